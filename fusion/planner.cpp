#include "fusion/planner.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <functional>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "fusion/plan_state.h"
#include "tensor/backend.h"
#include "tensor/knobs.h"

namespace loom {
using namespace plan_impl;
namespace {

// The consumer reads every element of p in p's own order.
bool linear_identity(const View& v, const Node& p) {
  return v.offset == 0 && !region_write(p) && numel(v.shape) == numel(p.shape) &&
         is_contiguous(v.shape, v.strides);
}

bool same_view(const View& a, const View& b) {
  return a.offset == b.offset && a.shape == b.shape && a.strides == b.strides;
}

Shape keep_shape(const PGroup& g) {
  Shape k = g.S;
  for (int a : g.axes) k[a] = 1;
  return k;
}
Shape squeeze_shape(const PGroup& g) {
  Shape k;
  for (int d = 0; d < int(g.S.size()); ++d)
    if (std::find(g.axes.begin(), g.axes.end(), d) == g.axes.end()) k.push_back(g.S[d]);
  return k;
}

class Planner : PlanState {
 public:
  Planner(const std::vector<std::shared_ptr<Storage>>& dag,
          const std::vector<std::shared_ptr<Storage>>& roots, bool fuse, const PlanLimits& lim,
          std::vector<std::vector<ScalarSrc>>* srcs)
      : fuse_(fuse), lim_(lim), srcs_(srcs) {
    for (auto& st : dag) {
      st->mark_epoch = epoch, st->mark = int64_t(nodes.size());
      nodes.push_back({st, st->node.get()});
    }
    for (auto& r : roots) nodes[idx(r.get())].root = true;
    if (!nodes.empty()) column_bodies_ = device_caps(nodes[0].n->device).column_bodies;
    column_sums_ =
        !nodes.empty() && column_sums_on() && device_caps(nodes[0].n->device).column_sums;
    if (column_sums_) column_sum_cols_ = device_caps(nodes[0].n->device).column_sum_cols;
    readers_.resize(nodes.size());
    for (int i = 0; i < int(nodes.size()); ++i)
      for (auto& in : nodes[i].n->in) {
        if (!in.st) continue;
        if (idx(in.st.get()) >= 0) readers_[size_t(idx(in.st.get()))].push_back(i);
        if (is_reduce(nodes[i].n->op)) reduce_loads_[in.st.get()].push_back({&in.view, i});
      }
    // Constants are inlined into their readers as scalars, except where memory must hold
    // them: region-write bases and inputs of opaque ops.
    for (auto& pn : nodes) {
      if (pn.n->base && idx(pn.n->base.get()) >= 0) nodes[idx(pn.n->base.get())].in_memory = true;
      if (is_opaque(pn.n->op))
        for (auto& in : pn.n->in)
          if (in.st && idx(in.st.get()) >= 0) nodes[idx(in.st.get())].in_memory = true;
    }
  }

  std::vector<Group> run() {
    place_all();
    // Where a group would write values that only a later group reads and that group could
    // compute them again from fewer bytes, plan once more with those values kept out of it.
    if (fuse_ && recompute_on() && mark_recompute()) {
      for (PNode& pn : nodes) {
        pn.group = -1, pn.space = Space::Full, pn.rule = Rule::Start;
        pn.split = Split::None, pn.split_from = Op::NumOps, pn.materialize = false;
        pn.colsum = false, pn.inlined = false;
      }
      groups.clear();
      gdeps_.clear();
      place_all();
    }
    std::vector<Group> out;
    GroupEmitter emit(*this, srcs_);
    for (int g : group_order()) out.push_back(emit.build(g));
    return out;
  }

 private:
  bool fuse_;
  bool column_bodies_ = true;  // the flush's backend caps().column_bodies
  bool column_sums_ = false;
  int64_t column_sum_cols_ =
      0;  // caps().column_sum_cols   // caps().column_sums, and LOOM_COLUMN_SUMS
  PlanLimits lim_;
  std::vector<std::vector<ScalarSrc>>* srcs_;  // when asked: each group's scalar sources
  std::vector<std::vector<int>> gdeps_;
  std::vector<std::vector<int>> readers_;  // each node's readers in the flush
  struct ReduceLoad {
    const View* view;
    int node;
  };
  // What the reductions read directly, by the memory read.
  std::unordered_map<const Storage*, std::vector<ReduceLoad>> reduce_loads_;
  // Every node by the memory it reads (readers_of_memory: built at a flush's first asking).
  std::unordered_map<const Storage*, std::vector<int>> mem_readers_;
  // The nodes that read memory `st` (column_sum_group, row_gather_group), in node order.
  const std::vector<int>& readers_of_memory(const Storage* st) {
    if (mem_readers_.empty())
      for (int j = 0; j < int(nodes.size()); ++j)
        for (auto& in : nodes[j].n->in)
          if (in.st) mem_readers_[in.st.get()].push_back(j);
    return mem_readers_[st];
  }
  // By first-planning group: whether values moved out of it (mark_recompute).
  std::vector<char> split_home_;

