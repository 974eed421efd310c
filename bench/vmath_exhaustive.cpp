// Offline proof, not a CI test. AVX-512 builds divide in tanh and sigmoid by a reciprocal,
// Newton steps and a correction (cpu/vmath.cpp, v_rcp / v_div), which is only sound if the
// quotient is the correctly rounded one on every divisor the kernels reach. The checks:
//   --div: cpu::rcp_f32 against IEEE 1 / b for every normal b in [2^-126, 2^126) (sigmoid's
//     divisor lies in [0.7, 2^116]), and cpu::div_f32 against m / (-2 - m) for every m in
//     [-1, 0] (tanh's quotient), bit for bit: seconds.
//   [tanh|sigmoid|exp] (default all three): every float32 input (2^32) through the vector
//     kernels and through the fused loop that inlines them (pair_unary_f32, as -0 + f(x)),
//     against the scalar forms, which divide with IEEE division: minutes a function.
//   --relu: the fused loop's relu on every float32, against the scalar relu.
// --ulp: also the worst error against float64 (slower). Run with LOOM_CPU_RCP=1 to check the
// reciprocal forms (vdivps is the default).
// Results (Xeon, Sapphire Rapids class, 2026-11-30, gcc 12 Release, -march=native): --div: 0 of
// 2113929216 reciprocals and 0 of 1065353217 quotients differ (20 s); --relu: 0 differ;
// LOOM_CPU_RCP=1, all 2^32 inputs: tanh, sigmoid and exp 0 vector and 0 fused-loop results
// differ (415, 532 and 117 s on a loaded box). Without v_rcp's nudge of e, 82 reciprocals in
// [1, 2^82) (each binade's all-ones significand) and 6291459 sigmoid inputs differed.
#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "cpu/vmath.h"

using namespace loom;

namespace {

using Kernel = void (*)(const float*, float*, int64_t);
using Scalar = float (*)(float);
using Ref = double (*)(double);

struct Fn {
  const char* name;
  Kernel vec;
  Scalar scalar;
  Ref ref;
  Op op;
};

double ref_tanh(double x) { return std::tanh(x); }
double ref_sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double ref_exp(double x) { return std::exp(x); }

// |got - want| in float ulps at want (subnormal spacing below FLT_MIN); inf for want past
// FLT_MAX counts as exact, a NaN mismatch as huge.
double ulp_error(float got, double want) {
  if (std::isnan(want) || std::isnan(got)) return std::isnan(want) == std::isnan(got) ? 0 : 1e30;
  if (std::isinf(got) && std::fabs(want) >= 0x1p128 * (1 - 0x1p-25) && (got > 0) == (want > 0))
    return 0;
  if (std::isinf(want)) return got == want ? 0 : 1e30;
  int e;
  std::frexp(std::fabs(want), &e);
  return std::fabs(double(got) - want) / std::ldexp(1.0, std::max(e - 24, -149));
}

bool same(float a, float b) {
  return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b) ||
         (std::isnan(a) && std::isnan(b));
}

// Bit-for-bit: the kernels' division against IEEE division over a range of bit patterns of
// the divisor (rcp) or of m (the quotient m / (-2 - m)). Returns the number that differ.
int64_t check_div(bool rcp, uint32_t lo, uint32_t hi) {
  constexpr int64_t kChunk = 1 << 20;
  std::vector<float> a(kChunk), b(kChunk), got(kChunk);
  int64_t bad = 0, total = 0;
  for (uint64_t base = lo; base <= hi; base += kChunk) {
    int64_t n = std::min<int64_t>(kChunk, int64_t(hi - base + 1));
    for (int64_t i = 0; i < n; ++i) {
      float v = std::bit_cast<float>(uint32_t(base + i));
      a[size_t(i)] = rcp ? 1.f : v;
      b[size_t(i)] = rcp ? v : -2.f - v;
    }
    if (rcp)
      cpu::rcp_f32(b.data(), got.data(), n);
    else
      cpu::div_f32(a.data(), b.data(), got.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      float want = a[size_t(i)] / b[size_t(i)];
      if (!same(got[size_t(i)], want) && ++bad <= 10)
        std::printf("  %a / %a: %a, IEEE %a\n", a[size_t(i)], b[size_t(i)], got[size_t(i)], want);
    }
    total += n;
  }
  std::printf("%s: %lld of %lld differ from IEEE division\n",
              rcp ? "1 / b, b in [2^-126, 2^126)" : "m / (-2 - m), m in [-1, 0]", (long long)bad,
              (long long)total);
  return bad;
}

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
    } else if (!std::strcmp(argv[i], "--div")) {
      // every normal divisor below 2^126 (past it 1 / b is subnormal); m from -0 down to -1, +0
      int64_t bad = check_div(true, std::bit_cast<uint32_t>(0x1p-126f),
                              std::bit_cast<uint32_t>(0x1p126f) - 1);
      bad += check_div(false, std::bit_cast<uint32_t>(-0.f), std::bit_cast<uint32_t>(-1.f));
      bad += check_div(false, 0, 0);
      return bad ? 1 : 0;
    } else {
      only = argv[i];
    }
  }
  const Fn fns[] = {{"tanh", cpu::tanh_f32, cpu::tanh_scalar, ref_tanh, Op::Tanh},
                    {"sigmoid", cpu::sigmoid_f32, cpu::sigmoid_scalar, ref_sigmoid, Op::Sigmoid},
                    {"exp", cpu::exp_f32, cpu::exp_scalar, ref_exp, Op::Exp}};
  constexpr int64_t kChunk = 1 << 20;
  std::vector<float> in(kChunk), out(kChunk), fused(kChunk);
  const float nz = -0.f;  // -0 + v is v, bit for bit, for every v (NaN stays NaN)
  int bad_total = 0;
  for (const Fn& f : fns) {
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
          double e = ulp_error(out[size_t(i)], f.ref(double(x)));
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
