#pragma once
// In-memory cache: (device kind, signature) -> lowered kernel.
#include <cstdint>
#include <memory>

#include "fusion/group.h"
#include "tensor/backend.h"
#include "tensor/error.h"

namespace loom {

struct KernelLookup {
  Kernel* kernel;
  bool hit;
  double lower_ms;  // 0 on a hit
};

KernelLookup get_kernel(Device d, const Group& g);
size_t kernel_cache_size();
void clear_kernel_cache();  // and the backends' compiled modules

// Thrown when a backend fails to lower a group; the flush falls back to unfused kernels.
struct LowerError : Error {
  using Error::Error;
};

}  // namespace loom
