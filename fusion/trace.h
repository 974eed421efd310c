#pragma once
// Per-stream traces of pending nodes, and the flush that runs them.
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ops/node.h"

namespace loom {

struct Group;

std::recursive_mutex& runtime_mutex();

// Records a node on its device's current stream; returns its pending storage.
// May flush first when the trace reaches its length or pending-memory limit.
std::shared_ptr<Storage> record(std::shared_ptr<Node> n);
// A buffer whose current storage is pending: a root candidate of the next flush.
void track(const std::shared_ptr<Buffer>& b, Device d);
// Runs everything pending on the device's trace (a sync point).
void flush(Device d);
// Flushes if `st` is pending; afterwards it holds memory.
void ensure_ready(const std::shared_ptr<Storage>& st);

// The pending-memory limit bounds what lazy execution holds beyond eager mode: ready storages
// kept alive by pending nodes (inputs and old versions the user may have dropped). Results
// and intermediates are not counted: dead ones are never allocated and live ones would be
// held by eager mode too, so counting them would only split fusible work (a chain over 1 GB
// tensors flushed every two ops).
struct TraceLimits {
  int64_t max_nodes = 4096;       // LOOM_MAX_TRACE
  int64_t max_pending_bytes = 0;  // LOOM_MAX_PENDING_BYTES; 0: a quarter of the device's memory
};
TraceLimits& trace_limits();

// The groups a flush would make for the work `st` needs, with signatures (nothing runs).
std::vector<Group> plan_storage(const std::shared_ptr<Storage>& st);
// The same as text, with each group's lowered program or source.
std::string explain_storage(const std::shared_ptr<Storage>& st);

// Pending nodes recorded on the device's trace since its last flush.
int64_t pending_nodes(Device d);

bool log_fusion();  // LOOM_LOG=fusion, or set_log_fusion(true)
void set_log_fusion(bool on);

}  // namespace loom
