// loom::optim against float64 updates written out here (torch's update rules), fused and with
// fusion off; laziness (a step records, the loss read runs it), the plan cache under a
// changing learning rate, and the constructors' errors.
#include <cmath>

#include "helpers.h"

using namespace loom;
using lt::check_close;

namespace {

struct Ref {  // one parameter's float64 state
  std::vector<double> p, m, v, vmax, buf;
  bool has_buf = false;
  int64_t step = 0;
};

void ref_sgd(Ref& r, const std::vector<double>& g, const optim::SGDOptions& o) {
  std::vector<double> d(g.size());
  for (size_t i = 0; i < g.size(); ++i) {
    d[i] = (o.maximize ? -g[i] : g[i]) + o.weight_decay * r.p[i];
  }
  if (o.momentum != 0) {
    if (!r.has_buf) {
      r.buf = d;
      r.has_buf = true;
    } else {
      for (size_t i = 0; i < d.size(); ++i)
        r.buf[i] = o.momentum * r.buf[i] + (1 - o.dampening) * d[i];
    }
    for (size_t i = 0; i < d.size(); ++i)
      d[i] = o.nesterov ? d[i] + o.momentum * r.buf[i] : r.buf[i];
  }
  for (size_t i = 0; i < d.size(); ++i) r.p[i] -= o.lr * d[i];
}

void ref_adam(Ref& r, const std::vector<double>& g0, const optim::AdamOptions& o) {
  size_t n = g0.size();
  if (r.m.empty()) r.m = r.v = r.vmax = std::vector<double>(n, 0.0);
  r.step += 1;
  double t = double(r.step);
  for (size_t i = 0; i < n; ++i) {
    double g = o.maximize ? -g0[i] : g0[i];
    if (o.decoupled_weight_decay) {
      r.p[i] *= 1 - o.lr * o.weight_decay;
    } else {
      g += o.weight_decay * r.p[i];
    }
    r.m[i] = o.beta1 * r.m[i] + (1 - o.beta1) * g;
    r.v[i] = o.beta2 * r.v[i] + (1 - o.beta2) * g * g;
    r.vmax[i] = std::max(r.vmax[i], r.v[i]);
    double second = o.amsgrad ? r.vmax[i] : r.v[i];
    double mhat = r.m[i] / (1 - std::pow(o.beta1, t));
    double denom = std::sqrt(second) / std::sqrt(1 - std::pow(o.beta2, t)) + o.eps;
    r.p[i] -= o.lr * mhat / denom;
  }
}

const std::vector<Shape> kShapes = {{7, 5}, {5}, {1}, {3, 4, 2}};

// Runs `steps` updates of `opt` over parameters of kShapes with random gradients, against the
// float64 reference `ref`; checks every parameter after each step.
template <typename MakeOpt, typename RefStep>
void run_against_reference(MakeOpt make_opt, RefStep ref, int steps, lt::Tol tol) {
  std::vector<Tensor> params;
  std::vector<Ref> refs;
  uint32_t seed = 11;
  for (const Shape& s : kShapes) {
    auto v = lt::uniform(numel(s), -1, 1, seed++);
    params.push_back(lt::make(v, s).requires_grad_());
    refs.push_back({v});
  }
  auto opt = make_opt(params);
  for (int k = 0; k < steps; ++k) {
    for (size_t i = 0; i < params.size(); ++i) {
      if (k == 1 && i == 2) continue;  // a parameter without a gradient this step is skipped
      auto g = lt::uniform(params[i].numel(), -1, 1, seed++);
      params[i].set_grad(lt::make(g, params[i].shape()));
      ref(refs[i], g);
    }
    opt->step();
    opt->zero_grad();
    for (size_t i = 0; i < params.size(); ++i) {
      INFO("step " << k << " parameter " << i);
      check_close(params[i], refs[i].p, tol);
      CHECK(!params[i].grad().defined());
    }
  }
}

}  // namespace

