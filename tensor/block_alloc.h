#pragma once
// BlockAlloc: an allocator for the small objects every recorded op makes (nodes, buffers,
// storages), keeping freed blocks in a free list per thread and block size. A flush frees a
// trace's objects in bulk and the next ops allocate as many again; malloc's per-thread cache
// holds 7 blocks a size, so the rest went through its arena lock, which once oneTBB's
// threads exist is taken on every call (about half the time of a tiny op).
#include <cstddef>
#include <cstdint>
#include <new>

namespace loom {

namespace detail {

// One block size's free blocks of this thread: an intrusive list (a free block holds the next
// one's address). Constant-initialized and trivially destructible, so a use is a plain
// thread-local access: the function-local thread_local list this replaces went through its
// guard and wrapper on every call, ~20 instructions each, six calls a recorded op.
struct FreeBlocks {
  void* head;
  uint32_t count;
  uint8_t state;  // 0: no reaper yet, 1: kept (the reaper frees them at thread exit), 2: gone
};

template <size_t Size>
inline thread_local constinit FreeBlocks free_blocks{nullptr, 0, 0};

inline constexpr uint32_t kMaxFreeBlocks = 4096;  // blocks kept per thread and size

// Frees this thread's blocks of one size when the thread exits; later frees of the thread go
// to the heap (other thread-local destructors may still drop objects).
template <size_t Size>
struct BlockReaper {
  ~BlockReaper() {
    FreeBlocks& f = free_blocks<Size>;
    f.state = 2;
    while (f.head) {
      void* next = *static_cast<void**>(f.head);
      ::operator delete(f.head);
      f.head = next;
    }
    f.count = 0;
  }
};

template <size_t Size>
[[gnu::noinline]] void start_keeping() {
  thread_local BlockReaper<Size> reaper;  // registers its destructor at first pass
  (void)reaper;
  free_blocks<Size>.state = 1;
}

}  // namespace detail

template <typename T>
struct BlockAlloc {
  using value_type = T;
  BlockAlloc() = default;
  template <typename U>
  BlockAlloc(const BlockAlloc<U>&) {}  // NOLINT: rebinding, as allocators do
  T* allocate(size_t n) {
    static_assert(sizeof(T) >= sizeof(void*), "a free block holds the next one's address");
    detail::FreeBlocks& f = detail::free_blocks<sizeof(T)>;
    if (n == 1 && f.head) {  // (empty unless kept: state 1)
      void* p = f.head;
      f.head = *static_cast<void**>(p);
      --f.count;
      return static_cast<T*>(p);
    }
    return static_cast<T*>(::operator new(n * sizeof(T)));
  }
  void deallocate(T* p, size_t n) {
    detail::FreeBlocks& f = detail::free_blocks<sizeof(T)>;
    if (n == 1 && f.state != 2 && f.count < detail::kMaxFreeBlocks) {
      if (f.state == 0) detail::start_keeping<sizeof(T)>();
      *reinterpret_cast<void**>(p) = f.head;
      f.head = p;
      ++f.count;
      return;
    }
    ::operator delete(p);
  }
  template <typename U>
  bool operator==(const BlockAlloc<U>&) const {
    return true;
  }
};

}  // namespace loom
