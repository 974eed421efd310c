#include "tensor/fault.h"

#include <atomic>

namespace loom::fault {
namespace {
std::atomic<bool> lower_flag{false};
std::atomic<long> alloc_countdown{-1};  // allocations left before the one that fails; -1: none
std::atomic<size_t> alloc_limit{0};     // 0: no limit
}  // namespace

void fail_next_alloc() { alloc_countdown = 0; }
void fail_alloc_after(long n) { alloc_countdown = n < 0 ? -1 : n; }
void fail_allocs_above(size_t bytes) { alloc_limit = bytes; }
void fail_next_lower() { lower_flag = true; }

bool take_alloc(size_t bytes) {
  size_t limit = alloc_limit.load(std::memory_order_relaxed);
  if (limit && bytes > limit) return true;
  long n = alloc_countdown.load(std::memory_order_relaxed);
  while (n >= 0 && !alloc_countdown.compare_exchange_weak(n, n - 1)) {
  }
  return n == 0;
}

bool take_lower() { return lower_flag.exchange(false); }

}  // namespace loom::fault
