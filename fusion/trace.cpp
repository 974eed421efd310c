#include "fusion/trace.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "fusion/kernel_cache.h"
#include "fusion/plan_cache.h"
#include "fusion/planner.h"
#include "fusion/runtime_lock.h"
#include "fusion/trace_impl.h"
#include "tensor/backend.h"
#include "tensor/block_alloc.h"
#include "tensor/counters.h"
#include "tensor/knobs.h"
#include "tensor/stream_work.h"

namespace loom {
namespace trace_impl {

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

std::vector<Trace*> all_traces() {
  std::vector<Trace*> all;
  for (auto& [k, t] : traces()) all.push_back(&t);
  return all;
}

bool& fusion_flag() {
  static bool on = knob_flag(Knob::Fusion);
  return on;
}

bool& log_flag() {
  static bool on = knob_str(Knob::Log).find("fusion") != std::string::npos;
  return on;
}

}  // namespace trace_impl

using namespace trace_impl;

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

Trace& recording_trace(Device d) { return is_host(d) ? cpu_trace() : trace_for(current_stream(d)); }

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
    // common case, tested here without the call (~25 instructions an input).
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
  if (is_host(d)) {
    raise_any(flush_trace(cpu_trace()));
    return raise_checks(cpu_trace());
  }
  Failures all;
  std::vector<Trace*> ran;
  for (auto& [k, t] : traces())
    if (t.stream.device == d) {
      for (auto& f : flush_trace(t)) all.push_back(std::move(f));
      ran.push_back(&t);
    }
  raise_any(all);
  for (Trace* t : ran) raise_checks(*t);
}

void flush_stream(const StreamRef& s) {
  std::lock_guard<std::recursive_mutex> lock(runtime_mutex());
  if (Trace* t = find_trace(s.device, s.id)) {
    raise_any(flush_trace(*t));
    raise_checks(*t);
  }
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
[[maybe_unused]] const bool g_stream_work_installed =
    (set_stream_work_handler(&count_stream_work), true);
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
    // The read, and the flags of the trace's checks, wait for their own kernels alone.
    std::vector<const Storage*> reads{st.get()};
    for (const DeferredCheck& c : t->checks) reads.push_back(c.flag->cur.get());
    raise_for(flush_trace(*t, std::move(reads)), st);  // work out of memory may stay pending
    raise_checks(*t);
  } else if (Trace* t = find_trace(st->device, st->stream)) {
    raise_checks(*t);  // checks a limit flush computed since the last sync point
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
  for (auto& [k, t] : traces()) raise_checks(t);
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
  std::optional<Error> failed_check;  // raised after the memory failures, as flush() does
  for (auto& [k, t] : traces()) {
    try {
      raise_checks(t);
    } catch (const Error& e) {
      if (!failed_check) failed_check = e;
    }
  }
  // Streams nothing else refers to are done (the device is idle): drop their traces.
  for (auto it = traces().begin(); it != traces().end();) {
    Trace& t = it->second;
    if (t.stream.id != 0 && t.buffers.empty() && t.checks.empty() &&
        t.stream.native.use_count() == 1) {
      backend(t.stream.device).stream_retired(t.stream);
      if (last_trace().tr == &t) last_trace().tr = nullptr;
      it = traces().erase(it);
    } else {
      ++it;
    }
  }
  raise_any(all);
  if (failed_check) throw *failed_check;
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
  for (auto& g : groups) {
    if (!g.opaque) g.signature = signature(g, roots[0]->device.kind);
    if (g.epilogue) g.epilogue->signature = signature(*g.epilogue, roots[0]->device.kind);
  }
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
      if (g.epilogue)
        os << "epilogue signature " << std::hex << g.epilogue->signature << std::dec << "\n"
           << get_kernel(st->device, *g.epilogue).kernel->source();
      continue;
    }
    os << "signature " << std::hex << g.signature << std::dec << "\n" << g.str();
    os << get_kernel(st->device, g).kernel->source();
  }
  return os.str();
}

}  // namespace loom
