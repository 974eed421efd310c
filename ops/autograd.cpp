// The autograd graph's bookkeeping and the engine that runs a backward (ops/autograd.h).
#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <queue>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "ops/autocast.h"
#include "ops/grad_node.h"
#include "ops/record.h"
#include "tensor/counters.h"

namespace loom {

// The graph fields of Tensor, for this file and the rules.
struct AutogradAccess {
  static const std::shared_ptr<AutogradMeta>& meta(const Tensor& t) { return t.ag_; }
  static std::shared_ptr<AutogradMeta>& meta(Tensor& t) { return t.ag_; }
  static std::shared_ptr<AutogradMeta>& ensure(Tensor& t) {
    if (!t.ag_) t.ag_ = std::make_shared<AutogradMeta>();
    return t.ag_;
  }
};
using A = AutogradAccess;

namespace {

thread_local bool t_grad_enabled = true;
std::atomic<uint64_t> g_seq{0};

std::string place(const Tensor& t) {
  return detail::cat(dtype_name(t.dtype()), " ", shape_str(t.shape()));
}

}  // namespace

bool is_grad_enabled() { return t_grad_enabled; }
void set_grad_enabled(bool on) { t_grad_enabled = on; }

// ---- Tensor's autograd methods --------------------------------------------------------------

bool Tensor::requires_grad() const { return ag_ && ag_->requires_grad; }

Tensor& Tensor::requires_grad_(bool on) {
  if (!on && ag_ && ag_->grad_fn)
    throw Error(ErrorKind::Runtime,
                "requires_grad_: you can only change requires_grad flags of leaf variables (" +
                    place(*this) + " made by " + ag_->grad_fn->name +
                    "); use detach() for a tensor that does not need gradients");
  LOOM_CHECK(!on || is_floating(dtype_), Runtime,
             "requires_grad_: only tensors of floating point dtype can require gradients, got ",
             place(*this));
  if (on || ag_) A::ensure(*this)->requires_grad = on;
  return *this;
}

bool Tensor::is_leaf() const { return !ag_ || !ag_->grad_fn; }

Tensor Tensor::grad() const { return ag_ ? ag_->grad : Tensor(); }

void Tensor::set_grad(const Tensor& g) {
  if (g.defined())
    LOOM_CHECK(g.shape() == shape() && g.dtype() == dtype_ && g.device() == device_, Value,
               "grad: assigned grad ", place(g), " on ", g.device().str(),
               " does not match the tensor's ", place(*this), " on ", device_.str());
  if (g.defined() || ag_) A::ensure(*this)->grad = g;
}

std::string Tensor::grad_fn_name() const { return ag_ && ag_->grad_fn ? ag_->grad_fn->name : ""; }

const std::shared_ptr<GradNode>& Tensor::grad_fn() const {
  static const std::shared_ptr<GradNode> none;
  return ag_ ? ag_->grad_fn : none;
}

void Tensor::backward(const std::optional<Tensor>& gradient, std::optional<bool> retain_graph,
                      bool create_graph) const {
  autograd::backward({*this}, {gradient ? *gradient : Tensor()}, retain_graph, create_graph);
}

Tensor Tensor::detach() const { return Tensor(buf_, view_, dtype_, device_); }

void Tensor::set_data(const Tensor& other) {
  LOOM_CHECK(other.defined(), Value, "set_data: an undefined tensor");
  LOOM_CHECK(!requires_grad() || is_floating(other.dtype()), Type,
             "set_data: a tensor that requires grad can't take data of dtype ",
             dtype_name(other.dtype()), " (shape ", shape_str(other.shape()), ")");
  buf_ = other.buf_;
  view_ = other.view_;
  dtype_ = other.dtype_;
  device_ = other.device_;
}

Tensor& Tensor::detach_() {
  if (ag_) ag_->grad_fn.reset(), ag_->requires_grad = false;
  return *this;
}

void Tensor::retain_grad() const {
  LOOM_CHECK(requires_grad(), Runtime,
             "retain_grad: can't retain_grad on a tensor that does not require grad (",
             place(*this), ")");
  if (ag_->grad_fn) ag_->retains_grad = true;  // a leaf keeps its grad anyway
}

bool Tensor::retains_grad() const { return ag_ && ag_->retains_grad; }

int Tensor::register_hook(std::function<Tensor(const Tensor&)> hook) const {
  LOOM_CHECK(requires_grad(), Runtime,
             "register_hook: cannot register a hook on a tensor that does not require gradient (",
             place(*this), ")");
  int id = ag_->next_hook_id++;
  ag_->hooks.emplace_back(id, std::move(hook));
  return id;
}

void Tensor::remove_hook(int id) const {
  if (!ag_) return;
  auto& h = ag_->hooks;
  h.erase(std::remove_if(h.begin(), h.end(), [&](auto& p) { return p.first == id; }), h.end());
}

uint32_t Tensor::version() const { return buf_ ? buf_->version : 0; }

namespace autograd {
// The bytes: the view's elements, but no more than its buffer holds (an expanded index).
SavedKey saved_key(const Tensor& t) {
  int64_t bytes = t.numel() * int64_t(itemsize(t.dtype()));
  if (const auto& st = t.buffer()->cur) bytes = std::min(bytes, int64_t(st->nbytes));
  return {t.buffer().get(), t.offset(), bytes};
}
}  // namespace autograd

namespace {
using autograd::saved_key;

struct SavedKeyHash {
  size_t operator()(const SavedKey& k) const {
    return std::hash<const void*>()(k.buf) ^ (size_t(k.offset) * 0x9e3779b97f4a7c15ull) ^
           (size_t(k.bytes) << 17);
  }
};
std::mutex g_saved_mutex;
std::unordered_map<SavedKey, int, SavedKeyHash> g_saved_holders;

// The bytes that start counting: t's, where no node held it yet.
int64_t hold_saved(const Tensor& t) {
  SavedKey k = saved_key(t);
  std::lock_guard<std::mutex> l(g_saved_mutex);
  return ++g_saved_holders[k] == 1 ? k.bytes : 0;
}

// The bytes that stop counting: t's, where this was its last holder.
int64_t drop_saved(const Tensor& t) {
  SavedKey k = saved_key(t);
  std::lock_guard<std::mutex> l(g_saved_mutex);
  auto it = g_saved_holders.find(k);
  if (it == g_saved_holders.end() || --it->second > 0) return 0;
  g_saved_holders.erase(it);
  return k.bytes;
}

}  // namespace

void GradNode::free_saved() {
  int64_t freed = 0;
  for (auto& s : saved)
    if (s.data.defined()) freed += drop_saved(s.data);
  saved.clear();
  if (freed) counters().saved_bytes.fetch_sub(freed);
}

// ---- recording --------------------------------------------------------------------------------

namespace autograd {

bool needs_grad(const Tensor& a) { return t_grad_enabled && a.requires_grad(); }
bool needs_grad(const Tensor& a, const Tensor& b) {
  return t_grad_enabled && (a.requires_grad() || b.requires_grad());
}
bool needs_grad(const std::vector<Tensor>& xs) {
  if (!t_grad_enabled) return false;
  for (auto& x : xs)
    if (x.requires_grad()) return true;
  return false;
}

std::string describe(const std::vector<Tensor>& xs) {
  std::vector<std::string> parts;  // an absent optional input (a norm's bias) is undefined
  for (auto& x : xs)
    if (x.defined()) parts.push_back(place(x));
  std::string s;
  for (size_t i = 0; i < parts.size(); ++i)
    s += (i ? (i + 1 == parts.size() ? " and " : ", ") : "") + parts[i];
  return s;
}

void mark_view(Tensor& result) {
  auto& m = A::meta(result);
  if (!m || !m->grad_fn) return;
  m->grad_fn->is_view = true;
  m->view_version = result.version();
}

void check_view_current(const Tensor& x, const char* where) {
  const auto& m = A::meta(x);
  if (!m || !m->grad_fn || !m->grad_fn->is_view || x.version() == m->view_version) return;
  throw Error(ErrorKind::Runtime,
              detail::cat(where, ": a view (", m->grad_fn->name, " of ", m->grad_fn->what,
                          ") is used after an in-place write to the tensor it views: its "
                          "gradient would be wrong; take the view again after the write"));
}

void record(Tensor& result, const char* name, const std::vector<Tensor>& inputs,
            std::vector<Tensor> saved, GradRule rule, int result_saved) {
  if (!is_floating(result.dtype())) return;  // an integer or bool result has no gradient
  auto n = std::make_shared<GradNode>();
  n->name = name;
  n->seq = g_seq.fetch_add(1, std::memory_order_relaxed);
  n->next.reserve(inputs.size());
  for (const Tensor& x : inputs) {
    Edge e;
    if (x.requires_grad()) {
      check_view_current(x, name);
      const auto& m = A::meta(x);
      if (m->grad_fn)
        e.fn = m->grad_fn;
      else
        e.leaf = m;
    }
    e.shape = x.shape();
    e.dtype = x.dtype();
    n->next.push_back(std::move(e));
  }
  n->saved.reserve(saved.size());
  for (size_t i = 0; i < saved.size(); ++i) {
    SavedTensor s;
    s.is_output = int(i) == result_saved;
    s.version = saved[i].version();
    if (!s.is_output && saved[i].requires_grad()) {
      const auto& m = A::meta(saved[i]);
      if (m->grad_fn)
        s.fn = m->grad_fn;
      else
        s.leaf = m;
    }
    s.data = saved[i].detach();
    n->saved.push_back(std::move(s));
  }
  int64_t added = 0;
  for (const SavedTensor& s : n->saved)
    if (s.data.defined()) added += hold_saved(s.data);
  if (added) {
    Counters& c = counters();
    int64_t now = c.saved_bytes.fetch_add(added) + added;
    for (int64_t p = c.saved_bytes_peak.load();
         now > p && !c.saved_bytes_peak.compare_exchange_weak(p, now);) {
    }
  }
  n->rule = std::move(rule);
  n->what = describe(inputs);
  auto m = std::make_shared<AutogradMeta>();
  m->requires_grad = true;
  m->grad_fn = n;
  n->out = m;
  A::meta(result) = std::move(m);
}

Tensor sum_to(const Tensor& g, const Shape& shape, DType dt) {
  Tensor r = g;
  if (r.shape() != shape) {
    int lead = r.dim() - int(shape.size());
    Dims ax;
    for (int d = 0; d < r.dim(); ++d)
      if (d < lead || (shape[d - lead] == 1 && r.shape()[d] != 1)) ax.push_back(d);
    if (!ax.empty()) r = sum(r, ax, true);
    if (lead > 0 || r.shape() != shape) r = r.reshape(Dims(shape.begin(), shape.end()));
  }
  return r.dtype() == dt ? r : cast(r, dt);
}

void check_inplace(const char* op, const Tensor& t, const Tensor& value) {
  if (!t_grad_enabled) return;
  const auto& m = A::meta(t);
  if (m && m->requires_grad && !m->grad_fn)
    throw Error(ErrorKind::Runtime,
                detail::cat(op, ": a leaf tensor that requires grad (", place(t),
                            ") is being used in an in-place operation; write to it under "
                            "no_grad, or to a clone"));
  // A buffer outside the graph taking in a value in it, when a view of it was taken (or this is
  // one): the other tensors over it would read the new values without the graph.
  bool whole = t.offset() == 0 && t.is_contiguous() &&
               size_t(t.numel()) * itemsize(t.dtype()) == t.storage()->nbytes;
  if ((!m || !m->requires_grad) && value.requires_grad() && (!whole || t.buffer()->viewed))
    throw Error(
        ErrorKind::Runtime,
        detail::cat(op, ": an in-place write of a value that requires grad into a ", place(t),
                    " tensor whose memory other tensors share (a view, or the "
                    "tensor a view was taken of) is not supported; write out of place"));
  if (m && m->grad_fn && m->grad_fn->is_view && (m->requires_grad || value.requires_grad()))
    throw Error(ErrorKind::Runtime,
                detail::cat(op, ": an in-place write into a view (", m->grad_fn->name, " of ",
                            m->grad_fn->what,
                            ") of a tensor in the autograd graph is not "
                            "supported; write out of place (torch.where, cat) instead"));
}

Tensor snapshot(const Tensor& t) {
  auto b = std::make_shared<Buffer>();
  b->cur = t.storage();
  b->cur->kept = true;
  Tensor s(b, t.view_info(), t.dtype(), t.device());
  if (const auto& m = A::meta(t)) {
    auto c = std::make_shared<AutogradMeta>();
    c->requires_grad = m->requires_grad;
    c->grad_fn = m->grad_fn;
    A::meta(s) = std::move(c);
  }
  if (b->cur->pending()) track(b, t.device());
  return s;
}

void rebase_inplace(Tensor& t, const Tensor& value) {
  if (!t_grad_enabled) return;
  const auto& vm = A::meta(value);
  if (vm && vm->grad_fn) {
    auto& m = A::ensure(t);
    m->grad_fn = vm->grad_fn;
    m->requires_grad = true;
    vm->grad_fn->out = m;
  } else if (A::meta(t) && A::meta(t)->grad_fn) {
    A::meta(t)->grad_fn.reset();  // overwritten by values without a graph
    A::meta(t)->requires_grad = false;
  }
}

// ---- the engine -------------------------------------------------------------------------------

namespace {

void add_into(Tensor& acc, const Tensor& g) { acc = acc.defined() ? add(acc, g) : g; }

// The region gradients the running rule told of (note_region_grad); cleared after each rule.
thread_local std::vector<RegionGrad> t_region_grads;
thread_local int t_rules_running = 0;

// The gradient of one input being summed: other gradients added as they come, region
// gradients (RegionGrad) kept apart and summed last, as a cat when their regions tile the base.
struct GradSum {
  Tensor dense;
  std::vector<RegionGrad> regions;

