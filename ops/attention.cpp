// scaled_dot_product_attention: q @ k^T, then scale, mask and softmax (one fused row kernel:
// the causal mask is an iota comparison, the scale a multiply in its prologue), dropout,
// then @ v. Its backward is its own node, as a flash kernel's: it keeps q, k, v and each row's
// logsumexp, not the [..., L, S] probabilities, and recomputes them (one more q @ k^T); a
// dropout mask is drawn again from the random range the forward reserved (as dropout's own
// rule does), so nothing of size [..., L, S] is kept. In bfloat16 and float16 the products
// stay 16-bit while the softmax runs in float32 (torch's autocast policy for the math path):
// the scores are widened for the logsumexp and the probabilities rounded once for @ v.
#include <cmath>

#include "ops/grad_node.h"
#include "ops/record.h"
#include "tensor/backend.h"

namespace loom {
namespace {

bool cheap_index(Device d) { return device_caps(d).cheap_index; }

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const std::optional<Tensor>& attn_mask, double dropout_p,
                                    bool is_causal, std::optional<double> scale) {
  const char* op = "scaled_dot_product_attention";
  // Under autocast attention is one of the low-precision ops (torch's policy): q, k and v are
  // cast first, so the forward and the backward's products agree in dtype (the flash node's
  // recompute would otherwise multiply float32 by the forward's bfloat16).
  if (autocast_to_low(q) || autocast_to_low(k) || autocast_to_low(v))
    return scaled_dot_product_attention(autocast_low(q), autocast_low(k), autocast_low(v),
                                        attn_mask, dropout_p, is_causal, scale);
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
  // Heads cut from one projection ([B, H, T, d] with strides [T 3C, d, 3C, 1]) are copied
  // once here where the BLAS takes one batch stride: the forward's products and the backward's
  // (its recompute of q @ k^T too) then read the same copies, one GEMM each.
  const Tensor qb = gemm_operand(q), kb = gemm_operand(k), vb = gemm_operand(v);
  double s = scale ? *scale : 1.0 / std::sqrt(double(E));
  const std::optional<Tensor> mask = attn_mask;
  // The scores after scale and mask; a float mask is added.
  auto scores_of = [L, S, s, is_causal, mask](const Tensor& q, const Tensor& k) {
    Tensor sc = matmul(q, k.transpose(-2, -1)) * s;  // [..., L, S]
    if (is_causal) {
      // torch's causal mask: row i sees columns j <= i (the top-left aligned lower triangle).
      // Where index leaves are cheap, over the scores' own shape: the comparison joins the
      // softmax's kernel instead of being an [L, S] bool tensor that every row reads back
      // through a broadcast (bench/RESULTS.md, "GPU training steps").
      const Shape ms = cheap_index(q.device()) ? sc.shape() : Shape{L, S};
      const int m = int(ms.size());
      Tensor keep = le(iota(ms, m - 1, q.device()), iota(ms, m - 2, q.device()));
      return where(keep, sc, -INFINITY);
    }
    if (mask) {
      if (mask->dtype() == DType::Bool) return where(*mask, sc, -INFINITY);  // True: take part
      return sc + *mask;
    }
    return sc;
  };
  if (mask) check_same_device(op, q, *mask);
  const DType lo = q.dtype();
  const bool flash = q.dtype() == k.dtype() && q.dtype() == v.dtype() &&
                     (!mask || mask->dtype() == DType::Bool || mask->dtype() == q.dtype());
  // The softmax's dtype: float32 for the 16-bit types, else the inputs' own (acc_float).
  auto wide = [](const Tensor& t) { return cast(t, acc_float(t.dtype())); };
  auto low = [lo](const Tensor& t) { return cast(t, lo); };
  std::vector<Tensor> ins{qb, kb, vb};
  if (mask && mask->dtype() != DType::Bool) ins.push_back(*mask);
  if (!flash || !autograd::needs_grad(ins)) {
    Tensor p = softmax(scores_of(qb, kb), -1);
    if (dropout_p > 0) p = dropout(p, dropout_p, true);
    return matmul(p, vb);
  }
  // Dropout's keep mask over the probabilities, from the one random range the forward
  // reserves (as much as dropout reserves): the backward draws the same values again.
  const bool drop = dropout_p > 0;
  RandomRange range{};
  auto dropped = [drop, dropout_p](const Tensor& p, RandomRange r) {
    if (!drop) return p;
    Tensor keep = ge(rand_at(p.shape(), p.device(), r), dropout_p);
    return where(keep, p * (1.0 / (1.0 - dropout_p)), 0);
  };
  Tensor out, lse;
  {
    NoGradGuard forward;  // the node below is the whole op's
    Tensor sc = wide(scores_of(qb, kb));
    lse = logsumexp(sc, {-1}, true);
    Tensor p = exp(sc - lse);
    if (drop) range = reserve_random(p.numel());
    out = matmul(low(dropped(p, range)), vb);
  }
  Shape mask_shape = mask ? mask->shape() : Shape{};
  autograd::record(
      out, "ScaledDotProductFlashAttentionBackward0", ins, {qb, kb, vb, lse},
      [scores_of, dropped, range, s, mask_shape, wide, low](
          const Tensor& g, const std::vector<Tensor>& sv, const std::vector<bool>& need) {
        const Tensor &q = sv[0], &k = sv[1], &v = sv[2], &lse = sv[3];
        Tensor p = exp(wide(scores_of(q, k)) - lse);  // the forward's probabilities, bit for bit
        Tensor pd = low(dropped(p, range));           // what multiplied v
        // d(pd), then through the mask (dropped is linear in p) to d(p)
        const Tensor gl = gemm_operand(low(g));  // one copy for both products it enters
        Tensor dp = dropped(wide(matmul(gl, v.transpose(-2, -1))), range);
        // rowsum(dO * out) as rowsum(p * dp): out is not kept
        Tensor ds = p * (dp - (p * dp).sum({-1}, true));  // d(scores after the mask)
        Tensor dss = low(ds * s);
        std::vector<Tensor> r(need.size());
        if (need[0]) r[0] = autograd::sum_to(matmul(dss, k), q.shape(), q.dtype());
        if (need[1])
          r[1] = autograd::sum_to(matmul(dss.transpose(-2, -1), q), k.shape(), k.dtype());
        if (need[2])
          r[2] = autograd::sum_to(matmul(pd.transpose(-2, -1), gl), v.shape(), v.dtype());
        if (need.size() > 3 && need[3]) r[3] = autograd::sum_to(low(ds), mask_shape, q.dtype());
        return r;
      });
  autograd::note_recompute(out, drop ? "the probabilities from q, k and the saved log-sum-exp "
                                       "(one more q @ k^T), and the dropout mask from the "
                                       "generator's seed and offset"
                                     : "the probabilities from q, k and the saved log-sum-exp "
                                       "(one more q @ k^T)");
  return out;
}

}  // namespace loom
