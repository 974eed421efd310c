// Host memory for tensors: chunks mapped from the system once and cut by best fit (a
// RangeArena), so that what a step frees serves the next step's blocks of any size without a
// page fault, and resident memory stays near the live peak. Small blocks (kSmall and below)
// come back first from lists by size, the last freed first: it is likely still in cache, and
// the lists skip the arena's tree walks (a small MLP's step ran 2% slower on one core without
// them); they hold little of a large step's memory (4 MB of the small GPT step's 126).
#pragma once

#include <algorithm>
#include <cstddef>
#include <mutex>
#include <unordered_map>
#include <vector>

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

  static constexpr size_t kPage = 4096, kHugePage = size_t(2) << 20, kSmall = size_t(256) << 10;
  // At most this much in the small lists: past it small blocks go back to the arena too, where
  // they merge and serve any size.
  static constexpr size_t kSmallKept = size_t(32) << 20;
  // A chunk's size: large requests map a chunk of their own size.
  static constexpr size_t kChunk = size_t(1) << 30;
  static size_t round(size_t bytes) {
    return (std::max<size_t>(bytes, 1) + kPage - 1) / kPage * kPage;
  }

  size_t mapped() const { return mapped_; }
  // Freed bytes that may be resident: in the small lists and in the arena's free ranges.
  size_t resident_free() const { return small_bytes_ + arena_.resident_free(); }

 private:
  bool map_chunk(size_t at_least);
  void trim(size_t keep);  // under m_
  std::mutex m_;
  RangeArena arena_;
  std::unordered_map<size_t, std::vector<void*>> small_;  // freed small blocks by size
  size_t small_bytes_ = 0;
  size_t keep_, mapped_ = 0;
};

}  // namespace loom::cpu
