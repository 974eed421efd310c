// Driver calls and host time of a memory-hit flush (issue 7), on the stand-in driver
// (libcuda_mock.c, scripts/mock_cuda_check.sh): bench_cpu's tiny-ops loop (100 ops on 1024 f32,
// then loom::sync()) on cuda:0, fused and fusion-off. Prints the calls of each driver entry
// point per flush and the host microseconds per flush, and fails when a steady-state flush of k
// kernels makes more than k launches, k allocations and frees, one synchronization, or any
// event record, stream wait, module load or context switch; then a flush ending at a read
// (item), which must wait for one event after the read value's kernel, not for the stream.
// Kernels do not run: no values.
// `flush_calls N [fused|off]` runs N flushes a mode (default 200; more for `perf record`), both
// modes unless one is named.
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "cuda/nvrtc.h"
#include "loom.h"
using namespace loom;

namespace {

struct Calls {
  const char** names = nullptr;
  unsigned long* counts = nullptr;
  std::map<std::string, unsigned long> snap() const {
    std::map<std::string, unsigned long> m;
    for (int i = 0; names[i]; ++i) m[names[i]] = counts[i];
    return m;
  }
};

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IONBF, 0);
  const int flushes = argc > 1 ? std::max(1, std::atoi(argv[1])) : 200;
  const std::string only = argc > 2 ? argv[2] : "";
  if (!backend_available(DeviceKind::CUDA)) return std::printf("no CUDA backend\n"), 2;
  void* mock = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  Calls calls;
  if (mock) {
    calls.names = static_cast<const char**>(dlsym(mock, "mock_count_names"));
    calls.counts = static_cast<unsigned long*>(dlsym(mock, "mock_calls"));
  }
  if (!calls.names || !calls.counts) return std::printf("not the stand-in driver\n"), 2;

  Device dev{DeviceKind::CUDA, 0};
  Tensor x = randn({1024}, Options(dev));
  loom::sync();
  // Each step's loom::sync() (the flush, launches and wait) and whole step, in microseconds:
  // medians, which a machine shared with builds disturbs less than means.
  std::vector<double> sync_us, step_us;
  auto step = [&] {
    auto t0 = std::chrono::steady_clock::now();
    Tensor y = x;
    for (int k = 0; k < 100; ++k) y = (k % 2) ? y * 0.999 : y + 0.001;
    auto t1 = std::chrono::steady_clock::now();
    loom::sync();
    auto t2 = std::chrono::steady_clock::now();
    sync_us.push_back(std::chrono::duration<double, std::micro>(t2 - t1).count());
    step_us.push_back(std::chrono::duration<double, std::micro>(t2 - t0).count());
  };
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
  };
  int fails = 0;
  for (bool fused : {true, false}) {
    if (only == (fused ? "off" : "fused")) continue;
    set_fusion(fused);
    for (int i = 0; i < 5; ++i) step();  // compile, plan cache and pools warm
    int64_t kernels0 = counters().kernels.load(), plans0 = counters().plan_hits.load();
    auto before = calls.snap();
    sync_us.clear(), step_us.clear();
    for (int i = 0; i < flushes; ++i) step();
    auto after = calls.snap();
    double k = double(counters().kernels.load() - kernels0) / flushes;
    double plans = double(counters().plan_hits.load() - plans0) / flushes;
    std::printf(
        "== %s: %.1f kernels a flush, %.2f plan-cache hits a flush; host time a flush "
        "(medians) %.1f us with recording, %.1f us in loom::sync()\n",
        fused ? "fused" : "fusion-off", k, plans, median(step_us), median(sync_us));
    std::map<std::string, double> per;
    for (auto& [name, n] : after) {
      per[name] = double(n - before[name]) / flushes;
      if (per[name] > 0) std::printf("  %-22s %6.2f a flush\n", name.c_str(), per[name]);
    }
    auto expect = [&](bool ok, const char* what) {
      if (!ok) std::printf("FAIL (%s): %s\n", fused ? "fused" : "fusion-off", what), fails++;
    };
    expect(per["cuLaunchKernel"] == k, "one launch a kernel");
    expect(per["cuMemAllocAsync"] <= k && per["cuMemFreeAsync"] <= k,
           "at most one allocation and one free a kernel");
    // Each flush frees and allocates the same sizes on the same stream: the backend's block
    // cache (cuda/block_cache.h) serves them without the driver unless it is turned off.
    if (loom::knob_int(loom::Knob::CudaBlockCache) > 0)
      expect(per["cuMemAllocAsync"] == 0 && per["cuMemFreeAsync"] == 0,
             "no allocation or free in a steady state (block cache)");
    expect(per["cuStreamSynchronize"] + per["cuCtxSynchronize"] == 1, "one synchronization");
    for (const char* none :
         {"cuEventRecord", "cuStreamWaitEvent", "cuEventCreate", "cuCtxSetCurrent",
          "cuModuleLoadData", "cuModuleGetFunction", "cuFuncSetAttribute", "cuMemcpyHtoDAsync",
          "cuMemcpyDtoHAsync", "cuMemcpyDtoDAsync", "cuMemsetD8Async"})
      expect(per[none] == 0, (std::string("no ") + none).c_str());
  }
  set_fusion(true);
  // A read's flush (item of the chain's sum, and the 100 ops after it that the read does not
  // need): the host waits for an event recorded after the sum's kernel, not for the stream,
  // whose later work still runs (Backend::mark_written).
  {
    for (int i = 0; i < 3; ++i) (void)((x * 0.5).sum() + 1.0).item<float>();
    auto before = calls.snap();
    for (int i = 0; i < flushes; ++i) {
      Tensor s = (x * 0.5).sum() + 1.0, later = x;
      for (int k = 0; k < 100; ++k) later = (k % 2) ? later * 0.999 : later + 0.001;
      (void)s.item<float>();
    }
    auto after = calls.snap();
    auto per = [&](const char* name) { return double(after[name] - before[name]) / flushes; };
    std::printf(
        "== a read: %.2f event records, %.2f event waits, %.2f stream and %.2f device "
        "synchronizations a flush\n",
        per("cuEventRecord"), per("cuEventSynchronize"), per("cuStreamSynchronize"),
        per("cuCtxSynchronize"));
    if (per("cuEventRecord") != 1 || per("cuEventSynchronize") != 1 || per("cuCtxSynchronize") != 0)
      std::printf("FAIL: a read waits for one event after its own kernel\n"), fails++;
  }
  loom::sync();
  std::printf("%s\n", fails ? "flush_calls: FAILED" : "flush_calls: ok");
  // NVRTC's warm-up compile (a background thread from the backend's start) crashes inside NVRTC
  // when the process exits under it: let it finish first.
  for (int i = 0; i < 600 && !loom::cuda::warmed_up(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  return fails != 0;
}
