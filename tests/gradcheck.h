#pragma once
// Gradient checks: a function's backward against float64 central differences, and the
// backward with fusion on against fusion off.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "loom.h"

namespace lt {

using loom::Shape;
using loom::Tensor;

// Builds an output from leaf tensors; the checks reduce it with fixed random weights.
using GradFn = std::function<Tensor(const std::vector<Tensor>&)>;

struct GradInput {
  Shape shape;
  std::vector<double> values;  // float64 data of the leaf
};

inline GradInput grad_input(const Shape& s, uint32_t seed, double lo = 0.2, double hi = 0.9,
                            bool signs = true) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  GradInput in{s, std::vector<double>(size_t(loom::numel(s)))};
  for (auto& v : in.values) v = (signs && (g() & 1)) ? -d(g) : d(g);
  return in;
}

// LOOM_TEST_GRAD_DEVICE=cuda (scripts/gpu_check.sh sets it): every check also runs its backward,
// fused, with the leaves on cuda:0 and compares it with the CPU's. A function that builds CPU
// tensors of its own (an index, a mask) can't follow its leaves there: counted, not compared.
struct GradDevice {
  bool on = false;
  loom::Device device{loom::DeviceKind::CPU, 0};
  int compared = 0, stayed = 0;
  ~GradDevice() {
    if (on)
      std::fprintf(stderr, "[gradcheck] on %s: %d checks compared with the CPU, %d stayed\n",
                   device.str().c_str(), compared, stayed);
  }
};
inline GradDevice& grad_device() {
  static GradDevice d = [] {
    GradDevice g;
    const char* e = std::getenv("LOOM_TEST_GRAD_DEVICE");
    if (e && std::string(e) == "cuda" && loom::backend_available(loom::DeviceKind::CUDA)) {
      g.on = true;
      g.device = loom::Device{loom::DeviceKind::CUDA, 0};
    }
    return g;
  }();
  return d;
}

inline std::vector<Tensor> make_leaves(const std::vector<GradInput>& in, bool with_grad = true,
                                       loom::Device dev = {loom::DeviceKind::CPU, 0}) {
  std::vector<Tensor> xs;
  for (auto& i : in) {
    Tensor t = loom::tensor<double>(i.values, i.shape);
    if (dev.kind != loom::DeviceKind::CPU) t = t.to(dev);
    if (with_grad) t.requires_grad_();
    xs.push_back(t);
  }
  return xs;
}

// A function's own tensor (an index, a target) on the device of its leaf `where`.
inline Tensor near(const Tensor& t, const Tensor& where) {
  return t.device() == where.device() ? t : t.to(where.device());
}

// sum(f(x) * w) with w fixed by the output's size (the same weights every call).
inline Tensor weighted(const Tensor& out) {
  std::mt19937 g(7);
  std::uniform_real_distribution<double> d(-1, 1);
  std::vector<double> w(size_t(out.numel()));
  for (auto& v : w) v = d(g);
  return (loom::cast(out, loom::DType::Float64) *
          loom::tensor<double>(w, out.shape()).to(out.device()))
      .sum();
}

// The analytic gradients of sum(f(x) * w) (zeros where an input gets none).
inline std::vector<std::vector<double>> analytic(const GradFn& f, const std::vector<GradInput>& in,
                                                 loom::Device dev = {loom::DeviceKind::CPU, 0}) {
  std::vector<Tensor> xs = make_leaves(in, true, dev);
  weighted(f(xs)).backward();
  std::vector<std::vector<double>> r;
  for (size_t i = 0; i < xs.size(); ++i)
    r.push_back(xs[i].grad().defined() ? xs[i].grad().to_vector<double>()
                                       : std::vector<double>(in[i].values.size(), 0.0));
  return r;
}

