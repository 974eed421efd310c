// Reductions over any set of dims, and the statistics built from them.
#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "ops/grad_node.h"
#include "ops/record.h"
#include "tensor/backend.h"

namespace loom {
namespace {

Tensor squeeze_axes(const Tensor& t, const std::vector<int>& ax) {
  Dims s;
  for (int d = 0; d < t.dim(); ++d)
    if (std::find(ax.begin(), ax.end(), d) == ax.end()) s.push_back(t.shape()[d]);
  return t.reshape(s);
}

int64_t reduced_count(const Shape& s, const std::vector<int>& ax) {
  int64_t n = 1;
  for (int a : ax) n *= s[a];
  return n;
}

DType reduce_dtype(Op op, DType in) {
  switch (reduce_kind(op)) {
    case ReduceKind::Sum:  // torch: integers and bool to int64; uint64, which it cannot hold, stays
      return is_floating(in) || in == DType::UInt64 ? in : DType::Int64;
    case ReduceKind::Index:
      return DType::Int64;
    case ReduceKind::Bool:
      return DType::Bool;
    default:
      return in;
  }
}

// One reduction node; the result keeps reduced dims as size 1 (then squeezed as a view).
Tensor reduce_op(Op op, const char* name, const Tensor& x, const std::vector<int>& ax, bool keepdim,
                 std::optional<DType> out_dtype = {}) {
  DType rt = out_dtype ? *out_dtype : reduce_dtype(op, x.dtype());
  if (x.dim() == 0 || ax.empty()) {
    if (reduce_kind(op) == ReduceKind::Index) return zeros_like(x, DType::Int64);
    if (reduce_kind(op) == ReduceKind::Bool) return ne(x, 0);
    return cast(x, rt).clone();
  }
  auto n = new_node(op, rt, keep_shape(x.shape(), ax), x.device());
  n->axes = ax;
  n->in.push_back(as_input(x));
  Tensor r = record_node(std::move(n));
  if (!keepdim) r = squeeze_axes(r, ax);  // a view of the node's result (no graph place yet)
  if (autograd::needs_grad(x)) autograd::record_reduce(op, x, ax, r);
  return r;
}

// Float type reductions of `t` accumulate and return in (float16/bfloat16 -> float32).

}  // namespace

// A row whose n elements all equal c gets mean c exactly, by construction. Each partial sum of
// such a row, in whatever order it is added, is k * c for an integer k <= n, which needs at most
// p + bit_width(n) significant bits for a c of p bits: a sum type with that many holds n * c
// exactly.
// - float16 (p = 11) rows of up to 8191 and bfloat16 (p = 8) rows of up to 65535 sum in float32
//   (24 bits), as before, and (n * c) / n is c (bfloat16 has float32's range: a sum past 2^128
//   overflows, as before).
// - Other float32 compute (float32 data, longer narrow rows) sums into a float64 node (53 bits:
//   n < 2^29), which both backends accumulate in float64. sum * (1 / n) in float64 is within a
//   relative 2^-52 of c, so it rounds to c in float32. (A product: the float64 division's
//   registers made CUDA row kernels spill.)
// - float64: no wider type holds n * c, so a row whose max equals its min takes that value, the
//   others sum / n (a NaN makes max, min and the sum NaN). One pass still: the three reductions
//   read the same row.
Tensor mean_keep(const Tensor& x, const std::vector<int>& ax, DType data) {
  DType at = acc_float(x.dtype());
  int64_t n = reduced_count(x.shape(), ax);
  if (at == DType::Float32) {
    int p = data == DType::BFloat16 ? 8 : data == DType::Float16 ? 11 : 24;
    if (p + std::bit_width(uint64_t(n)) <= 24)
      return reduce_op(Op::Sum, "mean", x, ax, true, at) / double(n);
    return cast(reduce_op(Op::Sum, "mean", x, ax, true, DType::Float64) * (1.0 / double(n)), at);
  }
  Tensor s = reduce_op(Op::Sum, "mean", x, ax, true, at);
  Tensor hi = reduce_op(Op::Max, "mean", x, ax, true, at);
  Tensor lo = reduce_op(Op::Min, "mean", x, ax, true, at);
  return where(eq(hi, lo), hi, s / double(n));
}

Tensor sum(const Tensor& x, const Dims& dims, bool keepdim, std::optional<DType> dtype) {
  auto ax = reduce_axes("sum", dims, x.shape());
  if (dtype) return reduce_op(Op::Sum, "sum", cast(x, *dtype), ax, keepdim, *dtype);
  return reduce_op(Op::Sum, "sum", x, ax, keepdim);
}

Tensor mean(const Tensor& x, const Dims& dims, bool keepdim) {
  LOOM_CHECK(is_floating(x.dtype()), Type, "mean: needs a floating point tensor, got ",
             dtype_name(x.dtype()), " of shape ", shape_str(x.shape()));
  auto ax = reduce_axes("mean", dims, x.shape());
  Tensor m;
  {
    NoGradGuard forward;  // its own backward node, below
    m = cast(mean_keep(x, ax, x.dtype()), x.dtype());
    if (!keepdim) m = squeeze_axes(m, ax);
  }
  if (autograd::needs_grad(x)) autograd::record_mean(x, ax, m);
  return m;
}

Tensor prod(const Tensor& x, const Dims& dims, bool keepdim) {
  return reduce_op(Op::Prod, "prod", x, reduce_axes("prod", dims, x.shape()), keepdim);
}

static void check_nonempty(const char* op, const Tensor& x, const std::vector<int>& ax) {
  int64_t n = 1;
  for (int a : ax) n *= x.shape()[a];
  LOOM_CHECK(n > 0 || ax.empty(), Index, op, ": cannot reduce over a zero-size dimension (shape ",
             shape_str(x.shape()), ")");
}

Tensor amax(const Tensor& x, const Dims& dims, bool keepdim) {
  auto ax = reduce_axes("amax", dims, x.shape());
  check_nonempty("amax", x, ax);
  return reduce_op(Op::Max, "amax", x, ax, keepdim);
}
Tensor amin(const Tensor& x, const Dims& dims, bool keepdim) {
  auto ax = reduce_axes("amin", dims, x.shape());
  check_nonempty("amin", x, ax);
  return reduce_op(Op::Min, "amin", x, ax, keepdim);
}

static Tensor arg_reduce(Op op, const char* name, const Tensor& x, std::optional<int64_t> dim,
                         bool keepdim) {
  LOOM_CHECK(!is_bool(x.dtype()), Type, name, ": not supported for bool tensors (shape ",
             shape_str(x.shape()), ")");
  if (!dim) {
    LOOM_CHECK(x.numel() > 0, Index, name, ": cannot take the ", name,
               " of an empty tensor of shape ", shape_str(x.shape()));
    Tensor flat = x.reshape({-1});
    Tensor r = reduce_op(op, name, flat, reduce_axes(name, {}, flat.shape()), false);
    return keepdim ? r.reshape(Dims(x.dim(), 1)) : r;
  }
  auto ax = reduce_axes(name, {*dim}, x.shape());
  check_nonempty(name, x, ax);
  return reduce_op(op, name, x, ax, keepdim);
}

Tensor argmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  return arg_reduce(Op::ArgMax, "argmax", x, dim, keepdim);
}
Tensor argmin(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  return arg_reduce(Op::ArgMin, "argmin", x, dim, keepdim);
}

