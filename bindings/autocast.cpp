// Autocast's thread-local state (ops/autocast.h) for loom.autocast (python/loom/amp.py).
#include "bindings/common.h"

namespace loom::py {
namespace {

DeviceKind kind_of(const std::string& device_type) {
  if (device_type == "cpu") return DeviceKind::CPU;
  if (device_type == "cuda") return DeviceKind::CUDA;
  throw nb::value_error(
      ("autocast: device_type must be 'cpu' or 'cuda', got '" + device_type + "'").c_str());
}

}  // namespace

void init_autocast(nb::module_& m) {
  m.def(
      "is_autocast_enabled",
      [](const std::string& device_type) { return autocast_enabled(kind_of(device_type)); },
      "device_type"_a = "cuda", "Whether autocast is on for the device type in this thread.");
  m.def(
      "get_autocast_dtype",
      [](const std::string& device_type) { return autocast_dtype(kind_of(device_type)); },
      "device_type"_a, "The lower precision autocast uses for the device type.");
  m.def(
      "_set_autocast",
      [](const std::string& device_type, bool enabled, DType dtype) {
        set_autocast(kind_of(device_type), enabled, dtype);
      },
      "device_type"_a, "enabled"_a, "dtype"_a, "Sets autocast's state for this thread.");
}

}  // namespace loom::py
