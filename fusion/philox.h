#pragma once
// Philox-4x32-10: a counter-based generator. Element i of a random tensor is a pure function
// of (seed, offset + i), so every device, tiling and fusion choice gives the same numbers.
// The CUDA code generator emits the same rounds (cuda/codegen_prelude.cpp).
#include <cmath>
#include <cstdint>

namespace loom {

struct Philox4 {
  uint32_t v[4];
};

inline Philox4 philox4x32(uint64_t counter, uint64_t seed) {
  uint32_t c0 = uint32_t(counter), c1 = uint32_t(counter >> 32), c2 = 0, c3 = 0;
  uint32_t k0 = uint32_t(seed), k1 = uint32_t(seed >> 32);
  for (int r = 0; r < 10; ++r) {
    uint64_t p0 = uint64_t(0xD2511F53u) * c0, p1 = uint64_t(0xCD9E8D57u) * c2;
    uint32_t n0 = uint32_t(p1 >> 32) ^ c1 ^ k0, n1 = uint32_t(p1);
    uint32_t n2 = uint32_t(p0 >> 32) ^ c3 ^ k1, n3 = uint32_t(p0);
    c0 = n0, c1 = n1, c2 = n2, c3 = n3;
    k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
  }
  return {{c0, c1, c2, c3}};
}

// Uniform in [0, 1) with 24 random bits: exactly representable in float32.
inline float philox_uniform_at(uint64_t seed, uint64_t counter) {
  return float(philox4x32(counter, seed).v[0] >> 8) * (1.0f / 16777216.0f);
}

// Standard normal by Box-Muller on two 24-bit uniforms, computed in double.
inline float philox_normal_at(uint64_t seed, uint64_t counter) {
  Philox4 r = philox4x32(counter, seed);
  double u1 = (double(r.v[0] >> 8) + 1.0) * (1.0 / 16777216.0);  // (0, 1]
  double u2 = double(r.v[1] >> 8) * (1.0 / 16777216.0);
  return float(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
}

}  // namespace loom
