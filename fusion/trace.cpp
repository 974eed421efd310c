#include "fusion/trace.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "fusion/counters.h"
#include "fusion/kernel_cache.h"
#include "fusion/planner.h"
#include "tensor/backend.h"

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
  std::vector<std::weak_ptr<Buffer>> buffers;
  int64_t nodes = 0;
  int64_t pinned_bytes = 0;  // ready storages pending nodes read (each once per epoch)
  uint64_t epoch = 0;        // changes at every flush; 0: not started
  int64_t limit = -1;        // the automatic pending-memory limit, once known
  LengthCut cut;             // where the trace-length limit flushes
};

std::unordered_map<int, Trace>& traces() {
  static auto* t = new std::unordered_map<int, Trace>();  // never destroyed: used at exit
  return *t;
}
// The CPU trace is looked up on every recorded op: keep a direct reference.
Trace& trace_for(Device d) {
  static Trace& cpu = traces()[0];
  return d.kind == DeviceKind::CPU ? cpu : traces()[int(d.kind) * 1024 + d.index];
}

bool env_flag(const char* name, bool dflt) {
  const char* v = std::getenv(name);
  if (!v || !*v) return dflt;
  return !(!std::strcmp(v, "0") || !std::strcmp(v, "false") || !std::strcmp(v, "off"));
}

bool& fusion_flag() {
  static bool on = env_flag("LOOM_FUSION", true);
  return on;
}

bool& log_flag() {
  static bool on = [] {
    const char* v = std::getenv("LOOM_LOG");
    return v && std::strstr(v, "fusion") != nullptr;
  }();
  return on;
}

// Pending storages `roots` need, producers first.
std::vector<std::shared_ptr<Storage>> live_dag(const std::vector<std::shared_ptr<Storage>>& roots) {
  std::vector<std::shared_ptr<Storage>> order;
  uint64_t epoch = next_mark_epoch();
  auto done = [&](const Storage* s) { return s->mark_epoch == epoch; };
  // (storage, next dependency to visit); dependencies are the inputs, then the base.
  std::vector<std::pair<std::shared_ptr<Storage>, size_t>> stack;
  for (auto& r : roots) {
    if (!r->pending() || done(r.get())) continue;
    stack.push_back({r, 0});
    while (!stack.empty()) {
      auto& [st, next] = stack.back();
      const Node& n = *st->node;
      size_t ndeps = n.in.size() + (n.base ? 1 : 0);
      if (next < ndeps) {
        const auto& child = next < n.in.size() ? n.in[next].st : n.base;
        ++next;
        if (child->pending() && !done(child.get())) stack.push_back({child, 0});
        continue;
      }
      if (!done(st.get())) {
        st->mark_epoch = epoch;
        order.push_back(st);
      }
      stack.pop_back();
    }
  }
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

void materialize(Device d, GOutput& o) {
  Storage& st = *o.st;
  if (o.alias && o.alias->mem) {
    st.mem = o.alias->mem;
    return;
  }
  st.mem = allocate(d, st.nbytes);
  if (o.init && o.init->mem) backend(d).copy_within(st.mem->ptr, o.init->mem->ptr, st.nbytes);
}

void run_groups(Device d, std::vector<Group>& groups, std::ostream* log) {
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    Group& g = groups[gi];
    counters().groups++;
    if (g.opaque) {
      for (auto& o : g.outputs) materialize(d, o);
      backend(d).run_opaque(g);
      if (log) *log << "  group " << gi << ": " << g.str();
    } else {
      g.signature = signature(g, d.kind);
      KernelLookup k = get_kernel(d, g);  // lower before touching memory: a failure loses nothing
      for (auto& o : g.outputs) materialize(d, o);
      k.kernel->run(g);
      counters().bytes_moved += group_bytes(g);
      if (log)
        *log << "  group " << gi << " sig " << std::hex << g.signature << std::dec
             << (k.hit ? " hit" : " compile") << " " << k.lower_ms << " ms, " << g.rows()
             << " rows x " << g.cols() << " cols\n"
             << g.str();
    }
    counters().kernels++;
    for (auto& o : g.outputs) {
      o.st->node.reset();  // ready: releases the producer and what only it read
      counters().materialized++;
    }
  }
}

void run_pending(Device d, const std::vector<std::shared_ptr<Storage>>& roots, bool fuse) {
  auto dag = live_dag(roots);
  // Empty storages (allocation only) that a live tensor holds get their memory now.
  for (auto& st : dag)
    if (st->node->op == Op::Empty) {
      st->mem = allocate(d, st->nbytes);
    }
  auto groups = plan(dag, roots, fuse);
  std::ostringstream os;
  std::ostream* log = log_fusion() ? &os : nullptr;
  if (log)
    os << "[loom] flush " << d.str() << ": " << dag.size() << " nodes -> " << groups.size()
       << " groups" << (fuse ? "" : " (fusion off)") << "\n";
  try {
    run_groups(d, groups, log);
  } catch (...) {
    if (log) std::cerr << os.str();
    throw;
  }
  for (auto& st : dag)
    if (st->node && st->node->op == Op::Empty) st->node.reset();
  if (log) std::cerr << os.str();
}

}  // namespace

