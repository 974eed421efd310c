#include "fusion/kernel_cache.h"

#include <chrono>
#include <unordered_map>

#include "fusion/counters.h"
#include "fusion/trace.h"
#include "tensor/fault.h"

namespace loom {
namespace {

std::unordered_map<uint64_t, std::unique_ptr<Kernel>>& cache() {
  static std::unordered_map<uint64_t, std::unique_ptr<Kernel>> c;
  return c;
}

}  // namespace

KernelLookup get_kernel(Device d, const Group& g) {
  uint64_t key = g.signature ^ (uint64_t(d.kind) * 0x9e3779b97f4a7c15ull);
  auto& c = cache();
  auto it = c.find(key);
  if (it != c.end()) {
    counters().cache_hits++;
    return {it->second.get(), true, 0};
  }
  auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<Kernel> k;
  try {
    LOOM_CHECK(!fault::take_lower(), Runtime, "lowering failed (injected fault)");
    k = backend(d).lower(g);
  } catch (const LowerError&) {
    throw;
  } catch (const Error& e) {
    throw LowerError(e.kind(), e.what());
  }
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  counters().cache_misses++;
  Kernel* raw = k.get();
  c.emplace(key, std::move(k));
  return {raw, false, ms};
}

size_t kernel_cache_size() { return cache().size(); }
// Also drops the backends' compiled modules, so a signature seen before is lowered again from
// the disk cache (or compiled): the only memory loom does not give back by itself.
void clear_kernel_cache() {
  std::lock_guard<std::recursive_mutex> lock(runtime_mutex());
  cache().clear();
  for (DeviceKind k : {DeviceKind::CPU, DeviceKind::CUDA})
    if (backend_available(k)) backend(Device{k, 0}).drop_compiled();
}

}  // namespace loom
