// A stand-in libcuda.so.1 for checking loom's driver plumbing on machines without a GPU
// (scripts/mock_cuda_check.sh): MOCK_DEVICES devices (default 2) whose memory is host memory and
// whose copies are memcpy; kernels do not run. It enforces the context discipline real drivers
// do: a stream, event or allocation used while another device's context is current fails with
// CUDA_ERROR_INVALID_CONTEXT, so a missing cuCtxSetCurrent shows. MOCK_NO_PEER=1: no peer access.
// It counts created events, stream waits and peer copies for the check program to read, and every
// call of the driver entry points on a flush's path (mock_calls, by name; mock_count_names lists
// them) so a program can count driver calls per flush.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
typedef int CUresult;
enum { OK = 0, BAD = 1, CTX = 201, NOTREADY = 600 };
typedef struct {
  int ctx;
  int prio;
} Stream;
typedef struct {
  int ctx;
  int timing;
} Event;
static __thread int cur = 0;  // 1 + device
static int ctxs[2] = {1, 2};
int n_events_created = 0, n_stream_waits = 0, n_peer_copies = 0, n_pool_access = 0;
static int ctx_of_stream(void* s) { return s ? ((Stream*)s)->ctx : cur; }
enum {
  C_LAUNCH,
  C_ALLOC,
  C_FREE,
  C_EVREC,
  C_WAIT,
  C_CTXSET,
  C_CTXGET,
  C_STSYNC,
  C_CTXSYNC,
  C_EVSYNC,
  C_MODLOAD,
  C_GETFN,
  C_FUNCATTR,
  C_H2D,
  C_D2H,
  C_D2D,
  C_MEMSET,
  C_EVCREATE,
  C_N
};
const char* mock_count_names[C_N + 1] = {"cuLaunchKernel",
                                         "cuMemAllocAsync",
                                         "cuMemFreeAsync",
                                         "cuEventRecord",
                                         "cuStreamWaitEvent",
                                         "cuCtxSetCurrent",
                                         "cuCtxGetCurrent",
                                         "cuStreamSynchronize",
                                         "cuCtxSynchronize",
                                         "cuEventSynchronize",
                                         "cuModuleLoadData",
                                         "cuModuleGetFunction",
                                         "cuFuncSetAttribute",
                                         "cuMemcpyHtoDAsync",
                                         "cuMemcpyDtoHAsync",
                                         "cuMemcpyDtoDAsync",
                                         "cuMemsetD8Async",
                                         "cuEventCreate",
                                         0};
