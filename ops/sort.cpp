// sort / argsort / topk along a dim, by rank: an element's place is the count of elements
// that go before it (ties kept in index order, so every sort is stable; NaN sorts as the
// largest value, as torch's). The ranks are a fused comparison count over the dim and each
// output slot takes the element of its rank: no host sync, the same on every device, and
// quadratic in the dim's length (rows up to a few thousand; longer ones want a sort kernel).
#include "ops/record.h"

namespace loom {
namespace {

// Indices [..., k] (along the last dim of xt) of the elements ranked 0..k-1.
Tensor ranked_indices(const Tensor& xt, int64_t k, bool descending) {
  int64_t n = xt.shape().back();
  Tensor a = xt.unsqueeze(-1);  // [..., n, 1]: element i
  Tensor b = xt.unsqueeze(-2);  // [..., 1, n]: element j, which may go before i
  Shape nn{n, n};
  Tensor earlier = lt(iota(nn, 1, xt.device()), iota(nn, 0, xt.device()));  // j < i
  Tensor first = descending ? gt(b, a) : lt(b, a);
  Tensor same = eq(b, a);
  if (is_floating(xt.dtype())) {
    Tensor na = isnan(a), nb = isnan(b);
    first = descending ? logical_or(first, logical_and(nb, logical_not(na)))
                       : logical_or(first, logical_and(na, logical_not(nb)));
    same = logical_or(same, logical_and(na, nb));
  }
  Tensor rank = sum(logical_or(first, logical_and(same, earlier)), {-1});  // [..., n]
  Shape kn{k, n};
  Tensor slot = iota(kn, 0, xt.device());                         // [k, n]: slot s
  Tensor pos = iota(kn, 1, xt.device());                          // [k, n]: element i
  return sum(where(eq(rank.unsqueeze(-2), slot), pos, 0), {-1});  // [..., k]
}

std::pair<Tensor, Tensor> sorted_k(const char* op, const Tensor& x, std::optional<int64_t> k0,
                                   int64_t dim, bool descending) {
  if (x.dim() == 0) {
    LOOM_CHECK(k0.value_or(1) <= 1 && k0.value_or(1) >= 0, Value, op, ": k ", *k0,
               " out of range for a 0-dim tensor");
    return {x.clone(), zeros({}, {DType::Int64, x.device()})};
  }
  int d = normalize_dim(op, dim, x.shape());
  int64_t n = x.shape()[d];
  int64_t k = k0.value_or(n);
  LOOM_CHECK(k >= 0 && k <= n, Value, op, ": k ", k, " out of range for dim ", d, " of size ", n,
             " (shape ", shape_str(x.shape()), ")");
  Tensor idx;
  {
    NoGradGuard no_grad;  // indices: nothing to differentiate
    Tensor xt = x.transpose(d, -1).detach();
    if (n == 0 || k == 0) {
      Shape s = xt.shape();
      s.back() = k;
      idx = zeros(s, {DType::Int64, x.device()});
    } else {
      idx = ranked_indices(xt, k, descending);
    }
    idx = idx.transpose(d, -1);
  }
  return {gather(x, d, idx), idx};  // values through gather: its gradient scatters back
}

}  // namespace

std::pair<Tensor, Tensor> sort(const Tensor& x, int64_t dim, bool descending, bool stable) {
  (void)stable;  // every sort here is stable
  return sorted_k("sort", x, std::nullopt, dim, descending);
}

Tensor argsort(const Tensor& x, int64_t dim, bool descending, bool stable) {
  (void)stable;
  return sorted_k("argsort", x, std::nullopt, dim, descending).second;
}

std::pair<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim, bool largest, bool sorted) {
  (void)sorted;  // always sorted (largest first, or smallest first when not largest)
  return sorted_k("topk", x, k, dim, largest);
}

}  // namespace loom
