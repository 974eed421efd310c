#pragma once
// Backend: what a device provides to the runtime. The CPU backend is always there; the
// CUDA backend registers itself when a driver and a GPU are found.
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "tensor/device.h"

namespace loom {

struct Group;

// A flush's work for Backend::prelower.
struct LowerAhead {
  std::vector<const Group*> groups;    // fused groups and epilogues the kernel cache lacks
  std::vector<const Group*> segments;  // the first group of each run of segments
  std::vector<const Group*> opaque;    // opaque groups (matmul, gather, scatter_add)
};
struct Node;
struct Memory;
struct Storage;

// A lowering may move up to this many elements of a leaf's pointer misalignment into its offset
// (the CUDA launcher aligns pointers for vector loads): the fuser picks 64-bit indexing for a
// group whose offsets could pass 2^31 with it.
inline constexpr int64_t kMaxAlignShift = 7;

// What a backend can do beyond lowering groups, asked by the op layer where it has a choice.
struct BackendCaps {
  bool scan = false;  // runs CumSum as its own kernel (else cumsum is recorded as a reduction)
  bool svd = false;   // runs Svdvals (else the op layer computes it on the host's backend)
  // Runs Gather and ScatterAdd as their own kernels (else the op layer records them as masked
  // reductions: quadratic in the indexed dim, but fusable and deterministic).
  bool gather = false;
  int gather_rank = 0;  // the most dims those kernels take (0: any)
  // Reads a Gather of one element a row (the index of size 1 along the one dim a reduction
  // group reduces: cross entropy's target logit) as a Row node of that group, from memory where
  // the gathered tensor lies, so the pick costs no kernel of its own.
  bool row_gather = false;
  // Runs a matmul's pointwise consumers as its epilogue (Group::epilogue, run_opaque_epilogue),
  // so the planner may put them in the matmul's group.
  bool matmul_epilogue = false;
  // Runs a costly pointwise body (exp, erf, division) inside a column reduction (a sum over
  // leading dims) as fast as in a pointwise kernel. Without it, a column reduction does not
  // take in the group of such a body whose values are written anyway (read by a matmul): it
  // reads them back, and the body runs in its pointwise kernel (a GELU backward and its bias
  // gradient).
  bool column_bodies = true;
  // Index leaves (iota) cost next to nothing inside a fused kernel, so an op may compare indices
  // over a whole shape rather than read a smaller tensor of the comparison through a broadcast
  // (a causal mask). The CPU interpreter fills int64 tiles of them element by element instead.
  bool cheap_index = false;
  // Runs a run of segments (fusion/segments.h) as one kernel (Kernel::run_segments); without
  // it the runtime runs each group on its own, as before.
  bool segments = false;
  // Does the slow part of lowering ahead, for a whole new flush at once (Backend::prelower);
  // without it the runtime skips gathering that flush's work.
  bool prelower = false;
  // Its BLAS takes one batch stride an operand (cuBLASLt): a batched matmul whose operand's
  // batch dims do not collapse into one stride would loop a launch per leftover batch index
  // (attention's heads cut from one projection: a GEMM per head), so the op layer copies that
  // operand contiguous first, one copy for one launch.
  bool gemm_one_batch_stride = false;
  // Sums a row group's values over its rows inside that group's kernel (GOutput::colsum): a
  // norm's weight and bias gradients in the kernel of dx, which reads x and dy anyway.
  bool column_sums = false;
  // > 0: column sums only in groups that reduce their trailing dims (rows, not a column
  // reduction, whose kernel could then no longer split its long columns), and of a Full value
  // (one a column) only where a row has at most this many elements; 0: anywhere.
  int64_t column_sum_cols = 0;
};

// A lowered group: built once per signature, run many times.
struct Kernel {
  virtual ~Kernel() = default;
  virtual void run(const Group& g) = 0;
  // Runs groups of this kernel's signature that read nothing another of them writes (the
  // runtime's horizontal fusion: an optimizer's update of each parameter, fusion/run_plan.cpp)
  // and returns how many kernels that took: by default one a group, in order.
  virtual int run_segments(const std::vector<const Group*>& gs) {
    for (const Group* g : gs) run(*g);
    return int(gs.size());
  }
  virtual std::string source() const = 0;  // the program or generated code, for explain()
};

struct Backend {
  virtual ~Backend() = default;
  virtual void* alloc(size_t bytes) = 0;
  virtual void free(void* p, size_t bytes) = 0;
  virtual void copy_from_host(void* dst, const void* src, size_t bytes) = 0;
  virtual void copy_to_host(void* dst, const void* src, size_t bytes) = 0;
  // A sync point reads `st` right after the flush that computes it (item, a host copy, a
  // deferred check's flag): called once the group writing it is submitted. A backend whose
  // work runs asynchronously marks that point (Storage::written), and copy_to_host_of then
  // waits for it alone: a training step's loss is read while its backward and update still run.
  virtual void mark_written(Storage& st) {}
  // copy_to_host of `bytes` at `src`, inside st's memory.
  virtual void copy_to_host_of(const Storage& st, void* dst, const void* src, size_t bytes) {
    copy_to_host(dst, src, bytes);
  }
  virtual void copy_within(void* dst, const void* src, size_t bytes) = 0;
  // Copies `bytes` of this device's memory at `src` into `dst` on device `to` (another device of
  // the same kind) without going through the host, as a sync point of the source stream (the
  // host waits for the copy). False: not possible here, the caller goes through the host.
  virtual bool copy_to_device(Device to, void* dst, const void* src, size_t bytes) { return false; }
  virtual std::unique_ptr<Kernel> lower(const Group& g) = 0;
  // What a flush of a plan not seen before is about to lower or run: a backend whose lowering
  // is slow (NVRTC) may do the slow part for all of it at once on worker threads, for lower()
  // and the runs to find. Best effort: whatever fails here is redone, and reported, there.
  virtual void prelower(const LowerAhead& work) {}
  virtual void run_opaque(const Group& g) = 0;  // matmul and friends
  // A matmul group with an epilogue (only where caps().matmul_epilogue): `epilogue` is
  // g.epilogue lowered by this backend. Every output of g has memory; C's leaf may not.
  virtual void run_opaque_epilogue(const Group& g, Kernel& epilogue);
  // Waits for all work of the device (every stream).
  virtual void synchronize() {}
  // Drops compiled code the backend keeps beside the signature cache (modules by source).
  virtual void drop_compiled() {}
  // Streams. Allocation, copies and kernels go to active_stream(device); these order work
  // between streams. Devices with only a default stream (the CPU) keep the defaults.
  // Frees `m` (its deleter for foreign memory): ordered on m.stream after every stream in
  // m.users has passed its work so far.
  virtual void release(Memory& m);
  // `waiter` waits (on the device, not the host) for everything submitted to `producer` so far.
  virtual void stream_wait(const StreamRef& waiter, const StreamRef& producer) {}
  // The host waits for everything submitted to `s`.
  virtual void synchronize_stream(const StreamRef& s) { synchronize(); }
  // A stream that was synchronized and that nothing refers to any more: drop what the
  // backend keeps for it (scratch memory).
  virtual void stream_retired(const StreamRef& s) {}
  // Bytes of memory the device has (0: unknown); sizes the trace's pending-memory limit.
  virtual size_t memory_capacity() const { return 0; }
  virtual std::string name() const = 0;
  virtual BackendCaps caps() const { return {}; }
};

// The backend of `d`: the first call registers the backends this build holds.
Backend& backend(Device d);

// How a backend comes to exist. The tensor floor names none: each backend folder defines a
// registration function loom_register_backend_<folder>() that calls the functions below, and
// the build writes the list of them it compiled (register_builtin_backends, in the build tree's
// backends.cpp), which runs once, before the first backend is looked up.
void register_builtin_backends();
// One backend for every device of `kind` (the CPU; a test's stand-in device).
void register_backend(DeviceKind kind, Backend* b);
// A backend per device index, made by `for_index` on first use (CUDA: one per GPU, each with its
// context, streams and memory). `for_index` throws loom::Error for an index the machine lacks.
// A backend registered with register_backend takes precedence.
using BackendFactory = Backend& (*)(int index);
void register_backend_factory(DeviceKind kind, BackendFactory for_index);
// Devices that may be missing from the machine: `probe` runs once, on the first use of `kind`,
// and registers the backend (returning true) when the device is there.
using BackendProbe = bool (*)();
void register_backend_probe(DeviceKind kind, BackendProbe probe);
bool backend_available(DeviceKind kind);
// What d's backend can do; the defaults where no backend of d's kind is available.
inline BackendCaps device_caps(Device d) {
  return backend_available(d.kind) ? backend(d).caps() : BackendCaps{};
}

}  // namespace loom
