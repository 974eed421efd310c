#pragma once
// The CUDA driver API, opened at run time (dlopen "libcuda.so.1") so loom builds, links and runs
// on machines without a driver or GPU: with none, CUDA reports itself unavailable and the CPU
// device works fully (docs/ARCHITECTURE.md, invariants). Every call makes the device's primary
// context current on the calling thread first and throws loom::Error naming the driver call and
// its CUresult on failure.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace loom::cuda {

using DevicePtr = uint64_t;  // CUdeviceptr

// True when libcuda loads, cuInit succeeds and at least one device exists.
bool is_available();
// Why is_available() is false ("" when it is true).
std::string unavailable_reason();
int device_count();  // 0 when unavailable

struct DeviceProps {
  std::string name;
  int sm_count = 0, cc_major = 0, cc_minor = 0, max_threads_per_block = 0;
  int max_smem_per_block_optin = 0, l2_bytes = 0;
  size_t total_mem = 0;
};
const DeviceProps& properties(int dev);  // cached; throws for a bad index

// Makes `dev`'s primary context current on this thread (retained once, kept for the process).
void ensure_context(int dev);

// A CUDA stream; copies share it, and it is destroyed with its last copy (the default stream
// lives for the whole process). Each stream has its own trace of pending ops: ops recorded while
// it is the current stream (StreamGuard, cuda/stream.h) run on it. `id` is 0 for the device's
// default stream and unique in the process otherwise.
struct Stream {
  int device = -1;
  uint64_t id = 0;
  std::shared_ptr<void> handle;  // CUstream
  void* raw() const { return handle.get(); }
  bool operator==(const Stream& o) const { return device == o.device && id == o.id; }

  // The user API (cuda/stream.cpp).
  // A new non-blocking stream. `priority`: lower numbers are higher priorities, clamped by the
  // driver into stream_priority_range(device) (0 is the default, the lowest priority).
  static Stream create(int device = 0, int priority = 0);
  int priority() const;  // as the driver reports it (cuStreamGetPriority)
  // Submits this stream's pending ops (its trace), then waits for all its work.
  void synchronize() const;
  // True when the stream has nothing pending and all its submitted work has finished.
  bool query() const;
  // Work recorded on this stream from now on waits for all work recorded on `other` so far.
  void wait_stream(const Stream& other) const;
};
// A non-blocking stream made once per device (not the legacy NULL stream).
Stream default_stream(int dev);
Stream create_stream(int dev, int priority = 0);
// cuCtxGetStreamPriorityRange: `least` (0, the default) to `greatest` (e.g. -5), numerically
// lower is more urgent; blocks of a higher-priority stream are scheduled first.
struct PriorityRange {
  int least = 0, greatest = 0;
};
PriorityRange stream_priority_range(int dev);
int stream_priority(const Stream& s);
void stream_sync(const Stream& s);
bool stream_done(const Stream& s);  // non-blocking query of submitted work
void device_sync(int dev);          // every stream of the device

// An event recorded on a stream; copies share it, destroyed with the last copy.
struct Event {
  int device = -1;
  bool timing = false;
  std::shared_ptr<void> handle;  // CUevent
  void* raw() const { return handle.get(); }

  // The user API (cuda/stream.cpp). record() submits the stream's pending ops first, so the
  // event marks the point after everything recorded on the stream so far.
  static Event create(bool timing = false, int device = 0);
  void record() const;  // on the current stream of its device
  void record(const Stream& s) const;
  // Work recorded on the stream from now on waits for the event (the host does not wait).
  void wait() const;  // the current stream
  void wait(const Stream& s) const;
  void synchronize() const;  // the host waits for the event
  bool query() const;        // true once the work before the event has finished
  // Milliseconds from this event to `end` (both created with timing=true and completed).
  float elapsed_time(const Event& end) const;
};
Event create_event(int dev, bool timing);
void record_event(const Event& e, const Stream& s);
// `timing` events cost a little more; elapsed_ms needs two of them.
Event record_event(const Stream& s, bool timing = false);
void stream_wait_event(const Stream& s, const Event& e);  // s waits, the host does not
// `waiter` waits (on the device) for everything submitted to `producer` so far; the streams may
// be of different devices. Uses a disable-timing event of the producer's device from a free
// list, recorded on `producer` and returned to the list as soon as the wait is enqueued
// (cuStreamWaitEvent captures the event's state at enqueue time; a later re-record does not
// change what an enqueued wait waits for).
void stream_wait_stream(const Stream& waiter, const Stream& producer);
// Debug accessor for the free list of wait events: how many events it has created and how many
// waits reused one. A steady state creates no more events.
struct EventPoolStats {
  uint64_t created = 0, reused = 0;
  size_t idle = 0;  // events in the list now
};
EventPoolStats event_pool_stats(int dev);
float elapsed_ms(const Event& start, const Event& end);
void event_sync(const Event& e);
bool event_done(const Event& e);  // non-blocking query

