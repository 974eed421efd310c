#include "tensor/storage.h"

#include <cstdlib>
#include <new>

#include "tensor/counters.h"
#include "tensor/backend.h"
#include "tensor/block_alloc.h"
#include "tensor/error.h"
#include "tensor/fault.h"
#include "tensor/stream_work.h"

namespace loom {

Memory::~Memory() {
  bool foreign = bool(deleter);
  if (ptr || foreign) backend(device).release(*this);
  if (!foreign) counters().bytes_live.fetch_sub(int64_t(bytes));
}

void Memory::add_user(const StreamRef& s) {
  if (s.id == stream.id) return;
  for (auto& u : users)
    if (u.id == s.id) return;
  users.push_back(s);
}

std::shared_ptr<Memory> allocate(Device device, size_t bytes) {
  // The message reads like a real failure's, which a flush extends with what it was for.
  LOOM_CHECK(!fault::take_alloc(bytes), Memory, device.str(),
             ": out of memory (injected fault) allocating ", bytes, " bytes");
  void* p = backend(device).alloc(bytes);
  auto live = counters().bytes_live.fetch_add(int64_t(bytes)) + int64_t(bytes);
  auto peak = counters().bytes_peak.load();
  while (live > peak && !counters().bytes_peak.compare_exchange_weak(peak, live)) {
  }
  // From the per-thread free lists like storages (a fusion-off flush makes one a kernel).
  auto m = std::allocate_shared<Memory>(BlockAlloc<Memory>(), p, bytes, device);
  if (!is_host(device)) m->stream = active_stream(device);
  return m;
}

uint64_t next_mark_epoch() {
  static std::atomic<uint64_t> e{1};
  return e++;
}

// Unique, increasing within a thread: each thread takes ids in blocks (a locked add per
// recorded node was a tenth of record()).
uint64_t next_storage_id() {
  static std::atomic<uint64_t> n{1};
  constexpr uint64_t kBlock = 1024;
  thread_local uint64_t next = 0, end = 0;
  if (next == end) next = n.fetch_add(kBlock, std::memory_order_relaxed), end = next + kBlock;
  return next++;
}

namespace {
std::atomic<StreamWorkHandler> g_stream_work{nullptr};
}  // namespace

void set_stream_work_handler(StreamWorkHandler h) { g_stream_work.store(h); }
void note_stream_work(const StreamRef& s) {
  if (auto h = g_stream_work.load(std::memory_order_relaxed)) h(s);
}

std::shared_ptr<Storage> make_ready_storage(Device d, size_t nbytes) {
  auto s = std::make_shared<Storage>();
  s->device = d;
  s->nbytes = nbytes;
  s->mem = allocate(d, nbytes);
  s->id = next_storage_id();
  s->stream = active_stream(d).id;  // the caller writes it on that stream
  note_stream_work(active_stream(d));
  return s;
}

}  // namespace loom
