#pragma once
// The fuser's trace machinery shared by its three files: fusion/trace.cpp (the traces of the
// streams, recording, sync points), fusion/flush.cpp (one flush, and the work it leaves pending
// when memory runs out) and fusion/run_plan.cpp (running one flush's plan). Not an API.
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "fusion/node.h"
#include "tensor/device.h"
#include "tensor/error.h"
#include "tensor/storage.h"

namespace loom::trace_impl {

// Where the trace-length limit cuts. Cutting exactly at the limit starts each flushed trace
// of a loop at another phase of the loop body (limit mod body length): a new plan and new
// signatures every flush until all phases were seen. Instead, once over the limit, the cut
// waits (up to twice the limit) for a record that matches the one the previous limit cut
// was made at: the same op, dtype, rank and arity of it and of the three records before it.
// Sizes and values are left out, as in signatures. The pending-memory limit cuts at once.
struct LengthCut {
  uint64_t recent[3] = {0, 0, 0};  // keys of the last records, newest first
  uint64_t at = 0;                 // the window where the last limit cut was made
  bool has = false;
  static uint64_t mix(uint64_t h) {
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    return h ^ (h >> 29);
  }
  // Records `n` into the window; true when the trace (`nodes` long) should flush before it.
  bool before(const Node& n, int64_t nodes, int64_t limit) {
    uint64_t k = uint64_t(n.op) | uint64_t(n.dtype) << 16 | uint64_t(n.in.size()) << 24 |
                 uint64_t(n.shape.size()) << 32 | uint64_t(n.base != nullptr) << 40;
    uint64_t w = mix(k ^ mix(recent[0] ^ mix(recent[1] ^ mix(recent[2] + 1))));
    recent[2] = recent[1], recent[1] = recent[0], recent[0] = k;
    if (nodes < limit) return false;
    if (has && w != at && nodes < 2 * limit) return false;
    at = w, has = true;
    return true;
  }
};

// A check deferred to the next sync point (fusion/checks.h).
struct DeferredCheck {
  std::shared_ptr<Buffer> flag;  // a 0-d bool: true when the check failed
  ErrorKind kind;
  std::string message;
};

struct Trace {
  StreamRef stream;  // keeps the stream alive while it has a trace
  std::vector<std::weak_ptr<Buffer>> buffers;
  // The previous flush's `buffers`, emptied: its capacity becomes the next trace's, so the
  // trace does not grow its list from nothing (8 reallocations for 100 ops) every flush.
  std::vector<std::weak_ptr<Buffer>> spare;
  int64_t nodes = 0;
  int64_t pinned_bytes = 0;  // ready storages pending nodes read (each once per epoch)
  // What a flush that ran out of memory left pending (hold_pending): the limits count from here.
  int64_t node_floor = 0, pinned_floor = 0;
  uint64_t epoch = 0;  // changes at every flush; 0: not started
  int64_t limit = -1;  // the automatic pending-memory limit, once known
  LengthCut cut;       // where the trace-length limit flushes
  // Cross-stream ordering: `submitted` changes whenever work is submitted to the stream;
  // `waited` holds, per producer stream, its `submitted` when this stream last waited on it
  // (a second wait with nothing new submitted in between is skipped).
  uint64_t submitted = 0;
  std::unordered_map<uint64_t, uint64_t> waited;
  // Deferred checks whose flags this trace computes (or computed), oldest first.
  std::vector<DeferredCheck> checks;
};

Trace& trace_for(const StreamRef& s);
Trace& cpu_trace();  // the CPU's one trace (recorded on every CPU op: a direct reference)
Trace* find_trace(Device d, uint64_t id);
std::vector<Trace*> all_traces();
bool& fusion_flag();
// Counts ready storage `s` (read by a pending node) in the trace's pinned bytes, once a flush.
inline void pin(Trace& tr, Storage* s) {
  if (s && !s->pending() && s->pin_epoch != tr.epoch) {
    s->pin_epoch = tr.epoch;
    tr.pinned_bytes += int64_t(s->nbytes);
  }
}

// Pending storages `roots` need, producers first.
std::vector<std::shared_ptr<Storage>> live_dag(const std::vector<std::shared_ptr<Storage>>& roots);

// Out of memory in a flush: the error (naming what it was for) and the storages the failed
// group would have computed, which stay pending. Caught by flush_trace; a loom::Error of kind
// Memory should it ever escape.
struct FlushOom : Error {
  FlushOom(const std::string& msg, std::vector<std::shared_ptr<Storage>> b)
      : Error(ErrorKind::Memory, msg), blocked(std::move(b)) {}
  std::vector<std::shared_ptr<Storage>> blocked;
};

// Memory that work left pending by a partial flush still reads (flush_trace): an in-place
// update of this flush must not take it over.
using KeepMemory = std::unordered_set<const Memory*>;

// Runs the flush of `roots` on `d` (fused when `fuse`), with its plan from the plan cache.
void run_pending(Device d, const std::vector<std::shared_ptr<Storage>>& roots, bool fuse,
                 const KeepMemory* keep);

// A group a flush could not run for want of memory: the error (naming the op and shape) and the
// storages it would have computed. They, and the work that needs them, stay pending; a flush
// runs all other work (flush_trace), and a sync point raises only when it needs what is left.
struct OomFailure {
  Error error;
  std::vector<std::shared_ptr<Storage>> blocked;
};
using Failures = std::vector<OomFailure>;  // empty: the flush ran everything

// Runs everything pending on `tr`; what could not run for memory stays pending, and the
// failures say why. `reads`: storages the sync point reads right after (Backend::mark_written).
[[nodiscard]] Failures flush_trace(Trace& tr, std::vector<const Storage*> reads = {});
// Of the flush running now: whether the sync point reads `st` right after it.
bool read_after_flush(const Storage* st);
// A sync point that needs everything: throws the first failure.
void raise_any(const Failures& f);
// A sync point that needs `st`: throws the failure `st` waits for, if it is still pending.
void raise_for(const Failures& f, const std::shared_ptr<Storage>& st);
// Pending storages of `tr` that a live tensor holds: the roots of its next flush.
std::vector<std::shared_ptr<Storage>> trace_roots(const Trace& tr);
// Reads the flags of `tr`'s checks that are computed, drops them, and throws the first failed
// one's error (fusion/checks.cpp). Called at sync points after the flush.
void raise_checks(Trace& tr);
// After `f`, may memory `m` be overwritten? Not while work left pending on `tr` reads it: then
// throws the failure that work waits for.
void raise_if_read(const Failures& f, const Trace& tr, const Memory* m);

}  // namespace loom::trace_impl
