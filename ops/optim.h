#pragma once
// Optimizers with torch's names and update rules (torch.optim.SGD / Adam / AdamW).
//
// Two layers: the update of a list of parameters from their gradients (`sgd_step`,
// `adam_step`, torch's functional forms), which Python's loom.optim calls too, so the math has
// one place; and optimizer objects over parameter groups that keep the per-parameter state.
// Updates are recorded under no_grad like any other in-place op, so they land in the same flush
// as the forward and the backward that made the gradients. Scalars (learning rate, the
// step's bias corrections) are kernel arguments: changing them compiles nothing.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ops/tensor.h"

namespace loom::optim {

struct SGDOptions {
  double lr = 1e-3;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;
  bool maximize = false;
};

struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;
  bool amsgrad = false;
  bool maximize = false;
  bool decoupled_weight_decay = false;  // AdamW: p *= 1 - lr * weight_decay, not a gradient term
};
// AdamW's defaults: decoupled decay of 1e-2.
AdamOptions adamw_defaults();

// Checks an option set as torch's constructors do (a negative rate, betas outside [0, 1),
// nesterov without momentum...), raising loom::Error naming the optimizer and the value.
void check(const SGDOptions& o);
void check(const AdamOptions& o, const char* name = "Adam");

// One SGD step over params[i] with grads[i] (same shapes). momentum_buffers[i] undefined means
// none yet: with momentum it becomes a copy of this step's direction (torch's first step).
void sgd_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
              std::vector<Tensor>& momentum_buffers, const SGDOptions& o);

// One Adam step. steps[i] is the count after this step (1 on the first); exp_avgs and
// exp_avg_sqs start as zeros; max_exp_avg_sqs is read only with amsgrad.
void adam_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
               const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
               const std::vector<Tensor>& max_exp_avg_sqs, const std::vector<int64_t>& steps,
               const AdamOptions& o);

// Parameter groups and per-parameter state. The state of params[j] of group i is
// state()[i][j]: named tensors and the step count.
struct ParamState {
  int64_t step = 0;
  std::map<std::string, Tensor> tensors;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // Clears (or, set_to_none = false, zeroes in place) every parameter's gradient.
  void zero_grad(bool set_to_none = true);
  // Updates every parameter that has a gradient; ones without are skipped.
  virtual void step() = 0;
  size_t num_groups() const { return params_.size(); }
  const std::vector<Tensor>& params(size_t group) const { return params_.at(group); }
  std::vector<std::vector<ParamState>>& state() { return state_; }

 protected:
  // Adds a group, refusing a parameter that is already in one, an integer one, or a non-leaf.
  void add_params(std::vector<Tensor> params, const char* name);
  std::vector<std::vector<Tensor>> params_;
  std::vector<std::vector<ParamState>> state_;
};

template <typename Opts>
struct ParamGroup {
  std::vector<Tensor> params;
  Opts options;
};

class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, SGDOptions defaults);
  explicit SGD(std::vector<ParamGroup<SGDOptions>> groups);
  void add_param_group(ParamGroup<SGDOptions> g);
  void step() override;
  SGDOptions& options(size_t group) { return options_.at(group); }

 private:
  std::vector<SGDOptions> options_;
};

// Adam, and AdamW when options.decoupled_weight_decay.
class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, AdamOptions defaults);
  explicit Adam(std::vector<ParamGroup<AdamOptions>> groups);
  void add_param_group(ParamGroup<AdamOptions> g);
  void step() override;
  AdamOptions& options(size_t group) { return options_.at(group); }

 private:
  std::vector<AdamOptions> options_;
};

class AdamW : public Adam {
 public:
  AdamW(std::vector<Tensor> params, AdamOptions defaults = adamw_defaults());
};

}  // namespace loom::optim
