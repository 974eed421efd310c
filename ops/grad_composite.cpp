// The composites' own backward rules: each reads what its forward already stores (the input,
// the result, a per-row statistic) and is one pass over the rows where the forward is, instead
// of the derivative of the decomposition (which adds masks and counts through amax).
#include "fusion/planner.h"
#include "ops/grad_node.h"
#include "ops/index_prims.h"
#include "ops/record.h"
#include "tensor/backend.h"

namespace loom::autograd {
namespace {

// Whether d's backend sums a row kernel's values over its rows inside that kernel, for rows of
// `cols` elements (BackendCaps::column_sums, column_sum_cols; fusion/planner.h column_sums_on()).
bool column_sums(Device d, int64_t cols) {
  if (!column_sums_on() || !backend_available(d.kind)) return false;
  const BackendCaps c = backend(d).caps();
  return c.column_sums && (c.column_sum_cols == 0 || cols <= c.column_sum_cols);
}

Tensor up(const Tensor& t) { return cast(t, acc_float(t.dtype())); }

Dims keep_dims(const Shape& s, const std::vector<int>& ax) {
  Shape k = keep_shape(s, ax);
  return Dims(k.begin(), k.end());
}

int64_t count(const Shape& s, const std::vector<int>& ax) {
  int64_t n = 1;
  for (int a : ax) n *= s[size_t(a)];
  return n;
}

// The dims before the trailing `k` (a norm weight's gradient sums over them).
Dims leading(int rank, int k) {
  Dims d;
  for (int i = 0; i < rank - k; ++i) d.push_back(i);
  return d;
}

}  // namespace

void record_softmax(const Tensor& x, int dim, Tensor& y, bool log) {
  record(
      y, log ? "LogSoftmaxBackward0" : "SoftmaxBackward0", {x}, {y},
      [dim, log](const Tensor& g, const std::vector<Tensor>& s, const std::vector<bool>&) {
        Tensor yf = up(s[0]), gf = up(g);
        if (log) return std::vector<Tensor>{gf - exp(yf) * sum(gf, {dim}, true)};
        return std::vector<Tensor>{yf * (gf - sum(gf * yf, {dim}, true))};
      },
      0);
}

void record_logsumexp(const Tensor& x, const std::vector<int>& ax, Tensor& y) {
  Dims k = keep_dims(x.shape(), ax);
  record(
      y, "LogsumexpBackward0", {x}, {x, y},
      [k](const Tensor& g, const std::vector<Tensor>& s, const std::vector<bool>&) {
        return std::vector<Tensor>{up(g).reshape(k) * exp(up(s[0]) - up(s[1]).reshape(k))};
      },
      1);
}

void record_mean(const Tensor& x, const std::vector<int>& ax, Tensor& y) {
  Dims k = keep_dims(x.shape(), ax), xs(x.shape().begin(), x.shape().end());
  double n = double(count(x.shape(), ax));
  record(y, int(ax.size()) == x.dim() ? "MeanBackward0" : "MeanBackward1", {x}, {},
         [k, xs, n](const Tensor& g, const std::vector<Tensor>&, const std::vector<bool>&) {
           return std::vector<Tensor>{(up(g) * (1.0 / n)).reshape(k).expand(xs)};
         });
}

void record_var(const Tensor& x, const std::vector<int>& ax, double correction, Tensor& y,
                bool is_std) {
  Dims k = keep_dims(x.shape(), ax);
  double dof = double(count(x.shape(), ax)) - correction;
  record(
      y, is_std ? "StdBackward0" : "VarBackward0", {x}, {x, is_std ? y : Tensor()},
      [k, ax, dof, is_std](const Tensor& g, const std::vector<Tensor>& s,
                           const std::vector<bool>&) {
        Tensor xf = up(s[0]);
        Tensor d = xf - mean_keep(xf, ax, s[0].dtype());
        Tensor gk = up(g).reshape(k);
        if (is_std) return std::vector<Tensor>{gk * d / (up(s[1]).reshape(k) * dof)};
        return std::vector<Tensor>{gk * d * (2.0 / dof)};
      },
      is_std ? 1 : -1);
}

void record_norm(const char* name, const Tensor& x, const Dims& dims, const Tensor& w,
                 const Tensor& b, const Tensor& mean, const Tensor& rstd, double eps, Tensor& y) {
  // Layer norm (mean defined) or RMS norm (mean undefined): xhat = (x - mean) rstd, y = xhat w + b.
  int k = int(dims.size());
  bool centered = mean.defined();
  record(y, name, {x, w, b}, {x, w, mean, rstd},
         [k, centered, dims, eps](const Tensor& g, const std::vector<Tensor>& s,
                                  const std::vector<bool>& need) {
           const Tensor &x = s[0], &w = s[1];
           Tensor mu = s[2], rstd = s[3];
           Tensor xf = up(x), gf = up(g);
           double n = 1;
           for (auto d : dims) n *= double(x.shape()[size_t(d)]);
           if (is_grad_enabled()) {  // a double backward: the statistics as functions of x
             if (centered) mu = sum(xf, dims, true) * (1.0 / n);
             Tensor c = centered ? xf - mu : xf;
             rstd = rsqrt(sum(c * c, dims, true) * (1.0 / n) + eps);
           }
           Tensor xhat = (centered ? xf - mu : xf) * rstd;
           Tensor gw = w.defined() ? gf * w : gf;
           std::vector<Tensor> r(3);
           if (need[0]) {
             Tensor proj = xhat * (sum(gw * xhat, dims, true) * (1.0 / n));
             Tensor c = centered ? gw - sum(gw, dims, true) * (1.0 / n) : gw;
             r[0] = rstd * (c - proj);
           }
           Dims lead = leading(x.dim(), k);
           // The weight and bias gradients sum over rows what dx's row kernel also computes.
           // Where the backend sums over rows inside that kernel (column sums), of its own xhat
           // and upcast. Else recorded as their own nodes from the saved inputs: xhat and the
           // upcasts run again inside the column sums, which then read x and g (16-bit: 2 bytes
           // an element each) instead of float32 products and upcasts dx's kernel would write.
           // So too where g comes from a matmul (the linear layer after the norm): g's products
           // join its epilogue, whose column sum is a kernel of its own that would read an
           // xhat the forward wrote for it.
           const bool from_matmul =
               g.is_pending() && g.storage()->node && g.storage()->node->op == Op::MatMul;
           if ((need[1] || need[2]) &&
               !(need[0] && !from_matmul && column_sums(x.device(), int64_t(n))))
             xf = up(x), gf = up(g), xhat = (centered ? xf - mu : xf) * rstd;
           if (need[1]) r[1] = lead.empty() ? gf * xhat : sum(gf * xhat, lead);
           if (need[2]) r[2] = lead.empty() ? gf : sum(gf, lead);
           return r;
         });
  note_recompute(y, centered ? "xhat = (x - mean) * rstd from the saved x, mean and rstd"
                             : "xhat = x * rstd from the saved x and rstd");
}

void record_cross_entropy(const Tensor& x, const Tensor& t, const Tensor& lse, const Tensor& w,
                          const Tensor& denom, int64_t ignore_index, Reduction reduction,
                          double eps, Tensor& y) {
  bool has_w = w.defined(), mean = reduction == Reduction::Mean;
  int64_t C = x.shape()[1];
  record(y, "NllLossBackward0", {x}, {x, t, lse, w, denom},
         [=](const Tensor& g, const std::vector<Tensor>& s, const std::vector<bool>&) {
           const Tensor &x = s[0], &t = s[1], &w = s[3];
           // A double backward differentiates lse too: recomputed from x then.
           Tensor lse = is_grad_enabled() ? logsumexp(up(x), {1}) : s[2];
           Tensor onehot = eq(iota(x.shape(), 1, x.device()), t.unsqueeze(1));
           Tensor valid = ne(t, ignore_index);
           Tensor p = exp(up(x) - up(lse).unsqueeze(1));
           // The mean's denominator, unweighted, counted again from the targets: a node that
           // depends on them alone lets the planner scale dx in the kernel that computes it
           // (the forward's count shares a kernel with the loss's sum, which comes after).
           Tensor denom = mean && !has_w ? sum(cast(valid, s[4].dtype())) : s[4];
           Tensor scale = mean ? up(g) / denom : up(g);  // 0-d, or [M] without a reduction
           Tensor wt = has_w ? class_values(w, t) * scale : scale;
           Tensor a = where(valid, wt, 0.0).unsqueeze(1);
           Tensor dx = where(onehot, p - 1.0, p) * (eps > 0 ? a * (1 - eps) : a);
           if (eps > 0) {
             // The smoothing term -eps/C * sum_c w_c log p_c, per valid row.
             Tensor b = where(valid, scale, 0.0).unsqueeze(1) * (eps / double(C));
             dx = dx + (has_w ? p * sum(w) - w.unsqueeze(0) : p * double(C) - 1.0) * b;
           }
           return std::vector<Tensor>{dx};
         });
  note_recompute(y, "the probabilities exp(x - lse) from the saved logits and log-sum-exp");
}

void record_nll_loss(const Tensor& x, const Tensor& t, const Tensor& w, const Tensor& denom,
                     int64_t ignore_index, Reduction reduction, Tensor& y) {
  const bool has_w = w.defined(), mean = reduction == Reduction::Mean;
  const Shape shape = x.shape();
  const Device dev = x.device();
  record(y, "NllLossBackward0", {x}, {t, w, denom},
         [=](const Tensor& g, const std::vector<Tensor>& s, const std::vector<bool>&) {
           const Tensor &t = s[0], &w = s[1];
           Tensor onehot = eq(iota(shape, 1, dev), t.unsqueeze(1));
           Tensor valid = ne(t, ignore_index);
           // The unweighted mean's count again from the targets alone (cross entropy's reason).
           Tensor d = mean && !has_w ? sum(cast(valid, s[2].dtype())) : s[2];
           Tensor scale = mean ? up(g) / d : up(g);  // 0-d, or [M] without a reduction
           Tensor wt = has_w ? class_values(w, t) * scale : scale;
           // (negated before the unsqueeze: over the targets' shape it joins the scale's kernel)
           Tensor a = (-where(valid, wt, 0.0)).unsqueeze(1);
           return std::vector<Tensor>{where(onehot, a, zeros({}, {a.dtype(), dev}))};
         });
}

}  // namespace loom::autograd