Tensor all(const Tensor& x, const Dims& dims, bool keepdim) {
  return reduce_op(Op::All, "all", x, reduce_axes("all", dims, x.shape()), keepdim);
}
Tensor any(const Tensor& x, const Dims& dims, bool keepdim) {
  return reduce_op(Op::Any, "any", x, reduce_axes("any", dims, x.shape()), keepdim);
}

static Tensor var_forward(const Tensor& x, const std::vector<int>& ax, double correction,
                          bool keepdim) {
  Tensor xf = cast(x, acc_float(x.dtype()));
  Tensor d = xf - mean_keep(xf, ax, x.dtype());  // exactly 0 on a constant row, as the variance
  Tensor ss = reduce_op(Op::Sum, "var", d * d, ax, true);
  Tensor v = cast(ss / (double(reduced_count(x.shape(), ax)) - correction), x.dtype());
  return keepdim ? v : squeeze_axes(v, ax);
}

static Tensor var_or_std(const char* name, const Tensor& x, const Dims& dims, double correction,
                         bool keepdim, bool is_std) {
  LOOM_CHECK(is_floating(x.dtype()), Type, name, ": needs a floating point tensor, got ",
             dtype_name(x.dtype()), " of shape ", shape_str(x.shape()));
  auto ax = reduce_axes(name, dims, x.shape());
  Tensor v;
  {
    NoGradGuard forward;  // its own backward node, below
    v = var_forward(x, ax, correction, keepdim);
    if (is_std) v = sqrt(v);
  }
  if (autograd::needs_grad(x)) autograd::record_var(x, ax, correction, v, is_std);
  return v;
}

