// Composites: decomposed into primitives here; the fuser turns each into one group.
#include <limits>

#include "ops/grad_node.h"
#include "ops/record.h"

namespace loom {
namespace {

Tensor float_input(const char* op, const Tensor& x) {
  LOOM_CHECK(is_floating(x.dtype()), Type, op, ": needs a floating point tensor, got ",
             dtype_name(x.dtype()), " of shape ", shape_str(x.shape()));
  return cast(x, acc_float(x.dtype()));
}

// The trailing dims named by normalized_shape, checked against x.
Dims trailing_dims(const char* op, const Tensor& x, const Dims& normalized_shape) {
  int k = int(normalized_shape.size());
  bool ok = k >= 1 && k <= x.dim();
  for (int i = 0; ok && i < k; ++i) ok = x.shape()[x.dim() - k + i] == normalized_shape[i];
  LOOM_CHECK(ok, Value, op, ": normalized_shape ",
             shape_str(Shape(normalized_shape.begin(), normalized_shape.end())),
             " does not match the trailing dims of input of shape ", shape_str(x.shape()));
  Dims d;
  for (int i = x.dim() - k; i < x.dim(); ++i) d.push_back(i);
  return d;
}

int64_t row_count(const Tensor& x, const Dims& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= x.shape()[d];
  return n;
}

void check_param(const char* op, const char* what, const std::optional<Tensor>& p,
                 const Dims& normalized_shape, const Tensor& x) {
  if (!p) return;
  LOOM_CHECK(p->shape() == Shape(normalized_shape.begin(), normalized_shape.end()), Value, op, ": ",
             what, " of shape ", shape_str(p->shape()), " does not match normalized_shape ",
             shape_str(Shape(normalized_shape.begin(), normalized_shape.end())));
  check_same_device(op, x, *p);
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) {
  int d = normalize_dim("softmax", dim, x.shape());
  Tensor y;
  {
    NoGradGuard forward;  // its own backward node, below
    Tensor xf = float_input("softmax", x);
    Tensor e = exp(xf - amax(xf, {d}, true));
    // One reciprocal per row, then a multiply per element (as torch's CPU kernel does): a
    // division per element costs more than the exp on the CPU. Within 1 ulp of e / sum.
    y = cast(e * reciprocal(sum(e, {d}, true)), x.dtype());
  }
  if (autograd::needs_grad(x)) autograd::record_softmax(x, d, y, false);
  return y;
}

Tensor log_softmax(const Tensor& x, int64_t dim) {
  int d = normalize_dim("log_softmax", dim, x.shape());
  Tensor y;
  {
    NoGradGuard forward;
    Tensor xf = float_input("log_softmax", x);
    Tensor s = xf - amax(xf, {d}, true);
    y = cast(s - log(sum(exp(s), {d}, true)), x.dtype());
  }
  if (autograd::needs_grad(x)) autograd::record_softmax(x, d, y, true);
  return y;
}

Tensor layer_norm(const Tensor& x, const Dims& normalized_shape,
                  const std::optional<Tensor>& weight, const std::optional<Tensor>& bias,
                  double eps) {
  Dims dims = trailing_dims("layer_norm", x, normalized_shape);
  check_param("layer_norm", "weight", weight, normalized_shape, x);
  check_param("layer_norm", "bias", bias, normalized_shape, x);
  Tensor y, mu, rstd;
  {
    NoGradGuard forward;  // its own backward node, below
    Tensor xf = float_input("layer_norm", x);
    // d is exactly 0 on a row of equal values (mean_keep), and so is y before weight and bias.
    mu = mean_keep(xf, std::vector<int>(dims.begin(), dims.end()), x.dtype());
    Tensor d = xf - mu;
    rstd = rsqrt(sum(d * d, dims, true) / double(row_count(x, dims)) + eps);
    y = d * rstd;
    if (weight) y = y * *weight;
    if (bias) y = y + *bias;
    y = cast(y, x.dtype());
  }
  Tensor w = weight ? *weight : Tensor(), b = bias ? *bias : Tensor();
  if (autograd::needs_grad({x, w, b}))
    autograd::record_norm("NativeLayerNormBackward0", x, dims, w, b, mu, rstd, eps, y);
  return y;
}

Tensor rms_norm(const Tensor& x, const Dims& normalized_shape, const std::optional<Tensor>& weight,
                std::optional<double> eps) {
  Dims dims = trailing_dims("rms_norm", x, normalized_shape);
  check_param("rms_norm", "weight", weight, normalized_shape, x);
  LOOM_CHECK(is_floating(x.dtype()), Type, "rms_norm: needs a floating point tensor, got ",
             dtype_name(x.dtype()), " of shape ", shape_str(x.shape()));
  double e = eps                            ? *eps
             : x.dtype() == DType::Float64  ? std::numeric_limits<double>::epsilon()
             : x.dtype() == DType::Float16  ? 0.0009765625
             : x.dtype() == DType::BFloat16 ? 0.0078125
                                            : double(std::numeric_limits<float>::epsilon());
  Tensor y, rstd;
  {
    NoGradGuard forward;  // its own backward node, below
    Tensor xf = float_input("rms_norm", x);
    rstd = rsqrt(sum(xf * xf, dims, true) / double(row_count(x, dims)) + e);
    y = xf * rstd;
    if (weight) y = y * *weight;
    y = cast(y, x.dtype());
  }
  Tensor w = weight ? *weight : Tensor();
  if (autograd::needs_grad({x, w}))
    autograd::record_norm("RmsNormBackward0", x, dims, w, Tensor(), Tensor(), rstd, e, y);
  return y;
}

Tensor dropout(const Tensor& x, double p, bool training) {
  LOOM_CHECK(p >= 0 && p <= 1, Value, "dropout: probability must be in [0, 1], got ", p);
  if (!training || p == 0) return x;
  if (p == 1) return zeros_like(x);
  Tensor keep = ge(rand(x.shape(), {DType::Float32, x.device()}), p);
  return where(keep, x * (1.0 / (1.0 - p)), 0);
}

Tensor cross_entropy(const Tensor& logits, const Tensor& target) {
  LOOM_CHECK(logits.dim() == 2 && target.dim() == 1 && target.shape()[0] == logits.shape()[0],
             Value, "cross_entropy: expected logits [N, C] and target [N], got ",
             shape_str(logits.shape()), " and ", shape_str(target.shape()));
  LOOM_CHECK(target.dtype() == DType::Int64 || target.dtype() == DType::Int32, Type,
             "cross_entropy: target must be an integer class index tensor, got ",
             dtype_name(target.dtype()), " of shape ", shape_str(target.shape()));
  check_same_device("cross_entropy", logits, target);
  int64_t C = logits.shape()[1];
  // An out-of-range class is an error. Reading the targets here would flush and wait in the
  // middle of a training step: the check runs with the step and raises at its sync point.
  if (target.numel() > 0)
    check_later(
        logical_or(lt(target, 0), ge(target, C)), ErrorKind::Index,
        detail::cat("cross_entropy: a target class is out of range [0, ", C,
                    ") for logits of shape ", shape_str(logits.shape()), " (target ",
                    dtype_name(target.dtype()), " of shape ", shape_str(target.shape()), ")"));
  Tensor lse, y;
  {
    NoGradGuard forward;  // its own backward node, below
    lse = logsumexp(logits, {1});
    Tensor cls = iota(logits.shape(), 1, logits.device());  // (an arange view would not fuse)
    Tensor picked =
        sum(where(eq(cls, target.unsqueeze(1)), float_input("cross_entropy", logits), 0.0), {1});
    y = cast(mean(cast(lse, picked.dtype()) - picked), logits.dtype());
  }
  if (autograd::needs_grad(logits)) autograd::record_cross_entropy(logits, target, lse, y);
  return y;
}

Tensor Tensor::softmax(int64_t dim) const { return loom::softmax(*this, dim); }
Tensor Tensor::log_softmax(int64_t dim) const { return loom::log_softmax(*this, dim); }

}  // namespace loom
