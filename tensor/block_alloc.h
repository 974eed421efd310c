#pragma once
// BlockAlloc: an allocator for the small objects every recorded op makes (nodes, buffers,
// storages), keeping freed blocks in a free list per thread and block size. A flush frees a
// trace's objects in bulk and the next ops allocate as many again; malloc's per-thread cache
// holds 7 blocks a size, so the rest went through its arena lock, which once oneTBB's
// threads exist is taken on every call (about half the time of a tiny op).
#include <cstddef>
#include <new>
#include <vector>

namespace loom {

namespace detail {

template <size_t Size>
struct BlockList {
  static constexpr size_t kMax = 4096;  // blocks kept per thread and size
  std::vector<void*> free;
  BlockList() { free.reserve(kMax); }  // push_back never allocates
  ~BlockList();
};

// Set when this thread's lists are gone (thread exit): later frees go to the heap.
inline thread_local bool blocks_gone = false;

template <size_t Size>
BlockList<Size>::~BlockList() {
  blocks_gone = true;
  for (void* p : free) ::operator delete(p);
}

template <size_t Size>
BlockList<Size>& block_list() {
  thread_local BlockList<Size> l;
  return l;
}

}  // namespace detail

template <typename T>
struct BlockAlloc {
  using value_type = T;
  BlockAlloc() = default;
  template <typename U>
  BlockAlloc(const BlockAlloc<U>&) {}  // NOLINT: rebinding, as allocators do
  T* allocate(size_t n) {
    if (n == 1 && !detail::blocks_gone) {
      auto& l = detail::block_list<sizeof(T)>().free;
      if (!l.empty()) {
        void* p = l.back();
        l.pop_back();
        return static_cast<T*>(p);
      }
    }
    return static_cast<T*>(::operator new(n * sizeof(T)));
  }
  void deallocate(T* p, size_t n) {
    if (n == 1 && !detail::blocks_gone) {
      auto& l = detail::block_list<sizeof(T)>().free;
      if (l.size() < detail::BlockList<sizeof(T)>::kMax) {
        l.push_back(p);
        return;
      }
    }
    ::operator delete(p);
  }
  template <typename U>
  bool operator==(const BlockAlloc<U>&) const {
    return true;
  }
};

}  // namespace loom
