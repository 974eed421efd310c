#pragma once
// Checks on values that only a kernel knows (an integer divisor's zero elements, a class index
// out of range), raised at the next sync point instead of syncing at the call. Reading a value
// at the call would flush the trace and wait for the device in the middle of a training step;
// a deferred check instead records its condition as a 0-d bool tensor computed with the rest of
// the trace, and the host reads it once that work has run.
//
// When a check's flag is true, the first sync point after the work that computes it ran
// (ensure_ready: item, host copies, printing; flush, sync, a stream's synchronize) raises its
// error, once, naming the op and the shapes; the results already computed stay valid and a
// retry of the sync point goes on. A flush for the trace's limits runs the work but raises
// nothing (the recording op needs no value). The checked op's own result holds what its kernel
// defines for the bad elements (prims.h: 0 for an integer division by zero).
#include <memory>
#include <string>

#include "tensor/error.h"
#include "tensor/storage.h"

namespace loom {

// `flag`'s current storage is a 0-d bool, pending on its device's current stream or ready:
// true means the check failed. The check holds `flag`, so the next flush computes it.
void defer_check(std::shared_ptr<Buffer> flag, ErrorKind kind, std::string message);

// The flag of a check not yet read with this kind and message on the trace of d's current
// stream, taken off its list (null if none). A loop that records the same check every step and
// reaches a sync point rarely would otherwise keep a flag a step: the op layer ORs the taken
// flag into the new one (ops/checks.cpp), so the list holds one check per kind of failure.
std::shared_ptr<Buffer> take_check(Device d, ErrorKind kind, const std::string& message);

// Checks registered and not yet read, over every stream (for tests and logs).
int64_t pending_checks();

}  // namespace loom
