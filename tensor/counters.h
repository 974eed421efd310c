#pragma once
// Counters that tests and users read to see what loom did ("softmax ran as 1 kernel").
#include <atomic>
#include <cstdint>
#include <string>

namespace loom {

struct Counters {
  std::atomic<int64_t> flushes{0};
  std::atomic<int64_t> groups{0};        // groups planned
  std::atomic<int64_t> kernels{0};       // kernels run (fused groups and opaque ops)
  std::atomic<int64_t> cache_hits{0};    // in-memory signature cache
  std::atomic<int64_t> cache_misses{0};  // lowered (compiled) this process
  std::atomic<int64_t> disk_hits{0};
  std::atomic<int64_t> compiled_ahead{0};    // lowered from a cubin a flush compiled before it ran
  std::atomic<int64_t> kernel_evictions{0};  // least recently used kernels dropped
  std::atomic<int64_t> bytes_moved{0};       // bytes read by kernels plus bytes written
  std::atomic<int64_t> materialized{0};      // storages written to memory
  std::atomic<int64_t> nodes_recorded{0};
  std::atomic<int64_t> bytes_live{0};  // device + host memory held by loom
  std::atomic<int64_t> bytes_peak{0};
  std::atomic<int64_t> plan_hits{0};  // flushes whose groups came from the plan cache
  // Host time of flushes: planning (the plan cache's lookup or the planner) and running the
  // groups (CPU kernels, or GPU launches); the rest of a flush's time is the DAG walk and frees.
  std::atomic<int64_t> plan_ns{0};
  std::atomic<int64_t> run_ns{0};
  // Bytes of the tensors autograd nodes hold for their backward (live; not reset), counted
  // as torch's saved_tensors_hooks see them: every saved tensor's elements, parameters included.
  std::atomic<int64_t> saved_bytes{0};
  std::atomic<int64_t> saved_bytes_peak{0};  // reset to saved_bytes
  std::atomic<int64_t> col_kernels{
      0};  // CPU kernels run in the column layout (cpu/interp_cols.cpp)
};

Counters& counters();
void reset_counters();  // zeroes everything except bytes_live; bytes_peak := bytes_live
std::string counters_str();

}  // namespace loom
