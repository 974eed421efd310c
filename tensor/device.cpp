#include "tensor/device.h"

#include <atomic>
#include <cstdlib>

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
  throw Error(ErrorKind::Value,
              "device: unknown device '" + s + "' (expected cpu, cuda or cuda:N)");
}

}  // namespace loom

// ---- streams ------------------------------------------------------------------------------

namespace loom {
namespace {

constexpr int kMaxDevices = 64;

// Per thread: the current stream of each CUDA device, and the stream a flush has made active.
struct ThreadStreams {
  StreamRef current[kMaxDevices];
  const StreamRef* active[kMaxDevices] = {};
  ThreadStreams() {
    for (int i = 0; i < kMaxDevices; ++i) current[i].device = Device{DeviceKind::CUDA, i};
  }
};

ThreadStreams& thread_streams() {
  thread_local ThreadStreams t;
  return t;
}

const StreamRef& cpu_stream() {
  static const StreamRef s{kCPU, 0, nullptr};
  return s;
}

std::atomic<int> g_cuda_count{-1};

// The errors of slot(), out of line: their message building made the every-op check set up a
// stack frame (~20 instructions a recorded op).
[[noreturn, gnu::noinline, gnu::cold]] void bad_slot(Device d, int n) {
  LOOM_CHECK(d.index >= 0 && d.index < kMaxDevices, Index, "stream: device index ", d.index,
             " out of range (at most ", kMaxDevices, " devices)");
  LOOM_CHECK(n < 0 || d.index < n, Index, "CUDA device cuda:", d.index,
             " does not exist: this machine has ", n, " CUDA device", n == 1 ? "" : "s",
             " (cuda:0 .. cuda:", n - 1, ")");
  std::abort();  // (slot() calls this only when a check above fails)
}

inline int slot(Device d) {
  int n = g_cuda_count.load(std::memory_order_relaxed);
  if (d.index < 0 || d.index >= kMaxDevices || (n >= 0 && d.index >= n)) [[unlikely]]
    bad_slot(d, n);
  return d.index;
}

}  // namespace

void set_cuda_device_count(int n) { g_cuda_count = n; }
int cuda_device_limit() { return g_cuda_count; }

std::string StreamRef::str() const {
  if (id == 0) return device.str() + " default stream";
  return device.str() + " stream " + std::to_string(id);
}

uint64_t new_stream_id() {
  static std::atomic<uint64_t> next{1};
  return next++;
}

const StreamRef& current_stream(Device d) {
  if (d.kind == DeviceKind::CPU) return cpu_stream();
  return thread_streams().current[slot(d)];
}

void set_current_stream(const StreamRef& s) {
  if (s.device.kind == DeviceKind::CPU) {
    LOOM_CHECK(s.id == 0, Value, "set_current_stream: the cpu device has only its default stream (",
               "got stream ", s.id, "); streams other than the default one are CUDA streams");
    return;
  }
  LOOM_CHECK(s.id == 0 || s.native, Value, "set_current_stream: ", s.str(),
             " has no stream handle (a moved-from or default-constructed stream?)");
  StreamRef& cur = thread_streams().current[slot(s.device)];
  cur.id = s.id;
  cur.native = s.id == 0 ? nullptr : s.native;
}

const StreamRef& active_stream(Device d) {
  if (d.kind == DeviceKind::CPU) return cpu_stream();
  ThreadStreams& t = thread_streams();
  int i = slot(d);
  return t.active[i] ? *t.active[i] : t.current[i];
}

ActiveStreamScope::ActiveStreamScope(const StreamRef& s) : prev_(nullptr), device_(s.device) {
  if (device_.kind == DeviceKind::CPU) return;
  const StreamRef*& a = thread_streams().active[slot(device_)];
  prev_ = a;
  a = &s;
}

ActiveStreamScope::~ActiveStreamScope() {
  if (device_.kind == DeviceKind::CPU) return;
  thread_streams().active[device_.index] = prev_;
}

CurrentStreamGuard::CurrentStreamGuard(const StreamRef& s) : prev_(current_stream(s.device)) {
  set_current_stream(s);
}

CurrentStreamGuard::~CurrentStreamGuard() {
  if (prev_.device.kind == DeviceKind::CPU) return;
  StreamRef& cur = thread_streams().current[prev_.device.index];
  cur.id = prev_.id;
  cur.native = prev_.native;
}

}  // namespace loom