// Stream-ordered device memory from the device's default pool, whose release threshold is set to
// "never" so freed memory stays cached for reuse. On out-of-memory: synchronize the device, trim
// the pool, retry once, then throw ErrorKind::Memory. alloc(0) returns 0; free(0) does nothing.
DevicePtr alloc(size_t bytes, const Stream& s);
void free(DevicePtr ptr, const Stream& s);
struct MemInfo {
  size_t free = 0, total = 0;
};
MemInfo mem_info(int dev);
// Synchronizes the device and returns the pool's cached (freed) blocks to the driver.
void release_cached_memory(int dev);

// Page-locked host memory (portable: usable from every device's context), allocated and freed
// with `dev`'s context current.
void* host_alloc(size_t bytes, int dev = 0);
void host_free(void* p, int dev = 0);

// Async on `s`. A pageable `src` may be reused on return (the driver stages it); a pinned one must
// stay untouched until the stream passes the copy.
void copy_h2d(DevicePtr dst, const void* src, size_t bytes, const Stream& s);
// Synchronous for the caller: waits for the stream, so `dst` holds the data on return.
void copy_d2h(void* dst, DevicePtr src, size_t bytes, const Stream& s);
// Async on `s` (into pinned memory; `dst` holds the data once the stream passes the copy).
void copy_d2h_async(void* dst, DevicePtr src, size_t bytes, const Stream& s);
void copy_d2d(DevicePtr dst, DevicePtr src, size_t bytes, const Stream& s);  // async
// True when `dev` can read and write `peer`'s memory directly (cuDeviceCanAccessPeer); the first
// true answer also enables that access for dev's context (cuCtxEnablePeerAccess). Cached.
bool peer_access(int dev, int peer);
// Async on `s` (a stream of dst_dev): a copy from src_dev's memory (cuMemcpyPeerAsync).
void copy_peer(DevicePtr dst, int dst_dev, DevicePtr src, int src_dev, size_t bytes,
               const Stream& s);
void memset_d8(DevicePtr dst, unsigned char value, size_t bytes, const Stream& s);  // async

// A loaded cubin; unloaded on destruction. Functions taken from it die with it.
class Module {
 public:
  Module() = default;
  Module(int dev, const void* image);  // cuModuleLoadData on dev's primary context
  Module(Module&& o) noexcept;
  Module& operator=(Module&& o) noexcept;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  ~Module();
  void* raw() const { return mod_; }
  int device() const { return dev_; }

 private:
  void reset();
  int dev_ = -1;
  void* mod_ = nullptr;  // CUmodule
};
// Convenience: load a cubin held in any byte container.
template <class Bytes>
Module load_module(int dev, const Bytes& cubin) {
  return Module(dev, cubin.data());
}

struct Function {
  int device = -1;
  void* handle = nullptr;  // CUfunction
};
Function get_function(Module& m, const char* name);

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};
// cuLaunchKernel; raises the function's dynamic shared memory limit first when smem > 48 KiB.
void launch(const Function& f, Dim3 grid, Dim3 block, unsigned smem_bytes, const Stream& s,
            void** args);

namespace fault {
// The next alloc() throws the out-of-memory error (ErrorKind::Memory) without allocating.
void fail_next_alloc();
// Every alloc() of more than `bytes` throws that error, until fail_allocs_above(0): a device with
// little memory, where small allocations (and the backend's scratch) still succeed.
void fail_allocs_above(size_t bytes);
// Whether an alloc() of `bytes` would fail by one of the above: the backend's kept blocks are
// then not handed out either, so a test's device behaves as one with that little memory.
bool alloc_would_fail(size_t bytes);
}  // namespace fault

}  // namespace loom::cuda
