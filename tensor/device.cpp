#include "tensor/device.h"

#include "tensor/error.h"

namespace loom {

std::string Device::str() const {
  return kind == DeviceKind::CPU ? "cpu" : "cuda:" + std::to_string(index);
}

Device Device::parse(const std::string& s) {
  if (s == "cpu") return kCPU;
  if (s == "cuda") return {DeviceKind::CUDA, 0};
  if (s.rfind("cuda:", 0) == 0) {
    size_t used = 0;
    int idx = -1;
    try {
      idx = std::stoi(s.substr(5), &used);
    } catch (...) {
    }
    LOOM_CHECK(idx >= 0 && used == s.size() - 5, Value, "device: bad device string '", s, "'");
    return {DeviceKind::CUDA, idx};
  }
  throw Error(ErrorKind::Value, "device: unknown device '" + s + "' (expected cpu, cuda or cuda:N)");
}

}  // namespace loom