  // Pointwise node i, with an input made in reduction group g, is read by nothing but
  // reductions over other dims (layer_norm's dy * xhat, summed over rows for dgamma, inside
  // the row kernel of dx): joining g would write it for those readers; starting their group
  // instead writes its one input made in g and lets their loads merge with a sibling's
  // (merge_siblings: dgamma with dbeta, both loading dy): one kernel fewer, the same bytes.
  bool reduced_elsewhere(int i, int g) const {
    const PNode& me = nodes[i];
    const PGroup& G = groups[g];
    if (me.root || me.in_memory || G.axes.empty() || G.opaque || readers_[size_t(i)].empty() ||
        prim_class(me.n->op) != PrimClass::Pointwise || me.n->base)
      return false;
    const std::vector<int>& axes = nodes[readers_[size_t(i)][0]].n->axes;
    bool sums = true;  // every reader can sum it over g's rows inside g (better still)
    for (int r : readers_[size_t(i)]) sums = sums && column_sum(*nodes[r].n, G);
    if (sums) return false;
    for (int r : readers_[size_t(i)]) {
      const Node& rn = *nodes[r].n;
      if (!is_reduce(rn.op) || rn.axes == G.axes || rn.axes != axes) return false;
    }
    // The trade is even only where another reduction over those dims loads i's other input
    // through the same view (dbeta's sum of dy): the new group shares that load. Otherwise
    // it would read that input again (rms_norm's dgamma alone).
    int made_in_g = 0;  // inputs g computes but does not write yet
    bool shared = false;
    for (auto& in : me.n->in) {
      int p = producer(in);
      if (p >= 0 && is_const(p)) continue;
      if (p >= 0 && nodes[p].group == g) {
        if (nodes[p].space != Space::Full || nodes[p].root || nodes[p].in_memory) return false;
        ++made_in_g;
        continue;
      }
      auto it = in.st ? reduce_loads_.find(in.st.get()) : reduce_loads_.end();
      if (it == reduce_loads_.end()) continue;
      for (const ReduceLoad& l : it->second)
        if (nodes[l.node].n->axes == axes && same_view(*l.view, in.view)) shared = true;
    }
    return made_in_g == 1 && shared;
  }

  // Whether reduction n, of a value over G's space, can be a column sum in G (PNode::colsum):
  // a float Sum over exactly G's kept dims, of its input's dtype, in a row group of other than
  // one row (one row's sum is the row itself, which in-group readers would take for the value).
  bool column_sum(const Node& n, const PGroup& G) const {
    if (!column_sums_ || n.op != Op::Sum || G.axes.empty() || G.opaque || n.in.size() != 1 ||
        n.dtype != n.in[0].dtype || (n.dtype != DType::Float32 && n.dtype != DType::Float64) ||
        n.in[0].view.shape != G.S)
      return false;
    int64_t rows = 1, cols = 1;
    for (int d = 0; d < int(G.S.size()); ++d) {
      const bool col = std::find(G.axes.begin(), G.axes.end(), d) != G.axes.end();
      const bool summed = std::find(n.axes.begin(), n.axes.end(), d) != n.axes.end();
      if (G.S[d] != 1 && col == summed) return false;
      (col ? cols : rows) *= G.S[d];
    }
    return rows != 1 && (column_sum_cols_ == 0 || (cols <= column_sum_cols_ && rows_last(G)));
  }

  // Whether G reduces its trailing dims (a row group over contiguous rows, not a column
  // reduction), where a backend with column_sum_cols takes column sums (tensor/backend.h).
  static bool rows_last(const PGroup& G) {
    const int R = int(G.S.size()), A = int(G.axes.size());
    for (int i = 0; i < A; ++i)
      if (std::find(G.axes.begin(), G.axes.end(), R - 1 - i) == G.axes.end()) return false;
    return true;
  }

  // Whether reduction n of Row node p of G (through input `in`) sums it over every row into one
  // value: a column sum of a row value (a loss's mean of its per-row terms, in their kernel).
  bool row_sum(const Node& n, const Input& in, const PNode& p, const PGroup& G) const {
    if (!column_sums_ || n.op != Op::Sum || G.axes.empty() || G.opaque || numel(n.shape) != 1 ||
        n.dtype != in.dtype || (n.dtype != DType::Float32 && n.dtype != DType::Float64) ||
        !linear_identity(in.view, *p.n) || (column_sum_cols_ > 0 && !rows_last(G)))
      return false;
    const Shape& s = p.n->shape;
    return (s == keep_shape(G) || s == squeeze_shape(G)) && numel(s) != 1;
  }

  // The group a Sum over rows of ready memory may join as a column sum: one that loads that
  // memory through the same view (a norm's dbeta, the sum of dy, in the kernel of dx). -1 if
  // none.
  int column_sum_group(int i) {
    const Node& n = *nodes[i].n;
    if (!column_sums_ || n.op != Op::Sum || n.in.size() != 1 || !n.in[0].st ||
        producer(n.in[0]) >= 0)
      return -1;
    const Input& x = n.in[0];
    for (int j : readers_of_memory(x.st.get())) {
      const int g = nodes[j].group;
      if (j >= i || g < 0 || !groups[g].alive || !fits(g, 1) || apart(i, g) ||
          !column_sum(n, groups[g]))
        continue;
      for (auto& in : nodes[j].n->in)
        if (in.st == x.st && same_view(in.view, x.view) && !is_reduce(nodes[j].n->op)) return g;
    }
    return -1;
  }

  // The group of the column sum a float Cast of the whole sum reads, where the cast can be that
  // sum's stored dtype (GOutput::cast: a bf16 norm weight's gradient in dx's kernel, not a kernel
  // of its own); -1 if none.
  int colsum_cast_group(int i) {
    const Node& n = *nodes[i].n;
    if (n.op != Op::Cast || n.in.size() != 1 || n.base || !is_floating(n.dtype)) return -1;
    const int p = producer(n.in[0]);
    if (p < 0 || is_const(p) || !nodes[p].colsum || nodes[p].n->op != Op::Sum ||
        !linear_identity(n.in[0].view, *nodes[p].n))
      return -1;
    const int g = nodes[p].group;
    return g >= 0 && groups[g].alive && fits(g, 1) ? g : -1;
  }

