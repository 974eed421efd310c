// Every primitive's rule, the views', matmul's and the composites' against float64 central
// differences and against the same backward with fusion off (tests/gradcheck.h).
#include <doctest/doctest.h>

#include <cmath>
#include <numbers>
#include <set>

#include "gradcheck.h"

using namespace loom;
using lt::grad_input;
using lt::gradcheck;
using V = std::vector<Tensor>;

namespace {

// Where each unary op's derivative is defined and smooth.
lt::GradInput unary_domain(Op op, const Shape& s, uint32_t seed) {
  switch (op) {
    case Op::Log:
    case Op::Log2:
    case Op::Log10:
    case Op::Sqrt:
    case Op::Rsqrt:
    case Op::Lgamma:
      return grad_input(s, seed, 0.3, 2.0, false);
    case Op::Acosh:
      return grad_input(s, seed, 1.2, 2.5, false);
    case Op::Asin:
    case Op::Acos:
    case Op::Atanh:
    case Op::Erfinv:
      return grad_input(s, seed, 0.1, 0.8);
    default:
      return grad_input(s, seed);
  }
}

}  // namespace

TEST_CASE("autograd: every float unary rule against finite differences") {
  const Shape s{3, 5};
  std::set<std::string> checked;
#define LOOM_X(name, api, kind)                                                                  \
  if (UnaryKind::kind != UnaryKind::BoolOut && Op::name != Op::BitwiseNot &&                     \
      Op::name != Op::Digamma) {                                                                 \
    gradcheck(#api, [](const V& x) { return loom::api(x[0]); }, {unary_domain(Op::name, s, 1)}); \
    checked.insert(#api);                                                                        \
  }
  LOOM_UNARY_OPS(LOOM_X)
#undef LOOM_X
  CHECK(checked.size() >= 44);
  // Through a transposed, offset view of a larger leaf.
  gradcheck("tanh of a transposed slice", [](const V& x) { return tanh(x[0].t().slice(0, 1, 4)); },
            {grad_input({5, 6}, 2)});
  // Round-to-int and sign ops: zero gradients, as torch.
  gradcheck("floor ceil round trunc sign",
            [](const V& x) {
              return floor(x[0]) + ceil(x[0]) + round(x[0]) + trunc(x[0]) + sign(x[0]) + x[0];
            },
            {grad_input(s, 3)});
}

// sinc' = pi (y cos y - sin y) / y^2 (y = pi x) cancels near 0: its relative error in a dtype
// of unit roundoff u is about 3 u / y^2 as a quotient (2e-4 at x = 0.01 in float32).
TEST_CASE("autograd: sinc's derivative near 0 holds its dtype's precision") {
  std::vector<double> xs = {0, 1e-5, -1e-4, 3e-3, -0.01, 0.02, 0.05, -0.1, 0.2, -0.3};
  for (double b : {1 / std::numbers::pi, 0.5, 1.7}) xs.insert(xs.end(), {b * 0.999, -b * 1.001});
  // Long double: the quotient where its 3 u / y^2 stays below 1e-16, else the series summed
  // term by term, (-1)^n 2n y^(2n - 1) / (2n + 1)!.
  auto exact = [](double x) {
    const long double p = std::numbers::pi_v<long double>, y = p * x;
    if (std::fabs(y) > 0.05L) return double((std::cos(y) * y - std::sin(y)) / (y * y) * p);
    long double sum = 0, term = -y / 3;
    for (int n = 1; n < 8; ++n) {
      sum += term;
      term *= -y * y * (n + 1) / (n * (2 * n + 2) * (2 * n + 3));
    }
    return double(sum * p);
  };
  for (DType t : {DType::Float32, DType::Float64}) {
    CAPTURE(t);
    Tensor x = tensor<double>(xs, {int64_t(xs.size())}).to(t).requires_grad_();
    sinc(x).sum().backward();
    std::vector<double> g = x.grad().to_vector<double>(), at = x.to_vector<double>();
    const double rtol = t == DType::Float32 ? 1e-6 : 1e-14;
    for (size_t i = 0; i < xs.size(); ++i) {
      CAPTURE(at[i]);
      double e = exact(at[i]);
      CHECK(std::fabs(g[i] - e) <= rtol * std::fabs(e) + 1e-300);
    }
  }
}

TEST_CASE("autograd: digamma's derivative is an error at backward, naming it") {
  Tensor x = full({2}, 1.5, DType::Float64).requires_grad_();
  Tensor y = digamma(x).sum();
  CHECK_THROWS_WITH_AS(y.backward(), doctest::Contains("digamma"), Error);
}

TEST_CASE("autograd: every float binary rule, broadcast and with a scalar") {
  std::set<std::string> skip = {"floor_divide"};
#define LOOM_X(name, api, kind)                                                               \
  if (BinaryKind::kind == BinaryKind::Arith || BinaryKind::kind == BinaryKind::TrueDiv ||     \
      BinaryKind::kind == BinaryKind::Floating) {                                             \
    if (!skip.count(#api)) {                                                                  \
      bool pos = Op::name == Op::Pow || Op::name == Op::Xlogy;                                \
      auto a = grad_input({3, 1, 4}, 11, 0.3, 1.5, !pos),                                     \
           b = grad_input({2, 4}, 12, 0.3, 1.5, Op::name != Op::Pow);                         \
      if (Op::name == Op::Xlogy) b = grad_input({2, 4}, 12, 0.3, 1.5, false);                 \
      gradcheck(#api " broadcast", [](const V& x) { return loom::api(x[0], x[1]); }, {a, b}); \
      gradcheck(#api " tensor-scalar", [](const V& x) { return loom::api(x[0], 0.7); }, {a}); \
      gradcheck(#api " scalar-tensor", [](const V& x) { return loom::api(1.3, x[0]); },       \
                {grad_input({4}, 13, 0.3, 1.5, false)});                                      \
    }                                                                                         \
  }
  LOOM_BINARY_OPS(LOOM_X)
#undef LOOM_X
  // Ties of maximum / minimum split the gradient; pow at 0 with exponent 0.
  Tensor a = tensor<double>({1, 2, 3}, {3}).requires_grad_();
  Tensor b = tensor<double>({2, 2, 2}, {3}).requires_grad_();
  maximum(a, b).sum().backward();
  CHECK(a.grad().to_vector<double>() == std::vector<double>{0, 0.5, 1});
  CHECK(b.grad().to_vector<double>() == std::vector<double>{1, 0.5, 0});
  Tensor z = tensor<double>({0, 0}, {2}).requires_grad_();
  Tensor e = tensor<double>({0, 2}, {2}).requires_grad_();
  pow(z, e).sum().backward();
  CHECK(z.grad().to_vector<double>() == std::vector<double>{0, 0});
  CHECK(e.grad().to_vector<double>() == std::vector<double>{0, 0});
  // floor_divide has no derivative (torch: not implemented): an error at backward.
  Tensor c = tensor<double>({3, 4}, {2}).requires_grad_();
  Tensor q = floor_divide(c, 2.0).sum();
  CHECK_THROWS_WITH_AS(q.backward(), doctest::Contains("floor_divide"), Error);
}

TEST_CASE("autograd: mixed dtypes: each input's gradient in its own dtype") {
  Tensor a = tensor<float>({1, 2, 3}, {3}).requires_grad_();
  Tensor b = tensor<double>({4, 5, 6}, {3}).requires_grad_();
  Tensor y = (a * b).sum();
  CHECK(y.dtype() == DType::Float64);
  y.backward();
  CHECK(a.grad().dtype() == DType::Float32);
  CHECK(b.grad().dtype() == DType::Float64);
  CHECK(a.grad().to_vector<double>() == std::vector<double>{4, 5, 6});
  CHECK(b.grad().to_vector<double>() == std::vector<double>{1, 2, 3});
  // to(dtype): the gradient comes back in the input's dtype.
  Tensor h = tensor<double>({0.5, 1.5}, {2}).requires_grad_();
  Tensor hf = h.to(DType::Float32);
  CHECK(hf.grad_fn_name() == "ToCopyBackward0");
  (hf * hf).sum().backward();
  CHECK(h.grad().dtype() == DType::Float64);
  CHECK(h.grad().to_vector<double>() == std::vector<double>{1, 3});
}

TEST_CASE("autograd: reductions over dims, keepdim and all") {
  auto x = grad_input({3, 4, 2}, 21);
  for (Dims d : {Dims{}, Dims{1}, Dims{0, 2}, Dims{-1}}) {
    for (bool k : {false, true}) {
      std::string w = std::string(k ? " keepdim" : "") + " dims " + std::to_string(d.size());
      gradcheck("sum" + w, [=](const V& v) { return sum(v[0], d, k); }, {x});
      gradcheck("mean" + w, [=](const V& v) { return mean(v[0], d, k); }, {x});
      gradcheck("prod" + w, [=](const V& v) { return prod(v[0], d, k); }, {x});
      gradcheck("amax" + w, [=](const V& v) { return amax(v[0], d, k); }, {x});
      gradcheck("amin" + w, [=](const V& v) { return amin(v[0], d, k); }, {x});
      gradcheck("var" + w, [=](const V& v) { return var(v[0], d, 1, k); }, {x});
      gradcheck("std" + w, [=](const V& v) { return loom::std(v[0], d, 0, k); }, {x});
      gradcheck("norm" + w, [=](const V& v) { return norm(v[0], 2, d, k); }, {x});
      gradcheck("norm 3" + w, [=](const V& v) { return norm(v[0], 3, d, k); }, {x});
      if (!d.empty())
        gradcheck("logsumexp" + w, [=](const V& v) { return logsumexp(v[0], d, k); }, {x});
    }
  }
  gradcheck("sum of a 0-d tensor", [](const V& v) { return sum(v[0]) * 2.0; }, {grad_input({}, 3)});
  gradcheck("cumsum", [](const V& v) { return cumsum(v[0], 1); }, {grad_input({3, 5}, 4)});
  gradcheck("cumsum dim 0 of a transpose", [](const V& v) { return cumsum(v[0].t(), 0); },
            {grad_input({3, 5}, 5)});
}

TEST_CASE("autograd: amax ties share the gradient; prod at zeros matches torch") {
  Tensor x = tensor<double>({1, 3, 3}, {1, 3}).requires_grad_();
  amax(x).backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{0, 0.5, 0.5});
  Tensor p = tensor<double>({0, 2, 3, 0, 0, 5, 1, 2, 4}, {3, 3}).requires_grad_();
  prod(p, {1}).sum().backward();
  // one zero: the others' product there, 0 elsewhere; two zeros: all 0; none: y / x.
  CHECK(p.grad().to_vector<double>() == std::vector<double>{6, 0, 0, 0, 0, 0, 8, 4, 2});
}

TEST_CASE("autograd: views and movement") {
  auto x = grad_input({2, 3, 4}, 31);
  gradcheck("reshape", [](const V& v) { return v[0].reshape({4, 6}).exp(); }, {x});
  gradcheck("reshape of a transpose (a copy)",
            [](const V& v) { return v[0].transpose(0, 2).reshape({-1}).exp(); }, {x});
  gradcheck("view flatten", [](const V& v) { return v[0].view({6, 4}).flatten().sin(); }, {x});
  gradcheck("squeeze unsqueeze",
            [](const V& v) { return v[0].unsqueeze(1).unsqueeze(-1).squeeze(1).squeeze().cos(); },
            {x});
  gradcheck("permute",
            [](const V& v) {
              return v[0].permute({2, 0, 1}) * v[0].permute({2, 0, 1});
            },
            {x});
  gradcheck("transpose t", [](const V& v) { return v[0].select(0, 1).t().exp(); }, {x});
  gradcheck("expand", [](const V& v) { return v[0].slice(1, 0, 1).expand({2, 5, 4}).exp(); }, {x});
  gradcheck("slice with step", [](const V& v) { return v[0].slice(2, 1, 4, 2).exp(); }, {x});
  gradcheck("select negative", [](const V& v) { return v[0].select(-1, -1).exp(); }, {x});
  gradcheck("narrow", [](const V& v) { return v[0].narrow(1, 1, 2).exp(); }, {x});
  gradcheck("index",
            [](const V& v) {
              return v[0]
                  .index({Slice::at(1), Slice::newaxis(), Slice::range(1, std::nullopt),
                          Slice::ellipsis()})
                  .exp();
            },
            {x});
  gradcheck("split chunk",
            [](const V& v) {
              auto p = v[0].split(2, 2);
              auto c = v[0].chunk(3, 1);
              return p[0] * p[1] + c[2].sum() - c[0].sum();
            },
            {x});
  gradcheck("cat",
            [](const V& v) {
              return cat({v[0], v[1].exp(), v[0]}, 1);
            },
            {x, grad_input({2, 2, 4}, 32)});
  gradcheck("stack", [](const V& v) { return stack({v[0], v[0] * v[0]}, 1); }, {x});
  gradcheck("contiguous clone", [](const V& v) { return v[0].t().contiguous().clone() * v[0].t(); },
            {grad_input({3, 4}, 33)});
  gradcheck("where clamp",
            [](const V& v) {
              return where(gt(v[0], 0), v[0] * v[1], v[1].exp()) + clamp(v[0], -0.5, 0.5);
            },
            {grad_input({3, 4}, 34), grad_input({4}, 35)});
  gradcheck("lerp addcmul addcdiv",
            [](const V& v) {
              return lerp(v[0], v[1], 0.3) + addcmul(v[0], v[1], v[1], 2) +
                     addcdiv(v[0], v[0], v[1], 0.5);
            },
            {grad_input({3, 4}, 36), grad_input({3, 4}, 37)});
}

TEST_CASE("autograd: gradients of several regions of one base: tiles, overlaps, steps") {
  auto x = grad_input({2, 6, 4}, 38);
  gradcheck("split, every part used (one cat)",
            [](const V& v) {
              auto p = v[0].split(2, 1);
              return p[0].exp() * p[1] + p[2].sin();
            },
            {x});
  gradcheck("parts and the whole",
            [](const V& v) {
              auto p = v[0].chunk(3, 1);
              return p[2] * p[0] + v[0].sum({1}, true) + p[1];
            },
            {x});
  gradcheck("selects that tile dim 0",
            [](const V& v) { return v[0].select(0, 1).exp() * v[0].select(0, 0); }, {x});
  gradcheck("overlapping slices",
            [](const V& v) { return v[0].slice(1, 0, 4) * v[0].slice(1, 2, 6).cos(); }, {x});
  gradcheck("slices with steps, and of different dims",
            [](const V& v) {
              return v[0].slice(2, 0, 4, 2) * v[0].slice(2, 1, 4, 2).exp() +
                     v[0].slice(1, 0, 6, 3).slice(2, 0, 2).sum();
            },
            {x});
  gradcheck("a gap between the parts",
            [](const V& v) { return v[0].narrow(1, 0, 2) * v[0].narrow(1, 3, 2); }, {x});
}

TEST_CASE("autograd: q, k, v thirds of one tensor: their gradient is written in place, no sum") {
  // The gradient of x is the three parts' gradients side by side: before, each part became a
  // zero-filled tensor of x's shape and the three were added (three fills, two full sums).
  Tensor x = randn({256, 96}).requires_grad_();
  auto xs = x.to_vector<double>();
  reset_counters();
  auto p = x.split(32, 1);
  Tensor loss = (p[0] * 2.0).sum() + (p[1].exp()).sum() + (p[2] * p[2]).sum();
  loss.backward();
  auto g = x.grad().to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i) {
    int64_t c = int64_t(i % 96);
    double want = c < 32 ? 2.0 : c < 64 ? std::exp(xs[i]) : 2 * xs[i];
    CHECK(g[i] == doctest::Approx(want).epsilon(1e-6));
  }
  // The flush reads x (twice at most) and writes x.grad once: summing three x-sized
  // gradients moved 9 such buffers.
  CHECK(counters().bytes_moved.load() <= 3 * 256 * 96 * 4);
  Tensor y = randn({256, 96}).requires_grad_();
  auto q = y.split(32, 1);
  auto gy = autograd::grad({(q[0] * 3.0).sum() + q[1].sum() + q[2].sum() * 0.5}, {y});
  auto gv = gy[0].to_vector<double>();
  for (size_t i = 0; i < gv.size(); ++i) {
    int64_t c = int64_t(i % 96);
    CHECK(gv[i] == (c < 32 ? 3.0 : c < 64 ? 1.0 : 0.5));
  }
}

TEST_CASE("autograd: matmul, batched and broadcast, with vectors") {
  gradcheck("mm", [](const V& v) { return matmul(v[0], v[1]); },
            {grad_input({3, 4}, 41), grad_input({4, 2}, 42)});
  gradcheck("vector @ matrix", [](const V& v) { return matmul(v[0], v[1]); },
            {grad_input({4}, 43), grad_input({4, 2}, 44)});
  gradcheck("matrix @ vector", [](const V& v) { return matmul(v[0], v[1]); },
            {grad_input({3, 4}, 45), grad_input({4}, 46)});
  gradcheck("dot", [](const V& v) { return matmul(v[0], v[1]); },
            {grad_input({4}, 47), grad_input({4}, 48)});
  gradcheck("bmm", [](const V& v) { return bmm(v[0], v[1]); },
            {grad_input({2, 3, 4}, 49), grad_input({2, 4, 5}, 50)});
  gradcheck("broadcast batch", [](const V& v) { return matmul(v[0], v[1]); },
            {grad_input({2, 1, 3, 4}, 51), grad_input({3, 4, 2}, 52)});
  gradcheck("transposed operand", [](const V& v) { return matmul(v[0].t(), v[1]); },
            {grad_input({4, 3}, 53), grad_input({4, 2}, 54)});
  // A linear layer: batch dims folded into one product with a column-major weight (whose
  // gradient is computed in the weight's own memory order), and a non-collapsible input.
  gradcheck("linear over batch dims", [](const V& v) { return matmul(v[0], v[1].t()); },
            {grad_input({2, 3, 4}, 55), grad_input({5, 4}, 56)});
  gradcheck("linear over a permuted input",
            [](const V& v) { return matmul(v[0].transpose(0, 1), v[1].t()); },
            {grad_input({3, 2, 4}, 57), grad_input({5, 4}, 58)});
}

TEST_CASE("autograd: composites through their decompositions") {
  auto x = grad_input({3, 6}, 61);
  gradcheck("softmax", [](const V& v) { return softmax(v[0], 1); }, {x});
  gradcheck("softmax dim 0", [](const V& v) { return softmax(v[0], 0); }, {x});
  gradcheck("log_softmax", [](const V& v) { return log_softmax(v[0], -1); }, {x});
  gradcheck("layer_norm", [](const V& v) { return layer_norm(v[0], {6}, v[1], v[2]); },
            {x, grad_input({6}, 62), grad_input({6}, 63)});
  gradcheck("rms_norm", [](const V& v) { return rms_norm(v[0], {6}, v[1]); },
            {x, grad_input({6}, 64)});
  gradcheck("gelu tanh silu softplus",
            [](const V& v) {
              return gelu(v[0], "tanh") + gelu(v[0], "none") + silu(v[0]) + softplus(v[0]);
            },
            {x});
  Tensor target = tensor<int64_t>({1, 5, 0}, {3});
  gradcheck("cross_entropy",
            [=](const V& v) { return cross_entropy(v[0], lt::near(target, v[0])); }, {x});
  // nll_loss's own rule (its forward gathers each row's target): weights, an ignored row, and
  // each reduction.
  Tensor tw = tensor<int64_t>({1, 5, 0}, {3});
  Tensor w = tensor<double>({0.5, 1.5, 2.0, 0.75, 1.25, 3.0}, {6});
  for (Reduction r : {Reduction::Mean, Reduction::Sum, Reduction::None})
    for (bool weighted : {false, true}) {
      gradcheck("nll_loss",
                [=](const V& v) {
                  NllLossOptions o;  // the weights on the input's device
                  o.reduction = r, o.ignore_index = 5;
                  if (weighted) o.weight = lt::near(w, v[0]);
                  return nll_loss(v[0], lt::near(tw, v[0]), o);
                },
                {x});
    }
}

TEST_CASE("autograd: dropout's gradient is its mask, scaled") {
  manual_seed(5);
  Tensor x = full({1000}, 2.0, DType::Float64).requires_grad_();
  loom::sync();
  const int64_t saved = counters().saved_bytes.load();
  Tensor y = dropout(x, 0.25);
  // Nothing kept: the backward draws the mask again from the forward's seed and offset.
  CHECK(y.grad_fn_name() == "NativeDropoutBackward0");
  CHECK(counters().saved_bytes.load() == saved);
  y.sum().backward();
  std::vector<double> yv = y.to_vector<double>(), gv = x.grad().to_vector<double>();
  int kept = 0;
  for (size_t i = 0; i < yv.size(); ++i) {
    CHECK(gv[i] == (yv[i] != 0 ? 1.0 / 0.75 : 0.0));
    kept += yv[i] != 0;
  }
  CHECK(kept > 650);
  CHECK(kept < 850);
}

TEST_CASE("autograd: double backward of pointwise, reduction, matmul and composite rules") {
  using lt::gradgradcheck;
  gradgradcheck("x^3 * sin", [](const V& v) { return v[0] * v[0] * v[0] * sin(v[0]); },
                {grad_input({5}, 71)});
  gradgradcheck("exp tanh sigmoid log",
                [](const V& v) { return exp(v[0]) * tanh(v[0]) + sigmoid(v[0]) * log(v[1]); },
                {grad_input({4}, 72), grad_input({4}, 73, 0.5, 1.5, false)});
  gradgradcheck("matmul", [](const V& v) { return pow(matmul(v[0], v[1]), 2.0); },
                {grad_input({3, 4}, 74), grad_input({4, 2}, 75)});
  gradgradcheck("softmax", [](const V& v) { return softmax(v[0], 1); }, {grad_input({2, 5}, 76)});
  gradgradcheck("layer_norm", [](const V& v) { return layer_norm(v[0], {5}, v[1]); },
                {grad_input({2, 5}, 77), grad_input({5}, 78)});
  gradgradcheck("rms_norm", [](const V& v) { return rms_norm(v[0], {5}, v[1]); },
                {grad_input({2, 5}, 81), grad_input({5}, 82)});
  gradgradcheck("log_softmax logsumexp var std mean",
                [](const V& v) {
                  return log_softmax(v[0], 1) + logsumexp(v[0], {1}, true) +
                         var(v[0], {1}, 1, true) + loom::std(v[0], {0}) +
                         mean(v[0] * v[0], {1}, true);
                },
                {grad_input({3, 5}, 83)});
  Tensor tgt = tensor<int64_t>({2, 0, 4}, {3});
  gradgradcheck("cross_entropy",
                [=](const V& v) { return cross_entropy(v[0] * v[0], lt::near(tgt, v[0])); },
                {grad_input({3, 5}, 84)});
  gradgradcheck(
      "nll_loss of log_softmax",
      [=](const V& v) { return nll_loss(log_softmax(v[0] * v[0], 1), lt::near(tgt, v[0])); },
      {grad_input({3, 5}, 85)});
  gradgradcheck("amax sum mean",
                [](const V& v) { return amax(v[0] * v[0], {1}) + sum(v[0].exp(), {0}).mean(); },
                {grad_input({3, 4}, 79)});
  gradgradcheck("views", [](const V& v) { return v[0].t().slice(0, 1, 3).reshape({-1}).exp(); },
                {grad_input({3, 4}, 80)});
  // d2/dx2 of x^3 is 6x, through autograd::grad twice.
  Tensor x = tensor<double>({1, 2, -3}, {3}).requires_grad_();
  Tensor g = autograd::grad({(x * x * x).sum()}, {x}, {}, {}, true)[0];
  Tensor gg = autograd::grad({g.sum()}, {x})[0];
  CHECK(gg.to_vector<double>() == std::vector<double>{6, 12, -18});
}

TEST_CASE(
    "autograd: attention's own backward (probabilities recomputed) against finite differences") {
  auto q = grad_input({2, 3, 5, 4}, 41), k = grad_input({3, 6, 4}, 42),
       v = grad_input({2, 3, 6, 2}, 43), m = grad_input({1, 5, 6}, 44);
  gradcheck("batch dims broadcast, a float mask that wants its gradient too",
            [](const V& t) {
              return scaled_dot_product_attention(t[0], t[1], t[2], t[3], 0.0, false, 0.7);
            },
            {q, k, v, m});
  gradcheck("causal",
            [](const V& t) {
              return scaled_dot_product_attention(t[0], t[1], t[2], std::nullopt, 0.0, true);
            },
            {grad_input({2, 5, 4}, 45), grad_input({2, 5, 4}, 46), grad_input({2, 5, 3}, 47)});
  // What the node keeps: q, k, v and one logsumexp a row, not the [.., L, S] probabilities.
  Tensor a = randn({4, 32, 16}).requires_grad_(), b = randn({4, 32, 16}).requires_grad_(),
         c = randn({4, 32, 16}).requires_grad_();
  loom::sync();
  const int64_t base = counters().saved_bytes.load();
  Tensor o = scaled_dot_product_attention(a, b, c, std::nullopt, 0.0, true);
  CHECK(o.grad_fn_name() == "ScaledDotProductFlashAttentionBackward0");
  CHECK(counters().saved_bytes.load() - base == (3 * 4 * 32 * 16 + 4 * 32) * 4);
}
