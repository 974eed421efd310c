// One flush of a trace, and what it leaves pending when memory runs out: the work that needs
// none of the failed groups runs around them, and a sync point raises only for what it needs.
#include <algorithm>
#include <iostream>
#include <sstream>

#include "fusion/kernel_cache.h"
#include "fusion/plan_cache.h"
#include "fusion/planner.h"
#include "fusion/trace.h"
#include "fusion/trace_impl.h"
#include "tensor/backend.h"
#include "tensor/counters.h"

namespace loom::trace_impl {

namespace {
// The storages the sync point whose flush runs now reads right after it (flush_trace's `reads`).
std::vector<const Storage*>& reads_now() {
  static std::vector<const Storage*> r;  // under the runtime mutex
  return r;
}
}  // namespace

bool read_after_flush(const Storage* st) {
  const auto& r = reads_now();
  return !r.empty() && std::find(r.begin(), r.end(), st) != r.end();
}

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
  // In the order their values were recorded, not the order their buffers were made: the DAG is
  // walked from the roots, and a training step's first roots would otherwise be the parameters
  // (made before the step), whose updates reach every gradient through the backward's chain
  // down to the first layer: every weight gradient, and so every activation it reads, then
  // waited until that chain's end (a fifth more memory than in the steps after).
  std::sort(roots.begin(), roots.end(), [](const auto& a, const auto& b) { return a->id < b->id; });
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

namespace {

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

}  // namespace

Failures flush_trace(Trace& tr, std::vector<const Storage*> reads) {
  if (tr.buffers.empty()) return {};
  // (A flush inside this one, of another stream's trace, marks nothing of this one's reads.)
  struct Reads {
    std::vector<const Storage*> outer;
    explicit Reads(std::vector<const Storage*> r) : outer(std::move(reads_now())) {
      reads_now() = std::move(r);
    }
    ~Reads() { reads_now() = std::move(outer); }
  } scope{std::move(reads)};
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

}  // namespace loom::trace_impl