std::recursive_mutex& runtime_mutex() {
  static std::recursive_mutex m;
  return m;
}

TraceLimits& trace_limits() {
  static TraceLimits l = [] {
    TraceLimits t;
    if (const char* v = std::getenv("LOOM_MAX_TRACE")) t.max_nodes = std::atoll(v);
    if (const char* v = std::getenv("LOOM_MAX_PENDING_BYTES")) t.max_pending_bytes = std::atoll(v);
    return t;
  }();
  return l;
}

bool log_fusion() { return log_flag(); }

int64_t pending_nodes(Device d) {
  std::lock_guard<std::recursive_mutex> lock(runtime_mutex());
  return trace_for(d).nodes;
}
void set_log_fusion(bool on) { log_flag() = on; }
bool fusion_enabled() { return fusion_flag(); }

std::shared_ptr<Storage> record(std::shared_ptr<Node> n) {
  std::lock_guard<std::recursive_mutex> lock(runtime_mutex());
  Trace& tr = trace_for(n->device);
  int64_t limit = trace_limits().max_pending_bytes;
  if (limit <= 0) {
    if (tr.limit < 0) {
      size_t cap = backend(n->device).memory_capacity();
      tr.limit = cap ? int64_t(cap / 4) : int64_t(4) << 30;
    }
    limit = tr.limit;
  }
  if (tr.cut.before(*n, tr.nodes, trace_limits().max_nodes) || tr.pinned_bytes >= limit)
    flush(n->device);
  if (!tr.epoch) tr.epoch = next_mark_epoch();
  auto pin = [&](Storage* s) {
    if (s && !s->pending() && s->pin_epoch != tr.epoch) {
      s->pin_epoch = tr.epoch;
      tr.pinned_bytes += int64_t(s->nbytes);
    }
  };
  for (auto& in : n->in) pin(in.st.get());
  pin(n->base.get());
  auto st = std::make_shared<Storage>();
  st->device = n->device;
  st->nbytes = n->base ? n->base->nbytes : size_t(numel(n->shape)) * itemsize(n->dtype);
  st->id = next_storage_id();
  st->node = std::move(n);
  tr.nodes++;
  counters().nodes_recorded++;
  return st;
}

void track(const std::shared_ptr<Buffer>& b, Device d) {
  std::lock_guard<std::recursive_mutex> lock(runtime_mutex());
  trace_for(d).buffers.push_back(b);
}

void flush(Device d) {
  std::lock_guard<std::recursive_mutex> lock(runtime_mutex());
  Trace& tr = trace_for(d);
  if (tr.buffers.empty()) return;
  std::vector<std::shared_ptr<Storage>> roots;
  std::unordered_set<const Storage*> seen;
  for (auto& w : tr.buffers)
    if (auto b = w.lock())
      if (b->cur->pending() && seen.insert(b->cur.get()).second) roots.push_back(b->cur);
  auto saved = std::move(tr.buffers);
  tr.buffers.clear();
  tr.nodes = tr.pinned_bytes = 0;
  tr.epoch = next_mark_epoch();
  counters().flushes++;
  auto restore = [&] {
    for (auto& w : saved)
      if (auto b = w.lock())
        if (b->cur->pending()) tr.buffers.push_back(w);
  };
  try {
    run_pending(d, roots, fusion_flag());
  } catch (const LowerError& e) {
    // A fused kernel failed to build: run what is still pending one primitive at a time.
    if (!fusion_flag()) {
      restore();
      throw;
    }
    if (log_fusion())
      std::cerr << "[loom] fused lowering failed, running unfused: " << e.what() << "\n";
    std::vector<std::shared_ptr<Storage>> left;
    for (auto& r : roots)
      if (r->pending()) left.push_back(r);
    try {
      run_pending(d, left, false);
    } catch (...) {
      restore();
      throw;
    }
  } catch (...) {
    restore();
    throw;
  }
  backend(d).synchronize();
}

void ensure_ready(const std::shared_ptr<Storage>& st) {
  if (st->pending()) flush(st->device);
}

void sync() {
  std::lock_guard<std::recursive_mutex> lock(runtime_mutex());
  std::vector<int> keys;
  for (auto& [k, t] : traces()) keys.push_back(k);
  for (int k : keys) flush(Device{DeviceKind(k / 1024), k % 1024});
}

// Defined after loom::sync: an unqualified sync() above it resolved to ::sync (unistd.h), a
// file-system flush, leaving the trace unflushed.
void set_fusion(bool on) {
  loom::sync();
  fusion_flag() = on;
}

std::vector<Group> plan_storage(const std::shared_ptr<Storage>& st) {
  std::lock_guard<std::recursive_mutex> lock(runtime_mutex());
  if (!st->pending()) return {};
  auto groups = plan(live_dag({st}), {st}, fusion_flag());
  for (auto& g : groups)
    if (!g.opaque) g.signature = signature(g, st->device.kind);
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
