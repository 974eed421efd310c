// The optimizers' update rules (torch.optim's, in its order of operations so float32 results
// match torch's) and their parameter groups.
#include "ops/optim.h"

#include <cmath>

#include "ops/record.h"

namespace loom::optim {
namespace {

void check_lists(const char* op, const std::vector<Tensor>& params,
                 const std::vector<Tensor>& other, const char* what) {
  LOOM_CHECK(other.size() == params.size(), Value, op, ": ", params.size(), " parameters but ",
             other.size(), " ", what);
  for (size_t i = 0; i < params.size(); ++i) {
    LOOM_CHECK(other[i].defined() && other[i].shape() == params[i].shape(), Value, op,
               ": parameter ", i, " of shape ", shape_str(params[i].shape()), " has ", what,
               " of shape ", other[i].defined() ? shape_str(other[i].shape()) : "(none)");
  }
}

bool same_param(const Tensor& a, const Tensor& b) {
  return a.same_buffer(b) && a.offset() == b.offset() && a.shape() == b.shape() &&
         a.strides() == b.strides();
}

}  // namespace

AdamOptions adamw_defaults() {
  AdamOptions o;
  o.weight_decay = 1e-2;
  o.decoupled_weight_decay = true;
  return o;
}

void check(const SGDOptions& o) {
  LOOM_CHECK(o.lr >= 0, Value, "SGD: invalid learning rate: ", o.lr);
  LOOM_CHECK(o.momentum >= 0, Value, "SGD: invalid momentum value: ", o.momentum);
  LOOM_CHECK(o.weight_decay >= 0, Value, "SGD: invalid weight_decay value: ", o.weight_decay);
  LOOM_CHECK(!o.nesterov || (o.momentum > 0 && o.dampening == 0), Value,
             "SGD: nesterov momentum requires a momentum and zero dampening");
}

void check(const AdamOptions& o, const char* name) {
  LOOM_CHECK(o.lr >= 0, Value, name, ": invalid learning rate: ", o.lr);
  LOOM_CHECK(o.eps >= 0, Value, name, ": invalid epsilon value: ", o.eps);
  LOOM_CHECK(o.beta1 >= 0 && o.beta1 < 1, Value, name,
             ": invalid beta parameter at index 0: ", o.beta1);
  LOOM_CHECK(o.beta2 >= 0 && o.beta2 < 1, Value, name,
             ": invalid beta parameter at index 1: ", o.beta2);
  LOOM_CHECK(o.weight_decay >= 0, Value, name, ": invalid weight_decay value: ", o.weight_decay);
}

void sgd_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
              std::vector<Tensor>& momentum_buffers, const SGDOptions& o) {
  check(o);
  check_lists("SGD", params, grads, "a gradient");
  LOOM_CHECK(momentum_buffers.size() == params.size(), Value, "SGD: ", params.size(),
             " parameters but ", momentum_buffers.size(), " momentum buffers");
  NoGradGuard no_grad;
  for (size_t i = 0; i < params.size(); ++i) {
    Tensor p = params[i];
    Tensor d = o.maximize ? -grads[i] : grads[i];
    if (o.weight_decay != 0) d = d + p * Scalar(o.weight_decay);
    if (o.momentum != 0) {
      Tensor& buf = momentum_buffers[i];
      if (!buf.defined()) {
        buf = d.clone();
      } else {
        buf.mul_(Scalar(o.momentum)).add_(d, Scalar(1 - o.dampening));
      }
      d = o.nesterov ? d + buf * Scalar(o.momentum) : buf;
    }
    p.add_(d, Scalar(-o.lr));
  }
}

void adam_step(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
               const std::vector<Tensor>& exp_avgs, const std::vector<Tensor>& exp_avg_sqs,
               const std::vector<Tensor>& max_exp_avg_sqs, const std::vector<int64_t>& steps,
               const AdamOptions& o) {
  const char* name = o.decoupled_weight_decay ? "AdamW" : "Adam";
  check(o, name);
  check_lists(name, params, grads, "a gradient");
  check_lists(name, params, exp_avgs, "exp_avg");
  check_lists(name, params, exp_avg_sqs, "exp_avg_sq");
  if (o.amsgrad) check_lists(name, params, max_exp_avg_sqs, "max_exp_avg_sq");
  LOOM_CHECK(steps.size() == params.size(), Value, name, ": ", params.size(), " parameters but ",
             steps.size(), " step counts");
  NoGradGuard no_grad;
  for (size_t i = 0; i < params.size(); ++i) {
    LOOM_CHECK(steps[i] >= 1, Value, name, ": step count ", steps[i], " of parameter ", i,
               " (counts start at 1)");
    Tensor p = params[i], m = exp_avgs[i], v = exp_avg_sqs[i];
    Tensor g = o.maximize ? -grads[i] : grads[i];
    if (o.weight_decay != 0) {
      if (o.decoupled_weight_decay) {
        p.mul_(Scalar(1 - o.lr * o.weight_decay));
      } else {
        g = g + p * Scalar(o.weight_decay);
      }
    }
    m.lerp_(g, Scalar(1 - o.beta1));
    v.mul_(Scalar(o.beta2)).addcmul_(g, g, Scalar(1 - o.beta2));
    double t = double(steps[i]);
    double step_size = o.lr / (1 - std::pow(o.beta1, t));
    double bc2_sqrt = std::sqrt(1 - std::pow(o.beta2, t));
    Tensor second = v;
    if (o.amsgrad) {
      Tensor vmax = max_exp_avg_sqs[i];
      vmax.copy_(maximum(vmax, v));
      second = vmax;
    }
    Tensor denom = second.sqrt() / Scalar(bc2_sqrt) + Scalar(o.eps);
    p.addcdiv_(m, denom, Scalar(-step_size));
  }
}

