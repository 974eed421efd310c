#pragma once
// The CPU interpreter's instructions beside the per-op loops (cpu/prims.h): fused pairs, select,
// cast and random numbers, each a vectorized loop over a run of a tile. Stride arguments are 1
// (a register) or 0 (a row scalar broadcast over the run).
#include <cstdint>

#include "cpu/ctype.h"
#include "fusion/prims.h"

namespace loom::cpu {

// out = (a inner c) outer b, or b outer (a inner c) when !first, in one pass, then relu'd
// when `relu`; inner and outer are Add, Sub or Mul, inner also Copy (a itself; c unread).
// T float or double.
template <typename T>
void binary_pair(Op inner, const T* a, int sa, const T* c, int sc, Op outer, bool first, const T* b,
                 int sb, bool relu, T* out, int64_t n);
// out = exp(a - b) in one pass (T float or double).
template <typename T>
void exp_sub(const T* a, int sa, const T* b, int sb, T* out, int64_t n);
template <typename T>
void select(const uint8_t* c, int sc, const T* a, int sa, const T* b, int sb, T* out, int64_t n);
// out (compute type of `to`) = a (compute type `from`); rounds to float16/bfloat16 when
// `to` is one of them, since a cast must give the value the narrow type can hold.
void cast(CT from, const void* a, int sa, DType to, void* out, int64_t n);
// out[j] (compute type `ct`) wrapped to narrow integer dtype `dt`'s own type (tensor/convert.h
// wrap_int), for j < n.
void wrap_run(CT ct, DType dt, void* out, int64_t n);
// uniform [0,1) (or normal) floats for counters idx[j] + offset under key `seed`.
void philox_uniform(const int64_t* idx, uint64_t seed, uint64_t offset, float* out, int64_t n);
void philox_normal(const int64_t* idx, uint64_t seed, uint64_t offset, float* out, int64_t n);

}  // namespace loom::cpu
