#pragma once
// Internal to the driver wrapper (cuda/driver*.cpp): the driver API through dlopen/dlsym. We
// declare the handful of signatures ourselves instead of including <cuda.h>, so loom builds
// without a CUDA toolkit. Versioned symbols (`_v2`) are named explicitly because the unversioned
// exports keep their old ABI for old binaries.
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cuda/driver.h"
#include "tensor/error.h"

namespace loom::cuda::driver_impl {

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

// The process's driver, opened on first use (driver.cpp).
Driver& drv();
inline const Api& api() { return drv().api; }
std::string result_name(const Api& api, CUresult r);

template <typename... Ctx>
void check(CUresult r, const char* call, const Ctx&... ctx) {
  if (r == kSuccess) return;
  std::string msg = std::string(call) + " failed: " + result_name(api(), r);
  if constexpr (sizeof...(ctx) > 0) msg += " [" + detail::cat(ctx...) + "]";
  throw Error(r == kOutOfMemory ? ErrorKind::Memory : ErrorKind::Runtime, msg);
}

void set_current(CUcontext ctx);
// The device's state, initialized on first use; throws for a bad index or no driver.
DeviceState& device(int dev);
// The device's state with its context current on this thread.
DeviceState& enter(int dev);

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

}  // namespace loom::cuda::driver_impl
