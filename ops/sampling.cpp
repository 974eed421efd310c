// Sampling: multinomial by inverting each row's cumulative sum against uniform draws (a
// comparison count that fuses into one reduction; no host sync, no sort).
#include "ops/record.h"

namespace loom {

Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement) {
  const char* op = "multinomial";
  LOOM_CHECK(probs.dim() == 1 || probs.dim() == 2, Value, op,
             ": probabilities must be 1 or 2 dims, got shape ", shape_str(probs.shape()));
  LOOM_CHECK(is_floating(probs.dtype()), Type, op, ": probabilities must be floating point, got ",
             dtype_name(probs.dtype()));
  int64_t V = probs.shape()[probs.dim() - 1];
  LOOM_CHECK(V > 0, Value, op, ": no categories (shape ", shape_str(probs.shape()), ")");
  LOOM_CHECK(num_samples > 0, Value, op, ": num_samples must be positive, got ", num_samples);
  LOOM_CHECK(replacement || num_samples <= V, Value, op, ": cannot draw ", num_samples,
             " samples without replacement from ", V, " categories");
  NoGradGuard no_grad;  // samples are integers: nothing to differentiate
  Tensor p = float_input(op, probs.dim() == 1 ? probs.unsqueeze(0) : probs);  // [B, V]
  int64_t B = p.shape()[0];
  // A bad row (a negative or non-finite probability, or nothing to draw) raises at the next
  // sync point, as the other value checks do, without reading the values now.
  if (B > 0)
    check_later(logical_or(any(logical_or(lt(p, 0.0), logical_not(isfinite(p))), {1}),
                           le(sum(p, {1}), 0.0)),
                ErrorKind::Value,
                detail::cat(op, ": invalid distribution in probabilities of shape ",
                            shape_str(probs.shape()),
                            " (a negative, inf or nan entry, or a row summing to 0)"));
  Shape bv{B, V};
  Tensor col = iota(bv, 1, p.device());
  auto draw = [&](const Tensor& q, int64_t n) {                // [B, n] indices, with replacement
    Tensor cdf = cumsum(q, 1);                                 // [B, V]
    Tensor total = cdf.narrow(1, V - 1, 1);                    // [B, 1]
    Tensor u = rand({B, n}, {p.dtype(), p.device()}) * total;  // in [0, total)
    // The sample is the first category whose cumulative sum exceeds u: the count of those
    // that do not. Clamped: a bad row (raised at the sync) must still index in range.
    Tensor count = sum(le(cdf.unsqueeze(1), u.unsqueeze(2)), {2});
    return minimum(count, full({}, V - 1, {DType::Int64, p.device()}));
  };
  Tensor out;
  if (replacement || num_samples == 1) {
    out = draw(p, num_samples);
  } else {
    // Without replacement: draw one at a time, taking each drawn category out of the row.
    std::vector<Tensor> picks;
    Tensor q = p;
    for (int64_t k = 0; k < num_samples; ++k) {
      Tensor one = draw(q, 1);  // [B, 1]
      picks.push_back(one);
      q = where(eq(col, one), 0.0, q);
    }
    out = cat(picks, 1);
  }
  return probs.dim() == 1 ? out.squeeze(0) : out;
}

}  // namespace loom
