// The kernel cache's LRU bound on the GPU: evicted kernels' modules are unloaded (after the
// device is idle) and recompiled or loaded from disk when used again; results stay equal to
// the CPU's, and a kernel used every iteration is never evicted.
#include "../helpers.h"

using namespace loom;

TEST_CASE("gpu: the kernel cache bound evicts modules and recompiles them correctly") {
  if (!cuda::is_available()) return;
  size_t was = kernel_cache_limit();
  loom::sync();
  clear_kernel_cache();
  set_kernel_cache_limit(4);
  Tensor xc = lt::random({3000}, DType::Float32, 71, -1, 1);
  Tensor xg = xc.to(Device::parse("cuda"));
  loom::sync();
  clear_kernel_cache();
  reset_counters();
  auto chain = [](const Tensor& x, int len) {  // a distinct signature per length
    Tensor y = x;
    for (int i = 0; i < len; ++i) y = (y * 0.75 + 0.125).sin();
    return y;
  };
  auto hot = [](const Tensor& x) { return (x.exp() - x).abs(); };
  std::vector<double> hot_cpu = lt::host(hot(xc));
  for (int len = 1; len <= 10; ++len) {
    lt::check_close(chain(xg, len), lt::host(chain(xc, len)));
    lt::check_close(hot(xg), hot_cpu);
    CHECK(kernel_cache_size() <= 4);
  }
  CHECK(kernel_cache_size() == 4);
  CHECK(counters().kernel_evictions.load() > 0);
  int64_t misses = counters().cache_misses.load();
  lt::check_close(chain(xg, 1), lt::host(chain(xc, 1)));  // evicted long ago: lowered again
  CHECK(counters().cache_misses.load() == misses + 2);    // its GPU and CPU kernels
  set_kernel_cache_limit(was);
  clear_kernel_cache();
}