  int new_group(Shape S, std::vector<int> axes, int first) {
    groups.push_back({std::move(S), std::move(axes), {first}});
    gdeps_.emplace_back();
    int g = int(groups.size()) - 1;
    nodes[first].group = g;
    add_deps(g, first);
    return g;
  }
  void join(int g, int i, Space sp) {
    groups[g].members.push_back(i);
    nodes[i].group = g;
    nodes[i].space = sp;
    add_deps(g, i);
  }
  void add_deps(int g, int i) {
    for_each_dep(i, [&](int p) {
      int pg = nodes[p].group;
      auto& d = gdeps_[g];
      if (pg >= 0 && pg != g && std::find(d.begin(), d.end(), pg) == d.end()) d.push_back(pg);
    });
  }

  // Groups that `g` reads from (materialized edges and region-write bases), kept up to date
  // as nodes join and groups merge, so planning a long chain stays linear.
  const std::vector<int>& deps_of(int g) const { return gdeps_[g]; }
  template <typename F>
  void for_each_dep(int i, F f) const {
    const Node& n = *nodes[i].n;
    for (auto& in : n.in) {
      int p = producer(in);
      if (p >= 0 && (!is_const(p) || nodes[p].in_memory) && !nodes[p].inlined) f(p);
    }
    if (n.base && n.base->pending() && idx(n.base.get()) >= 0) f(idx(n.base.get()));
  }
  // Does group `from` (transitively) read group `to`?
  bool reaches(int from, int to) const {
    std::vector<int> stack{from};
    std::unordered_set<int> seen;
    while (!stack.empty()) {
      int g = stack.back();
      stack.pop_back();
      if (g == to) return true;
      if (!seen.insert(g).second) continue;
      for (int d : deps_of(g)) stack.push_back(d);
    }
    return false;
  }

  void place_all() {
    for (int i = 0; i < int(nodes.size()); ++i) place(i);
    if (fuse_) merge_siblings();
    mark_materialized();
  }

  static bool recompute_on() {
    static const bool on = knob_flag(Knob::Recompute);
    return on;
  }

  // Bytes a group moves reading input `in` of a member (a broadcast reads its memory once).
  static int64_t read_bytes(const Input& in) {
    if (!in.st) return 0;
    return std::min<int64_t>(int64_t(in.st->nbytes), numel(in.view.shape) * itemsize(in.dtype));
  }
  int64_t node_bytes(int j) const {
    return numel(nodes[j].n->shape) * int64_t(itemsize(nodes[j].n->dtype));
  }

