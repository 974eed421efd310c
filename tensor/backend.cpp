#include "tensor/backend.h"

#include "tensor/error.h"
#include "tensor/storage.h"

namespace loom {

Backend& cpu_backend();

namespace {
Backend* registry[2] = {nullptr, nullptr};
BackendFactory factories[2] = {nullptr, nullptr};
}  // namespace

void Backend::release(Memory& m) {
  if (m.deleter)
    m.deleter();
  else
    free(m.ptr, m.bytes);
}

void register_backend(DeviceKind kind, Backend* b) { registry[int(kind)] = b; }
void register_backend_factory(DeviceKind kind, BackendFactory f) { factories[int(kind)] = f; }

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
  return registry[int(kind)] != nullptr || factories[int(kind)] != nullptr;
}

Backend& backend(Device d) {
  if (d.kind == DeviceKind::CPU) return cpu_backend();
  try_cuda();
  if (registry[int(d.kind)]) return *registry[int(d.kind)];
  LOOM_CHECK(factories[int(d.kind)], Runtime, "device ", d.str(),
             ": CUDA is not available in this build or on this machine");
  return factories[int(d.kind)](d.index);
}

}  // namespace loom
