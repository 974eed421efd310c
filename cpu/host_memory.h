// Host memory for tensors: chunks mapped from the system once and cut by best fit (a
// RangeArena), so that what a step frees serves the next step's blocks of any size without a
// page fault, and resident memory stays near the live peak.
#pragma once

#include <cstddef>
#include <mutex>

#include "tensor/range_arena.h"

namespace loom::cpu {

class HostMemory {
 public:
  // Freed bytes kept resident for reuse, beyond which free ranges go back to the system.
  explicit HostMemory(size_t keep) : keep_(keep) {}
  // At least `bytes` (a multiple of kPage, page aligned), or nullptr when the system has none.
  void* alloc(size_t bytes);
  void free(void* p, size_t bytes);
  // Gives every free range's pages back (the address space stays mapped).
  void release_free();

  static constexpr size_t kPage = 4096, kHugePage = size_t(2) << 20;
  // A chunk's size: large requests map a chunk of their own size.
  static constexpr size_t kChunk = size_t(1) << 30;
  static size_t round(size_t bytes) {
    return (std::max<size_t>(bytes, 1) + kPage - 1) / kPage * kPage;
  }

  size_t mapped() const { return mapped_; }
  size_t resident_free() const { return arena_.resident_free(); }

 private:
  bool map_chunk(size_t at_least);
  std::mutex m_;
  RangeArena arena_;
  size_t keep_, mapped_ = 0;
};

}  // namespace loom::cpu