  // Save or recompute, by bytes. In each fused group, the members only later groups read
  // (with the members only they read: their Full-space pointwise, index and random producers)
  // are a set R that the group computes and writes for those readers. A backward's values of
  // the forward are such sets: attention's probabilities from the recomputed scores and the
  // saved log-sum-exp, a norm's xhat, a 16-bit GELU's float32 derivative. R moves out of the group
  // when reading R's inputs where R is read costs fewer bytes than writing R and reading it back;
  // its readers then compute it (the next planning starts R in a group of its own, which they
  // join). Matmuls, scans and reductions are never recomputed; random values are drawn again from
  // their counters.
  bool mark_recompute() {
    for (PNode& pn : nodes) pn.home = pn.group;
    split_home_.assign(groups.size(), 0);
    std::vector<char> in_r(nodes.size(), 0);
    bool any = false;
    for (int g = 0; g < int(groups.size()); ++g) {
      const PGroup& G = groups[g];
      if (!G.alive || G.opaque) continue;
      // R in reverse dag order; `settled`: leave out values that must be memory anyway (read
      // by a matmul), so that the group keeps them (GELU's result) and R is what only the
      // later group reads (GELU's derivative).
      std::vector<int> r;
      bool keeps_one = false;
      auto collect = [&](bool settled) {
        for (int j : r) in_r[size_t(j)] = 0;
        r.clear();
        keeps_one = false;
        for (auto it = G.members.rbegin(); it != G.members.rend(); ++it) {
          const int j = *it;
          const PNode& pn = nodes[j];
          const PrimClass c = prim_class(pn.n->op);
          bool ok =
              (c == PrimClass::Pointwise || c == PrimClass::Index || c == PrimClass::Random) &&
              pn.space == Space::Full && !pn.root && !pn.n->base && !(settled && pn.in_memory);
          bool outside = false;
          for (int rd : readers_[size_t(j)]) {
            if (nodes[rd].group != g)
              outside = true, ok = ok && !(settled && opaque_group(nodes[rd].group));
            else if (!in_r[size_t(rd)])
              ok = false;
          }
          // A value read inside the group (or by nothing but R, which must read it too) stays.
          if (ok && (outside || !r.empty())) {
            in_r[size_t(j)] = 1;
            r.push_back(j);
          } else {
            keeps_one = true;
          }
        }
      };
      collect(false);
      if (!r.empty() && !keeps_one) collect(true);
      if (r.empty() || !keeps_one) continue;
      // R's parts (connected through reads inside R: a backward's recomputed probabilities
      // apart from the forward's own, which only a matmul reads) are weighed one by one.
      std::unordered_map<int, int> part;
      std::function<int(int)> root_of = [&](int j) {
        auto it = part.find(j);
        if (it == part.end() || it->second == j) return j;
        return it->second = root_of(it->second);
      };
      for (int j : r) part.emplace(j, j);
      for (int j : r)
        for (const Input& in : nodes[j].n->in) {
          const int p = producer(in);
          if (p >= 0 && in_r[size_t(p)] && nodes[p].group == g) part[root_of(j)] = root_of(p);
        }
      std::unordered_set<const Storage*> loaded;  // memory the group loads for other members
      for (int m : G.members)
        if (!in_r[size_t(m)])
          for (const Input& in : nodes[m].n->in) {
            const int p = producer(in);
            if (in.st && (p < 0 || nodes[p].group != g)) loaded.insert(in.st.get());
          }
      // Keep: a part's values that leave the group are written once and read by each other
      // group. Recompute: its inputs made in the group are read again where it is read (once,
      // as the readers join its group), and written first if the group did not write them;
      // memory the group loads for the part alone is loaded there instead (no change), memory
      // it also loads for other members is loaded twice; values that must be memory anyway
      // (read by a matmul) are written either way.
      // A part is moved only where one other group could take it in: the group computes it
      // once, so a second group reading it would read it from memory as now.
      std::unordered_map<int, std::pair<int64_t, int64_t>> cost;  // part: keep, again
      std::unordered_map<int, std::unordered_set<const Storage*>> seen;
      std::unordered_map<int, std::unordered_set<int>> takers;
      for (int j : r) {
        const int k = root_of(j);
        auto& [keep, again] = cost[k];
        std::unordered_set<int> others;
        bool opaque_reader = nodes[j].in_memory;
        for (int rd : readers_[size_t(j)])
          if (!in_r[size_t(rd)]) {
            if (opaque_group(nodes[rd].group) || !takes_in_order(rd, j))
              opaque_reader = true;
            else
              others.insert(nodes[rd].group), takers[k].insert(nodes[rd].group);
          }
        if (!others.empty() || opaque_reader) keep += node_bytes(j) * int64_t(1 + others.size());
        if (opaque_reader) again += node_bytes(j);
        for (const Input& in : nodes[j].n->in) {
          const int p = producer(in);
          if ((p >= 0 && (in_r[size_t(p)] || is_const(p))) || !in.st ||
              !seen[k].insert(in.st.get()).second)
            continue;
          if (p >= 0 && nodes[p].group == g)
            again += node_bytes(p) * (nodes[p].materialize ? 1 : 2);
          else if (loaded.count(in.st.get()))
            again += read_bytes(in);
        }
      }
      for (int j : r) {
        auto [keep, again] = cost[root_of(j)];
        if (again < keep && takers[root_of(j)].size() == 1) {
          nodes[j].barrier = g;
          split_home_[size_t(g)] = 1;
          any = true;
        }
      }
      for (int j : r) in_r[size_t(j)] = 0;
    }
    if (!any)
      for (PNode& pn : nodes) pn.home = -1;
    return any;
  }

  // A reduction whose reduced dims leave the innermost kept (a sum over rows: the column
  // layout).
  static bool column_reduce(const std::vector<int>& axes, const Shape& S) {
    const int last = int(S.size()) - 1;
    return last > 0 && S[last] > 1 && std::find(axes.begin(), axes.end(), last) == axes.end();
  }
  // A cast of memory whose readers read it through broadcasts (a 16-bit norm weight's float32
  // upcast, read a row at a time): no kernel of its own writes it for them; each reader's
  // group loads the memory through its view and casts it there, reading fewer bytes than the
  // cast would write and they read back. Readers of other kinds (a matmul, a row gather's
  // table, a region write's base) or views (a transpose) keep it in memory, as do index casts
  // (a compare with the iota reads a loaded index: cpu/program.cpp mark_index_compares).
  bool inline_cast(int i) const {
    const PNode& me = nodes[i];
    const Node& n = *me.n;
    if (n.op != Op::Cast || n.base || me.root || me.in_memory || n.in.size() != 1 || !n.in[0].st ||
        producer(n.in[0]) >= 0 || readers_[size_t(i)].empty() || !is_floating(n.dtype) ||
        !is_floating(n.in[0].dtype))
      return false;
    bool wider = false;
    for (int rd : readers_[size_t(i)]) {
      const Node& r = *nodes[rd].n;
      const PrimClass c = prim_class(r.op);
      if ((c != PrimClass::Pointwise && c != PrimClass::Reduce) || r.base == me.st) return false;
      for (const Input& in : r.in)
        if (producer(in) == i) {
          if (!through(n.in[0], in, n.shape)) return false;
          wider = wider || numel(in.view.shape) > numel(n.shape);
        }
    }
    return wider;
  }

  // Whether group g computes a costly op (exp, log, erf, division, ...) and writes a value
  // another kernel or the caller reads (a GELU backward's dx, read by a matmul).
  bool costly_written(int g) const {
    bool costly = false, written = false;
    for (int m : groups[g].members) {
      const Op op = nodes[m].n->op;
      costly = costly || unary_kind(op) == UnaryKind::FloatOut || op == Op::Div || op == Op::Pow;
      written = written || nodes[m].in_memory || nodes[m].root;
    }
    return costly && written;
  }

  // A reader outside every group (none is, but an unplaced one must count as memory).
  bool opaque_group(int g) const { return g < 0 || groups[g].opaque; }

