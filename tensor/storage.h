#pragma once
// Storage: one version of a tensor's memory, either ready (memory holds the values) or
// pending (a Node of a stream's trace will compute it at the next flush).
// Buffer: what views share. In-place ops make a new Storage version and point the
// Buffer at it, so every view sees the update while readers recorded earlier keep
// reading the version they saw (eager order without copies in the common case).
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "tensor/device.h"
#include "tensor/dtype.h"

namespace loom {

struct Node;

// Raw device memory with its owner's deleter.
struct Memory {
  void* ptr = nullptr;
  size_t bytes = 0;
  Device device;
  // Foreign memory (from_external): called instead of the backend's free; not counted live.
  std::function<void()> deleter;
  // The stream the memory was allocated on (its free is ordered there), and the other streams
  // that have read or written it: the free waits for them (cross-stream use is never a race).
  StreamRef stream;
  std::vector<StreamRef> users;
  void add_user(const StreamRef& s);
  ~Memory();
  Memory(const Memory&) = delete;
  Memory& operator=(const Memory&) = delete;
  Memory(void* p, size_t b, Device d) : ptr(p), bytes(b), device(d) {}
};

// Allocates `bytes` on `device` (64-byte aligned on the CPU), ordered on the device's active
// stream. Throws on failure.
std::shared_ptr<Memory> allocate(Device device, size_t bytes);

struct Storage {
  Device device;
  size_t nbytes = 0;
  std::shared_ptr<Memory> mem;  // set once ready (or when materialized)
  std::shared_ptr<Node> node;   // the producer while pending
  uint64_t id = 0;              // for plans and logs
  // Scratch marks for the flush walking the DAG (under the runtime mutex): cheaper than
  // hash sets keyed by pointer.
  uint64_t mark_epoch = 0;
  int64_t mark = -1;
  // The trace epoch in which a pending node last pinned this (ready) storage.
  uint64_t pin_epoch = 0;
  // The stream whose trace computes this version (pending) or computed/wrote it (ready).
  uint64_t stream = 0;
  // A saved tensor of the autograd graph reads this version after the next one is written:
  // the next version never takes over its memory.
  bool kept = false;
  // The backend's marker of the point in its stream where the kernel writing this version ran
  // (Backend::mark_written, set where a sync point reads it right after the flush): the read
  // waits for that point alone, not for the flush's later work.
  std::shared_ptr<void> written;

  bool pending() const { return node != nullptr; }
  void* data() const { return mem ? mem->ptr : nullptr; }
};

struct Buffer {
  std::shared_ptr<Storage> cur;
  uint32_t version = 0;  // in-place writes so far (autograd's saved tensors check it)
  bool viewed = false;   // a view of it was taken (autograd: a write of a graph value raises)
};

std::shared_ptr<Storage> make_ready_storage(Device d, size_t nbytes);
uint64_t next_storage_id();
uint64_t next_mark_epoch();

}  // namespace loom
