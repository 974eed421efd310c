#pragma once
// Devices and streams. Each stream owns one trace of pending work.
#include <cstdint>
#include <string>

namespace loom {

enum class DeviceKind : uint8_t { CPU, CUDA };

struct Device {
  DeviceKind kind = DeviceKind::CPU;
  int index = 0;
  bool operator==(const Device& o) const { return kind == o.kind && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
  std::string str() const;
  static Device parse(const std::string& s);  // "cpu", "cuda", "cuda:1"
};

inline const Device kCPU{DeviceKind::CPU, 0};

}  // namespace loom