  // Does reader rd read node j element for element over j's shape (so that it could compute
  // j in its own kernel), rather than through a view or broadcast?
  bool takes_in_order(int rd, int j) const {
    const Node& n = *nodes[rd].n;
    if (n.base || prim_class(n.op) == PrimClass::Opaque || n.op == Op::Gather) return false;
    for (const Input& in : n.in)
      if (producer(in) == j && (!linear_identity(in.view, *nodes[j].n) ||
                                (is_reduce(n.op) ? in.view.shape : n.shape) != nodes[j].n->shape))
        return false;
    return true;
  }

  // Recomputation's one constraint on the second planning: a moved node never shares a group
  // with a node that stayed in the group it moved out of.
  bool apart(int i, int g) const {
    const PNode& me = nodes[i];
    if (me.barrier < 0 && (me.home < 0 || !split_home_[size_t(me.home)])) return false;
    for (int m : groups[g].members) {
      const PNode& o = nodes[m];
      if (me.barrier >= 0 && o.barrier < 0 && o.home == me.barrier) return true;
      if (me.barrier < 0 && o.barrier >= 0 && o.barrier == me.home) return true;
    }
    return false;
  }
  bool groups_apart(int g, int h) const {
    for (int m : groups[h].members)
      if (apart(m, g)) return true;
    return false;
  }

  bool fits(int g, int extra) const {
    return int(groups[g].members.size()) + extra <= lim_.max_nodes &&
           groups[g].leaves <= lim_.max_leaves;
  }

  // The space node i would take in group g through input `in` from producer p, if fusable;
  // else why not (in `why`, when given).
  std::optional<Space> fusable(int i, const Input& in, int p, Split* why = nullptr) const {
    const Node& n = *nodes[i].n;
    const PNode& pp = nodes[p];
    const PGroup& G = groups[pp.group];
    auto no = [&](Split s) -> std::optional<Space> {
      if (why) *why = s;
      return std::nullopt;
    };
    if (G.opaque) {
      if (!G.epilogue_ok) return no(Split::ProducerOpaque);
      // A matmul's epilogue: pointwise ops reading C (or an epilogue value) element for element
      // over C's shape, so that each block of C's rows is complete once the GEMM wrote it.
      if (prim_class(n.op) != PrimClass::Pointwise || n.base) return no(Split::EpilogueOp);
      if (!linear_identity(in.view, *pp.n)) return no(Split::View);
      if (n.shape != G.S) return no(Split::Shape);
      return Space::Full;
    }
    if (region_write(*pp.n)) return no(Split::ProducerRegionWrite);
    if (prim_class(pp.n->op) == PrimClass::Alloc) return no(Split::ProducerAlloc);
    // A row gather reads its tensor from memory at one index a row: never a value of its group.
    if (n.op == Op::Gather && &in == &n.in[0]) return no(Split::View);
    // A column sum is an output of its group, not a value in it.
    if (pp.colsum) return no(Split::Shape);
    if (is_reduce(n.op)) {
      if (pp.space == Space::Row && row_sum(n, in, pp, G)) return Space::Row;
      if (pp.space != Space::Full || !linear_identity(in.view, *pp.n)) return no(Split::View);
      if (in.view.shape != G.S) return no(Split::Shape);
      if (!G.axes.empty() && G.axes != n.axes)
        return column_sum(n, G) ? std::optional<Space>(Space::Full) : no(Split::Axes);
      if (G.axes.empty() && !column_bodies_ && column_reduce(n.axes, G.S) &&
          costly_written(pp.group))
        return no(Split::ColumnBody);
      return Space::Row;
    }
    const Shape& Sn = n.base ? n.region->shape : n.shape;
    if (pp.space == Space::Full) {
      if (!linear_identity(in.view, *pp.n)) return no(Split::View);
      if (Sn == G.S || reshapes_into(n, G.S)) return Space::Full;
      return no(Split::Shape);
    }
    // Row-space producer: an epilogue on the reduced shape, or broadcast back over rows.
    if (linear_identity(in.view, *pp.n) && (Sn == keep_shape(G) || Sn == squeeze_shape(G)) &&
        !n.base)
      return Space::Row;
    if (in.view.shape == G.S && Sn == G.S && in.view.offset == 0) {
      Strides ks = contiguous_strides(keep_shape(G));
      for (int d = 0; d < int(G.S.size()); ++d) {
        bool red = std::find(G.axes.begin(), G.axes.end(), d) != G.axes.end();
        if (G.S[d] == 1) continue;
        if (red ? in.view.strides[d] != 0 : in.view.strides[d] != ks[d]) return no(Split::View);
      }
      return Space::Full;
    }
    return no(linear_identity(in.view, *pp.n) ? Split::Shape : Split::View);
  }

  // Whether pointwise node n, reading a value of a group over S in its own order but shaped
  // otherwise (a reshape: the transposed copy of a head's gradient, then its region of the
  // qkv gradient), can run over S: each view it loads and the region it writes re-expressed
  // over S as a reshape without a copy would (GroupEmitter::build then does so).
  static bool reshapes_into(const Node& n, const Shape& S) {
    const Shape& own = n.base ? n.region->shape : n.shape;
    if (prim_class(n.op) != PrimClass::Pointwise || numel(own) != numel(S)) return false;
    if (n.base && !view_strides(own, n.region->strides, S)) return false;
    for (const Input& in : n.in)
      if (in.st && !view_strides(in.view.shape, in.view.strides, S)) return false;
    return true;
  }