  void add(const Tensor& g) {
    for (auto it = t_region_grads.begin(); it != t_region_grads.end(); ++it)
      if (it->whole.buffer() == g.buffer() && it->whole.shape() == g.shape()) {
        regions.push_back(std::move(*it));
        t_region_grads.erase(it);
        return;
      }
    add_into(dense, g);
  }

  Tensor take() {
    Tensor r = regions_sum();
    regions.clear();
    if (!dense.defined()) return r;
    if (!r.defined()) return std::move(dense);
    return loom::add(dense, r);
  }

 private:
  // True when the regions are [start, stop) slices of one dim, step 1, that cover it without
  // overlap; sorts them by start.
  bool tiles() {
    int d = regions[0].dim;
    for (auto& r : regions)
      if (r.dim != d || r.step != 1) return false;
    std::sort(regions.begin(), regions.end(),
              [](const RegionGrad& a, const RegionGrad& b) { return a.start < b.start; });
    int64_t at = 0;
    for (auto& r : regions) {
      if (r.start != at) return false;
      at = r.stop;
    }
    return at == regions[0].whole.shape()[d];
  }

  Tensor regions_sum() {
    if (regions.empty()) return Tensor();
    if (regions.size() == 1) return regions[0].whole;
    const Tensor& w = regions[0].whole;
    if (tiles()) {
      std::vector<Tensor> parts;
      for (auto& r : regions) parts.push_back(r.selected ? r.src.unsqueeze(r.dim) : r.src);
      return cat(parts, regions[0].dim);
    }
    Tensor z = zeros(w.shape(), {w.dtype(), w.device()});
    for (auto& r : regions) r.view_of(z).add_(r.src);
    return z;
  }
};

std::vector<Tensor> unpack(GradNode& n, bool create_graph) {
  std::vector<Tensor> out;
  out.reserve(n.saved.size());
  for (SavedTensor& s : n.saved) {
    if (s.data.defined() && s.data.version() != s.version)
      throw Error(
          ErrorKind::Runtime,
          detail::cat("backward: a ", place(s.data), " tensor saved by ", n.name, " (of ", n.what,
                      ") was modified by an in-place operation (now at version ", s.data.version(),
                      ", saved at version ", s.version,
                      "): its gradient would be wrong; clone() it before writing in place"));
    Tensor t = s.data;
    if (create_graph && (s.is_output || s.fn)) {
      auto m = std::make_shared<AutogradMeta>();
      m->requires_grad = true;
      m->grad_fn = s.is_output ? n.shared_from_this() : s.fn;
      A::meta(t) = std::move(m);
    } else if (create_graph && s.leaf) {
      A::meta(t) = s.leaf;  // the same leaf: its gradient accumulates there
    }
    out.push_back(std::move(t));
  }
  return out;
}

Tensor apply_hooks(const std::shared_ptr<AutogradMeta>& m, Tensor g) {
  if (!m) return g;
  auto hooks = m->hooks;  // a hook may remove itself
  for (auto& [id, h] : hooks) {
    Tensor r = h(g);
    if (r.defined()) {
      LOOM_CHECK(r.shape() == g.shape(), Value, "hook: returned a gradient of shape ",
                 shape_str(r.shape()), " for a gradient of shape ", shape_str(g.shape()));
      g = r;
    }
  }
  return g;
}

struct Run {
  bool create_graph = false, keep_graph = false, accumulate = true;
  // Targets (autograd::grad, or backward's `inputs`): leaves by meta, non-leaves by node.
  std::unordered_map<const AutogradMeta*, size_t> leaf_target;
  std::unordered_map<const GradNode*, size_t> node_target;
  bool only_targets = false;
  std::vector<GradSum> captured;
  std::vector<Tensor> result;  // the captured gradients, summed after the run
  std::vector<bool> reached;
  std::vector<std::shared_ptr<AutogradMeta>> target_leaf;  // by input: its hooks run once

