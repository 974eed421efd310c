#include "fusion/kernel_cache.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <list>
#include <unordered_map>
#include <vector>

#include "fusion/plan_cache.h"
#include "fusion/segments.h"
#include "fusion/trace.h"
#include "tensor/counters.h"
#include "tensor/fault.h"
#include "tensor/knobs.h"

namespace loom {
namespace {

struct Entry {
  std::unique_ptr<Kernel> kernel;
  DeviceKind kind;
  std::list<uint64_t>::iterator pos;  // in Cache::lru
};

// A hit moves its key to the front of `lru` (a splice: no allocation); eviction takes the back.
struct Cache {
  std::unordered_map<uint64_t, Entry> map;
  std::list<uint64_t> lru;  // most recently used first
  size_t limit = [] {
    long long n = knob_int(Knob::KernelCacheMax);
    return size_t(n < 1 ? 1 : n);
  }();

  // Drops least recently used kernels until at most `keep` are left.
  void evict_to(size_t keep) {
    if (map.size() <= keep) return;
    std::vector<Entry> gone;          // destroyed after the device is idle (see below)
    bool dropped[kDeviceKinds] = {};  // per DeviceKind: compiled code to drop
    while (map.size() > keep) {
      auto it = map.find(lru.back());
      dropped[int(it->second.kind)] = true;
      gone.push_back(std::move(it->second));
      map.erase(it);
      lru.pop_back();
      counters().kernel_evictions++;
    }
    // A GPU kernel's module may still have launches in flight (flushes do not wait): wait for
    // the device before unloading it. Evictions are rare (a cache full of distinct signatures),
    // so the wait costs nothing in a loop that hits.
    for (int k = 0; k < kDeviceKinds; ++k)
      if (dropped[k] && backend_available(DeviceKind(k)))
        backend(Device{DeviceKind(k), 0}).synchronize();
    gone.clear();
    // The backends keep compiled code beside the kernels (CUDA: modules by source) so that
    // equal sources share one module; kernels still cached hold theirs, so dropping the
    // backend's map frees exactly the evicted kernels' code.
    for (int k = 0; k < kDeviceKinds; ++k)
      if (dropped[k] && backend_available(DeviceKind(k)))
        backend(Device{DeviceKind(k), 0}).drop_compiled();
  }
};

Cache& cache() {
  static Cache c;
  return c;
}

// LOOM_DUMP_KERNELS=DIR: every lowered kernel's source (CUDA C++, the CPU tile program) goes to
// DIR/<hash of the text>.txt, so two builds' kernels compare as two directories
// (scripts/dump_kernels.sh).
void dump_kernel(const std::string& text) {
  static const std::string dir = knob_str(Knob::DumpKernels);
  if (dir.empty()) return;
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char ch : text) h = (h ^ ch) * 0x100000001b3ull;
  char name[32];
  std::snprintf(name, sizeof name, "/%016llx.txt", static_cast<unsigned long long>(h));
  std::ofstream(dir + name) << text;
}

uint64_t cache_key(Device d, const Group& g) {
  return g.signature ^ (uint64_t(d.kind) * 0x9e3779b97f4a7c15ull);
}

}  // namespace

KernelLookup get_kernel(Device d, const Group& g) {
  uint64_t key = cache_key(d, g);
  auto& c = cache();
  auto it = c.map.find(key);
  if (it != c.map.end()) {
    counters().cache_hits++;
    if (it->second.pos != c.lru.begin()) c.lru.splice(c.lru.begin(), c.lru, it->second.pos);
    return {it->second.kernel.get(), true, 0};
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
  dump_kernel(k->source());
  c.evict_to(c.limit - 1);  // room for the new one, which is never the one evicted
  Kernel* raw = k.get();
  c.lru.push_front(key);
  c.map.emplace(key, Entry{std::move(k), d.kind, c.lru.begin()});
  return {raw, false, ms};
}

void prelower(Device d, std::vector<Group>& groups) {
  const BackendCaps caps = backend(d).caps();
  if (!caps.prelower) return;  // the CPU: lowering is cheap, nothing to gather
  auto& c = cache();
  LowerAhead work;
  // Every group of a signature not cached, not one a signature: groups of one signature may
  // need different variants of its kernel (alignment, vector width).
  auto want = [&](Group& g) {
    if (!g.signature) g.signature = signature(g, d.kind);
    if (!c.map.count(cache_key(d, g))) work.groups.push_back(&g);
  };
  for (Group& g : groups) {
    if (!g.opaque) want(g);
    if (g.epilogue) want(*g.epilogue);
    if (g.opaque) work.opaque.push_back(&g);
  }
  if (caps.segments)  // the runs run_groups will find
    for (size_t gi = 0, n; gi < groups.size(); gi += n)
      if ((n = segment_run(groups, gi, d.kind)) > 1) work.segments.push_back(&groups[gi]);
  if (work.groups.size() + work.segments.size() + work.opaque.size() > 1) backend(d).prelower(work);
}

size_t kernel_cache_size() { return cache().map.size(); }

size_t kernel_cache_limit() {
  std::lock_guard<std::recursive_mutex> lock(runtime_mutex());
  return cache().limit;
}

void set_kernel_cache_limit(size_t n) {
  LOOM_CHECK(n >= 1, Value, "set_kernel_cache_limit: the limit must be at least 1, got ", n);
  std::lock_guard<std::recursive_mutex> lock(runtime_mutex());
  cache().limit = n;
  cache().evict_to(n);
}

// Also drops the backends' compiled modules, so a signature seen before is lowered again from
// the disk cache (or compiled), and the plan cache: the memory loom does not give back by itself.
void clear_kernel_cache() {
  std::lock_guard<std::recursive_mutex> lock(runtime_mutex());
  cache().map.clear();
  cache().lru.clear();
  clear_plan_cache();  // plans hold no kernels, but they are memory of the same kind
  for (int k = 0; k < kDeviceKinds; ++k)
    if (backend_available(DeviceKind(k))) backend(Device{DeviceKind(k), 0}).drop_compiled();
}

}  // namespace loom