  // Node i may join (or pull in) group g in space `sp` only if every one of its inputs made
  // inside g is fusable in that space: a second read of an in-group value through another
  // view (y + y.t(), a broadcast slice) would otherwise read the value as if unpermuted, and
  // a Row node (epilogue) must not read a Full node, which no pass computes (when every
  // reduced dim has size 1 the keepdim shape equals the space and both look fusable).
  bool same_space(int i, int g, Space sp) const {
    if (base_group(i) == g) return false;
    for (auto& in : nodes[i].n->in) {
      int p = producer(in);
      if (p < 0 || is_const(p) || nodes[p].group != g) continue;
      auto s = fusable(i, in, p);
      if (!s || *s != sp) return false;
    }
    return true;
  }

  void place(int i) {
    Node& n = *nodes[i].n;
    if (prim_class(n.op) == PrimClass::Scalar && !nodes[i].root && !nodes[i].in_memory)
      return;                                          // inlined as a scalar
    if (prim_class(n.op) == PrimClass::Alloc) return;  // allocation only
    if (fuse_ && inline_cast(i)) {
      nodes[i].inlined = true;  // computed where it is read
      return;
    }
    if (fuse_ && n.op == Op::Gather)
      if (int g = row_gather_group(i); g >= 0) {
        join(g, i, Space::Row);
        nodes[i].rule = Rule::RowGather;
        count_leaves(g, i);
        return;
      }
    if (is_opaque(n.op)) {
      int g = new_group(n.shape, {}, i);
      groups[g].opaque = true;
      groups[g].epilogue_ok = fuse_ && n.op == Op::MatMul && device_caps(n.device).matmul_epilogue;
      nodes[i].rule = Rule::Opaque;
      return;
    }
    if (fuse_)
      if (int g = colsum_cast_group(i); g >= 0) {
        join(g, i, Space::Full);
        nodes[i].colsum = true;  // the sum's output, stored as the cast's dtype
        nodes[i].rule = Rule::PointwiseChain;
        count_leaves(g, i);
        return;
      }
    Shape own = n.base ? n.region->shape : is_reduce(n.op) ? n.in[0].view.shape : n.shape;
    std::vector<int> axes = is_reduce(n.op) ? n.axes : std::vector<int>{};
    if (!fuse_) {
      new_group(own, axes, i);
      nodes[i].space = is_reduce(n.op) ? Space::Row : Space::Full;
      nodes[i].rule = Rule::Unfused;
      count_leaves(nodes[i].group, i);
      return;
    }
    // Join the first producer's group that accepts this node, then pull in other
    // producers' groups that are compatible and independent. A row value of a reduction
    // group's is tried first: an op on it stays in the row kernel as its epilogue (a loss's
    // masked per-row term, which its mean then sums there) rather than taking it to a
    // pointwise group of the op's other input.
    int target = -1;
    Space sp = Space::Full;
    PNode& me = nodes[i];
    SmallVec<const Input*, 4> order;
    for (auto& in : n.in) {
      const int p = producer(in);
      if (p >= 0 && !is_const(p) && nodes[p].space == Space::Row && nodes[p].group >= 0 &&
          !groups[nodes[p].group].axes.empty())
        order.push_back(&in);
    }
    for (auto& in : n.in)
      if (std::find(order.begin(), order.end(), &in) == order.end()) order.push_back(&in);
    for (const Input* inp : order) {
      const Input& in = *inp;
      int p = producer(in);
      if (p < 0 || is_const(p) || nodes[p].group < 0) continue;
      // the first producer's reason is the one reported if the node starts a group
      Split why = Split::None;
      auto s = fusable(i, in, p, &why);
      int g = nodes[p].group;
      if (s && !fits(g, 1)) why = Split::Limit;
      if (s && why == Split::None && reduced_elsewhere(i, g)) why = Split::ReducedElsewhere;
      if (s && why == Split::None && apart(i, g)) why = Split::Recompute;
      if (s && why == Split::None && !same_space(i, g, *s)) why = Split::OtherView;
      if (s && why == Split::None) {
        bool cyclic = false;
        for_each_dep(i, [&](int q) {
          int qg = nodes[q].group;
          if (qg >= 0 && qg != g && reaches(qg, g)) cyclic = true;
        });
        if (cyclic) why = Split::Cycle;
      }
      if (why != Split::None) {
        if (me.split == Split::None) me.split = why, me.split_from = nodes[p].n->op;
        continue;
      }
      target = g, sp = *s;
      me.split = Split::None, me.split_from = Op::NumOps;
      break;
    }
    if (target < 0)
      if (int g = column_sum_group(i); g >= 0) {
        join(g, i, Space::Full);
        nodes[i].colsum = true;
        nodes[i].rule = Rule::ReducePrologue;
        count_leaves(g, i);
        return;
      }
    if (target < 0) {
      // A value computed again where it is read starts its group there.
      if (me.barrier >= 0 && me.split == Split::None) me.split = Split::Recompute;
      new_group(own, axes, i);
      nodes[i].space = is_reduce(n.op) ? Space::Row : Space::Full;
      count_leaves(nodes[i].group, i);
      return;
    }
    // A column sum: over other dims than the group's, or of a row value (a row sum: fusable()
    // takes no other reduction of a row value).
    bool colsum = false;
    if (is_reduce(n.op) && !groups[target].axes.empty()) {
      colsum = groups[target].axes != n.axes;
      for (auto& in : n.in) {
        const int p = producer(in);
        colsum = colsum || (p >= 0 && nodes[p].group == target && nodes[p].space == Space::Row);
      }
    }
    if (is_reduce(n.op) && !colsum) groups[target].axes = n.axes;
    join(target, i, sp);
    me.colsum = colsum;
    // The join's name: a Full node reading a row value of its group broadcasts it back.
    bool reads_row = false;
    for (auto& in : n.in) {
      int p = producer(in);
      if (p >= 0 && !is_const(p) && nodes[p].group == target && nodes[p].space == Space::Row)
        reads_row = true;
    }
    // A matmul group: the ops reading C directly are its epilogue's first; the rest chain on.
    bool reads_c = false;
    for (auto& in : n.in) {
      int p = producer(in);
      if (p >= 0 && groups[target].opaque && p == groups[target].members[0]) reads_c = true;
    }
    me.rule = is_reduce(n.op)    ? Rule::ReducePrologue
              : sp == Space::Row ? Rule::RowEpilogue
              : reads_row        ? Rule::BroadcastBack
              : reads_c          ? Rule::MatmulEpilogue
                                 : Rule::PointwiseChain;
    count_leaves(target, i);
    for (auto& in : n.in) {
      int p = producer(in);
      if (p < 0 || is_const(p) || nodes[p].group < 0 || nodes[p].group == target) continue;
      int h = nodes[p].group;
      if (!same_space(i, h, sp) || !mergeable(target, h)) continue;
      merge(target, h);
    }
  }