  std::unordered_map<GradNode*, int> deps;
  std::unordered_map<GradNode*, bool> needed;
  std::unordered_map<GradNode*, GradSum> buffer;
  std::vector<std::pair<std::shared_ptr<AutogradMeta>, GradSum>> leaf_grads;
  std::unordered_map<const AutogradMeta*, size_t> leaf_slot;

  bool leaf_wanted(const AutogradMeta* m) const {
    return only_targets ? leaf_target.count(m) > 0 : true;
  }

  // Counts each node's incoming edges and marks the nodes that lead to a wanted gradient.
  void discover(const std::vector<std::shared_ptr<GradNode>>& roots) {
    std::vector<GradNode*> order;  // post-order
    std::vector<std::pair<GradNode*, size_t>> stack;
    std::unordered_set<GradNode*> seen;
    for (auto& r : roots) {
      if (!r || !seen.insert(r.get()).second) continue;
      stack.push_back({r.get(), 0});
      while (!stack.empty()) {
        auto& [n, i] = stack.back();
        if (i < n->next.size()) {
          const Edge& e = n->next[i++];
          if (e.fn) {
            ++deps[e.fn.get()];
            if (seen.insert(e.fn.get()).second) stack.push_back({e.fn.get(), 0});
          }
          continue;
        }
        order.push_back(n);
        stack.pop_back();
      }
    }
    for (GradNode* n : order) {  // children first
      bool need = node_target.count(n) > 0 || !only_targets;
      for (const Edge& e : n->next) {
        if (e.fn) need = need || needed[e.fn.get()];
        if (e.leaf) need = need || leaf_wanted(e.leaf.get());
      }
      needed[n] = need;
    }
  }

