#include "fusion/trace.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <sstream>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "tensor/counters.h"
#include "fusion/kernel_cache.h"
#include "fusion/plan_cache.h"
#include "fusion/planner.h"
#include "fusion/runtime_lock.h"
#include "tensor/backend.h"
#include "tensor/block_alloc.h"
#include "tensor/stream_work.h"
#include "tensor/knobs.h"

namespace loom {
namespace {

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
};

using TraceKey = std::tuple<int, int, uint64_t>;  // device kind, device index, stream id

// Node-based: references to traces stay valid while others are added or erased.
std::map<TraceKey, Trace>& traces() {
  static auto* t = new std::map<TraceKey, Trace>();  // never destroyed: used at exit
  return *t;
}

TraceKey key_of(Device d, uint64_t id) { return {int(d.kind), d.index, id}; }

// The last GPU trace looked up (under the runtime mutex; cleared when sync() erases traces):
// a loop records on one stream, and two map lookups an op (record, track) were ~2% of it.
struct LastTrace {
  TraceKey key;
  Trace* tr = nullptr;
};
LastTrace& last_trace() {
  static LastTrace l;
  return l;
}

Trace& trace_for(const StreamRef& s) {
  LastTrace& last = last_trace();
  // Field by field: the tuple's comparison was most of this lookup, done every op.
  if (last.tr && std::get<2>(last.key) == s.id && std::get<1>(last.key) == s.device.index &&
      std::get<0>(last.key) == int(s.device.kind))
    return *last.tr;
  TraceKey k = key_of(s.device, s.id);
  auto [it, fresh] = traces().try_emplace(k);
  if (fresh) it->second.stream = s;
  last = {k, &it->second};
  return it->second;
}

// The CPU trace is looked up on every recorded op: keep a direct reference.
Trace& cpu_trace() {
  static Trace& cpu = trace_for(current_stream(kCPU));
  return cpu;
}

Trace* find_trace(Device d, uint64_t id) {
  if (is_host(d)) return &cpu_trace();
  TraceKey k = key_of(d, id);
  LastTrace& last = last_trace();
  if (last.tr && last.key == k) return last.tr;
  auto it = traces().find(k);
  if (it == traces().end()) return nullptr;
  last = {k, &it->second};
  return &it->second;
}

bool& fusion_flag() {
  static bool on = knob_flag(Knob::Fusion);
  return on;
}

bool& log_flag() {
  static bool on = knob_str(Knob::Log).find("fusion") != std::string::npos;
  return on;
}

// Pending storages `roots` need, producers first.
std::vector<std::shared_ptr<Storage>> live_dag(const std::vector<std::shared_ptr<Storage>>& roots) {
  std::vector<std::shared_ptr<Storage>> order;
  uint64_t epoch = next_mark_epoch();
  auto done = [&](const Storage* s) { return s->mark_epoch == epoch; };
  // (storage, next dependency to visit); dependencies are the inputs, then the base. The
  // stack points at the shared_ptrs the roots and nodes hold (alive during the walk): one
  // reference count increment a node, for `order` (the atomics of copies into the stack were
  // three quarters of the walk, itself the largest part of a memory hit's flush, issue 7).
  // The stack and the order's capacity outlive the walk: a chain of 200 ops grew the stack
  // from nothing (nine reallocations) and the order three times every flush.
  thread_local std::vector<std::pair<const std::shared_ptr<Storage>*, size_t>> stack;
  thread_local size_t last_size = 64;
  stack.clear();
  order.reserve(last_size);
  for (auto& r : roots) {
    if (!r->pending() || done(r.get())) continue;
    stack.push_back({&r, 0});
    while (!stack.empty()) {
      auto& [st, next] = stack.back();
      const Node& n = *(*st)->node;
      size_t ndeps = n.in.size() + (n.base ? 1 : 0);
      if (next < ndeps) {
        const auto& child = next < n.in.size() ? n.in[next].st : n.base;
        ++next;
        if (child && child->pending() && !done(child.get())) stack.push_back({&child, 0});
        continue;
      }
      if (!done(st->get())) {
        (*st)->mark_epoch = epoch;
        order.push_back(*st);
      }
      stack.pop_back();
    }
  }
  last_size = std::max(order.size(), size_t(64));
  return order;
}

int64_t group_bytes(const Group& g) {
  int64_t b = 0;
  for (auto& l : g.leaves) {
    if (!l.st) continue;
    int64_t n = 1;
    for (size_t d = 0; d < g.space.size(); ++d)
      if (l.strides[d] != 0) n *= g.space[d];
    b += n * int64_t(itemsize(l.dtype));
  }
  for (auto& o : g.outputs) {
    int64_t n = 1;
    for (size_t d = 0; d < g.space.size(); ++d)
      if (o.strides[d] != 0) n *= g.space[d];
    b += n * int64_t(itemsize(g.nodes[o.node].dtype));
  }
  return b;
}

// What a pending storage's node computes, for an out-of-memory message: "randn of shape [8]
// float32".
std::string what_computes(const Storage& st) {
  if (!st.node) return "a storage of " + std::to_string(st.nbytes) + " bytes";
  const Node& n = *st.node;
  std::string s =
      detail::cat(op_name(n.op), " of shape ", shape_str(n.shape), " ", dtype_name(n.dtype));
  if (n.base) s += detail::cat(" (written into a buffer of ", st.nbytes, " bytes)");
  return s;
}

// Out of memory in a flush: the error (naming what it was for) and the storages the failed
// group would have computed, which stay pending. Caught by flush_trace; a loom::Error of kind
// Memory should it ever escape.
struct FlushOom : Error {
  FlushOom(const std::string& msg, std::vector<std::shared_ptr<Storage>> b)
      : Error(ErrorKind::Memory, msg), blocked(std::move(b)) {}
  std::vector<std::shared_ptr<Storage>> blocked;
};

// Group `g` failed for memory (`e`): none of its outputs was computed, and those that got memory
// before the failure give it back now, not at the retry. When the failure was the allocation of
// output `st`, only `st` (and later what needs it) is blocked: the other outputs may run in a
// flush without it. Otherwise (memory a kernel needed) all of them are.
[[noreturn]] void group_oom(Group& g, const std::string& e, const std::shared_ptr<Storage>& st) {
  std::vector<std::shared_ptr<Storage>> blocked;
  for (auto& o : g.outputs)
    if (o.st->pending()) {
      o.st->mem.reset();
      if (!st) blocked.push_back(o.st);
    }
  if (st) blocked.push_back(st);
  std::string msg = e + " for " + what_computes(st ? *st : *g.outputs[0].st);
  throw FlushOom(msg, std::move(blocked));
}

void materialize(Device d, GOutput& o) {
  Storage& st = *o.st;
  if (o.alias && o.alias->mem) {
    st.mem = o.alias->mem;
    return;
  }
  st.mem = allocate(d, st.nbytes);
  if (o.init && o.init->mem) backend(d).copy_within(st.mem->ptr, o.init->mem->ptr, st.nbytes);
}

// Runs group `g`; `*at` is the output being materialized while that goes on, else null.
void run_group(Device d, Group& g, size_t gi, std::ostream* log, const GOutput** at) {
  auto materialize_all = [&] {
    for (auto& o : g.outputs) *at = &o, materialize(d, o);
    *at = nullptr;
  };
  if (g.opaque) {
    materialize_all();
    backend(d).run_opaque(g);
    if (log) *log << "  group " << gi << ": " << g.str();
  } else {
    if (!g.signature) g.signature = signature(g, d.kind);  // plan_cached sets it
    KernelLookup k = get_kernel(d, g);  // lower before touching memory: a failure loses nothing
    materialize_all();
    k.kernel->run(g);
    counters().bytes_moved += group_bytes(g);
    if (log)
      *log << "  group " << gi << " sig " << std::hex << g.signature << std::dec
           << (k.hit ? " hit" : " compile") << " " << k.lower_ms << " ms, " << g.rows()
           << " rows x " << g.cols() << " cols\n"
           << g.str();
  }
}

// Runs the groups in order. Out of memory stops at the group that met it (FlushOom): the groups
// before it keep their results, it and the ones after stay pending.
void run_groups(Device d, std::vector<Group>& groups, std::ostream* log) {
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    Group& g = groups[gi];
    counters().groups++;
    const GOutput* at = nullptr;
    try {
      run_group(d, g, gi, log, &at);
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::Memory) throw;
      group_oom(g, e.what(), at ? at->st : nullptr);
    } catch (const std::bad_alloc&) {  // host memory inside a kernel (scratch, a matmul's)
      group_oom(g, d.str() + ": out of memory (std::bad_alloc) in a kernel", nullptr);
    }
    counters().kernels++;
    for (auto& o : g.outputs) {
      o.st->node.reset();  // ready: releases the producer and what only it read
      counters().materialized++;
    }
  }
}