  // The group making the memory a region write starts from: never the writer's own group,
  // whose outputs start as a copy of that memory before the kernel computes it.
  int base_group(int i) const {
    const Node& n = *nodes[i].n;
    if (!n.base || !n.base->pending()) return -1;
    int b = idx(n.base.get());
    return b >= 0 ? nodes[b].group : -1;
  }

  // Members of group a reading members of group b, if both were one group.
  bool internal_reads_ok(int a, int b) const {
    for (int m : groups[a].members) {
      if (base_group(m) == b) return false;
      for (auto& in : nodes[m].n->in) {
        int p = producer(in);
        if (p < 0 || is_const(p) || nodes[p].group != b) continue;
        auto s = fusable(m, in, p);
        if (!s || *s != nodes[m].space) return false;
      }
    }
    return true;
  }

  bool mergeable(int g, int h) const {
    const PGroup &G = groups[g], &H = groups[h];
    if (H.opaque || G.opaque || G.S != H.S || groups_apart(g, h)) return false;
    if (!G.axes.empty() && !H.axes.empty() && G.axes != H.axes) return false;
    if (int(G.members.size() + H.members.size()) > lim_.max_nodes) return false;
    if (G.leaves + H.leaves > lim_.max_leaves) return false;
    // Reads between the two groups become in-group reads, which ignore the view: each must
    // be fusable in its reader's space (a transposed or sliced read must stay a load).
    if (!internal_reads_ok(g, h) || !internal_reads_ok(h, g)) return false;
    // Merging must not close a cycle through a third group.
    for (int d : deps_of(h))
      if (d != g && reaches(d, g)) return false;
    for (int d : deps_of(g))
      if (d != h && reaches(d, h)) return false;
    return true;
  }
  void merge(int g, int h) {
    PGroup& H = groups[h];
    if (groups[g].axes.empty()) groups[g].axes = H.axes;
    // The merged group's first member now shares a kernel with the other producer's group.
    nodes[H.members[0]].rule = Rule::SiblingMerge;
    nodes[H.members[0]].split = Split::None;
    for (int m : H.members) nodes[m].group = g;
    auto& M = groups[g].members;
    M.insert(M.end(), H.members.begin(), H.members.end());
    std::sort(M.begin(), M.end());  // dag order is topological
    groups[g].leaves += H.leaves;
    H.members.clear();
    H.alive = false;
    for (int d : gdeps_[h])
      if (d != g && std::find(gdeps_[g].begin(), gdeps_[g].end(), d) == gdeps_[g].end())
        gdeps_[g].push_back(d);
    gdeps_[h].clear();
    for (auto& d : gdeps_) {
      for (int& x : d)
        if (x == h) x = g;
      std::sort(d.begin(), d.end());
      d.erase(std::unique(d.begin(), d.end()), d.end());
    }
    auto& own = gdeps_[g];
    own.erase(std::remove(own.begin(), own.end(), g), own.end());
  }
  // Reductions over one space and the same dims that load the same memory through the same
  // view (a norm's dgamma and dbeta column sums of dy, a loss's sums over the logits) become
  // one kernel: the memory is read once and a launch is saved. Pointwise groups stay apart
  // (a pure pointwise kernel streams faster than the same work inside a reduction's passes).
  void merge_siblings() {
    // The loads of each reduction group, by the memory they read: (view, group), the memory
    // in the order of its first load (the merges, and so the plan, the same every run).
    std::unordered_map<const Storage*, size_t> slot;
    std::vector<std::vector<std::pair<const View*, int>>> loads;
    for (int g = 0; g < int(groups.size()); ++g) {
      const PGroup& G = groups[g];
      if (!G.alive || G.opaque || G.axes.empty()) continue;
      for (int m : G.members)
        for (const Input& in : nodes[m].n->in) {
          int p = producer(in);
          if (!in.st || (p >= 0 && (is_const(p) || nodes[p].group == g))) continue;
          auto [it, fresh] = slot.try_emplace(in.st.get(), loads.size());
          if (fresh) loads.emplace_back();
          loads[it->second].push_back({&in.view, g});
        }
    }
    // h's loads are g's once merged: follow the merges.
    std::vector<int> into(groups.size());
    for (int g = 0; g < int(groups.size()); ++g) into[size_t(g)] = g;
    auto now = [&](int g) {
      while (into[size_t(g)] != g) g = into[size_t(g)];
      return g;
    };
    for (auto& ls : loads)
      for (size_t a = 0; a < ls.size(); ++a)
        for (size_t b = a + 1; b < ls.size(); ++b) {
          int g = now(ls[a].second), h = now(ls[b].second);
          if (g == h || !same_view(*ls[a].first, *ls[b].first)) continue;
          if (groups[g].axes != groups[h].axes || !mergeable(g, h)) continue;
          merge(g, h);
          into[size_t(h)] = g;
        }
  }

