// The autograd API's semantics (torch's): leaves and accumulation, retain_grad, hooks,
// no_grad, detach, autograd::grad, the errors, and the laziness the design is for: backward
// records, and one sync runs forward, backward and the update.
#include <doctest/doctest.h>

#include "gradcheck.h"

using namespace loom;

namespace {
std::vector<double> vals(const Tensor& t) { return t.to_vector<double>(); }
}  // namespace

TEST_CASE("autograd api: leaves, accumulation across backward calls, grad_fn names") {
  Tensor x = tensor<double>({1, 2, 3}, {3}).requires_grad_();
  CHECK(x.is_leaf());
  CHECK(x.requires_grad());
  CHECK(!x.grad().defined());
  Tensor y = x * x;
  CHECK(!y.is_leaf());
  CHECK(y.requires_grad());
  CHECK(y.grad_fn_name() == "MulBackward0");
  CHECK(x.sum().grad_fn_name() == "SumBackward0");
  CHECK(x.reshape({3, 1}).sum({0}).grad_fn_name() == "SumBackward1");
  CHECK(x.exp().grad_fn_name() == "ExpBackward0");
  CHECK(gelu(x, "tanh").grad_fn_name() == "GeluTanhBackward0");
  CHECK((x + 1).grad_fn_name() == "AddBackward0");
  CHECK(x.unsqueeze(0).grad_fn_name() == "UnsqueezeBackward0");
  CHECK(x.slice(0, 1, 2).grad_fn_name() == "SliceBackward0");
  y.sum().backward();
  CHECK(vals(x.grad()) == std::vector<double>{2, 4, 6});
  (x * 3).sum().backward();  // accumulates
  CHECK(vals(x.grad()) == std::vector<double>{5, 7, 9});
  x.set_grad(Tensor());
  (x * 3).sum().backward();
  CHECK(vals(x.grad()) == std::vector<double>{3, 3, 3});
  CHECK(!y.grad().defined());  // a non-leaf's gradient is not kept
  CHECK(x.str() == "tensor([1., 2., 3.], dtype=float64, requires_grad=True)");
  CHECK(y.str() == "tensor([1., 4., 9.], dtype=float64, grad_fn=<MulBackward0>)");
  // A tensor that needs no gradient makes results that need none.
  Tensor c = tensor<double>({1, 1, 1}, {3});
  CHECK(!(c * 2).requires_grad());
  CHECK((c * x).requires_grad());
}

TEST_CASE("autograd api: a leaf's grad is its own memory (writable in place)") {
  Tensor x = tensor<double>({1, 2}, {2}).requires_grad_();
  x.sum().backward();  // an expanded gradient of ones
  x.grad().zero_();
  CHECK(vals(x.grad()) == std::vector<double>{0, 0});
  Tensor g = tensor<double>({5, 6}, {2});
  Tensor x2 = tensor<double>({1, 2}, {2}).requires_grad_();
  (x2 + 0).backward(g);  // passes g through unchanged
  x2.grad().mul_(2);
  CHECK(vals(g) == std::vector<double>{5, 6});
  CHECK(vals(x2.grad()) == std::vector<double>{10, 12});
}

TEST_CASE("autograd api: retain_grad, hooks, backward with a gradient") {
  Tensor x = tensor<double>({1, 2, 3}, {3}).requires_grad_();
  Tensor y = x * 2;
  y.retain_grad();
  int calls = 0;
  x.register_hook([&](const Tensor& g) {
    ++calls;
    return g * 10;
  });
  int id = y.register_hook([&](const Tensor& g) {
    ++calls;
    return Tensor();  // no change
  });
  Tensor z = (y * y).sum();
  z.backward();
  CHECK(calls == 2);
  CHECK(vals(y.grad()) == std::vector<double>{4, 8, 12});
  CHECK(vals(x.grad()) == std::vector<double>{80, 160, 240});
  y.remove_hook(id);
  Tensor w = x * x;
  w.backward(tensor<double>({1, 0, 2}, {3}));
  CHECK(vals(x.grad()) == std::vector<double>{80 + 20, 160, 240 + 120});
}

TEST_CASE("autograd api: no_grad, set_grad_enabled, detach") {
  Tensor x = tensor<double>({1, 2}, {2}).requires_grad_();
  {
    NoGradGuard ng;
    CHECK(!is_grad_enabled());
    Tensor y = x * 2;
    CHECK(!y.requires_grad());
    {
      EnableGradGuard eg;
      CHECK((x * 2).requires_grad());
    }
    x.mul_(3);  // a leaf's in-place update, as an optimizer step does
  }
  CHECK(is_grad_enabled());
  CHECK(vals(x) == std::vector<double>{3, 6});
  Tensor d = x.detach();
  CHECK(!d.requires_grad());
  CHECK(d.same_buffer(x));
  Tensor y = x * 2;
  y.detach_();
  CHECK(!y.requires_grad());
  CHECK(y.is_leaf());
}

