#include "tensor/backend.h"

#include "tensor/error.h"

namespace loom {

Backend& cpu_backend();

namespace {
Backend* registry[2] = {nullptr, nullptr};
}

void register_backend(DeviceKind kind, Backend* b) { registry[int(kind)] = b; }
bool backend_available(DeviceKind kind) { return kind == DeviceKind::CPU || registry[int(kind)]; }

Backend& backend(Device d) {
  if (d.kind == DeviceKind::CPU) return cpu_backend();
  LOOM_CHECK(registry[int(d.kind)], Runtime, "device ", d.str(),
             ": CUDA is not available in this build or on this machine");
  return *registry[int(d.kind)];
}

}  // namespace loom