TEST_CASE("optim: SGD's variants against a float64 update, fused and unfused") {
  std::vector<optim::SGDOptions> cases = {
      {0.1},
      {0.1, 0.9},
      {0.05, 0.9, 0.3, 0.01},
      {0.1, 0.9, 0, 0.02, true},
      {0.1, 0.5, 0, 0, false, true},
  };
  for (bool fused : {true, false}) {
    set_fusion(fused);
    for (const auto& o : cases) {
      INFO("fused " << fused << " momentum " << o.momentum << " nesterov " << o.nesterov);
      run_against_reference(
          [&](std::vector<Tensor> ps) { return std::make_unique<optim::SGD>(ps, o); },
          [&](Ref& r, const std::vector<double>& g) { ref_sgd(r, g, o); }, 4, {1e-6, 1e-5});
    }
  }
  set_fusion(true);
}

TEST_CASE("optim: Adam, AdamW and amsgrad against a float64 update, fused and unfused") {
  optim::AdamOptions plain;
  plain.lr = 0.01;
  optim::AdamOptions decay = plain;
  decay.weight_decay = 0.1;
  decay.amsgrad = true;
  optim::AdamOptions w = optim::adamw_defaults();
  w.lr = 0.02;
  w.beta1 = 0.8;
  w.beta2 = 0.95;
  optim::AdamOptions wmax = w;
  wmax.amsgrad = true;
  wmax.maximize = true;
  for (bool fused : {true, false}) {
    set_fusion(fused);
    for (const auto& o : {plain, decay, w, wmax}) {
      INFO("fused " << fused << " wd " << o.weight_decay << " amsgrad " << o.amsgrad
                    << " decoupled " << o.decoupled_weight_decay);
      run_against_reference(
          [&](std::vector<Tensor> ps) -> std::unique_ptr<optim::Optimizer> {
            if (o.decoupled_weight_decay) return std::make_unique<optim::AdamW>(ps, o);
            return std::make_unique<optim::Adam>(ps, o);
          },
          [&](Ref& r, const std::vector<double>& g) { ref_adam(r, g, o); }, 5, {2e-6, 1e-5});
    }
  }
  set_fusion(true);
}

TEST_CASE("optim: a step records; the loss read runs forward, backward and update at once") {
  Tensor w = lt::random({16, 8}, DType::Float32, 3).requires_grad_();
  Tensor x = lt::random({4, 8}, DType::Float32, 4);
  optim::AdamW opt({w});
  loom::sync();
  for (int k = 0; k < 4; ++k) {
    reset_counters();
    if (k == 2) opt.options(0).lr = 3e-4;  // a new rate is a kernel argument
    Tensor loss = x.matmul(w.t()).tanh().square().mean();
    opt.zero_grad();
    loss.backward();
    opt.step();
    CHECK(counters().flushes.load() == 0);
    (void)loss.item<float>();
    CHECK(counters().flushes.load() == 1);
    if (k >= 2) CHECK(counters().cache_misses.load() == 0);
  }
  CHECK(opt.state()[0][0].step == 4);
}

TEST_CASE("optim: bad options and parameter lists raise naming the optimizer") {
  Tensor a = zeros({3}).requires_grad_();
  Tensor b = ones({2}).requires_grad_();
  optim::SGDOptions neg;
  neg.lr = -1;
  LT_CHECK_ERROR(optim::SGD({a}, neg), "SGD", "learning rate", "-1");
  optim::SGDOptions nest;
  nest.nesterov = true;
  LT_CHECK_ERROR(optim::SGD({a}, nest), "SGD", "nesterov");
  optim::AdamOptions beta;
  beta.beta2 = 1.0;
  LT_CHECK_ERROR(optim::Adam({a}, beta), "Adam", "beta", "index 1");
  LT_CHECK_ERROR(optim::AdamW({a, b, a}), "AdamW", "twice");
  LT_CHECK_ERROR(optim::SGD({a * 2}, optim::SGDOptions{}), "SGD", "non-leaf", "[3]");
  LT_CHECK_ERROR(optim::SGD({zeros({2}, DType::Int64)}, optim::SGDOptions{}), "SGD", "int64");
  LT_CHECK_ERROR(optim::SGD({{{a}, {}}, {{a}, {}}}), "SGD", "more than one parameter group");
  std::vector<Tensor> bufs(1);
  LT_CHECK_ERROR(optim::sgd_step({a}, {ones({4})}, bufs, {}), "SGD", "[3]", "[4]");
  optim::AdamW opt({a});
  a.set_grad(ones({3}));
  opt.options(0).eps = -1;
  LT_CHECK_ERROR(opt.step(), "AdamW", "epsilon");
  CHECK(opt.state()[0][0].step == 0);  // the refused step changed no state
}
