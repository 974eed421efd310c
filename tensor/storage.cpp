#include "tensor/storage.h"

#include <cstdlib>
#include <new>

#include "fusion/counters.h"
#include "tensor/backend.h"
#include "tensor/error.h"
#include "tensor/fault.h"

namespace loom {

Memory::~Memory() {
  if (deleter) {
    deleter();
    return;
  }
  if (ptr) backend(device).free(ptr, bytes);
  counters().bytes_live.fetch_sub(int64_t(bytes));
}

std::shared_ptr<Memory> allocate(Device device, size_t bytes) {
  LOOM_CHECK(!fault::take_alloc(), Memory, device.str(), ": out of memory allocating ", bytes,
             " bytes (injected fault)");
  void* p = backend(device).alloc(bytes);
  auto live = counters().bytes_live.fetch_add(int64_t(bytes)) + int64_t(bytes);
  auto peak = counters().bytes_peak.load();
  while (live > peak && !counters().bytes_peak.compare_exchange_weak(peak, live)) {
  }
  return std::make_shared<Memory>(p, bytes, device);
}

uint64_t next_mark_epoch() {
  static std::atomic<uint64_t> e{1};
  return e++;
}

uint64_t next_storage_id() {
  static std::atomic<uint64_t> n{1};
  return n++;
}

std::shared_ptr<Storage> make_ready_storage(Device d, size_t nbytes) {
  auto s = std::make_shared<Storage>();
  s->device = d;
  s->nbytes = nbytes;
  s->mem = allocate(d, nbytes);
  s->id = next_storage_id();
  return s;
}

}  // namespace loom
