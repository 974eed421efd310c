// The 128-bit hash behind cache keys: streaming-stable, boundary-sensitive, well mixed, and fixed
// across builds (changing it silently invalidates every user's disk cache).
#include <doctest/doctest.h>

#include <bit>
#include <set>
#include <string>

#include "cuda/hash.h"

using loom::cuda::Hash128;
using loom::cuda::hash128;
using loom::cuda::Hasher;

TEST_CASE("hash128: chunked updates equal one update") {
  std::string s;
  for (int i = 0; i < 200; ++i) s += char('a' + (i * 7) % 26);
  Hash128 whole = hash128(s);
  for (size_t step : {1u, 3u, 7u, 8u, 9u, 64u}) {
    Hasher h;
    for (size_t i = 0; i < s.size(); i += step) h.update(s.substr(i, step));
    CHECK(h.finish() == whole);
  }
}

TEST_CASE("hash128: distinct inputs give distinct hashes") {
  std::set<std::string> seen;
  std::string s;
  for (int n = 0; n < 300; ++n) {  // every prefix of a string, including trailing zero bytes
    seen.insert(hash128(s).hex());
    s += char(n % 3 == 0 ? '\0' : 'x');
  }
  CHECK(seen.size() == 300);
  // Field framing: the same bytes split differently must not collide.
  CHECK(Hasher().field("ab").field("c").finish() != Hasher().field("a").field("bc").finish());
}

TEST_CASE("hash128: one flipped bit changes about half the output bits") {
  std::string base(40, 'q');
  double total = 0;
  int n = 0, worst = 128;
  for (size_t byte = 0; byte < base.size(); ++byte) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string t = base;
      t[byte] = char(t[byte] ^ (1 << bit));
      Hash128 a = hash128(base), b = hash128(t);
      int d = std::popcount(a.hi ^ b.hi) + std::popcount(a.lo ^ b.lo);
      total += d;
      worst = std::min(worst, d);
      ++n;
    }
  }
  CHECK(total / n == doctest::Approx(64).epsilon(0.06));
  CHECK(worst > 30);
}

TEST_CASE("hash128: values are pinned") {
  CHECK(hash128("").hex().size() == 32);
  CHECK(hash128("").hex() == "a63f27223e640ef38b2959480dea1a1c");
  CHECK(hash128("loom").hex() == "ae54f76bff56d155c0b9214fad8f33a2");
}
