// The driver API through dlopen/dlsym. We declare the handful of signatures ourselves instead of
// including <cuda.h>, so this file builds without a CUDA toolkit. Versioned symbols (`_v2`) are
// named explicitly because the unversioned exports keep their old ABI for old binaries.
#include "cuda/driver.h"

#include <dlfcn.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "cuda/call_times.h"
#include "tensor/device.h"
#include "tensor/error.h"
#include "tensor/knobs.h"

namespace loom::cuda {
namespace {

using CUresult = int;
using CUdevice = int;
using CUcontext = void*;
using CUstream = void*;
using CUevent = void*;
using CUmodule = void*;
using CUfunction = void*;
using CUmemoryPool = void*;

constexpr CUresult kSuccess = 0, kOutOfMemory = 2, kNoDevice = 100, kNotReady = 600;
constexpr CUresult kPeerAccessAlreadyEnabled = 704;
constexpr int kAttrMaxThreadsPerBlock = 1, kAttrSmCount = 16, kAttrL2Bytes = 38;
constexpr int kAttrCcMajor = 75, kAttrCcMinor = 76, kAttrSmemOptin = 97;
constexpr int kFuncAttrMaxDynamicSmem = 8;
constexpr int kPoolAttrReleaseThreshold = 4;
constexpr int kMemLocationDevice = 1, kMemAccessReadWrite = 3;

struct MemAccessDesc {  // CUmemAccessDesc
  int location_type, location_id, flags;
};
constexpr unsigned kStreamNonBlocking = 1, kEventDefault = 0, kEventDisableTiming = 2;
constexpr unsigned kHostAllocPortable = 1;
constexpr unsigned kDefaultSmemLimit = 48 * 1024;

struct Api {
  CUresult (*cuInit)(unsigned);
  CUresult (*cuGetErrorName)(CUresult, const char**);
  CUresult (*cuGetErrorString)(CUresult, const char**);
  CUresult (*cuDeviceGetCount)(int*);
  CUresult (*cuDeviceGet)(CUdevice*, int);
  CUresult (*cuDeviceGetName)(char*, int, CUdevice);
  CUresult (*cuDeviceGetAttribute)(int*, int, CUdevice);
  CUresult (*cuDeviceTotalMem)(size_t*, CUdevice);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice);
  CUresult (*cuCtxGetCurrent)(CUcontext*);
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuCtxSynchronize)();
  CUresult (*cuStreamCreate)(CUstream*, unsigned);
  CUresult (*cuStreamCreateWithPriority)(CUstream*, unsigned, int);
  CUresult (*cuStreamGetPriority)(CUstream, int*);
  CUresult (*cuCtxGetStreamPriorityRange)(int*, int*);
  CUresult (*cuDeviceCanAccessPeer)(int*, CUdevice, CUdevice);
  CUresult (*cuCtxEnablePeerAccess)(CUcontext, unsigned);
  CUresult (*cuMemcpyPeerAsync)(DevicePtr, CUcontext, DevicePtr, CUcontext, size_t, CUstream);
  CUresult (*cuMemPoolSetAccess)(CUmemoryPool, const MemAccessDesc*, size_t);
  CUresult (*cuStreamDestroy)(CUstream);
  CUresult (*cuStreamSynchronize)(CUstream);
  CUresult (*cuStreamQuery)(CUstream);
  CUresult (*cuStreamWaitEvent)(CUstream, CUevent, unsigned);
  CUresult (*cuEventCreate)(CUevent*, unsigned);
  CUresult (*cuEventRecord)(CUevent, CUstream);
  CUresult (*cuEventSynchronize)(CUevent);
  CUresult (*cuEventQuery)(CUevent);
  CUresult (*cuEventElapsedTime)(float*, CUevent, CUevent);
  CUresult (*cuEventDestroy)(CUevent);
  CUresult (*cuDeviceGetDefaultMemPool)(CUmemoryPool*, CUdevice);
  CUresult (*cuMemPoolSetAttribute)(CUmemoryPool, int, void*);
  CUresult (*cuMemPoolTrimTo)(CUmemoryPool, size_t);
  CUresult (*cuMemAllocAsync)(DevicePtr*, size_t, CUstream);
  CUresult (*cuMemFreeAsync)(DevicePtr, CUstream);
  CUresult (*cuMemGetInfo)(size_t*, size_t*);
  CUresult (*cuMemHostAlloc)(void**, size_t, unsigned);
  CUresult (*cuMemFreeHost)(void*);
  CUresult (*cuMemcpyHtoDAsync)(DevicePtr, const void*, size_t, CUstream);
  CUresult (*cuMemcpyDtoHAsync)(void*, DevicePtr, size_t, CUstream);
  CUresult (*cuMemcpyDtoDAsync)(DevicePtr, DevicePtr, size_t, CUstream);
  CUresult (*cuMemsetD8Async)(DevicePtr, unsigned char, size_t, CUstream);
  CUresult (*cuModuleLoadData)(CUmodule*, const void*);
  CUresult (*cuModuleUnload)(CUmodule);
  CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*);
  CUresult (*cuFuncSetAttribute)(CUfunction, int, int);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, CUstream, void**, void**);
};

