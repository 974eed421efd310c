#pragma once
// Devices and streams. Each stream owns one trace of pending work.
#include <cstdint>
#include <memory>
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
inline constexpr int kDeviceKinds = 2;

// The host: its memory is the process's own and its one stream runs work in the order it is
// submitted, so no stream waits for another and no copy is needed to read a result.
inline bool is_host(Device d) { return d.kind == DeviceKind::CPU; }

// A stream of a device: an ordered queue of device work with its own trace of pending ops.
// Id 0 is the device's default stream (the CPU's only stream); other ids are unique in the
// process. `native` is the backend's handle (a CUstream), null for default streams; holding a
// StreamRef keeps the stream alive.
struct StreamRef {
  Device device;
  uint64_t id = 0;
  std::shared_ptr<void> native;
  bool operator==(const StreamRef& o) const { return device == o.device && id == o.id; }
  std::string str() const;  // "cuda:0 stream 3", "cpu default stream"
};

// How many CUDA devices exist (set when the CUDA backend registers; -1, the default: unknown,
// any index below 64 is accepted). Recording on, or selecting a stream of, "cuda:N" for N past
// the count raises loom::Error naming the device and the count, before any trace exists for it.
void set_cuda_device_count(int n);
int cuda_device_limit();  // the count set, or -1

// A fresh stream id (never 0).
uint64_t new_stream_id();
// The calling thread's current stream of `d` (its default stream unless a guard set another).
const StreamRef& current_stream(Device d);
// Makes `s` the calling thread's current stream of s.device. Throws for a CPU stream other than
// the default one and for a stream without a handle.
void set_current_stream(const StreamRef& s);
// The stream that device work goes to now: the stream being flushed during a flush, else the
// current stream. Backends allocate, copy and launch on it.
const StreamRef& active_stream(Device d);

// Makes `s` the active stream of its device for a scope (used by the flush of s's trace).
class ActiveStreamScope {
 public:
  explicit ActiveStreamScope(const StreamRef& s);
  ~ActiveStreamScope();
  ActiveStreamScope(const ActiveStreamScope&) = delete;
  ActiveStreamScope& operator=(const ActiveStreamScope&) = delete;

 private:
  const StreamRef* prev_;
  Device device_;
};

// Sets the current stream of s.device for a scope, restoring the previous one on exit.
class CurrentStreamGuard {
 public:
  explicit CurrentStreamGuard(const StreamRef& s);
  ~CurrentStreamGuard();
  CurrentStreamGuard(const CurrentStreamGuard&) = delete;
  CurrentStreamGuard& operator=(const CurrentStreamGuard&) = delete;

 private:
  StreamRef prev_;
};

}  // namespace loom
