// Running one flush's plan: the groups in order, each lowered (or taken from the kernel cache)
// before its outputs get memory, so a failed lowering loses nothing.
#include <algorithm>
#include <chrono>
#include <climits>
#include <iostream>
#include <sstream>

#include "fusion/kernel_cache.h"
#include "fusion/plan_cache.h"
#include "fusion/planner.h"
#include "fusion/segments.h"
#include "fusion/trace.h"
#include "fusion/trace_impl.h"
#include "tensor/backend.h"
#include "tensor/counters.h"

namespace loom::trace_impl {

// Pending storages `roots` need, producers first.
std::vector<std::shared_ptr<Storage>> live_dag(const std::vector<std::shared_ptr<Storage>>& roots) {
  std::vector<std::shared_ptr<Storage>> order;
  uint64_t epoch = next_mark_epoch();
  auto done = [&](const Storage* s) { return s->mark_epoch == epoch; };
  // (storage, next dependency to visit); dependencies are the inputs, then the base. The
  // stack points at the shared_ptrs the roots and nodes hold (alive during the walk): one
  // reference count increment a node, for `order` (the atomics of copies into the stack were
  // three quarters of the walk, itself the largest part of a memory hit's flush).
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

namespace {

// `skip`: a leaf not read from memory (a matmul's C, which its epilogue reads from cache).
int64_t group_bytes(const Group& g, int skip = -1) {
  int64_t b = 0;
  for (auto& l : g.leaves) {
    if (!l.st || &l - g.leaves.data() == skip) continue;
    int64_t n = 1;
    for (size_t d = 0; d < g.space.size(); ++d)
      if (l.strides[d] != 0) n *= g.space[d];
    b += n * int64_t(itemsize(l.dtype));
  }
  for (auto& o : g.outputs) {
    int64_t n = 1;
    for (size_t d = 0; d < g.space.size(); ++d)
      if (o.strides[d] != 0) n *= g.space[d];
    b += n * int64_t(itemsize(o.dtype(g.nodes)));
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
  if (g.opaque && g.epilogue) {
    Group& e = *g.epilogue;
    if (!e.signature) e.signature = signature(e, d.kind);
    KernelLookup k = get_kernel(d, e);  // lower before touching memory: a failure loses nothing
    materialize_all();
    backend(d).run_opaque_epilogue(g, *k.kernel);
    counters().bytes_moved += group_bytes(e, g.c_leaf);
    if (log)
      *log << "  group " << gi << ": " << g.str() << "  epilogue sig " << std::hex << e.signature
           << std::dec << (k.hit ? " hit" : " compile") << " " << k.lower_ms << " ms\n";
  } else if (g.opaque) {
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

// For each group, the intermediates whose memory may go once it has run: storages of this
// flush that no live tensor holds (not roots) and that no later group reads: a training step is
// one flush, which would otherwise hold every activation and gradient it wrote until its end.
// Only this flush's nodes and groups refer to such a storage (a node of another stream that
// reads it flushed this trace when it was recorded, and held it through a live tensor).
std::vector<std::vector<Storage*>> frees_after(const std::vector<std::shared_ptr<Storage>>& dag,
                                               const std::vector<std::shared_ptr<Storage>>& roots,
                                               const std::vector<Group>& groups) {
  uint64_t epoch = next_mark_epoch();
  for (size_t i = 0; i < dag.size(); ++i) dag[i]->mark_epoch = epoch, dag[i]->mark = int64_t(i);
  std::vector<int> last(dag.size(), -1);
  for (auto& r : roots)
    if (r->mark_epoch == epoch) last[size_t(r->mark)] = INT_MAX;  // kept
  auto read = [&](const std::shared_ptr<Storage>& st, int gi) {
    if (st && st->mark_epoch == epoch && last[size_t(st->mark)] != INT_MAX)
      last[size_t(st->mark)] = gi;
  };
  auto read_group = [&](const Group& h, int gi) {
    for (auto& l : h.leaves) read(l.st, gi);
    for (auto& o : h.outputs) read(o.init, gi), read(o.alias, gi);
  };
  for (int gi = 0; gi < int(groups.size()); ++gi) {
    const Group& g = groups[size_t(gi)];
    read_group(g, gi);
    if (g.epilogue) read_group(*g.epilogue, gi);
    if (g.opaque)
      for (auto& in : g.opaque->in) read(in.st, gi);
  }
  std::vector<std::vector<Storage*>> out(groups.size());
  for (size_t i = 0; i < dag.size(); ++i)
    if (last[i] >= 0 && last[i] != INT_MAX) out[size_t(last[i])].push_back(dag[i].get());
  return out;
}

// For each group, the allocation-only storages (the bases cat and stack write into, empty())
// that it is the first to write or read: they get memory just before it runs. Taken at the
// start of the flush, a training step's gradient bases (the backward of each layer's split of
// q, k and v) were all held from its first kernel, through the whole forward.
using StorageLists = std::vector<std::vector<std::shared_ptr<Storage>>>;
StorageLists allocs_before(const std::vector<std::shared_ptr<Storage>>& dag,
                           const std::vector<Group>& groups) {
  uint64_t epoch = next_mark_epoch();
  bool any = false;
  for (auto& st : dag)
    if (!st->mem && prim_class(st->node->op) == PrimClass::Alloc)
      st->mark_epoch = epoch, any = true;
  StorageLists out(groups.size());
  if (!any) return out;  // most flushes: no walk of the groups
  auto touch = [&](const std::shared_ptr<Storage>& st, size_t gi) {
    if (st && st->mark_epoch == epoch) st->mark_epoch = 0, out[gi].push_back(st);
  };
  auto touch_group = [&](const Group& h, size_t gi) {
    for (auto& l : h.leaves) touch(l.st, gi);
    for (auto& o : h.outputs) touch(o.init, gi), touch(o.alias, gi);
  };
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    touch_group(groups[gi], gi);
    if (groups[gi].epilogue) touch_group(*groups[gi].epilogue, gi);
    if (groups[gi].opaque)
      for (auto& in : groups[gi].opaque->in) touch(in.st, gi);
  }
  return out;
}

void allocate_empty(Device d, const std::shared_ptr<Storage>& st) {
  try {
    st->mem = allocate(d, st->nbytes);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::Memory) throw;
    throw FlushOom(std::string(e.what()) + " for " + what_computes(*st), {st});
  }
}

// Runs groups [first, first + n), a run of segments (fusion/segments.h), as one kernel. False
// when an output could not get memory: nothing ran and nothing kept memory, and the caller runs
// them one by one, so the groups before the one out of memory still complete.
bool run_segments(Device d, std::vector<Group>& groups, size_t first, size_t n, std::ostream* log) {
  KernelLookup k = get_kernel(d, groups[first]);  // lower before touching memory
  std::vector<const Group*> gs;
  auto release = [&] {
    std::vector<std::shared_ptr<Storage>> pending;
    for (size_t j = first; j < first + n; ++j)
      for (auto& o : groups[j].outputs)
        if (o.st->pending()) o.st->mem.reset(), pending.push_back(o.st);
    return pending;
  };
  try {
    for (size_t j = first; j < first + n; ++j) {
      for (auto& o : groups[j].outputs) materialize(d, o);
      gs.push_back(&groups[j]);
    }
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::Memory) throw;
    release();
    return false;
  } catch (const std::bad_alloc&) {
    release();
    return false;
  }
  int kernels = 0;
  try {
    kernels = k.kernel->run_segments(gs);
  } catch (const Error& e) {  // memory a kernel needed: none of them counts as done
    if (e.kind() != ErrorKind::Memory) throw;
    throw FlushOom(std::string(e.what()) + " for " + what_computes(*groups[first].outputs[0].st),
                   release());
  } catch (const std::bad_alloc&) {
    throw FlushOom(d.str() + ": out of memory (std::bad_alloc) in a kernel", release());
  }
  counters().groups += int64_t(n);
  counters().kernels += kernels;
  for (const Group* g : gs) counters().bytes_moved += group_bytes(*g);
  if (log)
    *log << "  groups " << first << "-" << first + n - 1 << " sig " << std::hex
         << groups[first].signature << std::dec << (k.hit ? " hit" : " compile") << " "
         << k.lower_ms << " ms: " << n << " segments in " << kernels << " kernel(s)\n"
         << groups[first].str();
  return true;
}

// Runs the groups in order. Out of memory stops at the group that met it (FlushOom): the groups
// before it keep their results, it and the ones after stay pending.
// `allocs`: allocs_before's lists; `frees`: frees_after's lists.
void run_groups(Device d, std::vector<Group>& groups, std::ostream* log, const StorageLists& allocs,
                const std::vector<std::vector<Storage*>>& frees) {
  auto done = [&](size_t gi) {
    for (auto& o : groups[gi].outputs) {
      o.st->node.reset();  // ready: releases the producer and what only it read
      counters().materialized++;
      if (read_after_flush(o.st.get())) backend(d).mark_written(*o.st);
    }
    for (Storage* st : frees[gi]) st->mem.reset();  // read for the last time
  };
  const bool segments = backend(d).caps().segments;
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const size_t n = segments ? segment_run(groups, gi, d.kind) : 1;
    for (size_t j = gi; j < gi + n; ++j)
      for (auto& st : allocs[j])
        if (!st->mem) allocate_empty(d, st);
    if (n > 1 && run_segments(d, groups, gi, n, log)) {
      for (size_t j = gi; j < gi + n; ++j) done(j);
      gi += n - 1;
      continue;
    }
    Group& g = groups[gi];
    counters().groups++;
    const GOutput* at = nullptr;
    auto t0 = log ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    try {
      run_group(d, g, gi, log, &at);
      if (log)  // host time: a GPU group's is its launch
        *log << "    ran in "
             << std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
                    .count()
             << " us, " << counters().bytes_live.load() << " bytes live\n";
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::Memory) throw;
      group_oom(g, e.what(), at ? at->st : nullptr);
    } catch (const std::bad_alloc&) {  // host memory inside a kernel (scratch, a matmul's)
      group_oom(g, d.str() + ": out of memory (std::bad_alloc) in a kernel", nullptr);
    }
    counters().kernels++;
    done(gi);
  }
}

}  // namespace

