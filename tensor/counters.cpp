#include "tensor/counters.h"

#include <sstream>

namespace loom {

Counters& counters() {
  static Counters c;
  return c;
}

void reset_counters() {
  auto& c = counters();
  for (auto* a : {&c.flushes, &c.groups, &c.kernels, &c.cache_hits, &c.cache_misses, &c.disk_hits,
                  &c.compiled_ahead, &c.kernel_evictions, &c.plan_hits, &c.col_kernels,
                  &c.bytes_moved, &c.materialized, &c.nodes_recorded, &c.plan_ns, &c.run_ns})
    a->store(0);
  c.bytes_peak.store(c.bytes_live.load());
  c.saved_bytes_peak.store(c.saved_bytes.load());
}

std::string counters_str() {
  auto& c = counters();
  std::ostringstream os;
  os << "flushes=" << c.flushes << " groups=" << c.groups << " kernels=" << c.kernels
     << " cache_hits=" << c.cache_hits << " cache_misses=" << c.cache_misses
     << " disk_hits=" << c.disk_hits << " compiled_ahead=" << c.compiled_ahead
     << " kernel_evictions=" << c.kernel_evictions << " plan_hits=" << c.plan_hits
     << " col_kernels=" << c.col_kernels << " bytes_moved=" << c.bytes_moved
     << " materialized=" << c.materialized << " nodes=" << c.nodes_recorded
     << " plan_ns=" << c.plan_ns << " run_ns=" << c.run_ns << " bytes_live=" << c.bytes_live
     << " bytes_peak=" << c.bytes_peak << " saved_bytes=" << c.saved_bytes
     << " saved_bytes_peak=" << c.saved_bytes_peak;
  return os.str();
}

}  // namespace loom