void Optimizer::zero_grad(bool set_to_none) {
  NoGradGuard no_grad;
  for (auto& group : params_) {
    for (auto& p : group) {
      Tensor g = p.grad();
      if (!g.defined()) continue;
      if (set_to_none) {
        p.set_grad(Tensor());
      } else {
        g.zero_();
      }
    }
  }
}

void Optimizer::add_params(std::vector<Tensor> params, const char* name) {
  for (size_t i = 0; i < params.size(); ++i) {
    const Tensor& p = params[i];
    LOOM_CHECK(p.defined(), Value, name, ": parameter ", i, " is an undefined tensor");
    LOOM_CHECK(is_floating(p.dtype()), Type, name, ": parameter ", i, " of dtype ",
               dtype_name(p.dtype()), " (an optimizer updates floating tensors only)");
    LOOM_CHECK(p.is_leaf(), Value, name, ": can't optimize a non-leaf tensor (parameter ", i,
               " of shape ", shape_str(p.shape()), ")");
    for (const auto& group : params_) {
      for (const auto& q : group) {
        LOOM_CHECK(!same_param(p, q), Value, name,
                   ": some parameters appear in more than one parameter group");
      }
    }
    for (size_t j = 0; j < i; ++j) {
      LOOM_CHECK(!same_param(p, params[j]), Value, name,
                 ": a parameter group holds one parameter twice (index ", j, " and ", i, ")");
    }
  }
  state_.emplace_back(params.size());
  params_.push_back(std::move(params));
}

SGD::SGD(std::vector<Tensor> params, SGDOptions defaults) {
  add_param_group({std::move(params), defaults});
}

SGD::SGD(std::vector<ParamGroup<SGDOptions>> groups) {
  for (auto& g : groups) add_param_group(std::move(g));
}

void SGD::add_param_group(ParamGroup<SGDOptions> g) {
  check(g.options);
  add_params(std::move(g.params), "SGD");
  options_.push_back(g.options);
}

void SGD::step() {
  for (size_t gi = 0; gi < params_.size(); ++gi) {
    check(options_[gi]);
    std::vector<Tensor> ps, gs, bufs;
    std::vector<ParamState*> st;
    for (size_t j = 0; j < params_[gi].size(); ++j) {
      Tensor g = params_[gi][j].grad();
      if (!g.defined()) continue;
      ParamState& s = state_[gi][j];
      ps.push_back(params_[gi][j]);
      gs.push_back(g);
      auto it = s.tensors.find("momentum_buffer");
      bufs.push_back(it == s.tensors.end() ? Tensor() : it->second);
      st.push_back(&s);
    }
    sgd_step(ps, gs, bufs, options_[gi]);
    for (size_t k = 0; k < st.size(); ++k) {
      st[k]->step += 1;
      if (bufs[k].defined()) st[k]->tensors["momentum_buffer"] = bufs[k];
    }
  }
}

Adam::Adam(std::vector<Tensor> params, AdamOptions defaults) {
  add_param_group({std::move(params), defaults});
}

Adam::Adam(std::vector<ParamGroup<AdamOptions>> groups) {
  for (auto& g : groups) add_param_group(std::move(g));
}

void Adam::add_param_group(ParamGroup<AdamOptions> g) {
  const char* name = g.options.decoupled_weight_decay ? "AdamW" : "Adam";
  check(g.options, name);
  add_params(std::move(g.params), name);
  options_.push_back(g.options);
}

void Adam::step() {
  for (size_t gi = 0; gi < params_.size(); ++gi) {
    const AdamOptions& o = options_[gi];
    check(o, o.decoupled_weight_decay ? "AdamW" : "Adam");  // before any state changes
    std::vector<Tensor> ps, gs, ms, vs, vmax;
    std::vector<int64_t> steps;
    for (size_t j = 0; j < params_[gi].size(); ++j) {
      const Tensor& p = params_[gi][j];
      Tensor g = p.grad();
      if (!g.defined()) continue;
      ParamState& s = state_[gi][j];
      if (s.tensors.empty()) {
        s.tensors["exp_avg"] = zeros_like(p);
        s.tensors["exp_avg_sq"] = zeros_like(p);
      }
      if (o.amsgrad && !s.tensors.count("max_exp_avg_sq")) {
        s.tensors["max_exp_avg_sq"] = zeros_like(p);
      }
      s.step += 1;
      ps.push_back(p);
      gs.push_back(g);
      ms.push_back(s.tensors["exp_avg"]);
      vs.push_back(s.tensors["exp_avg_sq"]);
      if (o.amsgrad) vmax.push_back(s.tensors["max_exp_avg_sq"]);
      steps.push_back(s.step);
    }
    adam_step(ps, gs, ms, vs, vmax, steps, o);
  }
}

namespace {
AdamOptions decoupled(AdamOptions o) {
  o.decoupled_weight_decay = true;
  return o;
}
}  // namespace

AdamW::AdamW(std::vector<Tensor> params, AdamOptions defaults)
    : Adam(std::move(params), decoupled(defaults)) {}

}  // namespace loom::optim
