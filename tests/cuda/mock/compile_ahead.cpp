// A flush's new kernels compiled together before it runs (Backend::prelower,
// LOOM_CUDA_COMPILE_THREADS), on the stand-in driver (libcuda_mock.c,
// scripts/mock_cuda_check.sh). Argument "ahead": every kernel the first flush of a program
// loads (fused kernels, its run of segments' kernel, the index kernels) comes from the cubins
// compiled ahead; "serial" (run with LOOM_CUDA_COMPILE_THREADS=1): none does. Either way a second
// flush of the program compiles nothing and, after clear_kernel_cache, every kernel comes from the
// disk cache, not from a compile. Kernels do not run here: no values (the GPU suite runs with
// kernels compiled ahead).
#include <cstdio>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "loom.h"
#include "stderr_of.h"
using namespace loom;

namespace {

// Seven independent kernels of distinct programs over distinct lengths, a gather and a
// scatter_add (index kernels) and three in-place updates of one program (a run of segments).
std::vector<Tensor> program(Device d) {
  std::vector<Tensor> x, out;
  for (int i = 0; i < 7; ++i) x.push_back(randn({1000 + 37 * i}, Options(d)));
  out = {x[0].exp(),   x[1].sin(),     x[2].tanh(), x[3].abs().sqrt(),
         x[4] * 3 + 1, x[5].sigmoid(), x[6].sum()};
  Tensor idx = tensor<int64_t>({3, 1, 4, 1, 5}, {5}).to(d);
  out.push_back(gather(x[0], 0, idx));
  out.push_back(scatter_add(zeros({8}, Options(d)), 0, idx, x[1].narrow(0, 0, 5)));
  for (int i = 0; i < 3; ++i) {
    out.push_back(tensor<float>(std::vector<float>(size_t(300 + 7 * i), 1.f), {300 + 7 * i}).to(d));
    out.back().mul_(0.5f).add_(1.f);
  }
  return out;
}

struct Delta {
  int64_t misses, ahead, disk;
  int compiled;  // modules compiled where they were loaded (the fusion log's "compiled N ms")
};

Delta flush_of(Device d) {
  auto& c = counters();
  const int64_t m0 = c.cache_misses, a0 = c.compiled_ahead, d0 = c.disk_hits;
  std::vector<Tensor> outs = program(d);
  const std::string log = stderr_of([] {
    set_log_fusion(true);
    loom::sync();
    set_log_fusion(false);
  });
  std::istringstream in(log);
  int compiled = 0;
  for (std::string line; std::getline(in, line);)
    compiled += line.find(": compiled ") != std::string::npos &&
                line.find(": compiled ahead") == std::string::npos;
  return {c.cache_misses - m0, c.compiled_ahead - a0, c.disk_hits - d0, compiled};
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
    std::printf(
        "%s %s: %lld lowered, %lld modules compiled ahead, %d compiled at their load, "
        "%lld from disk\n",
        ok ? "ok  " : "FAIL", what, (long long)d.misses, (long long)d.ahead, d.compiled,
        (long long)d.disk);
    fails += !ok;
  };
  Delta first = flush_of(gpu);
  // Ahead: every module (fused kernels, the kernel of segments, the index kernels) comes from
  // the cubins compiled together, none is compiled where it is loaded.
  expect(first.misses >= 7 && first.disk == 0 &&
             (ahead ? first.ahead > first.misses && first.compiled == 0
                    : first.ahead == 0 && first.compiled > first.misses),
         "first flush", first);
  Delta again = flush_of(gpu);
  expect(again.misses == 0 && again.ahead == 0 && again.compiled == 0, "the same program again",
         again);
  clear_kernel_cache();
  Delta disk = flush_of(gpu);
  expect(disk.misses == first.misses && disk.ahead == 0 && disk.compiled == 0 &&
             disk.disk > first.misses,
         "after clear_kernel_cache", disk);
  return fails ? 1 : 0;
}
