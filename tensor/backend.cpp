#include "tensor/backend.h"

#include "tensor/error.h"
#include "tensor/storage.h"

namespace loom {

Backend& cpu_backend();

namespace {
Backend* registry[2] = {nullptr, nullptr};
}

void Backend::release(Memory& m) {
  if (m.deleter)
    m.deleter();
  else
    free(m.ptr, m.bytes);
}

void register_backend(DeviceKind kind, Backend* b) { registry[int(kind)] = b; }

// The CUDA backend registers itself on first use if a driver and a GPU are present.
static void try_cuda() {
  static bool tried = false;
  if (!tried) {
    tried = true;
    init_cuda_backend();
  }
}

bool backend_available(DeviceKind kind) {
  if (kind == DeviceKind::CPU) return true;
  try_cuda();
  return registry[int(kind)] != nullptr;
}

Backend& backend(Device d) {
  if (d.kind == DeviceKind::CPU) return cpu_backend();
  try_cuda();
  LOOM_CHECK(registry[int(d.kind)], Runtime, "device ", d.str(),
             ": CUDA is not available in this build or on this machine");
  return *registry[int(d.kind)];
}

}  // namespace loom
