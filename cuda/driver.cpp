// The driver wrapper's core: opening libcuda, devices and their contexts, modules and launches.
// Streams and events are in driver_streams.cpp, memory in driver_memory.cpp.
#include "cuda/driver.h"

#include <dlfcn.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <type_traits>

#include "cuda/call_times.h"
#include "cuda/driver_api.h"
#include "tensor/error.h"
#include "tensor/knobs.h"

namespace loom::cuda {
namespace driver_impl {

namespace {

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

void require() { LOOM_CHECK(drv().ok, Runtime, "CUDA is unavailable: ", drv().reason); }

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

}  // namespace

std::string result_name(const Api& api, CUresult r) {
  const char* name = nullptr;
  const char* desc = nullptr;
  if (api.cuGetErrorName) api.cuGetErrorName(r, &name);
  if (api.cuGetErrorString) api.cuGetErrorString(r, &desc);
  std::string s = name ? name : "CUresult " + std::to_string(r);
  if (desc) s += std::string(" (") + desc + ")";
  return s;
}

// Leaked on purpose: stream/event/module destructors of static objects may run after a function-
// local static would have been destroyed.
Driver& drv() {
  static Driver* d = open_driver();
  return *d;
}

void set_current(CUcontext ctx) {
  CUcontext cur = nullptr;
  check(api().cuCtxGetCurrent(&cur), "cuCtxGetCurrent");
  if (cur != ctx) check(api().cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
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

DeviceState& enter(int dev) {
  DeviceState& s = device(dev);
  set_current(s.ctx);
  return s;
}

}  // namespace driver_impl

using namespace driver_impl;

bool is_available() { return drv().ok; }
std::string unavailable_reason() { return drv().ok ? "" : drv().reason; }
int device_count() { return drv().count; }

const DeviceProps& properties(int dev) { return device(dev).props; }

void ensure_context(int dev) { enter(dev); }

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

}  // namespace loom::cuda
