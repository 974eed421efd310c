#pragma once
// The CPU's lowering of the primitive list (fusion/prims.h): the pointwise loop of each unary
// and binary op (cpu/prims.cpp), and each reduction's fold of a run into an accumulator, its
// identity, combine and result (cpu/prims_reduce.cpp).
#include <cstdint>

#include "cpu/ctype.h"
#include "fusion/prims.h"

namespace loom::cpu {

// out = op(a) over n elements: unary ops of the Same and FloatOut kinds (result type T), and of
// the BoolOut kind (unary_bool). T: the operand's compute type.
template <typename T>
void unary(Op op, const T* a, T* out, int64_t n);
template <typename T>
void unary_bool(Op op, const T* a, uint8_t* out, int64_t n);
// out = op(a, b) over n elements: binary ops with a result of type T, and Compare / Logical ops
// (binary_bool). sa, sb: 1 a run, 0 one value broadcast over it.
template <typename T>
void binary(Op op, const T* a, int sa, const T* b, int sb, T* out, int64_t n);
template <typename T>
void binary_bool(Op op, const T* a, int sa, const T* b, int sb, uint8_t* out, int64_t n);

// A reduction's running value: f for float inputs, i for integer and bool ones, idx the
// position of an arg{max,min}'s best element (-1: none yet).
struct Acc {
  double f;
  int64_t i;
  int64_t idx;
};

// The accumulator before any element: prim(op).identity.
Acc acc_init(Op op);
// Folds `rows` runs of n elements each (run i at x + i * n, type `in`, its first element at
// column col0 of the row) into acc[i]; `out` is the reduction's result type.
void fold(Op op, CT in, CT out, const void* x, int64_t rows, int64_t n, int64_t col0, Acc* acc);
// fold() of a sum over float16 or bfloat16 runs (`src`) read where they lie, as fold() of the
// float32 values they widen to would: the same bits. Whether fold_narrow takes reduction `op`
// of result type `out` (a float32 sum, on AVX-512 machines).
bool narrow_foldable(Op op, CT out);
void fold_narrow(DType src, const void* x, int64_t rows, int64_t n, Acc* acc);
// The column layout's accumulators (cpu/interp_cols.cpp): Acc's fields as one array each, so
// that a fold across rows vectorizes.
struct ColAcc {
  double* f;
  int64_t* i;
  int64_t* idx;
};
// Folds n runs of `rows` values (run j, at x + j * ld, holds column col0 + j of each row i)
// into acc's row i: the same result as fold() of each row's values in column order, but
// float sums and products accumulate in float64 element by element. ld >= rows: a tile's
// register (ld == rows), or the columns read in place from memory.
void fold_cols(Op op, CT in, const void* x, int64_t ld, int64_t rows, int64_t n, int64_t col0,
               ColAcc acc);
// combine() of b[i] into a[i] for i < n.
void combine_cols(Op op, CT in, ColAcc a, ColAcc b, int64_t n);
// Merges the accumulator of a later part of a row into an earlier one's (the order matters
// for ties): prim(op).combine. `in`: the compute type of the reduction's input.
void combine(Op op, CT in, Acc& a, const Acc& b);
// out[i] (compute type `out_ct`) = the reduction's result from acc[i].
void acc_values(Op op, CT out_ct, const Acc* acc, int64_t n, void* out);

}  // namespace loom::cpu