TEST_CASE("autograd api: autograd::grad returns gradients without accumulating") {
  Tensor x = tensor<double>({1, 2}, {2}).requires_grad_();
  Tensor u = tensor<double>({3, 4}, {2}).requires_grad_();
  Tensor h = x * u;  // a non-leaf input
  Tensor y = (h * h).sum();
  auto g = autograd::grad({y}, {x, h}, {}, true);
  CHECK(vals(g[0]) == std::vector<double>{2 * 3 * 3, 2 * 2 * 4 * 4});
  CHECK(vals(g[1]) == std::vector<double>{6, 16});
  CHECK(!x.grad().defined());
  CHECK(!u.grad().defined());
  Tensor other = tensor<double>({1}, {1}).requires_grad_();
  CHECK_THROWS_WITH_AS(autograd::grad({y}, {other}, {}, true), doctest::Contains("not used"),
                       Error);
  auto un = autograd::grad({y}, {other}, {}, true, false, true);
  CHECK(!un[0].defined());
  // backward(inputs=): only those leaves accumulate.
  autograd::backward({y}, {}, {}, false, {u});
  CHECK(u.grad().defined());
  CHECK(!x.grad().defined());
}

TEST_CASE("autograd api: errors name the op and the shapes") {
  CHECK_THROWS_WITH_AS(tensor<int64_t>({1, 2}, {2}).requires_grad_(),
                       doctest::Contains("floating point"), Error);
  Tensor x = tensor<double>({1, 2, 3}, {3}).requires_grad_();
  CHECK_THROWS_WITH_AS((x * 2).backward(), doctest::Contains("[3]"), Error);
  CHECK_THROWS_WITH_AS((x * 2).backward(tensor<double>({1, 2}, {2})),
                       doctest::Contains("shape [2] for output 0 of shape [3]"), Error);
  CHECK_THROWS_WITH_AS(tensor<double>({1}, {1}).sum().backward(),
                       doctest::Contains("does not require grad"), Error);
  // A second backward through freed saved tensors.
  Tensor y = (x * x).sum();
  y.backward();
  CHECK_THROWS_WITH_AS(y.backward(), doctest::Contains("second time"), Error);
  Tensor y2 = (x * x).sum();
  y2.backward({}, true);
  y2.backward();  // retained the first time
  // No saved tensors: a second backward is fine (as torch).
  Tensor y3 = (x + 1).sum();
  y3.backward();
  y3.backward();
  // A saved tensor modified in place before the backward.
  Tensor a = x * 1;
  Tensor b = (a * a).sum();
  a.add_(1);
  CHECK_THROWS_WITH_AS(b.backward(), doctest::Contains("modified by an in-place operation"), Error);
  // In place on a leaf that requires grad (outside no_grad).
  CHECK_THROWS_WITH_AS(x.add_(1), doctest::Contains("leaf"), Error);
  // Only a leaf's flag can change.
  Tensor nl = x * 2;
  CHECK_THROWS_WITH_AS(nl.requires_grad_(false), doctest::Contains("leaf"), Error);
}

TEST_CASE("autograd api: in-place ops on non-leaves join the graph") {
  Tensor x = tensor<double>({1, 2}, {2}).requires_grad_();
  Tensor y = x * 2;
  y.mul_(x);  // y = 2 x^2
  CHECK(y.grad_fn_name() == "MulBackward0");
  y.sum().backward();
  CHECK(vals(x.grad()) == std::vector<double>{4, 8});
  Tensor z = zeros({2}, DType::Float64);
  z.add_(x);  // a tensor outside the graph takes in a graph value
  CHECK(z.requires_grad());
  (z * 3).sum().backward();
  CHECK(vals(x.grad()) == std::vector<double>{7, 11});
  Tensor v = (x * 1).slice(0, 0, 1);
  CHECK_THROWS_WITH_AS(v.mul_(2), doctest::Contains("view"), Error);
  // A view taken before an in-place write to its base would read the new values with the old
  // graph: using it raises.
  Tensor base = x * 1;
  Tensor early = base.reshape({2, 1});
  base.add_(x);
  CHECK_THROWS_WITH_AS(early.sum().backward(), doctest::Contains("after an in-place write"), Error);
  Tensor late = base.reshape({2, 1});
  late.sum().backward();  // taken after the write: fine
  // A graph value written into a buffer outside the graph that has views (here through one).
  Tensor plain = zeros({2}, DType::Float64);
  Tensor part = plain.slice(0, 0, 1);
  CHECK_THROWS_WITH_AS(part.add_(x.slice(0, 0, 1)), doctest::Contains("write out of place"), Error);
  CHECK_THROWS_WITH_AS(plain.add_(x), doctest::Contains("write out of place"), Error);
}

TEST_CASE("autograd api: nextafter(x, x) keeps x's gradient (the result is the second operand)") {
  Tensor x = tensor<double>({1, 2}, {2}).requires_grad_();
  nextafter(x, x).sum().backward();
  CHECK(vals(x.grad()) == std::vector<double>{1, 1});
}