// Memory that work left pending by a partial flush still reads (flush_trace): an in-place
// update of this flush must not take it over.
using KeepMemory = std::unordered_set<const Memory*>;

void run_pending(Device d, const std::vector<std::shared_ptr<Storage>>& roots, bool fuse,
                 const KeepMemory* keep) {
  auto dag = live_dag(roots);
  // Empty storages (allocation only) that a live tensor holds get their memory now.
  for (auto& st : dag)
    if (prim_class(st->node->op) == PrimClass::Alloc) {
      try {
        st->mem = allocate(d, st->nbytes);
      } catch (const Error& e) {
        if (e.kind() != ErrorKind::Memory) throw;
        throw FlushOom(std::string(e.what()) + " for " + what_computes(*st), {st});
      }
    }
  int64_t plan_hits = counters().plan_hits.load(std::memory_order_relaxed);
  FlushPlan flush_plan = plan_cached(dag, roots, fuse, d.kind);
  std::vector<Group>& groups = flush_plan.groups();
  // The planner saw only this DAG: an in-place update whose old memory pending work outside it
  // still reads writes fresh memory instead (plans with aliases are never cached, so this
  // changes no cached plan).
  if (keep)
    for (auto& g : groups)
      for (auto& o : g.outputs)
        if (o.alias && o.alias->mem && keep->count(o.alias->mem.get())) o.alias = nullptr;
  // The log's stream only when logging: constructing one costs about as much as a small flush.
  std::unique_ptr<std::ostringstream> os;
  if (log_fusion()) os = std::make_unique<std::ostringstream>();
  std::ostream* log = os.get();
  if (log)
    *log << "[loom] flush " << d.str() << ": " << dag.size() << " nodes -> " << groups.size()
         << " groups" << (fuse ? "" : " (fusion off)")
         << (counters().plan_hits.load() != plan_hits ? " (plan cached)" : "")
         << (keep ? " (partial: around work that ran out of memory)" : "") << "\n";
  try {
    run_groups(d, groups, log);
  } catch (...) {
    if (log) std::cerr << os->str();
    throw;
  }
  // Allocations (Empty) are done, and dead intermediates (only `dag` holds them) drop their
  // nodes, consumers first so each drop is local (the node's inputs are still held by `dag`).
  // Dropping `dag` producers first freed them as one recursive chain from the last consumer
  // down, a dependent cache miss a node (a tenth of a tiny-op loop's time on the stand-in
  // driver, issue 7).
  for (size_t i = dag.size(); i-- > 0;) {
    Storage& st = *dag[i];
    if (st.node && (dag[i].use_count() == 1 || prim_class(st.node->op) == PrimClass::Alloc)) st.node.reset();
  }
  if (log) std::cerr << os->str();
}

}  // namespace

