#pragma once
// Per-stream traces of pending nodes, and the flush that runs them. Ops record into the trace of
// their device's current stream (tensor/device.h); flushing one stream's trace leaves the others
// pending. A node that touches a storage another stream produced, or memory another stream uses,
// flushes that stream's trace and waits for it on the device (an event), never racing it.
//
// Out of memory in a flush: the groups already run keep their results; the result that could not
// get memory (all of a group's results when a kernel's own scratch could not), and the work that
// needs it, stay pending; all other work of the trace runs. The error (ErrorKind::Memory) names
// the op, shape and dtype the memory was for. A sync point raises it only when it needs the work
// left pending: one that names a storage (ensure_ready: item, host copies, printing; an op on
// another stream reading it, which raises at record then) raises only when that storage could
// not be computed; one that needs everything (flush, sync, a stream's synchronize, events)
// raises while anything is left. A flush at record time for the trace's limits never raises it
// (the recording op needs nothing computed). The next flush retries what was left, so freeing
// memory (dropping tensors) lets it run.
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "fusion/node.h"

namespace loom {

struct Group;

std::recursive_mutex& runtime_mutex();

// Records a node on its device's current stream; returns its pending storage.
// May flush first when the trace reaches its length or pending-memory limit.
std::shared_ptr<Storage> record(std::shared_ptr<Node> n);
// record(n) as the new current storage of buffer `b` (a fresh one nothing else holds), and `b`
// tracked (track()) on the same trace: what every op's result does, with one trace lookup.
void record_into(std::shared_ptr<Node> n, const std::shared_ptr<Buffer>& b);
// A buffer whose current storage is pending: a root candidate of the next flush.
void track(const std::shared_ptr<Buffer>& b, Device d);
// Runs everything pending on every stream of the device (a sync point; does not wait). Raises
// after running what it could when memory ran out for some of it.
void flush(Device d);
// Runs what is pending on one stream's trace; other streams stay pending.
void flush_stream(const StreamRef& s);
// flush_stream, then the host waits for everything submitted to the stream.
void synchronize_stream(const StreamRef& s);
// `waiter` waits on the device for all work of `producer` (its trace flushed first).
void wait_stream(const StreamRef& waiter, const StreamRef& producer);
// Flushes `st`'s stream if `st` is pending; afterwards it holds memory, and the active stream
// of its device is ordered after the stream that wrote it. Raises for memory only when `st`
// itself could not be computed (other work that could not stays pending).
void ensure_ready(const std::shared_ptr<Storage>& st);
// Testing only: false skips the cross-stream waits (a test shows a race then shows).
void set_stream_waits(bool on);
// The stream that computes (or computed) `st` (without a handle once that stream is retired).
StreamRef stream_of(const Storage& st);

// The pending-memory limit bounds what lazy execution holds beyond eager mode: ready storages
// kept alive by pending nodes (inputs and old versions the user may have dropped). Results
// and intermediates are not counted: dead ones are never allocated and live ones would be
// held by eager mode too, so counting them would only split fusible work (a chain over 1 GB
// tensors flushed every two ops).
struct TraceLimits {
  // trace_limits() starts from LOOM_MAX_TRACE and LOOM_MAX_PENDING_BYTES (tensor/knobs.h).
  int64_t max_nodes = 0;
  int64_t max_pending_bytes = 0;  // 0 or less: a quarter of the device's memory
};
TraceLimits& trace_limits();

// The groups a flush would make for the work `st` needs, with signatures (nothing runs).
std::vector<Group> plan_storage(const std::shared_ptr<Storage>& st);
// The same for several storages at once (each pending one a root, as live tensors are).
std::vector<Group> plan_storages(const std::vector<std::shared_ptr<Storage>>& roots);
// The same as text, with each group's lowered program or source.
std::string explain_storage(const std::shared_ptr<Storage>& st);

// Pending nodes of the trace of the device's current stream: those recorded since its last
// flush, and those a flush that ran out of memory left pending.
int64_t pending_nodes(Device d);
int64_t pending_nodes(const StreamRef& s);
// The streams of `d` that have a trace (the CPU: only its default stream, id 0). loom::sync()
// drops the traces of streams nothing refers to any more.
std::vector<uint64_t> trace_streams(Device d);

bool log_fusion();  // LOOM_LOG=fusion, or set_log_fusion(true)
void set_log_fusion(bool on);

}  // namespace loom
