#pragma once
// Gradient checks: a function's backward against float64 central differences, and the
// backward with fusion on against fusion off.
#include <doctest/doctest.h>

#include <cmath>
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

inline std::vector<Tensor> make_leaves(const std::vector<GradInput>& in, bool with_grad = true) {
  std::vector<Tensor> xs;
  for (auto& i : in) {
    Tensor t = loom::tensor<double>(i.values, i.shape);
    if (with_grad) t.requires_grad_();
    xs.push_back(t);
  }
  return xs;
}

// sum(f(x) * w) with w fixed by the output's size (the same weights every call).
inline Tensor weighted(const Tensor& out) {
  std::mt19937 g(7);
  std::uniform_real_distribution<double> d(-1, 1);
  std::vector<double> w(size_t(out.numel()));
  for (auto& v : w) v = d(g);
  return (loom::cast(out, loom::DType::Float64) * loom::tensor<double>(w, out.shape())).sum();
}

// The analytic gradients of sum(f(x) * w) (zeros where an input gets none).
inline std::vector<std::vector<double>> analytic(const GradFn& f,
                                                 const std::vector<GradInput>& in) {
  std::vector<Tensor> xs = make_leaves(in);
  weighted(f(xs)).backward();
  std::vector<std::vector<double>> r;
  for (size_t i = 0; i < xs.size(); ++i)
    r.push_back(xs[i].grad().defined() ? xs[i].grad().to_vector<double>()
                                       : std::vector<double>(in[i].values.size(), 0.0));
  return r;
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
    Tensor s = loom::zeros({}, loom::DType::Float64);
    for (auto& t : gs)
      if (t.defined()) s = s + weighted(t * 1.5);
    return s;
  };
  gradcheck(what + " (double backward)", g, in, true);
}

}  // namespace lt
