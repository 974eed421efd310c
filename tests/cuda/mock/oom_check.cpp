// Out of memory in a CUDA flush, on the stand-in driver (libcuda_mock.c,
// scripts/mock_cuda_check.sh): with cuda::fault::fail_allocs_above, the error names the op and
// shape; sync points of unrelated tensors (item, host copies, cross-stream use) do not raise while
// the failing work is pending; loom::sync() and the failing tensor's sync points raise; nothing of
// the failed group keeps memory; once the limit is lifted nothing raises. Kernels do not run here,
// so values are checked only for host copies of ready data (tests/cuda/test_gpu_oom.cpp checks
// values on a GPU).
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "cuda/stream.h"
#include "loom.h"
using namespace loom;
namespace lc = loom::cuda;
#define EXPECT(c)                                      \
  do {                                                 \
    if (!(c)) {                                        \
      std::printf("FAIL line %d: %s\n", __LINE__, #c); \
      fails++;                                         \
    } else                                             \
      passes++;                                        \
  } while (0)

namespace {
std::string oom_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.kind() == ErrorKind::Memory ? e.what() : std::string("<not memory> ") + e.what();
  }
  return "<none>";
}
bool has(const std::string& s, const std::string& p) { return s.find(p) != std::string::npos; }
}  // namespace

int main() {
  setvbuf(stdout, nullptr, _IONBF, 0);
  int fails = 0, passes = 0;
  if (!backend_available(DeviceKind::CUDA)) return std::printf("no CUDA backend\n"), 2;
  const Device gpu{DeviceKind::CUDA, 0};
  const int64_t big = (int64_t(1) << 20) + 333;
  std::vector<float> hv(1000);
  for (int i = 0; i < 1000; ++i) hv[i] = float(i % 17) - 8;
  for (bool fuse : {true, false}) {
    set_fusion(fuse);
    Tensor a = tensor<float>(hv, {1000}).to(gpu);
    loom::sync();
    int64_t live0 = counters().bytes_live.load();
    lc::fault::fail_allocs_above(size_t(1) << 20);
    Tensor x = randn({big}, Options(gpu));
    Tensor y = x * 2;
    std::string msg = oom_of([] { loom::sync(); });
    std::printf("fusion %s: %s\n", fuse ? "on" : "off", msg.c_str());
    EXPECT(has(msg, "CUDA out of memory"));
    EXPECT(has(msg, std::to_string(big * 4) + " bytes"));
    EXPECT(has(msg, "of shape [" + std::to_string(big) + "] float32"));
    EXPECT(x.is_pending() && y.is_pending());
    EXPECT(counters().bytes_live.load() == live0);  // the failed group holds no memory
    // Unrelated sync points: no error (the kernels' values are not checked here).
    EXPECT(oom_of([&] { (a * 3).sum().item<float>(); }) == "<none>");
    EXPECT(a.to(kCPU).to_vector<float>() == hv);
    Tensor b = a + 1;
    EXPECT(oom_of([&] { b.to(kCPU); }) == "<none>");
    EXPECT(!b.is_pending());
    // Another stream reads a tensor the failing stream can compute.
    lc::Stream s1 = lc::Stream::create(0);
    Tensor x1, b1;
    {
      lc::StreamGuard g(s1);
      x1 = randn({big + 1}, Options(gpu));
      b1 = a * 5;
    }
    Tensor c;
    EXPECT(oom_of([&] { c = b1 + 1; }) == "<none>");
    EXPECT(!b1.is_pending() && x1.is_pending());
    EXPECT(has(oom_of([&] { (void)(x1 + 1); }), "for randn of shape"));
    EXPECT(has(oom_of([&] { s1.synchronize(); }), "out of memory"));
    // What needs the failed work raises, and so does loom::sync().
    EXPECT(has(oom_of([&] { y.to(kCPU); }), "of shape [" + std::to_string(big) + "] float32"));
    EXPECT(has(oom_of([] { loom::sync(); }), "out of memory"));
    lc::fault::fail_allocs_above(0);
    EXPECT(oom_of([] { loom::sync(); }) == "<none>");
    EXPECT(!x.is_pending() && !y.is_pending() && !x1.is_pending());
    EXPECT(pending_nodes(gpu) == 0);
  }
  set_fusion(true);
  std::printf("%d passed, %d failed\n", passes, fails);
  return fails ? 1 : 0;
}