unsigned long mock_calls[C_N];
#define COUNT(c) (mock_calls[c]++)
CUresult cuInit(unsigned f) { return OK; }
CUresult cuGetErrorName(CUresult r, const char** s) {
  *s = r == CTX ? "CUDA_ERROR_INVALID_CONTEXT" : "MOCK_ERROR";
  return OK;
}
CUresult cuGetErrorString(CUresult r, const char** s) {
  *s = "mock";
  return OK;
}
CUresult cuDeviceGetCount(int* n) {
  const char* e = getenv("MOCK_DEVICES");
  *n = e ? atoi(e) : 2;
  return OK;
}
CUresult cuDeviceGet(int* d, int o) {
  *d = o;
  return OK;
}
CUresult cuDeviceGetName(char* s, int n, int d) {
  snprintf(s, n, "Mock GPU %d", d);
  return OK;
}
CUresult cuDeviceGetAttribute(int* v, int a, int d) {
  *v = a == 75   ? 9
       : a == 76 ? 0
       : a == 16 ? 132
       : a == 1  ? 1024
       : a == 97 ? 232448
       : a == 38 ? 50 << 20
                 : 1;
  return OK;
}
CUresult cuDeviceTotalMem_v2(size_t* b, int d) {
  *b = (size_t)1 << 34;
  return OK;
}
CUresult cuDevicePrimaryCtxRetain(void** c, int d) {
  *c = &ctxs[d];
  return OK;
}
CUresult cuCtxGetCurrent(void** c) {
  COUNT(C_CTXGET);
  *c = cur ? &ctxs[cur - 1] : 0;
  return OK;
}
CUresult cuCtxSetCurrent(void* c) {
  COUNT(C_CTXSET);
  cur = c ? *(int*)c : 0;
  return OK;
}
CUresult cuCtxSynchronize(void) {
  COUNT(C_CTXSYNC);
  return cur ? OK : CTX;
}
CUresult cuStreamCreate(void** s, unsigned f) {
  Stream* st = malloc(sizeof *st);
  st->ctx = cur;
  st->prio = 0;
  *s = st;
  return cur ? OK : CTX;
}
CUresult cuStreamCreateWithPriority(void** s, unsigned f, int p) {
  Stream* st = malloc(sizeof *st);
  st->ctx = cur;
  st->prio = p < -5 ? -5 : p > 0 ? 0 : p;
  *s = st;
  return cur ? OK : CTX;
}
CUresult cuStreamGetPriority(void* s, int* p) {
  *p = ((Stream*)s)->prio;
  return OK;
}
CUresult cuCtxGetStreamPriorityRange(int* l, int* g) {
  *l = 0;
  *g = -5;
  return cur ? OK : CTX;
}
CUresult cuDeviceCanAccessPeer(int* c, int d, int p) {
  *c = getenv("MOCK_NO_PEER") ? 0 : 1;
  return OK;
}
CUresult cuCtxEnablePeerAccess(void* p, unsigned f) { return cur && *(int*)p != cur ? OK : CTX; }
CUresult cuMemcpyPeerAsync(uint64_t d, void* dc, uint64_t s, void* sc, size_t n, void* st) {
  if (ctx_of_stream(st) != cur) return CTX;
  n_peer_copies++;
  memcpy((void*)d, (void*)s, n);
  return OK;
}
CUresult cuMemPoolSetAccess(void* pool, const int* desc, size_t n) {
  n_pool_access++;
  return OK;
}
CUresult cuStreamDestroy_v2(void* s) { return ctx_of_stream(s) == cur ? (free(s), OK) : CTX; }
CUresult cuStreamSynchronize(void* s) {
  COUNT(C_STSYNC);
  return ctx_of_stream(s) == cur ? OK : CTX;
}
CUresult cuStreamQuery(void* s) { return ctx_of_stream(s) == cur ? OK : CTX; }
CUresult cuStreamWaitEvent(void* s, void* e, unsigned f) {
  COUNT(C_WAIT);
  n_stream_waits++;
  return ctx_of_stream(s) == cur ? OK : CTX;
}
CUresult cuEventCreate(void** e, unsigned f) {
  COUNT(C_EVCREATE);
  Event* ev = malloc(sizeof *ev);
  ev->ctx = cur;
  ev->timing = !(f & 2);
  *e = ev;
  n_events_created++;
  return cur ? OK : CTX;
}
CUresult cuEventRecord(void* e, void* s) {
  COUNT(C_EVREC);
  return ((Event*)e)->ctx == ctx_of_stream(s) && ctx_of_stream(s) == cur ? OK : CTX;
}
CUresult cuEventSynchronize(void* e) {
  COUNT(C_EVSYNC);
  return OK;
}
CUresult cuEventQuery(void* e) { return OK; }
CUresult cuEventElapsedTime_v2(float* ms, void* a, void* b) {
  *ms = 0.5f;
  return OK;
}
CUresult cuEventDestroy_v2(void* e) {
  free(e);
  return OK;
}
CUresult cuDeviceGetDefaultMemPool(void** p, int d) {
  *p = &ctxs[d];
  return OK;
}
CUresult cuMemPoolSetAttribute(void* p, int a, void* v) { return OK; }
CUresult cuMemPoolTrimTo(void* p, size_t n) { return OK; }
// Freed blocks are kept for reuse like the driver's pool (a real free and allocation a call
// page-faulted enough to hide loom's own time in `perf record`). Sizes live in a header. New
// blocks start zeroed: kernels do not run here, and the flags of deferred checks (an index out
// of range) that they would have written read as "no error" rather than as whatever the heap held.
#define POOL 256
static void* pool[POOL];
static int pool_n = 0;
CUresult cuMemAllocAsync(uint64_t* p, size_t n, void* s) {
  COUNT(C_ALLOC);
  if (ctx_of_stream(s) != cur) return CTX;
  size_t bytes = (n + 255) / 256 * 256 + 256;
  for (int i = pool_n - 1; i >= 0; --i)
    if (*(size_t*)pool[i] == bytes) {
      *p = (uint64_t)(uintptr_t)((char*)pool[i] + 256);
      pool[i] = pool[--pool_n];
      return OK;
    }
  char* b = aligned_alloc(256, bytes);
  memset(b, 0, bytes);
  *(size_t*)b = bytes;
  *p = (uint64_t)(uintptr_t)(b + 256);
  return OK;
}
CUresult cuMemFreeAsync(uint64_t p, void* s) {
  COUNT(C_FREE);
  if (ctx_of_stream(s) != cur) return CTX;
  char* b = (char*)(uintptr_t)p - 256;
  if (pool_n < POOL)
    pool[pool_n++] = b;
  else
    free(b);
  return OK;
}
CUresult cuMemGetInfo_v2(size_t* f, size_t* t) {
  *f = *t = (size_t)1 << 34;
  return OK;
}
CUresult cuMemHostAlloc(void** p, size_t n, unsigned f) {
  *p = malloc(n);
  return cur ? OK : CTX;
}
CUresult cuMemFreeHost(void* p) {
  free(p);
  return OK;
}
CUresult cuMemcpyHtoDAsync_v2(uint64_t d, const void* s, size_t n, void* st) {
  COUNT(C_H2D);
  if (ctx_of_stream(st) != cur) return CTX;
  memcpy((void*)d, s, n);
  return OK;
}
CUresult cuMemcpyDtoHAsync_v2(void* d, uint64_t s, size_t n, void* st) {
  COUNT(C_D2H);
  if (ctx_of_stream(st) != cur) return CTX;
  memcpy(d, (void*)s, n);
  return OK;
}
CUresult cuMemcpyDtoDAsync_v2(uint64_t d, uint64_t s, size_t n, void* st) {
  COUNT(C_D2D);
  if (ctx_of_stream(st) != cur) return CTX;
  memcpy((void*)d, (void*)s, n);
  return OK;
}
CUresult cuMemsetD8Async(uint64_t d, unsigned char v, size_t n, void* st) {
  COUNT(C_MEMSET);
  if (ctx_of_stream(st) != cur) return CTX;
  memset((void*)d, v, n);
  return OK;
}
CUresult cuModuleLoadData(void** m, const void* img) {
  COUNT(C_MODLOAD);
  *m = malloc(1);
  return cur ? OK : CTX;
}
CUresult cuModuleUnload(void* m) {
  free(m);
  return OK;
}
CUresult cuModuleGetFunction(void** f, void* m, const char* n) {
  COUNT(C_GETFN);
  *f = m;
  return OK;
}
CUresult cuFuncSetAttribute(void* f, int a, int v) {
  COUNT(C_FUNCATTR);
  return OK;
}
CUresult cuLaunchKernel(void* f, unsigned a, unsigned b, unsigned c, unsigned d, unsigned e,
                        unsigned g, unsigned sm, void* s, void** p, void** x) {
  COUNT(C_LAUNCH);
  return ctx_of_stream(s) == cur ? OK : CTX;
}
// NVRTC looks these up in an already loaded libcuda: refuse politely.
CUresult cuGetExportTable(const void** t, const void* id) {
  *t = 0;
  return 500;
}
CUresult cuGetProcAddress(const char* s, void** p, int v, unsigned long long f) {
  *p = 0;
  return 500;
}
CUresult cuGetProcAddress_v2(const char* s, void** p, int v, unsigned long long f, void* st) {
  *p = 0;
  return 500;
}
CUresult cuDriverGetVersion(int* v) {
  *v = 13000;
  return OK;
}
