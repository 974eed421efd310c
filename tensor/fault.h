#pragma once
// Fault injection for tests: make the next allocation or the next kernel lowering fail, to
// check that loom raises a clear error or falls back and that no tensor is lost.
// (The CUDA layer has its own hooks in cuda/driver.h, cuda/nvrtc.h, cuda/disk_cache.h.)
namespace loom::fault {

void fail_next_alloc();  // the next loom::allocate throws ErrorKind::Memory
void fail_next_lower();  // the next kernel lowering throws (the flush falls back to unfused)
bool take_alloc();       // consumed by allocate()
bool take_lower();       // consumed by the kernel cache

}  // namespace loom::fault