std::recursive_mutex& runtime_mutex() {
  static std::recursive_mutex m;
  return m;
}

TraceLimits& trace_limits() {
  static TraceLimits l = [] {
    TraceLimits t;
    t.max_nodes = knob_int(Knob::MaxTrace);
    t.max_pending_bytes = knob_int(Knob::MaxPendingBytes);
    return t;
  }();
  return l;
}

bool log_fusion() { return log_flag(); }

namespace {

// A group a flush could not run for want of memory: the error (naming the op and shape) and the
// storages it would have computed. They, and the work that needs them, stay pending; a flush
// runs all other work (flush_trace), and a sync point raises only when it needs what is left.
struct OomFailure {
  Error error;
  std::vector<std::shared_ptr<Storage>> blocked;
};
using Failures = std::vector<OomFailure>;  // empty: the flush ran everything

[[nodiscard]] Failures flush_trace(Trace& tr);

// A sync point that needs everything: throws the first failure.
void raise_any(const Failures& f) {
  if (!f.empty()) throw f.front().error;
}

// A sync point that needs `st`: throws the failure `st` waits for, if it is still pending.
void raise_for(const Failures& f, const std::shared_ptr<Storage>& st) {
  if (f.empty() || !st->pending()) return;
  std::unordered_set<const Storage*> needs;
  for (auto& s : live_dag({st})) needs.insert(s.get());
  for (auto& x : f)
    for (auto& b : x.blocked)
      if (needs.count(b.get())) throw x.error;
  throw f.front().error;
}

// Pending storages of `tr` that a live tensor holds: the roots of its next flush.
std::vector<std::shared_ptr<Storage>> trace_roots(const Trace& tr) {
  std::vector<std::shared_ptr<Storage>> roots;
  uint64_t seen = next_mark_epoch();  // marks roots already taken (no hash set per flush)
  for (auto& w : tr.buffers)
    if (auto b = w.lock()) {
      Storage& st = *b->cur;
      // A buffer updated on another stream since it was tracked here belongs to that trace.
      if (st.pending() && st.stream == tr.stream.id && st.mark_epoch != seen) {
        st.mark_epoch = seen;
        roots.push_back(b->cur);
      }
    }
  return roots;
}

// After `f`, may memory `m` be overwritten? Not while work left pending on `tr` reads it: then
// throws the failure that work waits for.
void raise_if_read(const Failures& f, const Trace& tr, const Memory* m) {
  if (f.empty()) return;
  for (auto& s : live_dag(trace_roots(tr))) {
    const Node& n = *s->node;
    bool reads = n.base && n.base->mem.get() == m;
    for (auto& in : n.in) reads = reads || (in.st && in.st->mem.get() == m);
    if (reads) raise_for(f, s);
  }
}

std::atomic<bool> g_stream_waits{true};

// `tr`'s stream waits (on the device) for everything submitted to stream `producer` so far.
void depend(Trace& tr, Device d, uint64_t producer) {
  if (producer == tr.stream.id || !g_stream_waits.load(std::memory_order_relaxed)) return;
  Trace* p = find_trace(d, producer);
  if (!p) return;  // retired: it was synchronized and nothing was submitted since
  auto it = tr.waited.find(producer);
  if (it != tr.waited.end() && it->second == p->submitted) return;
  backend(d).stream_wait(tr.stream, p->stream);
  tr.waited[producer] = p->submitted;
}

// A node recorded on `tr`'s stream touches storage `s` (reads it, or may write it in place when
// `writes`): work of other streams it depends on becomes a stream wait, never a race. Out of
// memory on the other stream raises only when the node needs what could not be computed.
void order_access(Trace& tr, const std::shared_ptr<Storage>& s, bool writes) {
  if (!s) return;
  Device d = s->device;
  if (s->pending() && s->stream != tr.stream.id) {
    Trace* p = find_trace(d, s->stream);
    LOOM_CHECK(p, Runtime, "internal: storage ", s->id, " pending on ", d.str(), " stream ",
               s->stream, " which has no trace");
    raise_for(flush_trace(*p), s);
  }
  if (s->pending()) return;  // pending on this stream: its trace keeps the order
  depend(tr, d, s->stream);  // the writer of this version
  if (!s->mem) return;
  if (writes) {
    // The memory may be overwritten in place: every stream that used it (pending reads
    // included, so flush them first) must be done with it.
    if (s->mem->stream.id != tr.stream.id) {
      if (Trace* o = find_trace(d, s->mem->stream.id))
        raise_if_read(flush_trace(*o), *o, s->mem.get());
      depend(tr, d, s->mem->stream.id);
    }
    for (size_t i = 0; i < s->mem->users.size(); ++i) {
      uint64_t u = s->mem->users[i].id;
      if (u == tr.stream.id) continue;
      if (Trace* o = find_trace(d, u)) raise_if_read(flush_trace(*o), *o, s->mem.get());
      depend(tr, d, u);
    }
  }
  s->mem->add_user(tr.stream);  // its free waits for this stream
}

// Runs what `roots` need (fused when fusion is on; a fused kernel that fails to build makes the
// flush run what is still pending one primitive at a time).
void run_roots(Device d, const std::vector<std::shared_ptr<Storage>>& roots,
               const KeepMemory* keep) {
  try {
    run_pending(d, roots, fusion_flag(), keep);
  } catch (const LowerError& e) {
    if (!fusion_flag()) throw;
    if (log_fusion())
      std::cerr << "[loom] fused lowering failed, running unfused: " << e.what() << "\n";
    std::vector<std::shared_ptr<Storage>> left;
    for (auto& r : roots)
      if (r->pending()) left.push_back(r);
    run_pending(d, left, false, keep);
  }
}

// After a flush of `roots` ran out of memory (`failed`): runs every root that needs none of the
// failed work, as one closed sub-DAG, leaving the rest pending; each further failure blocks more.
// What stays pending must still see the values it was recorded against (eager order), so
//  - a pending storage the sub-DAG computes and left-pending work reads becomes a root of the
//    sub-DAG: materialized now, not left to be recomputed later from memory that an in-place
//    update of the sub-DAG may have taken over;
//  - ready memory that left-pending work reads is never taken over by an in-place update of the
//    sub-DAG (the planner sees only the sub-DAG: its only-reader test cannot know).
void run_around(Device d, const std::vector<std::shared_ptr<Storage>>& roots, Failures& failed) {
  for (;;) {
    std::vector<std::shared_ptr<Storage>> pending;
    for (auto& r : roots)
      if (r->pending()) pending.push_back(r);
    auto dag = live_dag(pending);                // producers first
    std::unordered_set<const Storage*> blocked;  // failed, or needs failed work
    for (auto& f : failed)
      for (auto& b : f.blocked) blocked.insert(b.get());
    auto each_dep = [](const Node& n, auto&& fn) {
      for (auto& in : n.in)
        if (in.st) fn(in.st);
      if (n.base) fn(n.base);
    };
    for (auto& s : dag) {
      bool b = blocked.count(s.get()) > 0;
      each_dep(*s->node,
               [&](const std::shared_ptr<Storage>& c) { b = b || blocked.count(c.get()); });
      if (b) blocked.insert(s.get());
    }
    std::vector<std::shared_ptr<Storage>> run;
    for (auto& r : pending)
      if (!blocked.count(r.get())) run.push_back(r);
    if (run.empty()) return;
    std::unordered_set<const Storage*> sub;  // what `run` needs (none of it blocked)
    for (auto& s : live_dag(run)) sub.insert(s.get());
    KeepMemory keep;
    std::unordered_set<const Storage*> rooted(sub.size());
    for (auto& r : run) rooted.insert(r.get());
    for (auto& s : dag) {
      if (sub.count(s.get())) continue;  // runs now
      each_dep(*s->node, [&](const std::shared_ptr<Storage>& c) {
        if (c->pending()) {
          if (sub.count(c.get()) && rooted.insert(c.get()).second) run.push_back(c);
        } else if (c->mem) {
          keep.insert(c->mem.get());
        }
      });
    }
    try {
      run_roots(d, run, &keep);
      return;
    } catch (const FlushOom& e) {
      if (e.blocked.empty()) throw;  // (every group has an output: cannot happen)
      failed.push_back({e, e.blocked});
    }
  }
}

void pin(Trace& tr, Storage* s) {
  if (s && !s->pending() && s->pin_epoch != tr.epoch) {
    s->pin_epoch = tr.epoch;
    tr.pinned_bytes += int64_t(s->nbytes);
  }
}

// After a flush left work pending: the trace counts the nodes still pending and the ready memory
// they pin, and its limits count from there, so work that cannot run is retried once a limit's
// worth of new work is recorded, not at every record.
void hold_pending(Trace& tr) {
  auto dag = live_dag(trace_roots(tr));
  tr.nodes = int64_t(dag.size());
  for (auto& s : dag) {
    for (auto& in : s->node->in) pin(tr, in.st.get());
    pin(tr, s->node->base.get());
  }
  tr.node_floor = tr.nodes;
  tr.pinned_floor = tr.pinned_bytes;
}

Failures flush_trace(Trace& tr) {
  if (tr.buffers.empty()) return {};
  Device d = tr.stream.device;
  std::vector<std::shared_ptr<Storage>> roots = trace_roots(tr);
  std::vector<std::weak_ptr<Buffer>> saved;
  saved.swap(tr.buffers);
  tr.buffers.swap(tr.spare);
  tr.buffers.clear();
  // (Also on the way out by an exception: restore() has put back what it needed.)
  struct Recycle {
    Trace& tr;
    std::vector<std::weak_ptr<Buffer>>& saved;
    ~Recycle() {
      saved.clear();
      if (saved.capacity() > tr.spare.capacity()) tr.spare.swap(saved);
    }
  } recycle{tr, saved};
  tr.nodes = tr.pinned_bytes = tr.node_floor = tr.pinned_floor = 0;
  tr.epoch = next_mark_epoch();
  tr.submitted++;
  counters().flushes++;
  auto restore = [&] {
    for (auto& w : saved)
      if (auto b = w.lock())
        if (b->cur->pending() && b->cur->stream == tr.stream.id) tr.buffers.push_back(w);
  };
  ActiveStreamScope active(tr.stream);  // allocations, copies and launches go to this stream
  Failures failed;
  try {
    run_roots(d, roots, nullptr);
  } catch (const FlushOom& e) {
    failed.push_back({e, e.blocked});
    try {
      run_around(d, roots, failed);
    } catch (...) {
      restore();
      throw;
    }
  } catch (...) {
    restore();
    throw;
  }
  if (!failed.empty()) {
    restore();
    hold_pending(tr);
    if (log_fusion())
      std::cerr << "[loom] flush " << d.str() << " left " << tr.nodes
                << " nodes pending: " << failed.front().error.what() << "\n";
  }
  return failed;
}

Trace& recording_trace(Device d) {
  return is_host(d) ? cpu_trace() : trace_for(current_stream(d));
}

}  // namespace

