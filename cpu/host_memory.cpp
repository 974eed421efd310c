#include "cpu/host_memory.h"

#include <sys/mman.h>

#include <algorithm>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define LOOM_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define LOOM_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define LOOM_POISON(p, n) ((void)(p), (void)(n))
#define LOOM_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

namespace loom::cpu {

namespace {
char* addr(uintptr_t a) { return reinterpret_cast<char*>(a); }
}  // namespace

bool HostMemory::map_chunk(size_t at_least) {
  // Aligned to a huge page (mapped with one to spare, the ends trimmed), and asked to be backed
  // by huge pages: a walk down a column of a row-major matrix touches a new 4 KiB page every
  // row, and with small pages each is a TLB miss the hardware prefetchers do not cross.
  const size_t bytes = std::max(kChunk, (at_least + kHugePage - 1) / kHugePage * kHugePage);
  void* m =
      mmap(nullptr, bytes + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return false;
  const uintptr_t raw = reinterpret_cast<uintptr_t>(m);
  const uintptr_t base = (raw + kHugePage - 1) / kHugePage * kHugePage;
  if (base > raw) munmap(m, base - raw);
  munmap(addr(base + bytes), raw + kHugePage - base);
  madvise(addr(base), bytes, MADV_HUGEPAGE);  // a hint: failure changes nothing
  LOOM_POISON(addr(base), bytes);
  arena_.add(base, bytes);
  mapped_ += bytes;
  return true;
}

void* HostMemory::alloc(size_t bytes) {
  const size_t n = round(bytes);
  std::lock_guard<std::mutex> l(m_);
  if (n <= kSmall) {
    auto it = small_.find(n);
    if (it != small_.end() && !it->second.empty()) {
      void* q = it->second.back();
      it->second.pop_back();
      small_bytes_ -= n;
      LOOM_UNPOISON(q, bytes);
      return q;
    }
  }
  uintptr_t p = arena_.take(n);
  if (!p && map_chunk(n)) p = arena_.take(n);
  if (!p) {  // no address space: give the free pages back and try once more
    trim(0);
    p = arena_.take(n);
    if (!p && map_chunk(n)) p = arena_.take(n);
  }
  if (!p) return nullptr;
  LOOM_UNPOISON(addr(p), bytes);
  return addr(p);
}

void HostMemory::free(void* p, size_t bytes) {
  const size_t n = round(bytes);
  LOOM_POISON(p, n);
  std::lock_guard<std::mutex> l(m_);
  if (n <= kSmall && small_bytes_ + n <= kSmallKept) {
    small_[n].push_back(p);
    small_bytes_ += n;
  } else {
    arena_.give(reinterpret_cast<uintptr_t>(p), n);
  }
  if (resident_free() > keep_) trim(keep_);
}

// The small lists go back into the arena first (merged there, they may serve any size), then
// the arena's free ranges give pages back until at most `keep` bytes stay resident.
void HostMemory::trim(size_t keep) {
  for (auto& [n, blocks] : small_)
    for (void* b : blocks) arena_.give(reinterpret_cast<uintptr_t>(b), n);
  small_.clear();
  small_bytes_ = 0;
  arena_.trim(keep, [](uintptr_t a, size_t b) { madvise(addr(a), b, MADV_DONTNEED); });
}

void HostMemory::release_free() {
  std::lock_guard<std::mutex> l(m_);
  trim(0);
}

}  // namespace loom::cpu