  void to_leaf(const std::shared_ptr<AutogradMeta>& m, const Tensor& g) {
    auto t = leaf_target.find(m.get());
    if (t != leaf_target.end()) {
      reached[t->second] = true;
      if (!accumulate) {
        captured[t->second].add(g);
        return;
      }
    } else if (only_targets) {
      return;
    }
    auto [it, fresh] = leaf_slot.try_emplace(m.get(), leaf_grads.size());
    if (fresh) leaf_grads.push_back({m, GradSum()});
    leaf_grads[it->second].second.add(g);
  }

  void run_node(GradNode* n, Tensor g) {
    auto out = n->out.lock();
    g = apply_hooks(out, g);
    if (out && out->retains_grad) {
      if (out->grad.defined() && !create_graph) {
        NoGradGuard ng;
        out->grad = add(out->grad, g);
      } else {
        out->grad = out->grad.defined() ? add(out->grad, g) : g;
      }
    }
    auto t = node_target.find(n);
    if (t != node_target.end()) {
      reached[t->second] = true;
      captured[t->second].add(g);
      if (accumulate && out && !out->retains_grad)
        out->grad = out->grad.defined() ? add(out->grad, g) : g;
    }
    std::vector<bool> need(n->next.size());
    bool any = false;
    for (size_t i = 0; i < n->next.size(); ++i) {
      const Edge& e = n->next[i];
      need[i] = (e.fn && needed[e.fn.get()]) || (e.leaf && leaf_wanted(e.leaf.get()));
      any = any || need[i];
    }
    if (!any) return;
    if (n->released)
      throw Error(ErrorKind::Runtime,
                  detail::cat("backward: trying to backward through the graph a second time: the "
                              "tensors ",
                              n->name, " (of ", n->what,
                              ") saved were freed by the first backward; pass retain_graph=True "
                              "to it"));
    std::vector<Tensor> s = unpack(*n, create_graph);
    ++t_rules_running;
    std::vector<Tensor> gi;
    try {
      gi = n->rule(g, s, need);
    } catch (...) {
      --t_rules_running;
      t_region_grads.clear();
      throw;
    }
    --t_rules_running;
    LOOM_CHECK(gi.size() == n->next.size(), Runtime, "internal: ", n->name, " gave ", gi.size(),
               " gradients for ", n->next.size(), " inputs");
    for (size_t i = 0; i < gi.size(); ++i) {
      const Edge& e = n->next[i];
      if (!need[i] || !gi[i].defined()) continue;
      Tensor gg = gi[i];
      LOOM_CHECK(gg.shape() == e.shape, Runtime, "internal: ", n->name,
                 " gave a gradient of shape ", shape_str(gg.shape()), " for input ", i,
                 " of shape ", shape_str(e.shape));
      if (gg.dtype() != e.dtype) gg = cast(gg, e.dtype);
      if (e.fn)
        buffer[e.fn.get()].add(gg);
      else
        to_leaf(e.leaf, gg);
    }
    t_region_grads.clear();  // those of gradients not needed
  }

