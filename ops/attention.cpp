// scaled_dot_product_attention: q @ k^T, then scale, mask and softmax (one fused row kernel:
// the causal mask is an iota comparison, the scale a multiply in its prologue), dropout,
// then @ v. Its backward is the matmuls', softmax's own and where's rules.
#include <cmath>

#include "ops/record.h"

namespace loom {

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const std::optional<Tensor>& attn_mask, double dropout_p,
                                    bool is_causal, std::optional<double> scale) {
  const char* op = "scaled_dot_product_attention";
  LOOM_CHECK(q.dim() >= 2 && k.dim() >= 2 && v.dim() >= 2, Value, op,
             ": query, key and value need at least 2 dims, got ", shape_str(q.shape()), ", ",
             shape_str(k.shape()), " and ", shape_str(v.shape()));
  int64_t L = q.shape()[q.dim() - 2], E = q.shape()[q.dim() - 1];
  int64_t S = k.shape()[k.dim() - 2];
  LOOM_CHECK(k.shape()[k.dim() - 1] == E && v.shape()[v.dim() - 2] == S, Value, op, ": query ",
             shape_str(q.shape()), ", key ", shape_str(k.shape()), " and value ",
             shape_str(v.shape()), " disagree (want key [..., S, E], value [..., S, Ev])");
  LOOM_CHECK(!(is_causal && attn_mask), Value, op,
             ": pass either attn_mask or is_causal, not both");
  LOOM_CHECK(dropout_p >= 0 && dropout_p < 1, Value, op, ": dropout_p must be in [0, 1), got ",
             dropout_p);
  LOOM_CHECK(is_floating(q.dtype()), Type, op, ": needs floating tensors, got ",
             dtype_name(q.dtype()));
  check_same_device(op, q, k);
  check_same_device(op, q, v);
  double s = scale ? *scale : 1.0 / std::sqrt(double(E));
  Tensor scores = matmul(q, k.transpose(-2, -1)) * s;  // [..., L, S]
  if (is_causal) {
    // torch's causal mask: row i sees columns j <= i (the top-left aligned lower triangle).
    Shape ls{L, S};
    Tensor keep = le(iota(ls, 1, q.device()), iota(ls, 0, q.device()));
    scores = where(keep, scores, -INFINITY);
  } else if (attn_mask) {
    check_same_device(op, q, *attn_mask);
    if (attn_mask->dtype() == DType::Bool) {
      scores = where(*attn_mask, scores, -INFINITY);  // True: take part
    } else {
      scores = scores + *attn_mask;
    }
  }
  Tensor p = softmax(scores, -1);
  if (dropout_p > 0) p = dropout(p, dropout_p, true);
  return matmul(p, v);
}

}  // namespace loom
