#include "tensor/backend.h"

#include <mutex>

#include "tensor/error.h"
#include "tensor/storage.h"

namespace loom {

namespace {
Backend* registry[kDeviceKinds] = {};
BackendFactory factories[kDeviceKinds] = {};
BackendProbe probes[kDeviceKinds] = {};
std::once_flag probed[kDeviceKinds];

void registered() {
  static std::once_flag once;
  std::call_once(once, register_builtin_backends);
}

// The kind's probe, once (a device found later is not looked for again).
void probe(DeviceKind kind) {
  registered();
  if (BackendProbe p = probes[int(kind)]) std::call_once(probed[int(kind)], p);
}
}  // namespace

void Backend::release(Memory& m) {
  if (m.deleter)
    m.deleter();
  else
    free(m.ptr, m.bytes);
}

void Backend::run_opaque_epilogue(const Group&, Kernel&) {
  LOOM_CHECK(false, Runtime, name(), ": no matmul epilogue (its caps() do not offer one)");
}

void register_backend(DeviceKind kind, Backend* b) { registry[int(kind)] = b; }
void register_backend_factory(DeviceKind kind, BackendFactory f) { factories[int(kind)] = f; }
void register_backend_probe(DeviceKind kind, BackendProbe p) { probes[int(kind)] = p; }

bool backend_available(DeviceKind kind) {
  probe(kind);
  return registry[int(kind)] != nullptr || factories[int(kind)] != nullptr;
}

Backend& backend(Device d) {
  probe(d.kind);
  if (Backend* b = registry[int(d.kind)]) return *b;
  LOOM_CHECK(factories[int(d.kind)], Runtime, "device ", d.str(),
             ": not available (no backend for it in this build or on this machine)");
  return factories[int(d.kind)](d.index);
}

}  // namespace loom