  void release(GradNode* n) {
    bool holds = false;
    for (auto& s : n->saved) holds = holds || s.data.defined();
    if (keep_graph || !holds) return;  // nothing to free: a later backward may run it again
    n->free_saved();
    n->released = true;
  }

  void execute(const std::vector<std::shared_ptr<GradNode>>& roots) {
    discover(roots);
    auto later_first = [](GradNode* a, GradNode* b) { return a->seq < b->seq; };
    std::priority_queue<GradNode*, std::vector<GradNode*>, decltype(later_first)> ready(
        later_first);
    std::unordered_set<GradNode*> queued;
    for (auto& r : roots)
      if (r && deps[r.get()] == 0 && queued.insert(r.get()).second) ready.push(r.get());
    while (!ready.empty()) {
      GradNode* n = ready.top();
      ready.pop();
      auto b = buffer.find(n);
      if (needed[n] && b != buffer.end()) {
        Tensor g = b->second.take();
        buffer.erase(b);
        if (g.defined()) {
          run_node(n, std::move(g));
          release(n);
        }
      }
      for (const Edge& e : n->next)
        if (e.fn && --deps[e.fn.get()] == 0) ready.push(e.fn.get());
    }
    for (auto& [m, sum] : leaf_grads) {
      Tensor gg = apply_hooks(m, sum.take());
      if (!m->grad.defined()) {
        // The leaf's grad must own its memory: the user writes into it in place.
        if (!create_graph && (!gg.is_contiguous() || gg.buffer().use_count() > 2)) gg = gg.clone();
        m->grad = create_graph ? gg : gg.detach();
      } else if (create_graph) {
        m->grad = add(m->grad, gg);
      } else {
        m->grad.add_(gg);
      }
    }
  }
};

std::shared_ptr<GradNode> root_of(const Tensor& t, size_t i, const char* op) {
  check_view_current(t, op);
  if (t.grad_fn()) return t.grad_fn();
  LOOM_CHECK(t.requires_grad(), Runtime, op, ": element ", i,
             " of the outputs does not require grad and has no grad_fn (", place(t), ")");
  return nullptr;
}

Tensor root_grad(const Tensor& out, const Tensor& g, size_t i, const char* op) {
  if (!g.defined()) {
    LOOM_CHECK(out.numel() == 1, Runtime, op,
               ": grad can be implicitly created only for scalar outputs (output ", i, " is ",
               place(out), "); pass a gradient");
    return ones_like(out);
  }
  LOOM_CHECK(g.shape() == out.shape(), Runtime, op, ": got a gradient of shape ",
             shape_str(g.shape()), " for output ", i, " of shape ", shape_str(out.shape()));
  check_same_device(op, out, g);
  return g.dtype() == out.dtype() ? g : cast(g, out.dtype());
}

void run(const char* op, const std::vector<Tensor>& outputs, const std::vector<Tensor>& grads,
         bool keep_graph, bool create_graph, const std::vector<Tensor>& inputs, bool accumulate,
         Run& r) {
  LOOM_CHECK(grads.empty() || grads.size() == outputs.size(), Runtime, op, ": got ", grads.size(),
             " gradients for ", outputs.size(), " outputs");
  r.create_graph = create_graph;
  r.keep_graph = keep_graph;
  r.accumulate = accumulate;
  r.only_targets = !inputs.empty();
  r.captured.resize(inputs.size());
  r.reached.resize(inputs.size());
  for (size_t j = 0; j < inputs.size(); ++j) {
    const Tensor& x = inputs[j];
    LOOM_CHECK(x.requires_grad(), Runtime, op, ": input ", j,
               " of the differentiated tensors does not require grad (", place(x), ")");
    check_view_current(x, op);
    if (x.grad_fn()) {
      r.node_target[x.grad_fn().get()] = j;
    } else {
      r.leaf_target[A::meta(x).get()] = j;
      r.target_leaf.resize(inputs.size());
      r.target_leaf[j] = A::meta(x);
    }
  }
  GradModeGuard mode(create_graph);
  std::vector<std::shared_ptr<GradNode>> roots;
  for (size_t i = 0; i < outputs.size(); ++i) {
    auto fn = root_of(outputs[i], i, op);
    Tensor g = root_grad(outputs[i], grads.empty() ? Tensor() : grads[i], i, op);
    if (fn) {
      roots.push_back(fn);
      r.buffer[fn.get()].add(g);
    } else {
      r.to_leaf(A::meta(outputs[i]), g);
    }
  }
  r.execute(roots);
  for (auto& c : r.captured) r.result.push_back(c.take());
  if (!accumulate)  // a leaf's hooks see its whole gradient, as when it accumulates
    for (size_t j = 0; j < r.target_leaf.size(); ++j)
      if (r.target_leaf[j] && r.result[j].defined())
        r.result[j] = apply_hooks(r.target_leaf[j], r.result[j]);
}

}  // namespace

void note_region_grad(RegionGrad r) {
  if (t_rules_running > 0) t_region_grads.push_back(std::move(r));
}

void backward(const std::vector<Tensor>& outputs, const std::vector<Tensor>& grads,
              std::optional<bool> retain_graph, bool create_graph,
              const std::vector<Tensor>& inputs) {
  AutocastOff no_autocast;  // the rules keep the dtypes the forward recorded
  Run r;
  run("backward", outputs, grads, retain_graph.value_or(create_graph), create_graph, inputs, true,
      r);
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, std::optional<bool> retain_graph,
                         bool create_graph, bool allow_unused) {
  LOOM_CHECK(!inputs.empty(), Runtime, "grad: no inputs given");
  AutocastOff no_autocast;
  Run r;
  run("grad", outputs, grad_outputs, retain_graph.value_or(create_graph), create_graph, inputs,
      false, r);
  for (size_t j = 0; j < inputs.size(); ++j)
    LOOM_CHECK(r.reached[j] || allow_unused, Runtime, "grad: input ", j, " (", place(inputs[j]),
               ") was not used in the graph of the outputs; pass allow_unused=True if this is "
               "intended");
  return r.result;
}

}  // namespace autograd
}  // namespace loom