int64_t pending_nodes(Device d) {
  std::lock_guard<std::recursive_mutex> lock(runtime_mutex());
  return recording_trace(d).nodes;
}

int64_t pending_nodes(const StreamRef& s) {
  std::lock_guard<std::recursive_mutex> lock(runtime_mutex());
  Trace* t = find_trace(s.device, s.id);
  return t ? t->nodes : 0;
}

std::vector<uint64_t> trace_streams(Device d) {
  std::lock_guard<std::recursive_mutex> lock(runtime_mutex());
  std::vector<uint64_t> ids;
  for (auto& [k, t] : traces())
    if (t.stream.device == d) ids.push_back(t.stream.id);
  return ids;
}

void set_log_fusion(bool on) { log_flag() = on; }
bool fusion_enabled() { return fusion_flag(); }

namespace {

// record() on the trace `tr` (the recording trace of n's device).
std::shared_ptr<Storage> record_on(Trace& tr, std::shared_ptr<Node>& n) {
  if (!is_host(n->device)) {
    // An input pending on this trace needs no ordering (order_access returns at once): the
    // common case, tested here without the call (~25 instructions an input, issue 7).
    for (auto& in : n->in)
      if (in.st && !(in.st->pending() && in.st->stream == tr.stream.id))
        order_access(tr, in.st, false);
    if (n->base) order_access(tr, n->base, true);
    if (auto r = n->reuse.lock()) order_access(tr, r, true);
  }
  const TraceLimits& lim = trace_limits();
  int64_t limit = lim.max_pending_bytes;
  if (limit <= 0) {
    if (tr.limit < 0) {
      size_t cap = backend(n->device).memory_capacity();
      tr.limit = cap ? int64_t(cap / 4) : int64_t(4) << 30;
    }
    limit = tr.limit;
  }
  if (tr.cut.before(*n, tr.nodes - tr.node_floor, lim.max_nodes) ||
      tr.pinned_bytes - tr.pinned_floor >= limit) {
    // Out of memory here is not the recording op's failure: what could not run stays pending
    // and raises at the sync point that needs it; everything else ran (flush_trace).
    Failures f = flush_trace(tr);
    if (!f.empty() && log_fusion())
      std::cerr << "[loom] a limit flush ran out of memory, recording goes on\n";
  }
  if (!tr.epoch) tr.epoch = next_mark_epoch();
  for (auto& in : n->in) pin(tr, in.st.get());
  pin(tr, n->base.get());
  auto st = std::allocate_shared_for_overwrite<Storage>(BlockAlloc<Storage>());  // no memset
  st->device = n->device;
  st->nbytes = n->base ? n->base->nbytes : size_t(numel(n->shape)) * itemsize(n->dtype);
  st->id = next_storage_id();
  st->stream = tr.stream.id;
  st->node = std::move(n);
  tr.nodes++;
  // Under the runtime mutex (every writer holds it): a plain add, not a locked one.
  auto& rec = counters().nodes_recorded;
  rec.store(rec.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  return st;
}

}  // namespace

std::shared_ptr<Storage> record(std::shared_ptr<Node> n) {
  RuntimeLock lock;
  return record_on(recording_trace(n->device), n);
}

void record_into(std::shared_ptr<Node> n, const std::shared_ptr<Buffer>& b) {
  RuntimeLock lock;
  // The trace stays valid through record_on (traces are only erased by sync()); its flush, if
  // the limits call for one, runs before the node is added, so `b` joins the new trace.
  Trace& tr = recording_trace(n->device);
  b->cur = record_on(tr, n);
  tr.buffers.push_back(b);
}

void track(const std::shared_ptr<Buffer>& b, Device d) {
  RuntimeLock lock;
  const Storage& st = *b->cur;
  Trace* t = st.pending() ? find_trace(d, st.stream) : nullptr;
  Trace& tr = t ? *t : recording_trace(d);
  // An in-place update may hand its result the old version's memory after recording it
  // (assign_inplace's fast path sets `reuse` then): order that write like record() does.
  if (!is_host(d) && st.pending())
    if (auto r = st.node->reuse.lock()) order_access(tr, r, true);
  tr.buffers.push_back(b);
}

// Flushing several traces runs all of them before raising the first failure.
void flush(Device d) {
  std::lock_guard<std::recursive_mutex> lock(runtime_mutex());
  if (is_host(d)) return raise_any(flush_trace(cpu_trace()));
  Failures all;
  for (auto& [k, t] : traces())
    if (t.stream.device == d)
      for (auto& f : flush_trace(t)) all.push_back(std::move(f));
  raise_any(all);
}

void flush_stream(const StreamRef& s) {
  std::lock_guard<std::recursive_mutex> lock(runtime_mutex());
  if (Trace* t = find_trace(s.device, s.id)) raise_any(flush_trace(*t));
}

void synchronize_stream(const StreamRef& s) {
  std::lock_guard<std::recursive_mutex> lock(runtime_mutex());
  flush_stream(s);
  backend(s.device).synchronize_stream(s);
}

void wait_stream(const StreamRef& waiter, const StreamRef& producer) {
  std::lock_guard<std::recursive_mutex> lock(runtime_mutex());
  LOOM_CHECK(waiter.device == producer.device, Value, "wait_stream: ", waiter.str(),
             " cannot wait for ", producer.str(), " (different devices)");
  if (is_host(waiter.device) || waiter.id == producer.id) return;
  flush_stream(producer);
  Trace& p = trace_for(producer);
  p.submitted++;  // an explicit wait always waits (the caller may have submitted work itself)
  depend(trace_for(waiter), waiter.device, producer.id);
}

void set_stream_waits(bool on) { g_stream_waits = on; }

// Work submitted to a stream outside a flush (tensor/stream_work.h): a later wait for the
// stream must wait for it too.
namespace {
void count_stream_work(const StreamRef& s) {
  if (is_host(s.device)) return;
  std::lock_guard<std::recursive_mutex> lock(runtime_mutex());
  trace_for(s).submitted++;
}
[[maybe_unused]] const bool g_stream_work_installed = (set_stream_work_handler(&count_stream_work), true);
}  // namespace

StreamRef stream_of(const Storage& st) {
  std::lock_guard<std::recursive_mutex> lock(runtime_mutex());
  if (Trace* t = find_trace(st.device, st.stream)) return t->stream;
  return StreamRef{st.device, st.stream, nullptr};
}

void ensure_ready(const std::shared_ptr<Storage>& st) {
  std::lock_guard<std::recursive_mutex> lock(runtime_mutex());
  if (st->pending()) {
    Trace* t = find_trace(st->device, st->stream);
    LOOM_CHECK(t, Runtime, "internal: storage ", st->id, " pending on stream ", st->stream,
               " which has no trace");
    raise_for(flush_trace(*t), st);  // other work that ran out of memory may stay pending
  }
  if (is_host(st->device)) return;
  // The caller reads the memory on the active stream: order it after the writer.
  Trace& tr = trace_for(active_stream(st->device));
  depend(tr, st->device, st->stream);
  if (st->mem) st->mem->add_user(tr.stream);
}

void flush() {
  std::lock_guard<std::recursive_mutex> lock(runtime_mutex());
  Failures all;
  for (auto& [k, t] : traces())
    for (auto& f : flush_trace(t)) all.push_back(std::move(f));
  raise_any(all);
}

void sync() {
  std::lock_guard<std::recursive_mutex> lock(runtime_mutex());
  std::vector<Device> devices;
  Failures all;  // raised once every trace ran what it could and the devices are idle
  for (auto& [k, t] : traces()) {
    for (auto& f : flush_trace(t)) all.push_back(std::move(f));
    if (std::find(devices.begin(), devices.end(), t.stream.device) == devices.end())
      devices.push_back(t.stream.device);
  }
  for (Device d : devices)  // (a device whose backend went away has nothing to wait for)
    if (is_host(d) || backend_available(d.kind)) backend(d).synchronize();
  // Streams nothing else refers to are done (the device is idle): drop their traces.
  for (auto it = traces().begin(); it != traces().end();) {
    Trace& t = it->second;
    if (t.stream.id != 0 && t.buffers.empty() && t.stream.native.use_count() == 1) {
      backend(t.stream.device).stream_retired(t.stream);
      if (last_trace().tr == &t) last_trace().tr = nullptr;
      it = traces().erase(it);
    } else {
      ++it;
    }
  }
  raise_any(all);
}

// Defined after loom::sync: an unqualified sync() above it resolved to ::sync (unistd.h), a
// file-system flush, leaving the trace unflushed.
void set_fusion(bool on) {
  loom::sync();
  fusion_flag() = on;
}

std::vector<Group> plan_storage(const std::shared_ptr<Storage>& st) { return plan_storages({st}); }

std::vector<Group> plan_storages(const std::vector<std::shared_ptr<Storage>>& all) {
  std::lock_guard<std::recursive_mutex> lock(runtime_mutex());
  std::vector<std::shared_ptr<Storage>> roots;
  for (auto& st : all)
    if (st->pending() && std::find(roots.begin(), roots.end(), st) == roots.end())
      roots.push_back(st);
  if (roots.empty()) return {};
  auto groups = plan(live_dag(roots), roots, fusion_flag());
  for (auto& g : groups)
    if (!g.opaque) g.signature = signature(g, roots[0]->device.kind);
  return groups;
}

std::string explain_storage(const std::shared_ptr<Storage>& st) {
  std::lock_guard<std::recursive_mutex> lock(runtime_mutex());
  std::ostringstream os;
  if (!st->pending()) {
    os << "ready: nothing pending\n";
    return os.str();
  }
  auto groups = plan_storage(st);
  size_t nodes = live_dag({st}).size();
  os << nodes << " nodes -> " << groups.size() << " kernel(s)"
     << (fusion_flag() ? "" : " (fusion off)") << "\n";
  for (size_t i = 0; i < groups.size(); ++i) {
    Group& g = groups[i];
    os << "kernel " << i << ": ";
    if (g.opaque) {
      os << g.str();
      continue;
    }
    os << "signature " << std::hex << g.signature << std::dec << "\n" << g.str();
    os << get_kernel(st->device, g).kernel->source();
  }
  return os.str();
}

}  // namespace loom
