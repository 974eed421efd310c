#pragma once
// The gather and scatter-add primitives as the op layer records them, below the public API's
// checks (ops/index_ops.cpp validates shapes and dtypes and records the deferred range check;
// the gradient rules call these on indices already checked).
#include "ops/tensor.h"

namespace loom {

// out = x[.., index[.., j, ..], ..] along dim `d`, in index's shape. index: int64 or int32, of
// x's rank (>= 1), no larger than x in the dims other than `d`. Records its backward node.
Tensor gather_prim(const Tensor& x, int d, const Tensor& index);
// out = self with src[.., j, ..] added at index[.., j, ..] along `d`, in increasing j. src: no
// smaller than index in every dim, self's dtype; self: no smaller than index but along `d`.
// Records its backward node.
Tensor scatter_add_prim(const Tensor& self, int d, const Tensor& index, const Tensor& src);

// The formulations for a device without caps().gather: a reduction over a one-hot mask of the
// index, quadratic in the indexed dim's length but fusable and deterministic. `xs` and `src` are
// already cut to the index's shape (xs but along `d`); an index is clamped into range, as the
// CPU kernels do. No backward nodes (the callers record theirs).
Tensor gather_masked(const Tensor& xs, int d, const Tensor& index);
Tensor scatter_add_masked(const Tensor& self, int d, const Tensor& index, const Tensor& src);

// Each row's value at its class: v[i, t[i]] for v [M, C], v[t[i]] for v [C] (class weights),
// an index out of [0, C) clamped into it (callers mask the rows they ignore). A gather of M
// elements where the backend has one, not a pass over every row (the one-hot sum's cost).
Tensor class_values(const Tensor& v, const Tensor& t);

// `t` followed by zeros up to `shape` in each dim where it is shorter.
Tensor pad_zeros(const Tensor& t, const Shape& shape);

}  // namespace loom
