// Soak: a training-like step repeated many times keeps memory (loom's own count and the
// process's resident set), the kernel cache and the trace flat. CI runs a short soak;
// LOOM_SOAK_ITERS=1000000 runs the full one, LOOM_SOAK_DEVICE=cuda on the GPU.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "loom.h"

using namespace loom;

namespace {
// Resident set size in bytes (Linux), 0 when unknown.
int64_t resident_bytes() {
  long pages = 0, resident = 0;
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  int got = std::fscanf(f, "%ld %ld", &pages, &resident);
  std::fclose(f);
  return got == 2 ? int64_t(resident) * 4096 : 0;
}
}  // namespace

TEST_CASE("soak: memory, cached kernels and the trace stay flat") {
  const char* env = std::getenv("LOOM_SOAK_ITERS");
  int64_t iters = env ? std::atoll(env) : 3000;
  const char* dev_env = std::getenv("LOOM_SOAK_DEVICE");
  Device dev = dev_env ? Device::parse(dev_env) : kCPU;
  manual_seed(3);
  Tensor w = randn({32, 64}, dev) * 0.1, m = zeros({32, 64}, dev), v = zeros({32, 64}, dev);
  Tensor x = randn({16, 32}, dev);
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
  int64_t rss0 = resident_bytes(), max_pending = 0;
  auto t0 = std::chrono::steady_clock::now();
  for (int64_t i = 200; i < iters; ++i) {
    step(i);
    max_pending = std::max(max_pending, pending_nodes(dev));
  }
  loom::sync();
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  int64_t rss1 = resident_bytes();
  MESSAGE("soak on " << dev.str() << ": " << iters << " steps in " << s << " s, resident "
                     << rss0 / 1024 << " KiB -> " << rss1 / 1024 << " KiB, " << kernels
                     << " kernels, at most " << max_pending << " pending nodes");
  // Synced every 100 steps (about 34 nodes a step): the trace never grows past that.
  CHECK(max_pending <= 100 * 40);
  CHECK(counters().bytes_live.load() == live);
  CHECK(kernel_cache_size() == kernels);
  // The resident set may settle (allocator arenas) but must not grow with the step count.
  // Not under AddressSanitizer: its quarantine keeps freed memory resident by design.
#if !defined(__SANITIZE_ADDRESS__)
  CHECK(rss1 - rss0 <= (int64_t(16) << 20));
#endif
  CHECK(std::isfinite(w.abs().sum().item<float>()));
}