TEST_CASE("autograd api: backward records lazily; one sync runs forward, backward and update") {
  Tensor w = randn({64, 32}, DType::Float32).requires_grad_();
  Tensor b = zeros({32}, DType::Float32).requires_grad_();
  Tensor x = randn({16, 64});
  loom::sync();
  for (int step = 0; step < 2; ++step) {
    reset_counters();
    Tensor loss = pow((matmul(x, w) + b).tanh(), 2.0).mean();
    loss.backward();
    {
      NoGradGuard ng;
      w.sub_(w.grad() * 0.1);
      b.sub_(b.grad() * 0.1);
    }
    w.set_grad(Tensor());
    b.set_grad(Tensor());
    CHECK(counters().flushes.load() == 0);  // nothing ran yet
    double l = loss.item<double>();
    CHECK(std::isfinite(l));
    CHECK(counters().flushes.load() == 1);
    (void)vals(w);
    (void)vals(b);
    CHECK(counters().flushes.load() == 1);  // the update ran in the same flush
  }
}

TEST_CASE("autograd api: training steps compile nothing after the first, for any lr or batch") {
  manual_seed(3);
  Tensor w1 = (randn({32, 64}) * 0.2).requires_grad_(), b1 = zeros({64}).requires_grad_();
  Tensor w2 = (randn({64, 10}) * 0.2).requires_grad_(), g = ones({64}).requires_grad_();
  std::vector<Tensor> params{w1, b1, w2, g};
  auto step = [&](int64_t batch, double lr) {
    Tensor x = randn({batch, 32});
    Tensor t = randint(0, 10, {batch});
    Tensor h = gelu(layer_norm(matmul(x, w1) + b1, {64}, g), "tanh");
    Tensor loss = cross_entropy(matmul(h, w2), t);
    loss.backward();
    {
      NoGradGuard ng;
      for (Tensor& p : params) p.sub_(p.grad() * lr);
    }
    for (Tensor& p : params) p.set_grad(Tensor());
    return loss.item<double>();
  };
  double first = step(16, 0.1);
  step(16, 0.1);
  reset_counters();
  double later = 0;
  for (int i = 0; i < 3; ++i) later = step(16, 0.05 + 0.01 * i);
  later = step(24, 0.1);
  later = step(40, 0.2);
  CHECK(counters().cache_misses.load() == 0);
  CHECK(counters().flushes.load() == 5);  // one per step: the loss read
  CHECK(std::isfinite(first));
  CHECK(std::isfinite(later));
}

TEST_CASE(
    "autograd: saved bytes count each saved tensor once; a product by a constant keeps no "
    "operand") {
  Tensor x = randn({64, 96}).requires_grad_();
  Tensor w = randn({96, 32}).requires_grad_();
  loom::sync();
  const int64_t base = counters().saved_bytes.load();
  Tensor y = x * 2.0;  // its gradient is 2 g: only the constant is kept, not x
  const int64_t f = 4;
  CHECK(counters().saved_bytes.load() - base == f);
  Tensor z = gelu(y);         // keeps y and z
  Tensor out = matmul(z, w);  // keeps z (again: counted once) and w
  CHECK(counters().saved_bytes.load() - base == (64 * 96 + 64 * 96 + 96 * 32) * f + f);
  Tensor e = x.expand({3, 64, 96}) * w.sum();  // keeps the expanded view: x's bytes, not 3x
  CHECK(counters().saved_bytes.load() - base ==
        (64 * 96 + 64 * 96 + 96 * 32) * f + f + 64 * 96 * f + f);
  (out.sum() + e.sum()).backward();
  CHECK(counters().saved_bytes.load() == base);  // all given back
}

TEST_CASE("autograd api: explain lists each node's saved tensors and what it recomputes") {
  manual_seed(3);
  Tensor x = randn({8, 16}).requires_grad_();
  Tensor w = randn({16}).requires_grad_(), b = randn({16}).requires_grad_();
  Tensor t = tensor<int64_t>({1, 0, 3, 2, 5, 4, 7, 6}, {8});
  loom::sync();
  const int64_t base = counters().saved_bytes.load();
  Tensor h = dropout(layer_norm(x, {16}, w, b), 0.1);
  Tensor loss = cross_entropy(h, t);
  const int64_t saved = counters().saved_bytes.load() - base;
  std::string e = explain(loss);
  // The plan first, then the graph: its saved bytes are what the counters hold.
  CHECK(e.find("kernel") < e.find("backward graph:"));
  CHECK(e.find("backward graph: 3 nodes; saved for backward") != std::string::npos);
  CHECK(e.find(" " + std::to_string(saved) + " bytes; 3 nodes recompute") != std::string::npos);
  for (const char* s : {"NllLossBackward0", "NativeDropoutBackward0", "NativeLayerNormBackward0",
                        "recomputes its mask", "recomputes xhat", "recomputes the probabilities",
                        "saves float32[8, 16], 512 bytes"})
    CHECK_MESSAGE(e.find(s) != std::string::npos, s, "\n", e);
  // The dropout node keeps nothing: no "saves" line between it and the next node.
  size_t d = e.find("NativeDropoutBackward0");
  CHECK(e.substr(d, e.find("Backward0", d + 22) - d).find("saves") == std::string::npos);
  CHECK(explain(x).find("backward graph") == std::string::npos);  // a leaf has none
}
