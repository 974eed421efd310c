// Composites: decomposed into primitives here; the fuser turns each into one group.
#include <limits>

#include "ops/grad_node.h"
#include "ops/record.h"

namespace loom {
namespace {

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
  if (autocast_to_f32(x, true)) return softmax(autocast_f32(x, true), dim);
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
  if (autocast_to_f32(x, true)) return log_softmax(autocast_f32(x, true), dim);
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
  if (autocast_to_f32(x, true) || (weight && autocast_to_f32(*weight, true)) ||
      (bias && autocast_to_f32(*bias, true)))
    return layer_norm(autocast_f32(x, true), normalized_shape,
                      weight ? std::optional(autocast_f32(*weight, true)) : std::nullopt,
                      bias ? std::optional(autocast_f32(*bias, true)) : std::nullopt, eps);
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
  if (autocast_to_f32(x, true) || (weight && autocast_to_f32(*weight, true)))
    return rms_norm(autocast_f32(x, true), normalized_shape,
                    weight ? std::optional(autocast_f32(*weight, true)) : std::nullopt, eps);
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
  // The mask is kept by nobody: the backward draws the same values again from the range the
  // forward reserved, and the planner fuses that draw into the gradient's kernel.
  const RandomRange r = reserve_random(x.numel());
  const double scale = 1.0 / (1.0 - p);
  auto mask = [r, p, shape = x.shape(), d = x.device()] { return ge(rand_at(shape, d, r), p); };
  Tensor y;
  {
    NoGradGuard forward;
    y = where(mask(), x * scale, 0);
  }
  if (autograd::needs_grad(x)) {
    autograd::record(
        y, "NativeDropoutBackward0", {x}, {},
        [mask, scale](const Tensor& g, const std::vector<Tensor>&, const std::vector<bool>&) {
          return std::vector<Tensor>{where(mask(), g * scale, 0)};
        });
    autograd::note_recompute(y, "its mask, drawn again from the generator's seed and offset");
  }
  return y;
}

Tensor Tensor::softmax(int64_t dim) const { return loom::softmax(*this, dim); }
Tensor Tensor::log_softmax(int64_t dim) const { return loom::log_softmax(*this, dim); }

}  // namespace loom
