// The optimizers' update rules (ops/optim.h) for loom.optim (python/loom/optim/), which keeps
// the parameter groups and state in torch's Python shapes and calls these once per group.
#include "ops/optim.h"

#include "bindings/common.h"

namespace loom::py {
namespace {

std::vector<Tensor> maybe_tensors(const std::vector<std::optional<Tensor>>& v) {
  std::vector<Tensor> out;
  out.reserve(v.size());
  for (const auto& t : v) out.push_back(t ? *t : Tensor());
  return out;
}

}  // namespace

void init_optim(nb::module_& m) {
  m.def(
      "_sgd_step",
      [](const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
         const std::vector<std::optional<Tensor>>& momentum_buffers, double lr, double momentum,
         double dampening, double weight_decay, bool nesterov, bool maximize) {
        optim::SGDOptions o{lr, momentum, dampening, weight_decay, nesterov, maximize};
        std::vector<Tensor> bufs = maybe_tensors(momentum_buffers);
        optim::sgd_step(params, grads, bufs, o);
        std::vector<std::optional<Tensor>> out;
        for (auto& b : bufs) out.push_back(b.defined() ? std::optional<Tensor>(b) : std::nullopt);
        return out;
      },
      "params"_a, "grads"_a, "momentum_buffers"_a, "lr"_a, "momentum"_a, "dampening"_a,
      "weight_decay"_a, "nesterov"_a, "maximize"_a,
      "One SGD step over the parameters, recorded in place; returns the momentum buffers "
      "(a new one where None was given and momentum is on).");
  m.def(
      "_adam_step",
      [](const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
         const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
         const std::vector<Tensor>& max_exp_avg_sqs, const std::vector<int64_t>& steps, double lr,
         double beta1, double beta2, double eps, double weight_decay, bool amsgrad, bool maximize,
         bool decoupled_weight_decay) {
        optim::AdamOptions o{lr,           beta1,   beta2,    eps,
                             weight_decay, amsgrad, maximize, decoupled_weight_decay};
        optim::adam_step(params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps, o);
      },
      "params"_a, "grads"_a, "exp_avgs"_a, "exp_avg_sqs"_a, "max_exp_avg_sqs"_a, "steps"_a, "lr"_a,
      "beta1"_a, "beta2"_a, "eps"_a, "weight_decay"_a, "amsgrad"_a, "maximize"_a,
      "decoupled_weight_decay"_a,
      "One Adam (AdamW with decoupled_weight_decay) step over the parameters, recorded in "
      "place; steps are the counts after this step.");
}

}  // namespace loom::py