Tensor var(const Tensor& x, const Dims& dims, double correction, bool keepdim) {
  return var_or_std("var", x, dims, correction, keepdim, false);
}

Tensor std(const Tensor& x, const Dims& dims, double correction, bool keepdim) {
  return var_or_std("std", x, dims, correction, keepdim, true);
}

static Tensor logsumexp_forward(const Tensor& x, const std::vector<int>& ax, bool keepdim) {
  Tensor xf = is_floating(x.dtype()) ? cast(x, acc_float(x.dtype())) : cast(x, kDefaultFloat);
  Tensor m = reduce_op(Op::Max, "logsumexp", xf, ax, true);
  Tensor mm = where(isinf(m), 0.0, m);  // all -inf rows give -inf, not nan
  Tensor s = reduce_op(Op::Sum, "logsumexp", exp(xf - mm), ax, true);
  Tensor r = log(s) + mm;
  if (is_floating(x.dtype())) r = cast(r, x.dtype());
  return keepdim ? r : squeeze_axes(r, ax);
}

Tensor logsumexp(const Tensor& x, const Dims& dims, bool keepdim) {
  if (autocast_to_f32(x, true)) return logsumexp(autocast_f32(x, true), dims, keepdim);
  auto ax = reduce_axes("logsumexp", dims, x.shape());
  Tensor r;
  {
    NoGradGuard forward;  // its own backward node, below
    r = logsumexp_forward(x, ax, keepdim);
  }
  if (autograd::needs_grad(x)) autograd::record_logsumexp(x, ax, r);
  return r;
}

Tensor norm(const Tensor& x, double p, const Dims& dims, bool keepdim) {
  if (autocast_to_f32(x, true)) return norm(autocast_f32(x, true), p, dims, keepdim);
  LOOM_CHECK(is_floating(x.dtype()), Type, "norm: needs a floating point tensor, got ",
             dtype_name(x.dtype()), " of shape ", shape_str(x.shape()));
  auto ax = reduce_axes("norm", dims, x.shape());
  Tensor xf = cast(x, acc_float(x.dtype()));
  Tensor r;
  if (std::isinf(p)) {
    // Max and min have no identity: like torch, an inf norm over zero elements is an error.
    check_nonempty("norm (inf)", x, ax);
    r = p > 0 ? reduce_op(Op::Max, "norm", abs(xf), ax, true)
              : reduce_op(Op::Min, "norm", abs(xf), ax, true);
  } else if (p == 2) {
    r = sqrt(reduce_op(Op::Sum, "norm", xf * xf, ax, true));
  } else if (p == 1) {
    r = reduce_op(Op::Sum, "norm", abs(xf), ax, true);
  } else if (p == 0) {
    r = reduce_op(Op::Sum, "norm", cast(ne(xf, 0), xf.dtype()), ax, true);
  } else {
    r = pow(reduce_op(Op::Sum, "norm", pow(abs(xf), p), ax, true), 1.0 / p);
  }
  r = cast(r, x.dtype());
  return keepdim ? r : squeeze_axes(r, ax);
}

