#pragma once
// Fault injection for tests: make allocations or the next kernel lowering fail, to check that
// loom raises a clear error or falls back and that no tensor is lost.
// (The CUDA layer has its own hooks in cuda/driver.h, cuda/nvrtc.h, cuda/disk_cache.h.)
#include <cstddef>

namespace loom::fault {

void fail_next_alloc();  // the next loom::allocate throws ErrorKind::Memory
// The allocation after the next `n` succeed throws ErrorKind::Memory (n = 0: the next one),
// once; a negative n cancels it.
void fail_alloc_after(long n);
// Every loom::allocate of more than `bytes` throws ErrorKind::Memory, until
// fail_allocs_above(0): a device with little memory, where small allocations still succeed.
void fail_allocs_above(size_t bytes);
void fail_next_lower();         // the next kernel lowering throws (the flush falls back to unfused)
bool take_alloc(size_t bytes);  // consumed by allocate(): true when this allocation fails
bool take_lower();              // consumed by the kernel cache

}  // namespace loom::fault
