#pragma once
// Own vectorized float exp, tanh and sigmoid, a few ulp from the float64 result over the whole
// float range (NaN in -> NaN out). One exp core for all three: exp2 range reduction and a
// polynomial for expm1 of the reduced argument; AVX-512 code where the build has it (masked
// tails, so every element takes the same instructions), the same math in scalar form elsewhere.
// Fused and fusion-off programs both reach these through unary() (cpu/prims.h): the same math
// either way.
#include <cstdint>

#include "fusion/prims.h"

namespace loom::cpu {

// Whether unary() uses these (cpu/prims.cpp): by default where the build has AVX-512, else
// Eigen's kernels; LOOM_CPU_VMATH=0 / 1 picks either, for A/B timing. Fused and
// fusion-off programs switch together, and without them the tile program folds none of these
// functions into other ops.
bool vmath_on();

void exp_f32(const float* a, float* out, int64_t n);
void tanh_f32(const float* a, float* out, int64_t n);
void sigmoid_f32(const float* a, float* out, int64_t n);
// gelu(x) of the tanh form (torch's approximate="tanh"), within 3 ulp.
void gelu_tanh_f32(const float* a, float* out, int64_t n);
// erfc(x) and gelu(x) (the erf form), in float64 lanes rounded once (cpu/vmath_erfc.cpp).
void erfc_f32(const float* a, float* out, int64_t n);
void gelu_f32(const float* a, float* out, int64_t n);
void erf_f32(const float* a, float* out, int64_t n);
// sqrt, correctly rounded, and rsqrt, 1 / sqrt in float64 rounded once (cpu/vmath_sqrt.cpp):
// exact functions, so unary() takes them whether or not vmath_on().
void sqrt_f32(const float* a, float* out, int64_t n);
void rsqrt_f32(const float* a, float* out, int64_t n);
// out = exp(a - b); sa, sb: 1 an array, 0 one value broadcast. Rounds a - b first, as
// exp_f32 of a computed difference would.
void exp_sub_f32(const float* a, int sa, const float* b, int sb, float* out, int64_t n);
// out = (a inner c) outer f(b), or f(b) outer (a inner c) when !first, then relu'd when `relu`
// (NaN kept), in one pass: binary_pair (cpu/math.h) with its `b` operand put through f first.
// f: Exp, Tanh or Sigmoid; inner: Add, Sub, Mul or Copy (a itself); outer: Add, Sub or Mul;
// a and c: stride 1 or 0 (one value), b: stride 1. f(b) rounds as the kernels above give it.
// tail (Add, Sub, Mul; Op::Const: none): the result v becomes v tail w (w tail v when
// !tail_first) before the relu, rounded as that op alone would; w: stride sw, 1 or 0.
// stream: `out` is 64-byte aligned and its whole vectors are written with non-temporal
// stores (an output too large for the caches; the caller fences before others read it).
// pre: up to three Add/Sub/Mul of b by a constant applied before f (tanh(x * 1.5 + 0.5)),
// each rounded as that op alone.
struct PreOps {
  static constexpr int kMax = 3;
  int n = 0;                                  // steps used
  Op op[kMax] = {Op::Add, Op::Add, Op::Add};  // Add, Sub or Mul
  float k[kMax] = {0.f, 0.f, 0.f};
  bool k_first[kMax] = {false, false, false};  // k op v rather than v op k
};
void pair_unary_f32(Op inner, const float* a, int sa, const float* c, int sc, Op outer, bool first,
                    Op f, const float* b, bool relu, float* out, int64_t n, Op tail = Op::Const,
                    bool tail_first = true, const float* w = nullptr, int sw = 0,
                    bool stream = false, const PreOps& pre = {});

// The scalar forms (what builds without AVX-512 run), for tests: the vector code must give
// the same bits.
float exp_scalar(float x);
float tanh_scalar(float x);
float sigmoid_scalar(float x);
float gelu_tanh_scalar(float x);

}  // namespace loom::cpu
