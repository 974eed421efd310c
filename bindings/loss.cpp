// The losses (ops/loss.cpp) with torch.nn.functional's keywords; reduction as its strings.
#include "bindings/common.h"

namespace loom::py {
namespace {

Reduction reduction_of(const char* op, const std::string& s) {
  if (s == "mean") return Reduction::Mean;
  if (s == "sum") return Reduction::Sum;
  if (s == "none") return Reduction::None;
  throw nb::value_error(
      (std::string(op) + ": reduction must be 'mean', 'sum' or 'none', got '" + s + "'").c_str());
}

using OT = std::optional<Tensor>;

}  // namespace

void init_loss(nb::module_& m) {
  m.def(
      "cross_entropy",
      [](const Tensor& input, const Tensor& target, const OT& weight, int64_t ignore_index,
         const std::string& reduction, double label_smoothing) {
        return cross_entropy(
            input, target,
            {weight, ignore_index, reduction_of("cross_entropy", reduction), label_smoothing});
      },
      "input"_a, "target"_a, "weight"_a = nb::none(), "ignore_index"_a = -100,
      "reduction"_a = "mean", "label_smoothing"_a = 0.0,
      "Cross entropy of logits ([N, C], [C] or [N, C, d...]) against class indices or class "
      "probabilities (torch.nn.functional.cross_entropy).");
  m.def(
      "nll_loss",
      [](const Tensor& input, const Tensor& target, const OT& weight, int64_t ignore_index,
         const std::string& reduction) {
        return nll_loss(input, target, {weight, ignore_index, reduction_of("nll_loss", reduction)});
      },
      "input"_a, "target"_a, "weight"_a = nb::none(), "ignore_index"_a = -100,
      "reduction"_a = "mean", "Negative log likelihood of log-probabilities at class indices.");
  m.def(
      "mse_loss",
      [](const Tensor& input, const Tensor& target, const std::string& reduction) {
        return mse_loss(input, target, reduction_of("mse_loss", reduction));
      },
      "input"_a, "target"_a, "reduction"_a = "mean", "Squared error.");
  m.def(
      "l1_loss",
      [](const Tensor& input, const Tensor& target, const std::string& reduction) {
        return l1_loss(input, target, reduction_of("l1_loss", reduction));
      },
      "input"_a, "target"_a, "reduction"_a = "mean", "Absolute error.");
  m.def(
      "binary_cross_entropy_with_logits",
      [](const Tensor& input, const Tensor& target, const OT& weight, const std::string& reduction,
         const OT& pos_weight) {
        return binary_cross_entropy_with_logits(
            input, target, weight, pos_weight,
            reduction_of("binary_cross_entropy_with_logits", reduction));
      },
      "input"_a, "target"_a, "weight"_a = nb::none(), "reduction"_a = "mean",
      "pos_weight"_a = nb::none(), "Binary cross entropy of logits (stable for any logit).");
}

}  // namespace loom::py