Tensor cumsum(const Tensor& x, int64_t dim) {
  if (autocast_to_f32(x, true)) return cumsum(autocast_f32(x, true), dim);
  int d = normalize_dim("cumsum", dim, x.shape());
  DType rt = reduce_dtype(Op::Sum, x.dtype());  // torch: integers and bool sum to int64
  if (x.dim() == 0) return cast(x, rt).clone();
  if (device_caps(x.device()).scan) {
    // A scan primitive: O(n) per row, not fused (its own group, like matmul).
    auto n = new_node(Op::CumSum, rt, x.shape(), x.device());
    n->dim = d;
    n->in.push_back(as_input(x));
    Tensor y = record_node(std::move(n));
    if (autograd::needs_grad(x)) autograd::record_cumsum(x, d, y);
    return y;
  }
  // Devices without a scan kernel: a sum over a masked broadcast (i <= j), one reduction
  // group, quadratic in the dim's length.
  int64_t n = x.shape()[d];
  Tensor xm = x.transpose(d, -1);  // [..., n]
  Tensor xi = xm.unsqueeze(-2);    // [..., 1, n]: element i
  Tensor i = arange(n, {DType::Int64, x.device()});
  Tensor mask = le(i.unsqueeze(0), i.unsqueeze(1));  // [n(j), n(i)]: i <= j
  Tensor z = where(mask, xi, zeros({}, {xm.dtype(), x.device()}));
  Tensor r = sum(z, {-1});  // [..., n(j)]
  return r.transpose(d, -1);
}

Tensor Tensor::sum(const Dims& dims, bool keepdim) const { return loom::sum(*this, dims, keepdim); }
Tensor Tensor::mean(const Dims& dims, bool keepdim) const {
  return loom::mean(*this, dims, keepdim);
}
Tensor Tensor::prod(const Dims& dims, bool keepdim) const {
  return loom::prod(*this, dims, keepdim);
}
Tensor Tensor::amax(const Dims& dims, bool keepdim) const {
  return loom::amax(*this, dims, keepdim);
}
Tensor Tensor::amin(const Dims& dims, bool keepdim) const {
  return loom::amin(*this, dims, keepdim);
}
Tensor Tensor::argmax(std::optional<int64_t> dim, bool keepdim) const {
  return loom::argmax(*this, dim, keepdim);
}
Tensor Tensor::argmin(std::optional<int64_t> dim, bool keepdim) const {
  return loom::argmin(*this, dim, keepdim);
}
Tensor Tensor::var(const Dims& dims, double c, bool keepdim) const {
  return loom::var(*this, dims, c, keepdim);
}
Tensor Tensor::std(const Dims& dims, double c, bool keepdim) const {
  return loom::std(*this, dims, c, keepdim);
}
Tensor Tensor::logsumexp(const Dims& dims, bool keepdim) const {
  return loom::logsumexp(*this, dims, keepdim);
}
Tensor Tensor::norm(double p, const Dims& dims, bool keepdim) const {
  return loom::norm(*this, p, dims, keepdim);
}
Tensor Tensor::all(const Dims& dims, bool keepdim) const { return loom::all(*this, dims, keepdim); }
Tensor Tensor::any(const Dims& dims, bool keepdim) const { return loom::any(*this, dims, keepdim); }
Tensor Tensor::cumsum(int64_t dim) const { return loom::cumsum(*this, dim); }

}  // namespace loom
