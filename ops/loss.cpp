// Losses with torch.nn.functional's names and semantics. cross_entropy over class indices has
// its own backward node (one pass over the logits: softmax minus the target's one-hot, scaled
// per row); the others are written in recorded ops and differentiate through them.
#include "ops/grad_node.h"
#include "ops/index_prims.h"
#include "ops/record.h"

namespace loom {
namespace {

Tensor reduce(const Tensor& per, Reduction r) {
  switch (r) {
    case Reduction::None:
      return per;
    case Reduction::Sum:
      return sum(per);
    case Reduction::Mean:
      return mean(per);
  }
  return per;
}

// input [N, C, d...] as rows [M, C] (the class dim last) and the target as [M]; `unbatched`:
// input [C] and a 0-d target. Returns the shape of the per-element loss.
Shape class_rows(const char* op, const Tensor& input, const Tensor& target, Tensor& x2,
                 Tensor& t1) {
  bool unbatched = input.dim() == 1;
  Shape want;
  if (!unbatched) {
    want = input.shape();
    want.erase(want.begin() + 1);
  }
  LOOM_CHECK(input.dim() >= 1 && target.shape() == want, Value, op, ": expected target of shape ",
             shape_str(want), " for input of shape ", shape_str(input.shape()), ", got ",
             shape_str(target.shape()));
  LOOM_CHECK(target.dtype() == DType::Int64 || target.dtype() == DType::Int32, Type, op,
             ": target must hold class indices (int64), got ", dtype_name(target.dtype()),
             " of shape ", shape_str(target.shape()));
  check_same_device(op, input, target);
  int64_t C = input.shape()[unbatched ? 0 : 1];
  if (unbatched) {
    x2 = input.unsqueeze(0);
  } else if (input.dim() == 2) {
    x2 = input;
  } else {
    Dims order{0};
    for (int d = 2; d < input.dim(); ++d) order.push_back(d);
    order.push_back(1);
    x2 = input.permute(order).reshape({-1, C});
  }
  t1 = target.reshape({-1});
  return want;
}

Tensor class_weight(const char* op, const std::optional<Tensor>& weight, int64_t C,
                    const Tensor& input) {
  if (!weight) return Tensor();
  LOOM_CHECK(weight->dim() == 1 && weight->shape()[0] == C, Value, op, ": weight of shape ",
             shape_str(weight->shape()), " for ", C, " classes (input of shape ",
             shape_str(input.shape()), ")");
  check_same_device(op, input, *weight);
  LOOM_CHECK(!(is_grad_enabled() && weight->requires_grad()), Value, op,
             ": the gradient of weight is not supported (detach it)");
  return float_input(op, *weight);
}

// Raises at the next sync point when a target other than ignore_index is outside [0, C).
void check_targets(const char* op, const Tensor& t1, int64_t ignore_index, int64_t C,
                   const Tensor& input, const Tensor& target) {
  if (t1.numel() == 0) return;
  // Reading the targets here would flush and wait in the middle of a training step: the
  // check runs with the step and raises at its sync point.
  check_later(logical_and(ne(t1, ignore_index), logical_or(lt(t1, 0), ge(t1, C))), ErrorKind::Index,
              detail::cat(op, ": a target class is out of range [0, ", C, ") for input of shape ",
                          shape_str(input.shape()), " (target ", dtype_name(target.dtype()),
                          " of shape ", shape_str(target.shape()), ")"));
}

// Cross entropy against class probabilities (target shaped as input), through log_softmax.
Tensor cross_entropy_probs(const Tensor& input, const Tensor& target,
                           const CrossEntropyOptions& o) {
  const char* op = "cross_entropy";
  LOOM_CHECK(is_floating(target.dtype()), Type, op,
             ": class-probability targets must be "
             "floating point, got ",
             dtype_name(target.dtype()));
  check_same_device(op, input, target);
  int cdim = input.dim() == 1 ? 0 : 1;
  int64_t C = input.shape()[cdim];
  Tensor logp = log_softmax(float_input(op, input), cdim);
  Tensor y = float_input(op, target);
  if (o.label_smoothing > 0) y = y * (1 - o.label_smoothing) + o.label_smoothing / double(C);
  Tensor prod = logp * y;
  if (o.weight) {
    Tensor w = class_weight(op, o.weight, C, input);
    Dims ws(size_t(input.dim()), 1);
    ws[size_t(cdim)] = C;
    prod = prod * w.reshape(ws);
  }
  Tensor per = -sum(prod, {cdim});
  Tensor r = o.reduction == Reduction::Mean && input.dim() > 1
                 ? sum(per) * (1.0 / double(input.shape()[0]))
                 : reduce(per, o.reduction);
  return cast(r, input.dtype());
}

}  // namespace

namespace {

// The reduction of per-row losses (0 in rows whose target is ignored): the mean divides by the
// valid rows' class weights `wt` (undefined: their count), set in `denom` for the backward.
// Each row's term is divided before the sum, which is then a plain sum of the row kernel's
// values: a backend with column sums adds it up inside that kernel.
Tensor reduce_rows(const Tensor& per, const Tensor& valid, const Tensor& wt, Reduction r,
                   Tensor& denom) {
  if (r != Reduction::Mean) return reduce(per, r);
  denom = wt.defined() ? sum(where(valid, wt, 0.0)) : sum(cast(valid, per.dtype()));
  return sum(per / denom);
}

}  // namespace

Tensor cross_entropy(const Tensor& input, const Tensor& target, const CrossEntropyOptions& o) {
  const char* op = "cross_entropy";
  if (autocast_to_f32(input) || autocast_to_f32(target) ||
      (o.weight && autocast_to_f32(*o.weight))) {
    CrossEntropyOptions o32 = o;
    if (o.weight) o32.weight = autocast_f32(*o.weight);
    return cross_entropy(autocast_f32(input), autocast_f32(target), o32);
  }
  LOOM_CHECK(o.label_smoothing >= 0 && o.label_smoothing <= 1, Value, op,
             ": label_smoothing must be in [0, 1], got ", o.label_smoothing);
  float_input(op, input);  // the dtype check, at the call
  if (target.shape() == input.shape() && is_floating(target.dtype()) && input.dim() >= 1)
    return cross_entropy_probs(input, target, o);
  Tensor x2, t;
  Shape per_shape = class_rows(op, input, target, x2, t);
  int64_t C = x2.shape()[1];
  Tensor w = class_weight(op, o.weight, C, input);
  check_targets(op, t, o.ignore_index, C, input, target);
  double eps = o.label_smoothing;
  Tensor lse, y, denom;
  {
    NoGradGuard forward;  // its own backward node, below
    Tensor xf = float_input(op, x2);
    lse = logsumexp(xf, {1});
    Tensor valid = ne(t, o.ignore_index);
    Tensor nll = lse - cast(class_values(x2, t), xf.dtype());
    Tensor wt;
    if (w.defined()) {
      wt = class_values(w, t);
      nll = nll * wt;
    }
    Tensor per = where(valid, nll, 0.0);
    if (eps > 0) {
      Tensor smooth = w.defined() ? lse * sum(w) - sum(xf * w.unsqueeze(0), {1})
                                  : lse * double(C) - sum(xf, {1});
      per = per * (1 - eps) + where(valid, smooth, 0.0) * (eps / double(C));
    }
    y = cast(reduce_rows(per, valid, wt, o.reduction, denom), input.dtype());
  }
  if (autograd::needs_grad(x2))
    autograd::record_cross_entropy(x2, t, lse, w, denom, o.ignore_index, o.reduction, eps, y);
  return o.reduction == Reduction::None ? y.reshape(Dims(per_shape.begin(), per_shape.end())) : y;
}

Tensor nll_loss(const Tensor& input, const Tensor& target, const NllLossOptions& o) {
  const char* op = "nll_loss";
  if (autocast_to_f32(input) || (o.weight && autocast_to_f32(*o.weight))) {
    NllLossOptions o32 = o;
    if (o.weight) o32.weight = autocast_f32(*o.weight);
    return nll_loss(autocast_f32(input), target, o32);
  }
  float_input(op, input);
  Tensor x2, t;
  Shape per_shape = class_rows(op, input, target, x2, t);
  int64_t C = x2.shape()[1];
  Tensor w = class_weight(op, o.weight, C, input);
  check_targets(op, t, o.ignore_index, C, input, target);
  Tensor y, denom;
  {
    NoGradGuard forward;  // its own backward node, below
    Tensor valid = ne(t, o.ignore_index);
    // Each row's target element by a gather (one element a row), not a pass over the row.
    Tensor picked = cast(class_values(x2, t), float_input(op, x2).dtype());
    Tensor wt;
    if (w.defined()) {
      wt = class_values(w, t);
      picked = picked * wt;
    }
    Tensor per = where(valid, -picked, 0.0);
    y = cast(reduce_rows(per, valid, wt, o.reduction, denom), input.dtype());
  }
  if (autograd::needs_grad(x2))
    autograd::record_nll_loss(x2, t, w, denom, o.ignore_index, o.reduction, y);
  if (o.reduction == Reduction::None) return y.reshape(Dims(per_shape.begin(), per_shape.end()));
  return y;
}

namespace {

void check_same_shape(const char* op, const Tensor& input, const Tensor& target) {
  LOOM_CHECK(input.shape() == target.shape(), Value, op, ": input of shape ",
             shape_str(input.shape()), " and target of shape ", shape_str(target.shape()),
             " differ");
  check_same_device(op, input, target);
}

}  // namespace

// mse_loss and l1_loss broadcast input against target, as torch's do (which also warn).
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction r) {
  if (autocast_to_f32(input) || autocast_to_f32(target))
    return mse_loss(autocast_f32(input), autocast_f32(target), r);
  check_same_device("mse_loss", input, target);
  float_input("mse_loss", input);
  return reduce(square(input - target), r);
}

Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction r) {
  if (autocast_to_f32(input) || autocast_to_f32(target))
    return l1_loss(autocast_f32(input), autocast_f32(target), r);
  check_same_device("l1_loss", input, target);
  float_input("l1_loss", input);
  return reduce(abs(input - target), r);
}

Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const std::optional<Tensor>& weight,
                                        const std::optional<Tensor>& pos_weight, Reduction r) {
  const char* op = "binary_cross_entropy_with_logits";
  if (autocast_to_f32(input) || autocast_to_f32(target) || (weight && autocast_to_f32(*weight)) ||
      (pos_weight && autocast_to_f32(*pos_weight))) {
    auto f32 = [](const std::optional<Tensor>& t) {
      return t ? std::optional(autocast_f32(*t)) : std::nullopt;
    };
    return binary_cross_entropy_with_logits(autocast_f32(input), autocast_f32(target), f32(weight),
                                            f32(pos_weight), r);
  }
  check_same_shape(op, input, target);
  float_input(op, input);
  // log(1 + exp(-|x|)) + max(-x, 0) is -log(sigmoid(x)) without overflow for any x.
  Tensor log_sig_neg = log1p(exp(-abs(input))) + relu(-input);  // -log(sigmoid(x))
  Tensor per;
  if (pos_weight) {
    check_same_device(op, input, *pos_weight);
    // -(pw * y * log(sigmoid(x)) + (1 - y) * log(1 - sigmoid(x))), log(1 - sigmoid(x)) being
    // -x - (-log(sigmoid(x))) negated: (1 - y) * x + (1 + (pw - 1) * y) * (-log sigmoid(x)).
    per = (1.0 - target) * input + (1.0 + (*pos_weight - 1.0) * target) * log_sig_neg;
  } else {
    per = (1.0 - target) * input + log_sig_neg;
  }
  if (weight) {
    check_same_device(op, input, *weight);
    per = per * *weight;
  }
  return reduce(per, r);
}

}  // namespace loom
