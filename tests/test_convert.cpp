// The float16 / bfloat16 runs of tensor/convert.cpp (vectorized where the library is built for
// AVX-512) give exactly the scalar conversions of tensor/half.h: every 16-bit pattern widened,
// and float32 patterns (rounding ties either way, subnormals of both sizes, overflow, infinities,
// NaNs with payloads of both signs) narrowed, and rounded to either and back, in runs whose
// lengths (1 to 150) leave every remainder.
#include <cstring>
#include <random>

#include "helpers.h"
#include "tensor/convert.h"
#include "tensor/half.h"

using namespace loom;

namespace {

std::vector<uint32_t> float_patterns() {
  std::vector<uint32_t> v = {0x00000000, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc00000,
                             0x7f800001, 0xff812345, 0x7fbfffff, 0x00000001, 0x807fffff, 0x00800000,
                             0x477fefff, 0x477ff000, 0x477fe000, 0x7f7fffff, 0x33800000, 0x33000000,
                             0x387fc000, 0x38800000, 0x3f808000, 0x3f818000, 0x3f80ffff};
  // halfway and near-halfway cases for both narrow types, and random patterns
  for (uint32_t hi = 0; hi < 0x10000; hi += 97) {
    uint32_t b = hi << 16;
    for (uint32_t lo : {0x0000u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu, 0x1000u, 0x0fffu, 0x1001u})
      v.push_back(b | lo);
  }
  std::mt19937 g(4242);
  for (int i = 0; i < 20000; ++i) v.push_back(uint32_t(g()));
  return v;
}

}  // namespace

TEST_CASE("convert: float16 and bfloat16 runs match the scalar conversions bit for bit") {
  std::vector<uint16_t> all(65536);
  for (uint32_t i = 0; i < 65536; ++i) all[i] = uint16_t(i);
  std::vector<uint32_t> fp = float_patterns();
  std::vector<float> f(fp.size());
  std::memcpy(f.data(), fp.data(), fp.size() * 4);
  for (DType dt : {DType::Float16, DType::BFloat16}) {
    INFO(dtype_name(dt));
    const bool half = dt == DType::Float16;
    // widen every pattern, in runs of 1..150 elements
    std::vector<float> got(all.size());
    for (size_t at = 0, len = 1; at < all.size(); at += len, len = len % 150 + 1)
      load_run<float>(all.data() + at, dt, 1, got.data() + at,
                      int64_t(std::min(len, all.size() - at)));
    int64_t bad = 0;
    for (uint32_t i = 0; i < 65536; ++i) {
      float want = half ? f16_to_f32(uint16_t(i)) : bf16_to_f32(uint16_t(i));
      bad += std::memcmp(&want, &got[i], 4) != 0;
    }
    CHECK(bad == 0);
    // narrow the float patterns
    std::vector<uint16_t> out(f.size());
    for (size_t at = 0, len = 1; at < f.size(); at += len, len = len % 150 + 1)
      store_run<float>(out.data() + at, dt, 1, f.data() + at,
                       int64_t(std::min(len, f.size() - at)));
    bad = 0;
    for (size_t i = 0; i < f.size(); ++i) {
      uint16_t want = half ? f32_to_f16(f[i]) : f32_to_bf16(f[i]);
      if (want == out[i]) continue;
      if (bad++ < 5)
        MESSAGE("pattern " << std::hex << fp[i] << ": want " << want << ", got " << out[i]);
    }
    CHECK(bad == 0);
    // round to the narrow type and back (a cast's value in float32 compute)
    std::vector<float> back(f.size());
    for (size_t at = 0, len = 1; at < f.size(); at += len, len = len % 150 + 1)
      round_to(dt, f.data() + at, back.data() + at, int64_t(std::min(len, f.size() - at)));
    bad = 0;
    for (size_t i = 0; i < f.size(); ++i) {
      float want = half ? f16_to_f32(f32_to_f16(f[i])) : bf16_to_f32(f32_to_bf16(f[i]));
      bad += std::memcmp(&want, &back[i], 4) != 0;
    }
    CHECK(bad == 0);
  }
}
