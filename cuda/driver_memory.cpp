// Device and pinned host memory of the driver wrapper (cuda/driver.h): the stream-ordered pool,
// copies, peer access, and the allocation fault hooks.
#include <atomic>
#include <cstdio>
#include <mutex>
#include <string>

#include "cuda/driver.h"
#include "cuda/driver_api.h"
#include "tensor/error.h"

namespace loom::cuda {

using namespace driver_impl;

namespace {

std::atomic<bool> g_fail_next_alloc{false};
std::atomic<size_t> g_alloc_limit{0};  // fault::fail_allocs_above; 0: none

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

}  // namespace

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

namespace fault {
void fail_next_alloc() { g_fail_next_alloc = true; }
void fail_allocs_above(size_t bytes) { g_alloc_limit = bytes; }
bool alloc_would_fail(size_t bytes) {
  size_t lim = g_alloc_limit.load(std::memory_order_relaxed);
  return g_fail_next_alloc || (lim && bytes > lim);
}
}  // namespace fault

}  // namespace loom::cuda
