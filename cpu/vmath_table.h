#pragma once
// The functions of cpu/vmath.h as a table (vector kernel, scalar form, float64 reference,
// tested ulp bound) and the ulp measure, shared by tests/cpu/test_vmath.cpp and
// bench/vmath_exhaustive.cpp so both check the same set the same way. Not part of the library.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

#include "cpu/vmath.h"

namespace loom::cpu::vmath_table {

struct Fn {
  const char* name;
  void (*vec)(const float*, float*, int64_t);
  float (*scalar)(float);
  double (*ref)(double);
  Op op;
  double max_ulp;     // the bound tests/cpu/test_vmath.cpp checks against ref
  bool folds = true;  // pair_unary_f32 takes it as f (cpu/program.cpp folds it into an op)
};

inline double ref_tanh(double x) { return std::tanh(x); }
inline double ref_sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
inline double ref_exp(double x) { return std::exp(x); }
inline double ref_gelu_tanh(double x) {  // torch's NaN at -inf
  if (std::isinf(x) && x < 0) return std::nan("");
  double t = 1.5957691216057307117597842397375 * (x + 0.044715 * x * x * x);
  return x / (1.0 + std::exp(-t));
}

inline const Fn kFns[] = {
    {"tanh", tanh_f32, tanh_scalar, ref_tanh, Op::Tanh, 3},
    {"sigmoid", sigmoid_f32, sigmoid_scalar, ref_sigmoid, Op::Sigmoid, 3},
    {"exp", exp_f32, exp_scalar, ref_exp, Op::Exp, 2},
    {"gelu_tanh", gelu_tanh_f32, gelu_tanh_scalar, ref_gelu_tanh, Op::GeluTanh, 3, false},
};

// |got - want| in units of the float ulp at want (subnormal spacing below FLT_MIN); a result
// that rounds past FLT_MAX counts as exact when it is inf, a NaN mismatch as huge.
inline double ulp_error(float got, double want) {
  if (std::isnan(want) || std::isnan(got)) return std::isnan(want) == std::isnan(got) ? 0 : 1e30;
  if (std::isinf(got) && std::fabs(want) >= 0x1p128 * (1 - 0x1p-25) && (got > 0) == (want > 0))
    return 0;
  if (std::isinf(want)) return got == want ? 0 : 1e30;
  int e;
  std::frexp(std::fabs(want), &e);
  return std::fabs(double(got) - want) / std::ldexp(1.0, std::max(e - 24, -149));
}

// The same bits, or both NaN.
inline bool same(float a, float b) {
  return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b) ||
         (std::isnan(a) && std::isnan(b));
}

}  // namespace loom::cpu::vmath_table
