// Threads: tensors used from several host threads at once give the same results as one
// thread (the runtime serializes recording and flushing; kernels use all cores).
#include <doctest/doctest.h>

#include <atomic>
#include <cmath>
#include <thread>
#include <vector>

#include "loom.h"

using namespace loom;

namespace {

// A small training-like step on thread-private tensors; returns a checksum.
double work(int seed, int iters) {
  std::vector<float> init(64 * 33);
  uint32_t s = uint32_t(seed) * 2654435761u + 1;
  for (auto& v : init) {
    s = s * 1664525u + 1013904223u;
    v = float(int(s >> 9) % 2000 - 1000) / 500.0f + 0.01f;
  }
  Tensor w = tensor<float>(init, {64, 33});
  Tensor m = zeros({64, 33});
  double check = 0;
  for (int i = 0; i < iters; ++i) {
    Tensor g = softmax(w * (1.0 + 0.01 * i), -1) - layer_norm(w, {33}) * 0.1;
    m.mul_(0.9).add_(g * 0.1);
    w.sub_(m * 0.01);
    if (i % 10 == 9) check += w.abs().sum().item<double>();
  }
  return check + w.sum().item<double>();
}

}  // namespace

TEST_CASE("threads: each thread on the default trace gets what it gets alone") {
  const int T = 4, iters = 40;
  std::vector<double> alone(T), together(T);
  for (int t = 0; t < T; ++t) alone[t] = work(t, iters);
  std::vector<std::thread> th;
  for (int t = 0; t < T; ++t) th.emplace_back([&, t] { together[t] = work(t, iters); });
  for (auto& x : th) x.join();
  for (int t = 0; t < T; ++t) {
    CHECK(std::isfinite(alone[t]));
    CHECK(together[t] == doctest::Approx(alone[t]).epsilon(1e-9));
  }
}

TEST_CASE("threads: a tensor shared between threads is read consistently") {
  Tensor x = arange(0, 10000, 1, DType::Float32).reshape({100, 100});
  // Reductions are deterministic: every thread must see exactly the single-thread value,
  // which is within float32 rounding of the exact sum.
  double expect = (x * 2.0).sum().item<double>();
  CHECK(expect == doctest::Approx(99990000.0).epsilon(1e-6));
  std::atomic<int> bad{0};
  std::vector<std::thread> th;
  for (int t = 0; t < 4; ++t)
    th.emplace_back([&] {
      for (int i = 0; i < 50; ++i)
        if ((x * 2.0).sum().item<double>() != expect) bad++;
    });
  for (auto& t : th) t.join();
  CHECK(bad.load() == 0);
}
