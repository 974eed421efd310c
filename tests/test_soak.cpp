// Soak: a training-like step repeated many times keeps memory, the kernel cache and the
// trace flat. CI runs a short soak; LOOM_SOAK_ITERS=1000000 runs the full one.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>

#include "loom.h"

using namespace loom;

TEST_CASE("soak: memory, cached kernels and the trace stay flat") {
  const char* env = std::getenv("LOOM_SOAK_ITERS");
  int64_t iters = env ? std::atoll(env) : 3000;
  manual_seed(3);
  Tensor w = randn({32, 64}) * 0.1, m = zeros({32, 64}), v = zeros({32, 64});
  Tensor x = randn({16, 32});
  auto step = [&](int64_t i) {
    Tensor h = softmax(matmul(x, w), -1);                 // forward-ish
    Tensor g = matmul(x.t(), h - 1.0 / 64) * (1.0 / 16);  // a gradient-like value
    m.mul_(0.9).add_(g * 0.1);                            // Adam-like in-place updates
    v.mul_(0.999).add_(g * g * 0.001);
    w.sub_(m / (sqrt(v) + 1e-8) * (1e-3 / (1 + 1e-6 * double(i))));
    if (i % 100 == 99) loom::sync();  // the same batches every time
  };
  for (int64_t i = 0; i < 200; ++i) step(i);
  loom::sync();
  int64_t live = counters().bytes_live.load();
  size_t kernels = kernel_cache_size();
  for (int64_t i = 200; i < iters; ++i) {
    step(i);
    // Synced every 100 steps (about 34 nodes a step): the trace never grows past that.
    CHECK(pending_nodes(kCPU) <= 100 * 40);
  }
  loom::sync();
  CHECK(counters().bytes_live.load() == live);
  CHECK(kernel_cache_size() == kernels);
  CHECK(std::isfinite(w.abs().sum().item<float>()));
}
