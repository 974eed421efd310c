#pragma once
// In-memory cache: (device kind, signature) -> lowered kernel, bounded by an entry count with
// least-recently-used eviction (a long run with ever-new signatures keeps a flat cache).
#include <cstdint>
#include <memory>
#include <vector>

#include "fusion/group.h"
#include "tensor/backend.h"
#include "tensor/error.h"

namespace loom {

struct KernelLookup {
  Kernel* kernel;  // valid until the next get_kernel (which may evict it)
  bool hit;
  double lower_ms;  // 0 on a hit
};

KernelLookup get_kernel(Device d, const Group& g);
// Before a flush runs `groups` (a plan not seen before): has the backend prepare together the
// kernels of those the cache lacks, its runs of segments and its opaque groups
// (Backend::prelower), computing signatures left unset.
void prelower(Device d, std::vector<Group>& groups);
size_t kernel_cache_size();
void clear_kernel_cache();  // and the backends' compiled modules
// The most kernels kept (at least 1; starts at LOOM_KERNEL_CACHE_MAX). Lowering one more
// evicts the least recently used one and has its backend drop the compiled code it kept;
// a later use of the evicted signature lowers it again (a cache miss).
size_t kernel_cache_limit();
void set_kernel_cache_limit(size_t n);  // evicts down to n now

// Thrown when a backend fails to lower a group; the flush falls back to unfused kernels.
struct LowerError : Error {
  using Error::Error;
};

}  // namespace loom