// The backward with the leaves on grad_device() against the CPU's `a` (float64 both: the
// device's libm and summation orders differ from the CPU's by a few ulps).
inline void compare_on_device(const std::string& what, const GradFn& f,
                              const std::vector<GradInput>& in,
                              const std::vector<std::vector<double>>& a) {
  GradDevice& gd = grad_device();
  std::vector<std::vector<double>> d;
  try {
    d = analytic(f, in, gd.device);
  } catch (const loom::Error& e) {
    if (std::string(e.what()).find("device") == std::string::npos) throw;
    ++gd.stayed;  // a CPU tensor of the function's own met the device's leaves
    MESSAGE(what << ": stays on the CPU: " << std::string(e.what()));
    return;
  }
  ++gd.compared;
  for (size_t i = 0; i < in.size(); ++i)
    for (size_t j = 0; j < in[i].values.size(); ++j)
      if (!(std::fabs(d[i][j] - a[i][j]) <= 1e-11 + 1e-9 * std::fabs(a[i][j]))) {
        std::ostringstream os;
        os.precision(17);
        os << what << ": input " << i << " element " << j << ": backward on " << gd.device.str()
           << " " << d[i][j] << ", on the CPU " << a[i][j];
        FAIL_CHECK(os.str());
        return;
      }
}

// f's backward against central differences (eps 1e-6, atol 1e-5, rtol 1e-3) and the same
// backward with fusion off (1e-12). `requires_grad_eval`: the numeric evaluations run with
// leaves that require grad (for functions that take gradients themselves).
inline void gradcheck(const std::string& what, const GradFn& f, const std::vector<GradInput>& in,
                      bool requires_grad_eval = false, double atol = 1e-5, double rtol = 1e-3) {
  INFO(what);
  std::vector<std::vector<double>> a = analytic(f, in), off;
  {
    bool was = loom::fusion_enabled();
    loom::set_fusion(false);
    off = analytic(f, in);
    loom::set_fusion(was);
  }
  if (grad_device().on) compare_on_device(what, f, in, a);
  const double eps = 1e-6;
  for (size_t i = 0; i < in.size(); ++i) {
    for (size_t j = 0; j < in[i].values.size(); ++j) {
      auto eval = [&](double delta) {
        std::vector<GradInput> p = in;
        p[i].values[j] += delta;
        std::optional<loom::NoGradGuard> ng;
        if (!requires_grad_eval) ng.emplace();
        return weighted(f(make_leaves(p, requires_grad_eval))).item<double>();
      };
      double num = (eval(eps) - eval(-eps)) / (2 * eps);
      double got = a[i][j];
      if (!(std::fabs(got - num) <= atol + rtol * std::fabs(num))) {
        std::ostringstream os;
        os.precision(10);
        os << what << ": input " << i << " element " << j << ": backward " << got
           << ", finite difference " << num;
        FAIL_CHECK(os.str());
        return;
      }
      if (!(std::fabs(got - off[i][j]) <= 1e-12 + 1e-12 * std::fabs(got))) {
        std::ostringstream os;
        os.precision(17);
        os << what << ": input " << i << " element " << j << ": fused backward " << got
           << ", fusion-off backward " << off[i][j];
        FAIL_CHECK(os.str());
        return;
      }
    }
  }
}

// The gradient of f's gradient: gradcheck of x -> sum(grad(sum(f(x) w), x, create_graph) v).
inline void gradgradcheck(const std::string& what, const GradFn& f,
                          const std::vector<GradInput>& in) {
  GradFn g = [f](const std::vector<Tensor>& xs) {
    std::vector<Tensor> gs =
        loom::autograd::grad({weighted(f(xs))}, xs, {}, {}, /*create_graph=*/true, true);
    Tensor s = loom::zeros({}, {loom::DType::Float64, xs.at(0).device()});
    for (auto& t : gs)
      if (t.defined()) s = s + weighted(t * 1.5);
    return s;
  };
  gradcheck(what + " (double backward)", g, in, true);
}

}  // namespace lt