  // The reduction group a Gather of one element a row of x may join as a Row node (index of
  // size 1 along dim d and x's size elsewhere; the backend reads it there, caps.row_gather):
  // a group over x's shape reducing dim d that already loads x through the same view (cross
  // entropy's log-sum-exp, whose row then yields lse - x[i, t[i]]), so the pick costs no
  // kernel and no pass of its own. -1 if none.
  int row_gather_group(int i) {
    const Node& n = *nodes[i].n;
    const Input &x = n.in[0], &ix = n.in[1];
    const int d = n.dim, r = int(n.shape.size());
    if (int(x.view.shape.size()) != r || ix.view.shape != n.shape || n.shape[d] != 1 ||
        !device_caps(n.device).row_gather)
      return -1;
    for (int k = 0; k < r; ++k)
      if (k != d && x.view.shape[k] != n.shape[k]) return -1;
    const int px = producer(x), pi = producer(ix);
    if (is_const(px)) return -1;  // its readers inline it: no memory to pick from
    for (int j : readers_of_memory(x.st.get())) {
      const int g = nodes[j].group;
      if (j >= i || g < 0) continue;
      const PGroup& G = groups[g];
      if (!G.alive || G.opaque || G.S != x.view.shape || G.axes != std::vector<int>{d} ||
          !fits(g, 1) || (px >= 0 && nodes[px].group == g) || apart(i, g))
        continue;
      bool loads = false;  // a member of g loads x through the gather's view
      for (auto& in : nodes[j].n->in)
        loads = loads || (in.st == x.st && same_view(in.view, x.view));
      if (!loads) continue;
      if (pi >= 0 && !is_const(pi)) {
        const int ig = nodes[pi].group;
        if (ig == g && (nodes[pi].space != Space::Row || !linear_identity(ix.view, *nodes[pi].n)))
          continue;
        if (ig >= 0 && ig != g && reaches(ig, g)) continue;  // g would read ig, which reads g
      }
      return g;
    }
    return -1;
  }

  void count_leaves(int g, int i) {
    for (auto& in : nodes[i].n->in) {
      if (!in.st) continue;  // a scalar operand: a kernel argument, not memory
      int p = producer(in);
      if (p < 0 || (nodes[p].group != g && !is_const(p))) groups[g].leaves++;
    }
  }

  void mark_materialized() {
    for (int i = 0; i < int(nodes.size()); ++i) {
      PNode& pn = nodes[i];
      // A matmul's C is written to memory only where something outside its group reads it
      // (a root, another group, an opaque op): its epilogue reads each block from cache.
      bool c_in_group = is_opaque(pn.n->op) && pn.group >= 0 &&
                        (!groups[pn.group].opaque || groups[pn.group].members.size() > 1);
      if (pn.root || pn.in_memory || (is_opaque(pn.n->op) && !c_in_group) || region_write(*pn.n))
        pn.materialize = true;
      if (prim_class(pn.n->op) == PrimClass::Alloc) pn.materialize = true;
      for_each_dep(i, [&](int p) {
        if (nodes[p].group != pn.group || nodes[p].group < 0) nodes[p].materialize = true;
      });
      if (pn.n->base && idx(pn.n->base.get()) >= 0) nodes[idx(pn.n->base.get())].materialize = true;
    }
  }

  std::vector<int> group_order() const {
    std::vector<int> alive, order;
    for (int g = 0; g < int(groups.size()); ++g)
      if (groups[g].alive && !groups[g].members.empty()) alive.push_back(g);
    std::unordered_map<int, int> state;  // 1 visiting, 2 done
    std::function<void(int)> visit = [&](int g) {
      if (state[g] == 2) return;
      state[g] = 1;
      for (int d : deps_of(g))
        if (state[d] != 2) visit(d);
      state[g] = 2;
      order.push_back(g);
    };
    for (int g : alive) visit(g);
    return order;
  }
};

}  // namespace

namespace {
std::atomic<bool>& column_sums_flag() {
  static std::atomic<bool> on{knob_flag(Knob::ColumnSums)};
  return on;
}
}  // namespace

bool column_sums_on() { return column_sums_flag().load(std::memory_order_relaxed); }
void set_column_sums(bool on) { column_sums_flag() = on; }

int default_max_group_nodes() {
  static const int n = [] {
    int x = int(knob_int(Knob::MaxGroupNodes));
    return x >= 1 ? x : int(knob_default_int(Knob::MaxGroupNodes));
  }();
  return n;
}

std::vector<Group> plan(const std::vector<std::shared_ptr<Storage>>& dag,
                        const std::vector<std::shared_ptr<Storage>>& roots, bool fuse,
                        const PlanLimits& limits, std::vector<std::vector<ScalarSrc>>* srcs) {
  return Planner(dag, roots, fuse, limits, srcs).run();
}

}  // namespace loom
