// Offline proof, not a CI test: cpu/vmath.cpp's vector kernels against their scalar forms on
// every float32 input.
//   [tanh|sigmoid|exp] (default all three): all 2^32 inputs through the vector kernels and
//     through the fused loop that inlines them (pair_unary_f32, as -0 + f(x)), bit for bit
//     against the scalar forms: minutes a function.
//   --relu: the fused loop's relu on every float32, against the scalar relu.
// --ulp: also the worst error against float64 (slower).
// Results: bench/RESULTS.md ("vmath over every float32").
#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "cpu/vmath.h"
#include "cpu/vmath_table.h"

using namespace loom;

namespace {

using cpu::vmath_table::Fn;
using cpu::vmath_table::same;

// The fused loop's relu (one vfixupimmps) on every float v, as relu(v * exp(0)), against the
// scalar relu (v > 0 ? v : NaN kept : +0). Returns the number that differ.
int64_t check_relu() {
  constexpr int64_t kChunk = 1 << 20;
  std::vector<float> v(kChunk), zero(kChunk, 0.f), got(kChunk);
  int64_t bad = 0;
  for (uint64_t base = 0; base < (uint64_t(1) << 32); base += kChunk) {
    for (int64_t i = 0; i < kChunk; ++i) v[size_t(i)] = std::bit_cast<float>(uint32_t(base + i));
    cpu::pair_unary_f32(Op::Copy, v.data(), 1, v.data(), 1, Op::Mul, true, Op::Exp, zero.data(),
                        true, got.data(), kChunk);
    for (int64_t i = 0; i < kChunk; ++i) {
      float x = v[size_t(i)], want = x > 0 ? x : (x != x ? x : 0.f);
      if (!same(got[size_t(i)], want) && ++bad <= 10)
        std::printf("  relu(%a): %a, want %a\n", x, got[size_t(i)], want);
    }
  }
  std::printf("relu: %lld of 2^32 differ\n", (long long)bad);
  return bad;
}

}  // namespace

int main(int argc, char** argv) {
  const char* only = nullptr;
  bool ulp = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--ulp")) {
      ulp = true;
    } else if (!std::strcmp(argv[i], "--relu")) {
      return check_relu() ? 1 : 0;
    } else {
      only = argv[i];
    }
  }
  constexpr int64_t kChunk = 1 << 20;
  std::vector<float> in(kChunk), out(kChunk), fused(kChunk);
  const float nz = -0.f;  // -0 + v is v, bit for bit, for every v (NaN stays NaN)
  int bad_total = 0;
  for (const Fn& f : cpu::vmath_table::kFns) {
    if (only && std::strcmp(only, f.name)) continue;
    auto t0 = std::chrono::steady_clock::now();
    int64_t bad = 0, bad_fused = 0;
    double worst = 0;
    float worst_at = 0;
    for (uint64_t base = 0; base < (uint64_t(1) << 32); base += kChunk) {
      for (int64_t i = 0; i < kChunk; ++i) in[size_t(i)] = std::bit_cast<float>(uint32_t(base + i));
      f.vec(in.data(), out.data(), kChunk);
      cpu::pair_unary_f32(Op::Copy, &nz, 0, &nz, 0, Op::Add, true, f.op, in.data(), false,
                          fused.data(), kChunk);
      for (int64_t i = 0; i < kChunk; ++i) {
        float x = in[size_t(i)], s = f.scalar(x);
        if (!same(out[size_t(i)], s) && ++bad <= 10)
          std::printf("  %s(%a): vector %a, scalar %a\n", f.name, x, out[size_t(i)], s);
        if (!same(fused[size_t(i)], s) && ++bad_fused <= 10)
          std::printf("  %s(%a): fused loop %a, scalar %a\n", f.name, x, fused[size_t(i)], s);
        if (ulp) {
          double e = cpu::vmath_table::ulp_error(out[size_t(i)], f.ref(double(x)));
          if (e > worst) worst = e, worst_at = x;
        }
      }
    }
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf(
        "%-8s of 2^32 inputs, %lld vector and %lld fused-loop results differ from the "
        "scalar form",
        f.name, (long long)bad, (long long)bad_fused);
    if (ulp) std::printf("; worst %.3f ulp vs float64 at %a", worst, worst_at);
    std::printf(" (%.0f s)\n", s);
    std::fflush(stdout);
    bad_total += bad + bad_fused > 0;
  }
  return bad_total ? 1 : 0;
}