void run_pending(Device d, const std::vector<std::shared_ptr<Storage>>& roots, bool fuse,
                 const KeepMemory* keep) {
  auto dag = live_dag(roots);
  int64_t plan_hits = counters().plan_hits.load(std::memory_order_relaxed);
  using Clock = std::chrono::steady_clock;
  auto ns_since = [](Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t).count();
  };
  const auto t_plan = Clock::now();
  // A partial flush (around work that ran out of memory) edits its groups' aliases below:
  // planned apart from the cache.
  FlushPlan flush_plan = plan_cached(dag, roots, fuse, d.kind, keep == nullptr);
  counters().plan_ns += ns_since(t_plan);
  std::vector<Group>& groups = flush_plan.groups();
  // The planner saw only this DAG: an in-place update whose old memory pending work outside it
  // still reads writes fresh memory instead.
  if (keep)
    for (auto& g : groups)
      for (auto& o : g.outputs)
        if (o.alias && o.alias->mem && keep->count(o.alias->mem.get())) o.alias = nullptr;
  const bool plan_hit = counters().plan_hits.load() != plan_hits;
  // The log's stream only when logging: constructing one costs about as much as a small flush.
  std::unique_ptr<std::ostringstream> os;
  if (log_fusion()) os = std::make_unique<std::ostringstream>();
  std::ostream* log = os.get();
  if (log)
    *log << "[loom] flush " << d.str() << ": " << dag.size() << " nodes -> " << groups.size()
         << " groups" << (fuse ? "" : " (fusion off)") << (plan_hit ? " (plan cached)" : "")
         << (keep ? " (partial: around work that ran out of memory)" : "") << "\n";
  const auto t_run = Clock::now();
  try {
    if (!plan_hit) prelower(d, groups);  // a plan seen before found its kernels in the cache
    run_groups(d, groups, log, allocs_before(dag, groups), frees_after(dag, roots, groups));
    // Allocations no group wrote or read (an empty() a live tensor holds) get memory now.
    for (auto& st : dag)
      if (!st->mem && st->node && prim_class(st->node->op) == PrimClass::Alloc)
        allocate_empty(d, st);
    counters().run_ns += ns_since(t_run);
  } catch (...) {
    if (log) std::cerr << os->str();
    throw;
  }
  // Allocations (Empty) are done, and dead intermediates (only `dag` holds them) drop their
  // nodes, consumers first so each drop is local (the node's inputs are still held by `dag`).
  // Dropping `dag` producers first freed them as one recursive chain from the last consumer
  // down, a dependent cache miss a node (a tenth of a tiny-op loop's time on the stand-in
  // driver).
  for (size_t i = dag.size(); i-- > 0;) {
    Storage& st = *dag[i];
    if (st.node && (dag[i].use_count() == 1 || prim_class(st.node->op) == PrimClass::Alloc))
      st.node.reset();
  }
  if (log) std::cerr << os->str();
}

}  // namespace loom::trace_impl