// The free list of disable-timing events for cross-stream waits (stream_wait_stream).
struct EventPool {
  std::mutex mu;
  std::vector<CUevent> idle;
  uint64_t created = 0, reused = 0;
};

struct DeviceState {
  std::once_flag once;
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  CUmemoryPool pool = nullptr;
  Stream stream;
  DeviceProps props;
  EventPool events;
  std::mutex peer_mu;
  std::vector<signed char> peer;  // by peer device: -1 unknown, 0 no, 1 enabled
};

struct Driver {
  Api api{};
  bool ok = false;
  std::string reason;
  int count = 0;
  std::unique_ptr<DeviceState[]> devs;
};

std::atomic<bool> g_fail_next_alloc{false};
std::atomic<size_t> g_alloc_limit{0};  // fault::fail_allocs_above; 0: none

std::string result_name(const Api& api, CUresult r) {
  const char* name = nullptr;
  const char* desc = nullptr;
  if (api.cuGetErrorName) api.cuGetErrorName(r, &name);
  if (api.cuGetErrorString) api.cuGetErrorString(r, &desc);
  std::string s = name ? name : "CUresult " + std::to_string(r);
  if (desc) s += std::string(" (") + desc + ")";
  return s;
}

// Binds every symbol or returns the name of the first one missing.
const char* bind(void* lib, Api& a) {
  const char* missing = nullptr;
  auto sym = [&](auto& fn, const char* name, const char* fallback = nullptr) {
    void* p = dlsym(lib, name);
    if (!p && fallback) p = dlsym(lib, fallback);
    if (!p && !missing) missing = name;
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
  };
  sym(a.cuInit, "cuInit");
  sym(a.cuGetErrorName, "cuGetErrorName");
  sym(a.cuGetErrorString, "cuGetErrorString");
  sym(a.cuDeviceGetCount, "cuDeviceGetCount");
  sym(a.cuDeviceGet, "cuDeviceGet");
  sym(a.cuDeviceGetName, "cuDeviceGetName");
  sym(a.cuDeviceGetAttribute, "cuDeviceGetAttribute");
  sym(a.cuDeviceTotalMem, "cuDeviceTotalMem_v2");
  sym(a.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
  sym(a.cuCtxGetCurrent, "cuCtxGetCurrent");
  sym(a.cuCtxSetCurrent, "cuCtxSetCurrent");
  sym(a.cuCtxSynchronize, "cuCtxSynchronize");
  sym(a.cuStreamCreate, "cuStreamCreate");
  sym(a.cuStreamCreateWithPriority, "cuStreamCreateWithPriority");
  sym(a.cuStreamGetPriority, "cuStreamGetPriority");
  sym(a.cuCtxGetStreamPriorityRange, "cuCtxGetStreamPriorityRange");
  sym(a.cuDeviceCanAccessPeer, "cuDeviceCanAccessPeer");
  sym(a.cuCtxEnablePeerAccess, "cuCtxEnablePeerAccess");
  sym(a.cuMemcpyPeerAsync, "cuMemcpyPeerAsync");
  sym(a.cuMemPoolSetAccess, "cuMemPoolSetAccess");
  sym(a.cuStreamDestroy, "cuStreamDestroy_v2");
  sym(a.cuStreamSynchronize, "cuStreamSynchronize");
  sym(a.cuStreamQuery, "cuStreamQuery");
  sym(a.cuStreamWaitEvent, "cuStreamWaitEvent");
  sym(a.cuEventCreate, "cuEventCreate");
  sym(a.cuEventRecord, "cuEventRecord");
  sym(a.cuEventSynchronize, "cuEventSynchronize");
  sym(a.cuEventQuery, "cuEventQuery");
  sym(a.cuEventElapsedTime, "cuEventElapsedTime_v2", "cuEventElapsedTime");  // _v2: 12.8+
  sym(a.cuEventDestroy, "cuEventDestroy_v2");
  sym(a.cuDeviceGetDefaultMemPool, "cuDeviceGetDefaultMemPool");
  sym(a.cuMemPoolSetAttribute, "cuMemPoolSetAttribute");
  sym(a.cuMemPoolTrimTo, "cuMemPoolTrimTo");
  sym(a.cuMemAllocAsync, "cuMemAllocAsync");
  sym(a.cuMemFreeAsync, "cuMemFreeAsync");
  sym(a.cuMemGetInfo, "cuMemGetInfo_v2");
  sym(a.cuMemHostAlloc, "cuMemHostAlloc");
  sym(a.cuMemFreeHost, "cuMemFreeHost");
  sym(a.cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2");
  sym(a.cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2");
  sym(a.cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2");
  sym(a.cuMemsetD8Async, "cuMemsetD8Async");
  sym(a.cuModuleLoadData, "cuModuleLoadData");
  sym(a.cuModuleUnload, "cuModuleUnload");
  sym(a.cuModuleGetFunction, "cuModuleGetFunction");
  sym(a.cuFuncSetAttribute, "cuFuncSetAttribute");
  sym(a.cuLaunchKernel, "cuLaunchKernel");
  return missing;
}

// The calls a flush, a sync or an allocation makes (LOOM_CUDA_CALL_TIMES, cuda/call_times.h).
void time_calls(Api& a) {
  using call_times::Timed;
#define LOOM_TIME(f) Timed<&Api::f>::wrap(a, #f)
  LOOM_TIME(cuCtxGetCurrent);
  LOOM_TIME(cuCtxSetCurrent);
  LOOM_TIME(cuCtxSynchronize);
  LOOM_TIME(cuStreamSynchronize);
  LOOM_TIME(cuStreamQuery);
  LOOM_TIME(cuStreamWaitEvent);
  LOOM_TIME(cuEventCreate);
  LOOM_TIME(cuEventRecord);
  LOOM_TIME(cuEventSynchronize);
  LOOM_TIME(cuEventQuery);
  LOOM_TIME(cuMemAllocAsync);
  LOOM_TIME(cuMemFreeAsync);
  LOOM_TIME(cuMemcpyHtoDAsync);
  LOOM_TIME(cuMemcpyDtoHAsync);
  LOOM_TIME(cuMemcpyDtoDAsync);
  LOOM_TIME(cuMemsetD8Async);
  LOOM_TIME(cuModuleLoadData);
  LOOM_TIME(cuModuleGetFunction);
  LOOM_TIME(cuFuncSetAttribute);
  LOOM_TIME(cuLaunchKernel);
#undef LOOM_TIME
  std::atexit(call_times::print_call_times);
}

Driver* open_driver() {
  auto* d = new Driver();
  if (knob_flag(Knob::DisableCuda)) {
    d->reason = "disabled by LOOM_DISABLE_CUDA";
    return d;
  }
  // Never dlclose: handles and destructors may call into the driver until process exit.
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* err = dlerror();
    d->reason = std::string("libcuda.so.1 not found") + (err ? std::string(": ") + err : "");
    return d;
  }
  if (const char* missing = bind(lib, d->api)) {
    d->reason = std::string("libcuda.so.1 lacks ") + missing + " (driver too old)";
    return d;
  }
  if (knob_flag(Knob::CudaCallTimes)) time_calls(d->api);
  if (CUresult r = d->api.cuInit(0); r != kSuccess) {
    d->reason = "cuInit failed: " + result_name(d->api, r);
    return d;
  }
  int n = 0;
  if (CUresult r = d->api.cuDeviceGetCount(&n); r != kSuccess) {
    d->reason = "cuDeviceGetCount failed: " + result_name(d->api, r);
    return d;
  }
  if (n <= 0) {
    d->reason = "no CUDA devices: " + result_name(d->api, kNoDevice);
    return d;
  }
  d->count = n;
  d->devs = std::make_unique<DeviceState[]>(n);
  d->ok = true;
  return d;
}

// Leaked on purpose: stream/event/module destructors of static objects may run after a function-
// local static would have been destroyed.
Driver& drv() {
  static Driver* d = open_driver();
  return *d;
}

const Api& api() { return drv().api; }

template <typename... Ctx>
void check(CUresult r, const char* call, const Ctx&... ctx) {
  if (r == kSuccess) return;
  std::string msg = std::string(call) + " failed: " + result_name(api(), r);
  if constexpr (sizeof...(ctx) > 0) msg += " [" + detail::cat(ctx...) + "]";
  throw Error(r == kOutOfMemory ? ErrorKind::Memory : ErrorKind::Runtime, msg);
}

void require() { LOOM_CHECK(drv().ok, Runtime, "CUDA is unavailable: ", drv().reason); }

void set_current(CUcontext ctx) {
  CUcontext cur = nullptr;
  check(api().cuCtxGetCurrent(&cur), "cuCtxGetCurrent");
  if (cur != ctx) check(api().cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
}

void init_device(DeviceState& s, int ordinal) {
  const Api& a = api();
  check(a.cuDeviceGet(&s.dev, ordinal), "cuDeviceGet", "device ", ordinal);
  check(a.cuDevicePrimaryCtxRetain(&s.ctx, s.dev), "cuDevicePrimaryCtxRetain", "device ", ordinal);
  set_current(s.ctx);

  DeviceProps& p = s.props;
  char name[256] = {};
  check(a.cuDeviceGetName(name, sizeof(name) - 1, s.dev), "cuDeviceGetName");
  p.name = name;
  auto attr = [&](int which) {
    int v = 0;
    check(a.cuDeviceGetAttribute(&v, which, s.dev), "cuDeviceGetAttribute", "attribute ", which);
    return v;
  };
  p.sm_count = attr(kAttrSmCount);
  p.cc_major = attr(kAttrCcMajor);
  p.cc_minor = attr(kAttrCcMinor);
  p.max_threads_per_block = attr(kAttrMaxThreadsPerBlock);
  p.max_smem_per_block_optin = attr(kAttrSmemOptin);
  p.l2_bytes = attr(kAttrL2Bytes);
  check(a.cuDeviceTotalMem(&p.total_mem, s.dev), "cuDeviceTotalMem_v2");

  // Keep freed blocks in the pool instead of returning them at every sync; alloc() trims on OOM.
  check(a.cuDeviceGetDefaultMemPool(&s.pool, s.dev), "cuDeviceGetDefaultMemPool");
  uint64_t threshold = UINT64_MAX;
  check(a.cuMemPoolSetAttribute(s.pool, kPoolAttrReleaseThreshold, &threshold),
        "cuMemPoolSetAttribute", "release threshold");

  CUstream st = nullptr;
  check(a.cuStreamCreate(&st, kStreamNonBlocking), "cuStreamCreate", "default stream");
  s.stream = Stream{ordinal, 0, std::shared_ptr<void>(st, [](void*) {})};
  s.peer.assign(size_t(drv().count), -1);
}

DeviceState& device(int dev) {
  require();
  Driver& d = drv();
  LOOM_CHECK(dev >= 0 && dev < d.count, Index, "CUDA device cuda:", dev,
             " does not exist: this machine has ", d.count, " CUDA device", d.count == 1 ? "" : "s",
             " (cuda:0 .. cuda:", d.count - 1, ")");
  DeviceState& s = d.devs[dev];
  std::call_once(s.once, init_device, s, dev);  // retried on the next call if it threw
  return s;
}

// The device's state with its context current on this thread.
DeviceState& enter(int dev) {
  DeviceState& s = device(dev);
  set_current(s.ctx);
  return s;
}

// In the largest unit that keeps the number at least 1 (4195636 bytes: "4.00 MiB").
std::string fmt_bytes(size_t b) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  double v = double(b);
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, ++u;
  char buf[64];
  std::snprintf(buf, sizeof(buf), u ? "%.2f %s" : "%.0f %s", v, units[u]);
  return buf;
}

[[noreturn]] void throw_oom(size_t bytes, int dev, const char* why) {
  std::string mem = "free/total memory unknown";
  if (drv().ok && dev >= 0 && dev < drv().count) {
    try {
      MemInfo m = mem_info(dev);
      mem = fmt_bytes(m.free) + " free of " + fmt_bytes(m.total) + " total";
    } catch (const Error&) {
    }
  }
  throw Error(ErrorKind::Memory,
              detail::cat("CUDA out of memory on device ", dev, ": tried to allocate ", bytes,
                          " bytes (", fmt_bytes(bytes), "); ", mem, " (", why, ")"));
}

// Waits for the device, then returns every unused pool block to the driver.
void trim(DeviceState& d) {
  check(api().cuCtxSynchronize(), "cuCtxSynchronize", "trimming the memory pool");
  check(api().cuMemPoolTrimTo(d.pool, 0), "cuMemPoolTrimTo");
}

// Destroys a driver object when its last handle goes; errors are ignored because this runs in
// destructors, possibly during process exit after the driver has shut down.
template <typename Fn>
std::shared_ptr<void> owned(void* h, int dev, Fn destroy) {
  return std::shared_ptr<void>(h, [dev, destroy](void* p) {
    try {
      set_current(drv().devs[dev].ctx);
    } catch (...) {
    }
    destroy(p);
  });
}

}  // namespace

bool is_available() { return drv().ok; }
std::string unavailable_reason() { return drv().ok ? "" : drv().reason; }
int device_count() { return drv().count; }

const DeviceProps& properties(int dev) { return device(dev).props; }

void ensure_context(int dev) { enter(dev); }

Stream default_stream(int dev) { return device(dev).stream; }

Stream create_stream(int dev, int priority) {
  enter(dev);
  CUstream st = nullptr;
  check(api().cuStreamCreateWithPriority(&st, kStreamNonBlocking, priority),
        "cuStreamCreateWithPriority", "device ", dev, ", priority ", priority);
  return Stream{dev, new_stream_id(), owned(st, dev, [](void* p) { api().cuStreamDestroy(p); })};
}

PriorityRange stream_priority_range(int dev) {
  enter(dev);
  PriorityRange r;
  check(api().cuCtxGetStreamPriorityRange(&r.least, &r.greatest), "cuCtxGetStreamPriorityRange",
        "device ", dev);
  return r;
}

int stream_priority(const Stream& s) {
  enter(s.device);
  int p = 0;
  check(api().cuStreamGetPriority(s.raw(), &p), "cuStreamGetPriority", "device ", s.device);
  return p;
}

void stream_sync(const Stream& s) {
  enter(s.device);
  check(api().cuStreamSynchronize(s.raw()), "cuStreamSynchronize", "device ", s.device);
}

bool stream_done(const Stream& s) {
  enter(s.device);
  CUresult r = api().cuStreamQuery(s.raw());
  if (r == kNotReady) return false;
  check(r, "cuStreamQuery", "device ", s.device);
  return true;
}

void device_sync(int dev) {
  enter(dev);
  check(api().cuCtxSynchronize(), "cuCtxSynchronize", "device ", dev);
}

Event create_event(int dev, bool timing) {
  enter(dev);
  CUevent ev = nullptr;
  check(api().cuEventCreate(&ev, timing ? kEventDefault : kEventDisableTiming), "cuEventCreate",
        "device ", dev);
  return Event{dev, timing, owned(ev, dev, [](void* p) { api().cuEventDestroy(p); })};
}

void record_event(const Event& e, const Stream& s) {
  LOOM_CHECK(e.raw(), Value, "Event.record: the event was not created (use Event::create)");
  LOOM_CHECK(e.device == s.device, Value, "Event.record: an event of cuda:", e.device,
             " cannot be recorded on a stream of cuda:", s.device);
  enter(s.device);
  check(api().cuEventRecord(e.raw(), s.raw()), "cuEventRecord", "device ", s.device);
}

Event record_event(const Stream& s, bool timing) {
  Event e = create_event(s.device, timing);
  record_event(e, s);
  return e;
}

void stream_wait_event(const Stream& s, const Event& e) {
  enter(s.device);
  check(api().cuStreamWaitEvent(s.raw(), e.raw(), 0), "cuStreamWaitEvent");
}

void stream_wait_stream(const Stream& waiter, const Stream& producer) {
  DeviceState& pd = enter(producer.device);
  EventPool& pool = pd.events;
  CUevent ev = nullptr;
  {
    std::lock_guard<std::mutex> lock(pool.mu);
    if (!pool.idle.empty()) {
      ev = pool.idle.back();
      pool.idle.pop_back();
      pool.reused++;
    }
  }
  if (!ev) {
    check(api().cuEventCreate(&ev, kEventDisableTiming), "cuEventCreate", "device ",
          producer.device, " (wait event)");
    std::lock_guard<std::mutex> lock(pool.mu);
    pool.created++;
  }
  // Back to the list whatever happens: the enqueued wait (if any) already captured the event.
  struct Return {
    EventPool& pool;
    CUevent ev;
    ~Return() {
      std::lock_guard<std::mutex> lock(pool.mu);
      pool.idle.push_back(ev);
    }
  } ret{pool, ev};
  check(api().cuEventRecord(ev, producer.raw()), "cuEventRecord", "device ", producer.device);
  enter(waiter.device);  // a stream may wait for another context's event
  check(api().cuStreamWaitEvent(waiter.raw(), ev, 0), "cuStreamWaitEvent", "cuda:", waiter.device,
        " waiting for cuda:", producer.device);
}

EventPoolStats event_pool_stats(int dev) {
  EventPool& pool = device(dev).events;
  std::lock_guard<std::mutex> lock(pool.mu);
  return EventPoolStats{pool.created, pool.reused, pool.idle.size()};
}

float elapsed_ms(const Event& start, const Event& end) {
  LOOM_CHECK(start.timing && end.timing, Runtime,
             "elapsed_ms needs events recorded with timing=true");
  enter(start.device);
  float ms = 0;
  check(api().cuEventElapsedTime(&ms, start.raw(), end.raw()), "cuEventElapsedTime");
  return ms;
}

void event_sync(const Event& e) {
  enter(e.device);
  check(api().cuEventSynchronize(e.raw()), "cuEventSynchronize");
}

bool event_done(const Event& e) {
  enter(e.device);
  CUresult r = api().cuEventQuery(e.raw());
  if (r == kNotReady) return false;
  check(r, "cuEventQuery");
  return true;
}

DevicePtr alloc(size_t bytes, const Stream& s) {
  if (g_fail_next_alloc.exchange(false)) throw_oom(bytes, s.device, "injected by fault hook");
  if (size_t lim = g_alloc_limit.load(std::memory_order_relaxed); lim && bytes > lim)
    throw_oom(bytes, s.device, "injected by fault hook: allocations above the test's limit fail");
  if (bytes == 0) return 0;
  DeviceState& d = enter(s.device);
  DevicePtr p = 0;
  CUresult r = api().cuMemAllocAsync(&p, bytes, s.raw());
  if (r == kOutOfMemory) {
    // Pending frees on any stream return memory once the device is idle; trimming then hands the
    // pool's cached blocks back so one large allocation can fit.
    trim(d);
    if (bytes <= d.props.total_mem) r = api().cuMemAllocAsync(&p, bytes, s.raw());
  }
  if (r == kOutOfMemory) {
    // A failed request can leave the pool holding nearly all device memory (seen on H200, driver
    // 580): give it back so the error reports true free memory and a retry can succeed.
    trim(d);
    throw_oom(bytes, s.device, "after synchronizing and trimming the pool");
  }
  check(r, "cuMemAllocAsync", bytes, " bytes on device ", s.device);
  return p;
}

void free(DevicePtr ptr, const Stream& s) {
  if (ptr == 0) return;
  enter(s.device);
  check(api().cuMemFreeAsync(ptr, s.raw()), "cuMemFreeAsync", "device ", s.device);
}

void release_cached_memory(int dev) { trim(enter(dev)); }

MemInfo mem_info(int dev) {
  enter(dev);
  MemInfo m;
  check(api().cuMemGetInfo(&m.free, &m.total), "cuMemGetInfo_v2", "device ", dev);
  return m;
}

void* host_alloc(size_t bytes, int dev) {
  if (bytes == 0) return nullptr;
  enter(dev);
  void* p = nullptr;
  CUresult r = api().cuMemHostAlloc(&p, bytes, kHostAllocPortable);
  check(r, "cuMemHostAlloc", bytes, " bytes of pinned host memory");
  return p;
}

void host_free(void* p, int dev) {
  if (!p) return;
  enter(dev);
  check(api().cuMemFreeHost(p), "cuMemFreeHost");
}

void copy_h2d(DevicePtr dst, const void* src, size_t bytes, const Stream& s) {
  if (bytes == 0) return;
  enter(s.device);
  check(api().cuMemcpyHtoDAsync(dst, src, bytes, s.raw()), "cuMemcpyHtoDAsync_v2", bytes, " bytes");
}

void copy_d2h(void* dst, DevicePtr src, size_t bytes, const Stream& s) {
  if (bytes == 0) return;
  enter(s.device);
  check(api().cuMemcpyDtoHAsync(dst, src, bytes, s.raw()), "cuMemcpyDtoHAsync_v2", bytes, " bytes");
  check(api().cuStreamSynchronize(s.raw()), "cuStreamSynchronize", "after device-to-host copy");
}

void copy_d2h_async(void* dst, DevicePtr src, size_t bytes, const Stream& s) {
  if (bytes == 0) return;
  enter(s.device);
  check(api().cuMemcpyDtoHAsync(dst, src, bytes, s.raw()), "cuMemcpyDtoHAsync_v2", bytes, " bytes");
}

void copy_d2d(DevicePtr dst, DevicePtr src, size_t bytes, const Stream& s) {
  if (bytes == 0) return;
  enter(s.device);
  check(api().cuMemcpyDtoDAsync(dst, src, bytes, s.raw()), "cuMemcpyDtoDAsync_v2", bytes, " bytes");
}

bool peer_access(int dev, int peer) {
  if (dev == peer) return true;
  DeviceState& d = device(dev);
  DeviceState& p = device(peer);
  std::lock_guard<std::mutex> lock(d.peer_mu);
  signed char& known = d.peer[size_t(peer)];
  if (known < 0) {
    int can = 0;
    check(api().cuDeviceCanAccessPeer(&can, d.dev, p.dev), "cuDeviceCanAccessPeer", "cuda:", dev,
          " -> cuda:", peer);
    if (can) {
      set_current(d.ctx);
      CUresult r = api().cuCtxEnablePeerAccess(p.ctx, 0);
      if (r != kPeerAccessAlreadyEnabled)
        check(r, "cuCtxEnablePeerAccess", "cuda:", dev, " -> cuda:", peer);
      // Pool allocations ignore peer access: each pool grants it itself (both ways, since the
      // copy engine of `dev` reads and writes both devices' memory).
      MemAccessDesc to_peer{kMemLocationDevice, dev, kMemAccessReadWrite};
      check(api().cuMemPoolSetAccess(p.pool, &to_peer, 1), "cuMemPoolSetAccess", "cuda:", dev,
            " -> pool of cuda:", peer);
      MemAccessDesc to_dev{kMemLocationDevice, peer, kMemAccessReadWrite};
      check(api().cuMemPoolSetAccess(d.pool, &to_dev, 1), "cuMemPoolSetAccess", "cuda:", peer,
            " -> pool of cuda:", dev);
    }
    known = can ? 1 : 0;
  }
  return known == 1;
}

void copy_peer(DevicePtr dst, int dst_dev, DevicePtr src, int src_dev, size_t bytes,
               const Stream& s) {
  if (bytes == 0) return;
  CUcontext dst_ctx = device(dst_dev).ctx, src_ctx = device(src_dev).ctx;
  enter(s.device);
  check(api().cuMemcpyPeerAsync(dst, dst_ctx, src, src_ctx, bytes, s.raw()), "cuMemcpyPeerAsync",
        bytes, " bytes cuda:", src_dev, " -> cuda:", dst_dev);
}

void memset_d8(DevicePtr dst, unsigned char value, size_t bytes, const Stream& s) {
  if (bytes == 0) return;
  enter(s.device);
  check(api().cuMemsetD8Async(dst, value, bytes, s.raw()), "cuMemsetD8Async", bytes, " bytes");
}

Module::Module(int dev, const void* image) : dev_(dev) {
  LOOM_CHECK(image, Value, "Module: null cubin image");
  const DeviceProps& p = enter(dev).props;
  check(api().cuModuleLoadData(&mod_, image), "cuModuleLoadData", "device ", dev, " (sm_",
        p.cc_major, p.cc_minor, ")");
}

Module::Module(Module&& o) noexcept : dev_(o.dev_), mod_(o.mod_) { o.mod_ = nullptr; }

Module& Module::operator=(Module&& o) noexcept {
  if (this != &o) {
    reset();
    dev_ = o.dev_;
    mod_ = o.mod_;
    o.mod_ = nullptr;
  }
  return *this;
}

Module::~Module() { reset(); }

void Module::reset() {
  if (!mod_) return;
  try {
    enter(dev_);
  } catch (...) {
  }
  api().cuModuleUnload(mod_);  // error ignored: runs from destructors
  mod_ = nullptr;
}

Function get_function(Module& m, const char* name) {
  LOOM_CHECK(m.raw(), Value, "get_function(", name, "): module not loaded");
  enter(m.device());
  CUfunction f = nullptr;
  check(api().cuModuleGetFunction(&f, m.raw(), name), "cuModuleGetFunction", "kernel ", name);
  return Function{m.device(), f};
}

void launch(const Function& f, Dim3 grid, Dim3 block, unsigned smem_bytes, const Stream& s,
            void** args) {
  LOOM_CHECK(f.handle, Value, "launch: null function");
  LOOM_CHECK(f.device == s.device, Value, "launch: kernel of device ", f.device,
             " on a stream of device ", s.device);
  enter(s.device);
  if (smem_bytes > kDefaultSmemLimit) {
    check(api().cuFuncSetAttribute(f.handle, kFuncAttrMaxDynamicSmem, int(smem_bytes)),
          "cuFuncSetAttribute", "max dynamic shared memory ", smem_bytes, " bytes");
  }
  check(api().cuLaunchKernel(f.handle, grid.x, grid.y, grid.z, block.x, block.y, block.z,
                             smem_bytes, s.raw(), args, nullptr),
        "cuLaunchKernel", "grid (", grid.x, ",", grid.y, ",", grid.z, ") block (", block.x, ",",
        block.y, ",", block.z, ") smem ", smem_bytes);
}

namespace fault {
void fail_next_alloc() { g_fail_next_alloc = true; }
void fail_allocs_above(size_t bytes) { g_alloc_limit = bytes; }
}  // namespace fault

}  // namespace loom::cuda
