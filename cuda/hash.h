#pragma once
// A 128-bit streaming hash for cache keys (kernel sources, disk cache entries). Not cryptographic:
// it guards against accidental collisions and corruption, not against an attacker. Two 64-bit
// lanes, each updated by a bijective step per 8-byte word (so no input word can collapse the
// state), mixed into each other every step and avalanched at the end. The output is stable across
// platforms and builds: cache files written by one loom build are read by the next.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace loom::cuda {

struct Hash128 {
  uint64_t hi = 0, lo = 0;
  bool operator==(const Hash128&) const = default;
  // 32 lowercase hex digits, hi first.
  std::string hex() const {
    static const char* digits = "0123456789abcdef";
    std::string s(32, '0');
    for (int i = 0; i < 16; ++i) {
      s[15 - i] = digits[(hi >> (4 * i)) & 15];
      s[31 - i] = digits[(lo >> (4 * i)) & 15];
    }
    return s;
  }
};

class Hasher {
 public:
  Hasher& update(const void* data, size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    total_ += n;
    // Top up a partial word left by the previous call first.
    while (n > 0 && fill_ != 0) {
      tail_ |= uint64_t(*p++) << (8 * fill_++);
      --n;
      if (fill_ == 8) flush_tail();
    }
    for (; n >= 8; n -= 8, p += 8) step(load_le(p));
    while (n-- > 0) tail_ |= uint64_t(*p++) << (8 * fill_++);
    return *this;
  }
  Hasher& update(std::string_view s) { return update(s.data(), s.size()); }
  // Length-prefixed, so ("ab","c") and ("a","bc") hash differently when fields are concatenated.
  Hasher& field(std::string_view s) {
    u64(s.size());
    return update(s);
  }
  Hasher& u64(uint64_t v) {
    unsigned char b[8];
    for (int i = 0; i < 8; ++i) b[i] = static_cast<unsigned char>(v >> (8 * i));
    return update(b, 8);
  }

  Hash128 finish() const {
    uint64_t a = a_, b = b_;
    if (fill_ != 0) {
      // Mark the partial word's length so trailing zero bytes are not lost.
      uint64_t w = tail_ ^ (uint64_t(fill_) << 59);
      mix(a, b, w);
    }
    a ^= total_;
    b ^= rotl(total_, 32);
    a += b;
    b += a;
    a = fmix(a);
    b = fmix(b ^ kB);
    a += b;
    b += a;
    return {a, b};
  }

 private:
  static constexpr uint64_t kA = 0x6a09e667f3bcc908ull, kB = 0xbb67ae8584caa73bull;
  static constexpr uint64_t kM1 = 0x9e3779b97f4a7c15ull, kM2 = 0xc2b2ae3d27d4eb4full;
  static constexpr uint64_t kM3 = 0x165667b19e3779f9ull, kM4 = 0xd6e8feb86659fd93ull;

  static uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
  static uint64_t load_le(const unsigned char* p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
    return v;
  }
  // splitmix64's finalizer: a bijection with full avalanche.
  static uint64_t fmix(uint64_t x) {
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
  }
  static void mix(uint64_t& a, uint64_t& b, uint64_t w) {
    // For a fixed w each line is a bijection of (a, b): xor, rotate, odd multiply, add.
    a = rotl(a ^ (w * kM1), 31) * kM2;
    b = rotl(b ^ (w * kM3), 27) * kM4;
    a += b;
    b ^= rotl(a, 17);
  }
  void step(uint64_t w) { mix(a_, b_, w); }
  void flush_tail() {
    step(tail_);
    tail_ = 0;
    fill_ = 0;
  }

  uint64_t a_ = kA, b_ = kB, tail_ = 0, total_ = 0;
  unsigned fill_ = 0;
};

inline Hash128 hash128(const void* data, size_t n) { return Hasher().update(data, n).finish(); }
inline Hash128 hash128(std::string_view s) { return hash128(s.data(), s.size()); }

}  // namespace loom::cuda
