// Trains an MLP from C++ with loom's autograd and AdamW: three interleaved spirals (made here,
// nothing read from disk), 2 -> 64 -> 64 -> 3 with GELU and layer_norm. Each step is plain
// eager code; forward, backward and the update run as one flush when the loss is read.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "loom.h"

using namespace loom;

namespace {

constexpr int kClasses = 3;

// n points per class on arms of a spiral, with noise: features [3n, 2], labels [3n].
void spirals(int n, uint32_t seed, Tensor& x, Tensor& y) {
  std::mt19937 g(seed);
  std::normal_distribution<float> noise(0.f, 0.2f);
  std::vector<float> xs;
  std::vector<int64_t> ys;
  for (int c = 0; c < kClasses; ++c) {
    for (int i = 0; i < n; ++i) {
      float r = float(i) / float(n);
      float t = 4.f * r + 2.094f * float(c) + noise(g);
      xs.push_back(r * std::sin(t));
      xs.push_back(r * std::cos(t));
      ys.push_back(c);
    }
  }
  x = tensor<float>(xs, {int64_t(ys.size()), 2});
  y = tensor<int64_t>(ys, {int64_t(ys.size())});
}

// A linear layer's weight with torch's default bounds (uniform in +-1/sqrt(fan_in)).
Tensor init(const Shape& s, int64_t fan_in) {
  double bound = 1.0 / std::sqrt(double(fan_in));
  return ((rand(s) * 2.0 - 1.0) * bound).requires_grad_();
}

struct Mlp {
  Tensor w1 = init({64, 2}, 2), b1 = init({64}, 2);
  Tensor g = ones({64}).requires_grad_(), beta = zeros({64}).requires_grad_();
  Tensor w2 = init({64, 64}, 64), b2 = init({64}, 64);
  Tensor w3 = init({kClasses, 64}, 64), b3 = init({kClasses}, 64);

  std::vector<Tensor> params() const { return {w1, b1, g, beta, w2, b2, w3, b3}; }
  Tensor operator()(const Tensor& x) const {
    Tensor h = gelu(layer_norm(x.matmul(w1.t()) + b1, {64}, g, beta));
    h = gelu(h.matmul(w2.t()) + b2);
    return h.matmul(w3.t()) + b3;
  }
};

double accuracy(const Mlp& m, const Tensor& x, const Tensor& y) {
  NoGradGuard no_grad;
  return eq(m(x).argmax(-1), y).to(DType::Float32).mean().item<double>();
}

}  // namespace

int main(int argc, char** argv) {
  int steps = argc > 1 ? std::atoi(argv[1]) : 600;
  manual_seed(0);
  Tensor x, y, xt, yt;
  spirals(300, 1, x, y);    // training set
  spirals(200, 2, xt, yt);  // held out
  Mlp model;
  optim::AdamOptions o = optim::adamw_defaults();
  o.lr = 1e-2;
  optim::AdamW opt(model.params(), o);
  auto t0 = std::chrono::steady_clock::now();
  float loss_value = 0;
  for (int step = 1; step <= steps; ++step) {
    opt.options(0).lr = 1e-2 * 0.5 * (1 + std::cos(M_PI * step / steps));  // cosine schedule
    Tensor loss = cross_entropy(model(x), y);
    opt.zero_grad();
    loss.backward();
    opt.step();
    loss_value = loss.item<float>();  // the step's one sync point
    if (step % 100 == 0 || step == 1) std::printf("step %4d  loss %.4f\n", step, loss_value);
  }
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  double train = accuracy(model, x, y), held = accuracy(model, xt, yt);
  std::printf(
      "spirals: %d steps in %.2f s (%.3f ms/step), final loss %.4f, train accuracy %.1f%%, "
      "held-out accuracy %.1f%%\n",
      steps, secs, 1e3 * secs / steps, loss_value, 100 * train, 100 * held);
  return held >= 0.9 ? 0 : 1;
}
