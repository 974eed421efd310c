#pragma once
// RuntimeLock: holds the runtime mutex (fusion/trace.h), counting this thread's nested holds
// itself so that an inner hold is a thread-local increment. An op entry holds it around the
// records and tracking of one op (a Const, casts, the node, its buffer): relocking the
// recursive mutex there cost about as much as the first lock, five times an op.
#include <mutex>

namespace loom {

std::recursive_mutex& runtime_mutex();

namespace detail {
inline thread_local int runtime_lock_depth = 0;  // RuntimeLock holds of this thread
}

class RuntimeLock {
 public:
  // A thread that holds the mutex through a plain lock_guard (depth 0) locks it again:
  // correct, only not the shortcut; depth > 0 always means this thread holds it.
  RuntimeLock() : own_(detail::runtime_lock_depth == 0) {
    if (own_) runtime_mutex().lock();
    ++detail::runtime_lock_depth;
  }
  ~RuntimeLock() {
    --detail::runtime_lock_depth;
    if (own_) runtime_mutex().unlock();
  }
  RuntimeLock(const RuntimeLock&) = delete;
  RuntimeLock& operator=(const RuntimeLock&) = delete;

 private:
  bool own_;
};

}  // namespace loom
