// A flush's new kernels compiled together before it runs (Backend::prelower,
// LOOM_CUDA_COMPILE_THREADS), on the stand-in driver (libcuda_mock.c,
// scripts/mock_cuda_check.sh). Argument "ahead": every kernel the first flush of a program
// lowers comes from the cubins compiled ahead; "serial" (run with LOOM_CUDA_COMPILE_THREADS=1):
// none does. Either way a second flush of the program compiles nothing and, after
// clear_kernel_cache, every kernel comes from the disk cache, not from a compile. Kernels do not
// run here: no values (the GPU suite runs with kernels compiled ahead).
#include <cstdio>
#include <cstring>
#include <vector>

#include "loom.h"
using namespace loom;

namespace {

// Seven independent kernels of distinct programs over distinct lengths.
std::vector<Tensor> program(Device d) {
  std::vector<Tensor> x;
  for (int i = 0; i < 7; ++i) x.push_back(randn({1000 + 37 * i}, Options(d)));
  return {x[0].exp(),   x[1].sin(),     x[2].tanh(), x[3].abs().sqrt(),
          x[4] * 3 + 1, x[5].sigmoid(), x[6].sum()};
}

struct Delta {
  int64_t misses, ahead, disk;
};

Delta flush_of(Device d) {
  auto& c = counters();
  const int64_t m0 = c.cache_misses, a0 = c.compiled_ahead, d0 = c.disk_hits;
  std::vector<Tensor> outs = program(d);
  loom::sync();
  return {c.cache_misses - m0, c.compiled_ahead - a0, c.disk_hits - d0};
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IONBF, 0);
  if (argc != 2 || (std::strcmp(argv[1], "ahead") && std::strcmp(argv[1], "serial")))
    return std::printf("usage: compile_ahead ahead|serial\n"), 2;
  const bool ahead = std::strcmp(argv[1], "ahead") == 0;
  if (!backend_available(DeviceKind::CUDA)) return std::printf("no CUDA backend\n"), 2;
  const Device gpu{DeviceKind::CUDA, 0};
  int fails = 0;
  auto expect = [&](bool ok, const char* what, const Delta& d) {
    std::printf("%s %s: %lld lowered, %lld compiled ahead, %lld from disk\n", ok ? "ok  " : "FAIL",
                what, (long long)d.misses, (long long)d.ahead, (long long)d.disk);
    fails += !ok;
  };
  Delta first = flush_of(gpu);
  expect(first.misses >= 7 && first.ahead == (ahead ? first.misses : 0) && first.disk == 0,
         "first flush", first);
  Delta again = flush_of(gpu);
  expect(again.misses == 0 && again.ahead == 0, "the same program again", again);
  clear_kernel_cache();
  Delta disk = flush_of(gpu);
  expect(disk.misses == first.misses && disk.ahead == 0 && disk.disk == first.misses,
         "after clear_kernel_cache", disk);
  return fails ? 1 : 0;
}
