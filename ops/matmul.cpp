// matmul / bmm: validated and broadcast here, run by the backend's BLAS (a group boundary).
#include "ops/grad_node.h"
#include "ops/record.h"
#include "tensor/backend.h"

namespace loom {
namespace {

// Whether dims [0, hi] of t collapse into one (a view, no copy).
bool leading_dims_collapse(const Tensor& t, int hi) {
  return collapsed_stride(t.shape(), t.strides(), 0, hi + 1).has_value();
}

// t [..., M, K] as one [(... M), K] matrix, where its leading dims collapse (a view, no copy).
std::optional<Tensor> as_rows(const Tensor& t) {
  if (t.dim() > 2 && leading_dims_collapse(t, t.dim() - 2))
    return t.reshape({-1, t.shape().back()});
  return std::nullopt;
}

// t's dims with the last one n: the shape a product of as_rows(t) takes back.
Dims last_as(const Tensor& t, int64_t n) {
  Dims out(t.shape().begin(), t.shape().end() - 1);
  out.push_back(n);
  return out;
}

}  // namespace

Tensor gemm_operand(const Tensor& t) {
  const int r = t.dim();
  if (r < 3 || !device_caps(t.device()).gemm_one_batch_stride) return t;
  const Shape& n = t.shape();
  const Strides& s = t.strides();
  const bool unit = (n[r - 1] == 1 || s[r - 1] == 1) || (n[r - 2] == 1 || s[r - 2] == 1);
  return unit && leading_dims_collapse(t, r - 3) ? t : t.contiguous();
}

Tensor matmul(const Tensor& a0, const Tensor& b0) {
  if (autocast_to_low(a0) || autocast_to_low(b0)) return matmul(autocast_low(a0), autocast_low(b0));
  check_same_device("matmul", a0, b0);
  LOOM_CHECK(a0.dim() >= 1 && b0.dim() >= 1, Value,
             "matmul: both arguments need at least 1 dim, got ", shape_str(a0.shape()), " and ",
             shape_str(b0.shape()));
  LOOM_CHECK(a0.dtype() == b0.dtype(), Type,
             "matmul: expected both operands to have the same dtype, got ", dtype_name(a0.dtype()),
             " ", shape_str(a0.shape()), " and ", dtype_name(b0.dtype()), " ",
             shape_str(b0.shape()));
  LOOM_CHECK(!is_bool(a0.dtype()), Type, "matmul: not supported for bool tensors (shapes ",
             shape_str(a0.shape()), " and ", shape_str(b0.shape()), ")");
  // [..., M, K] @ [K, N] as one [(... M), K] @ [K, N] product: one large GEMM instead of a
  // batch of small ones, and a weight gradient that is one GEMM over every row instead of a
  // batch of products summed afterwards.
  if (b0.dim() == 2 && a0.shape().back() == b0.shape()[0])
    if (std::optional<Tensor> rows = as_rows(a0))
      return matmul(*rows, b0).reshape(last_as(a0, b0.shape()[1]));
  Tensor a = a0.dim() == 1 ? a0.unsqueeze(0) : a0;
  Tensor b = b0.dim() == 1 ? b0.unsqueeze(1) : b0;
  int64_t M = a.shape()[a.dim() - 2], K = a.shape()[a.dim() - 1];
  int64_t K2 = b.shape()[b.dim() - 2], N = b.shape()[b.dim() - 1];
  LOOM_CHECK(K == K2, Value, "matmul: shapes ", shape_str(a0.shape()), " and ",
             shape_str(b0.shape()), " cannot be multiplied (", K, " vs ", K2, ")");
  Shape ba(a.shape().begin(), a.shape().end() - 2), bb(b.shape().begin(), b.shape().end() - 2);
  Shape batch = broadcast_shapes("matmul", ba, bb);
  // An operand broadcast over the batch keeps its view (a copy would write every repeat).
  if (ba == batch) a = gemm_operand(a);
  if (bb == batch) b = gemm_operand(b);
  Shape sa = batch, sb = batch, out = batch;
  sa.insert(sa.end(), {M, K});
  sb.insert(sb.end(), {K, N});
  out.insert(out.end(), {M, N});
  auto n = new_node(Op::MatMul, a.dtype(), out, a.device());
  n->in.push_back(as_input(expand_to(a, sa)));
  n->in.push_back(as_input(expand_to(b, sb)));
  Tensor r = record_node(std::move(n));
  if (autograd::needs_grad(a, b)) autograd::record_matmul(a, b, r);
  if (a0.dim() == 1) r = r.squeeze(-2);
  if (b0.dim() == 1) r = r.squeeze(-1);
  return r;
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  LOOM_CHECK(a.dim() == 3 && b.dim() == 3 && a.shape()[0] == b.shape()[0], Value,
             "bmm: expected [B, M, K] and [B, K, N] tensors, got ", shape_str(a.shape()), " and ",
             shape_str(b.shape()));
  return matmul(a, b);
}

Tensor Tensor::matmul(const Tensor& o) const { return loom::matmul(*this, o); }

Tensor linear(const Tensor& input, const Tensor& weight, const std::optional<Tensor>& bias) {
  LOOM_CHECK(weight.dim() == 2, Runtime,
             "linear: weight must be 2-D [out_features, in_features], got shape ",
             shape_str(weight.shape()));
  LOOM_CHECK(input.dim() >= 1 && input.shape().back() == weight.shape()[1], Runtime,
             "linear: input shape ", shape_str(input.shape()), " does not match weight shape ",
             shape_str(weight.shape()), ": the input's last dim must equal in_features (",
             weight.shape()[1], ")");
  if (bias)
    LOOM_CHECK(bias->dim() == 0 || (bias->dim() == 1 && bias->shape()[0] == weight.shape()[0]),
               Runtime, "linear: bias shape ", shape_str(bias->shape()),
               " does not match out_features (", weight.shape()[0], ")");
  // Under autocast linear is one of the low-precision ops with every floating argument cast,
  // the bias too (torch's policy): its output stays 16-bit, so the activations after it (bias
  // add, GELU, the cast for the next GEMM) move half the bytes.
  if (autocast_to_low(input) || autocast_to_low(weight) || (bias && autocast_to_low(*bias)))
    return linear(autocast_low(input), autocast_low(weight),
                  bias ? std::optional(autocast_low(*bias)) : std::nullopt);
  // Where the backend runs a matmul's pointwise consumers as its epilogue, the bias is added
  // to the one [(... M), N] GEMM before the result takes the input's leading dims: added
  // after, it would run over another shape than C's and miss the epilogue. Elsewhere it is
  // added after, over the shape the consumers have (a GELU, a residual add and the norm after
  // it), so that it joins their kernel instead of taking one of its own.
  if (std::optional<Tensor> rows = as_rows(input)) {
    const Shape out_shape = last_as(input, weight.shape()[0]);
    if (!bias || device_caps(input.device()).matmul_epilogue)
      return linear(*rows, weight, bias).reshape(out_shape);
    return linear(*rows, weight, std::nullopt).reshape(out_shape) + *bias;
  }
  Tensor out = matmul(input, weight.t());
  return bias ? out + *bias : out;
}

}  // namespace loom
