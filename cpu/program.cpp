#include "cpu/program.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdlib>
#include <sstream>

#include "cpu/vmath.h"
#include "tensor/knobs.h"

namespace loom::cpu {
namespace {

// Assigns register slots so a register is reused once its value has no later reader.
void allocate(const Program& p, StepList& s) {
  std::vector<int> pos(p.nodes.size(), -1), last(p.nodes.size(), -1);
  for (int i = 0; i < int(s.nodes.size()); ++i) pos[s.nodes[i]] = i;
  for (int i = 0; i < int(s.nodes.size()); ++i) {
    const GNode& n = p.nodes[s.nodes[i]];
    last[s.nodes[i]] = std::max(last[s.nodes[i]], i);
    for (int a : {n.a, n.b, n.c, p.tail_arg[s.nodes[i]]})
      if (a >= 0 && pos[a] >= 0) last[a] = std::max(last[a], i);
  }
  std::vector<int> free_slots;
  std::vector<std::vector<int>> release(s.nodes.size());
  s.reg.assign(s.nodes.size(), -1);
  for (int i = 0; i < int(s.nodes.size()); ++i) {
    if (free_slots.empty()) {
      s.reg[i] = s.slots++;
    } else {
      s.reg[i] = free_slots.back();
      free_slots.pop_back();
    }
    release[last[s.nodes[i]]].push_back(s.reg[i]);
    // Slots whose last reader is step i become free after it (not during: the step's own
    // result must not overwrite an argument it is still reading).
    for (int r : release[i]) free_slots.push_back(r);
  }
}

// Full nodes needed to compute `targets`, in (pass, index) order.
std::vector<int> closure(const Program& p, std::vector<int> targets) {
  std::vector<bool> need(p.nodes.size(), false);
  while (!targets.empty()) {
    int t = targets.back();
    targets.pop_back();
    if (t < 0 || need[t] || p.nodes[t].space != Space::Full) continue;
    need[t] = true;
    const GNode& n = p.nodes[t];
    for (int a : {n.a, n.b, n.c, p.tail_arg[t]}) targets.push_back(a);
  }
  std::vector<int> out;
  for (int i = 0; i < int(p.nodes.size()); ++i)
    if (need[i]) out.push_back(i);
  std::stable_sort(out.begin(), out.end(),
                   [&](int x, int y) { return p.nodes[x].pass < p.nodes[y].pass; });
  return out;
}

// Readers of each node among the live ones (reachable from the outputs and reductions through
// the arguments as the folds so far left them: a folded node stays in place, read by nothing
// live), plus one per group output; the folds merge only a node with one reader. A Copy
// pair's `c` is its `a` again, not a second read.
std::vector<int> count_uses(const Program& p, const Group& g) {
  int nn = int(p.nodes.size());
  auto args = [&](int i) {
    const GNode& n = p.nodes[i];
    bool copy = i < int(p.pair_op.size()) && p.pair_op[i] == Op::Copy;
    return std::array<int, 4>{n.a, n.b, copy ? -1 : n.c,
                              i < int(p.tail_arg.size()) ? p.tail_arg[i] : -1};
  };
  std::vector<uint8_t> live(nn, 0);
  std::vector<int> todo;
  for (auto& o : g.outputs) todo.push_back(o.node);
  for (int i = 0; i < nn; ++i)
    if (is_reduce(p.nodes[i].op)) todo.push_back(i);
  while (!todo.empty()) {
    int t = todo.back();
    todo.pop_back();
    if (t < 0 || live[t]) continue;
    live[t] = 1;
    for (int a : args(t)) todo.push_back(a);
  }
  std::vector<int> uses(nn, 0);
  for (int i = 0; i < nn; ++i)
    if (live[i])
      for (int a : args(i))
        if (a >= 0) uses[a]++;
  for (auto& o : g.outputs) uses[o.node]++;
  return uses;
}

// The fold switches: LOOM_CPU_UNARY_FOLD=0, LOOM_CPU_TAIL_FOLD=0, LOOM_CPU_PRE_FOLD=0 turn a
// fold off (A/B timing, or to rule it out).
bool unary_fold_on() {
  static const bool on = knob_flag(Knob::CpuUnaryFold) && vmath_on();
  return on;
}
bool tail_fold_on() {
  static const bool on = knob_flag(Knob::CpuTailFold);
  return on;
}
bool pre_fold_on() {
  static const bool on = knob_flag(Knob::CpuPreFold);
  return on;
}

bool vmath_unary(Op op) { return op == Op::Exp || op == Op::Tanh || op == Op::Sigmoid; }

bool const_f32(const Program& p, int id) {
  return id >= 0 && p.ct[id] == CT::F32 && p.nodes[id].op == Op::Const && p.nodes[id].scalar >= 0;
}

// An exp/tanh/sigmoid (float32, of a Full float32 value) nothing else reads, computed no later
// than pass `pass`: fold_unary_operands computes it in its reader's loop. An exp(x - k) that
// build_program made one exp_sub instruction too, where k is a float32 constant: its
// subtraction becomes a pre step (Program::pre).
bool unary_foldable(const Program& p, const std::vector<int>& uses, int d, int pass) {
  if (d < 0 || uses[d] != 1) return false;
  const GNode& dn = p.nodes[d];
  if (p.exp_sub[d] && !(pre_fold_on() && const_f32(p, dn.b))) return false;
  return dn.space == Space::Full && vmath_unary(dn.op) && dn.leaf < 0 && p.ct[d] == CT::F32 &&
         dn.pass <= pass && dn.a >= 0 && p.ct[dn.a] == CT::F32 &&
         p.nodes[dn.a].space == Space::Full;
}

bool pairable(Op op) { return op == Op::Add || op == Op::Sub || op == Op::Mul; }
// binary_pair's ops (float only): a division pairs there, but not in the vmath instructions.
bool pair_op_ok(Op op) { return pairable(op) || op == Op::Div; }

// Folds a float Add/Sub/Mul/Div into the Add/Sub/Mul/Div that alone reads it (x * 1.5 + 0.5,
// x * x + y, m * k / d, ...): the interpreter is bound by passes over L1-resident tiles, and
// this drops one. An inner op that is itself folded is left alone (three arguments at most).
void fuse_pairs(Program& p, const Group& g) {
  int nn = int(p.nodes.size());
  p.pair_op.assign(nn, Op::Const);
  p.pair_first.assign(nn, 0);
  // LOOM_CPU_PAIRS=0 turns the folding off (A/B timing, or to rule it out).
  static const bool on = knob_flag(Knob::CpuPairs);
  if (!on) return;
  std::vector<int> uses = count_uses(p, g);
  auto fits = [&](int id, CT c) {
    const GNode& n = p.nodes[id];
    return n.space == Space::Full && pair_op_ok(n.op) && n.a >= 0 && n.b >= 0 && n.c < 0 &&
           p.ct[id] == c && p.ct[n.a] == c && p.ct[n.b] == c && !p.exp_sub[id] &&
           p.pair_op[id] == Op::Const && n.leaf < 0;
  };
  // f(x) * y + w: the pair would fold f(x) * y and leave f its own instruction (f folds only
  // into a pair's `b`), where the unary fold (f in f(x) * y's loop) and the tail fold (+ w in
  // it too) make it one. Such an inner op is left to them, unless w is an f(...) as well.
  const bool tails = unary_fold_on() && tail_fold_on();
  auto has_f = [&](int id, int pass) {
    return unary_foldable(p, uses, p.nodes[id].a, pass) ||
           unary_foldable(p, uses, p.nodes[id].b, pass);
  };
  for (int i = 0; i < nn; ++i) {
    CT c = p.ct[i];
    if ((c != CT::F32 && c != CT::F64) || !fits(i, c)) continue;
    GNode& n = p.nodes[i];
    for (bool first : {true, false}) {
      int d = first ? n.a : n.b;
      if (uses[d] != 1 || !fits(d, c) || p.nodes[d].pass > n.pass) continue;
      const GNode& dn = p.nodes[d];
      int other = first ? n.b : n.a;
      if (tails && c == CT::F32 && has_f(d, dn.pass) && !unary_foldable(p, uses, other, n.pass))
        continue;
      p.pair_op[i] = dn.op;
      p.pair_first[i] = first;
      n.a = dn.a, n.c = dn.b, n.b = other;
      break;
    }
  }
  // relu(y) of an op y nothing else reads: the op's loop applies the relu too.
  p.pair_relu.assign(nn, 0);
  uses = count_uses(p, g);
  for (int i = 0; i < nn; ++i) {
    GNode& n = p.nodes[i];
    CT c = p.ct[i];
    if (n.op != Op::Relu || n.space != Space::Full || (c != CT::F32 && c != CT::F64) || n.a < 0)
      continue;
    int d = n.a;
    const GNode& dn = p.nodes[d];
    bool plain = p.pair_op[d] == Op::Const;
    if (uses[d] != 1 || dn.pass > n.pass || p.pair_relu[d] || p.exp_sub[d] ||
        dn.space != Space::Full || !pairable(dn.op) || p.ct[d] != c)
      continue;
    if (plain && !fits(d, c)) continue;
    n.op = dn.op;
    n.a = dn.a, n.b = dn.b, n.c = plain ? dn.a : dn.c;
    p.pair_op[i] = plain ? Op::Copy : p.pair_op[d];
    p.pair_first[i] = plain ? 1 : p.pair_first[d];
    p.pair_relu[i] = 1;
  }
}

// f(u) op w, with f exp, tanh or sigmoid and the f node read by nothing else: the op's loop
// computes f too (cpu/vmath.h pair_unary_f32), so f's result is never written out and read
// back: the transcendental loops are port-bound with room for an op or two. Only the `b`
// operand of a folded pair; either operand of a plain op, relu'd or not (the other becomes
// `a`). Where u is itself an Add/Sub/Mul of a tensor by constants (u = x * 1.5 + 0.5, a
// plain op or a folded pair) nothing else reads, the loop computes u from x too
// (Program::pre): one pass less.
void fold_unary_operands(Program& p, const Group& g) {
  int nn = int(p.nodes.size());
  p.pair_f.assign(nn, Op::Const);
  p.pre.assign(nn, {});
  if (int(p.pair_relu.size()) != nn) p.pair_relu.assign(nn, 0);  // LOOM_CPU_PAIRS=0 left it empty
  if (!unary_fold_on()) return;
  std::vector<int> uses = count_uses(p, g);
  auto f32 = [&](int id) { return id >= 0 && p.ct[id] == CT::F32; };
  auto is_k = [&](int id) { return const_f32(p, id); };
  auto is_x = [&](int id) { return f32(id) && p.nodes[id].space == Space::Full; };
  // f's input for instruction i: u itself, or x with u's steps in p.pre[i] (u = x op k or a
  // folded pair (x op k) op k', either order, nothing else reading it), then exp_sub's - k
  auto input = [&](int d, int i) {
    const GNode& dn = p.nodes[d];
    int u = dn.a, x = u, n = 0;
    auto& st = p.pre[i];
    const GNode& un = p.nodes[u];
    Op inner = p.pair_op[u];
    if (pre_fold_on() && uses[u] == 1 && un.space == Space::Full && pairable(un.op) &&
        un.leaf < 0 && !p.exp_sub[u] && !p.pair_relu[u] && p.pair_f[u] == Op::Const &&
        un.pass <= p.nodes[i].pass) {
      if (inner == Op::Const) {  // x op k or k op x
        bool kf = is_k(un.a);
        int k = kf ? un.a : un.b, t = kf ? un.b : un.a;
        if (is_k(k) && is_x(t)) st[n++] = {un.op, k, kf}, x = t;
      } else if (pairable(inner) && is_k(un.b)) {  // (a inner c) op b, b the constant
        bool kf = is_k(un.a);
        int k = kf ? un.a : un.c, t = kf ? un.c : un.a;
        if (is_k(k) && is_x(t)) {
          st[n++] = {inner, k, kf}, x = t;
          st[n++] = {un.op, un.b, !p.pair_first[u]};
        }
      }
    }
    if (p.exp_sub[d]) st[n++] = {Op::Sub, dn.b, false};  // exp(u - k)
    return x;
  };
  for (int i = 0; i < nn; ++i) {
    GNode& n = p.nodes[i];
    if (n.space != Space::Full || !pairable(n.op) || n.leaf >= 0 || p.exp_sub[i] || !f32(i) ||
        !f32(n.a) || !f32(n.b) || p.pair_op[i] == Op::Div)
      continue;
    bool plain = p.pair_op[i] == Op::Const;
    // the relu fold's form of a plain op (Copy of `a`, first): f may be its `a` as well
    bool relu_plain = p.pair_op[i] == Op::Copy && p.pair_first[i];
    if (!plain && !f32(n.c)) continue;
    if (unary_foldable(p, uses, n.b, n.pass)) {
      if (plain) n.c = n.a, p.pair_op[i] = Op::Copy, p.pair_first[i] = 1;
      int d = n.b;
      p.pair_f[i] = p.nodes[d].op;
      n.b = input(d, i);
    } else if ((plain || relu_plain) &&
               unary_foldable(p, uses, n.a, n.pass)) {  // f(u) op w: w in `a`, u `b`
      int d = n.a;
      n.a = n.b, n.c = n.b;
      p.pair_op[i] = Op::Copy, p.pair_first[i] = 0;
      p.pair_f[i] = p.nodes[d].op;
      n.b = input(d, i);
    }
  }
}

// w op v or v op w, v a pair_f instruction (exp/tanh/sigmoid folded) nothing else reads and
// without a relu or tail of its own, the op float32 Add/Sub/Mul, plain or relu'd (chain8's
// `- 0.25` and relu): v's loop applies the op and the relu too, one pass less over the tile.
void fold_tails(Program& p, const Group& g) {
  int nn = int(p.nodes.size());
  p.tail_op.assign(nn, Op::Const);
  p.tail_arg.assign(nn, -1);
  p.tail_first.assign(nn, 0);
  if (!tail_fold_on() || !unary_fold_on()) return;
  std::vector<int> uses = count_uses(p, g);
  auto f32 = [&](int id) { return id >= 0 && p.ct[id] == CT::F32; };
  for (int i = 0; i < nn; ++i) {
    GNode& n = p.nodes[i];
    // a plain op, or the relu fold's form of one (Copy of `a`, first): arguments a and b
    bool plain = p.pair_op[i] == Op::Const || (p.pair_op[i] == Op::Copy && p.pair_first[i]);
    if (n.space != Space::Full || !pairable(n.op) || n.leaf >= 0 || p.exp_sub[i] || !plain ||
        p.pair_f[i] != Op::Const || !f32(i) || !f32(n.a) || !f32(n.b))
      continue;
    for (bool first : {true, false}) {
      int d = first ? n.a : n.b, w = first ? n.b : n.a;
      if (uses[d] != 1 || p.pair_f[d] == Op::Const || p.pair_relu[d] || p.tail_arg[d] >= 0 ||
          p.nodes[d].space != Space::Full || p.nodes[d].pass > n.pass)
        continue;
      const GNode& dn = p.nodes[d];
      p.tail_op[i] = n.op, p.tail_arg[i] = w, p.tail_first[i] = first;
      n.op = dn.op, n.a = dn.a, n.b = dn.b, n.c = dn.c;
      p.pair_op[i] = p.pair_op[d], p.pair_first[i] = p.pair_first[d], p.pair_f[i] = p.pair_f[d];
      p.pre[i] = p.pre[d];
      break;
    }
  }
}

// A load in the interpreter may be a pointer into its leaf's memory, read when a step uses it,
// and an output is stored at the step that computes it. Where an output overwrites a leaf the
// group reads, a step after the store that reads the leaf's load (a fold moved an early reader
// there: y = x * 2; x.add_(1); y.mul_(x) computes x * 2 inside the last multiply) would read
// the new values: such a load copies the values at its step instead.
void mark_load_copies(Program& p, const Group& g, const StepList& sl) {
  std::vector<int> pos(p.nodes.size(), -1);
  for (int k = 0; k < int(sl.nodes.size()); ++k) pos[sl.nodes[k]] = k;
  for (auto& o : g.outputs) {
    if (o.overwrites < 0 || pos[o.node] < 0) continue;
    for (int k = pos[o.node] + 1; k < int(sl.nodes.size()); ++k) {
      int id = sl.nodes[k];
      const GNode& n = p.nodes[id];
      for (int a : {n.a, n.b, n.c, p.tail_arg[id]})
        if (a >= 0 && is_load(p.nodes[a]) && p.nodes[a].leaf == o.overwrites) p.load_copy[a] = 1;
    }
  }
}

// A float32 value's Cast to float16 / bfloat16 that only outputs read (a reduced-precision
// op's last step): the store into the output rounds the same way, so the Cast's own rounding
// pass is skipped (Program::store_cast).
void mark_store_casts(Program& p, const Group& g) {
  p.store_cast.assign(p.nodes.size(), 0);
  std::vector<int> uses = count_uses(p, g), outs(p.nodes.size(), 0);
  for (auto& o : g.outputs) outs[size_t(o.node)]++;
  for (int i = 0; i < int(p.nodes.size()); ++i) {
    const GNode& n = p.nodes[i];
    if (n.op != Op::Cast || n.a < 0 || n.space != Space::Full || outs[i] == 0 || uses[i] != outs[i])
      continue;
    if ((n.dtype == DType::Float16 || n.dtype == DType::BFloat16) && p.ct[i] == CT::F32 &&
        p.ct[n.a] == CT::F32 && p.nodes[n.a].space == Space::Full)
      p.store_cast[i] = 1;
  }
}

// A Copy of a Full value into its own dtype that is no output (the value an in-place op hands
// on: m.mul_(b1) before .add_ of the same m) is its input: its readers read the input and the
// Copy leaves the steps (a pass over the tile each; LOOM_CPU_PAIRS=0 keeps them, for A/B).
void forward_copies(Program& p, const Group& g) {
  if (!knob_flag(Knob::CpuPairs)) return;
  std::vector<uint8_t> out(p.nodes.size(), 0);
  for (auto& o : g.outputs) out[size_t(o.node)] = 1;
  std::vector<int> to(p.nodes.size());
  for (int i = 0; i < int(p.nodes.size()); ++i) {
    GNode& n = p.nodes[i];
    for (int* a : {&n.a, &n.b, &n.c})
      if (*a >= 0) *a = to[size_t(*a)];
    to[size_t(i)] = i;
    if (n.a < 0 || out[size_t(i)] || n.space != Space::Full) continue;
    const GNode& src = p.nodes[n.a];
    if (src.space != Space::Full) continue;
    // A Cast into a type that holds its input's computed values as they are (the float32 of a
    // bfloat16 load, whose load already widened it): a copy too.
    bool same = n.op == Op::Copy   ? src.dtype == n.dtype
                : n.op == Op::Cast ? p.ct[n.a] == p.ct[i] && compute_dtype(n.dtype) == n.dtype &&
                                         n.dtype != DType::Bool
                                   : false;
    if (same) to[size_t(i)] = n.a;
  }
}

// A Copy into its own dtype of a load nothing else reads, that is an output (a transposing
// .contiguous(), a slice written into a larger tensor): the Copy becomes the load itself, so
// a strided load gathers straight into the output's memory (or a contiguous one is stored
// from the leaf) instead of into a tile that the Copy then copies again. Not where an output
// overwrites the leaf: the load would move to the Copy's step, after that output's store.
void loads_into_copies(Program& p, const Group& g) {
  std::vector<int> uses = count_uses(p, g);
  for (int i = 0; i < int(p.nodes.size()); ++i) {
    GNode& n = p.nodes[i];
    if (n.op != Op::Copy || n.a < 0 || n.space != Space::Full || uses[size_t(n.a)] != 1) continue;
    const GNode& src = p.nodes[n.a];
    if (!is_load(src) || src.space != Space::Full || src.dtype != n.dtype) continue;
    bool overwritten = false;  // (part of the signature, as the program is)
    for (auto& o : g.outputs) overwritten |= o.overwrites == src.leaf;
    if (overwritten) continue;
    n.leaf = src.leaf, n.a = -1;
  }
}

// A Full load the same along every reduced dim (a norm's saved mean and rstd, a loss's
// log-sum-exp: [R, 1] read over [R, C]) that no reduction, row gather or output reads
// directly: a Row node, one value a row as a reduction's result is, which the tile's
// instructions take a row at a time, rather than a tile filled with copies of it (filling
// those tiles was half of a float32 layer_norm backward's time).
void row_loads(Program& p, const Group& g) {
  const int rank = int(g.space.size()), nk = g.n_kept;
  if (nk <= 0 || nk >= rank) return;
  std::vector<uint8_t> keep(p.nodes.size(), 0);
  for (const GOutput& o : g.outputs) keep[size_t(o.node)] = 1;
  for (const GNode& n : p.nodes)
    if ((is_reduce(n.op) || n.op == Op::Gather) && n.a >= 0) keep[size_t(n.a)] = 1;
  for (int i = 0; i < int(p.nodes.size()); ++i) {
    GNode& n = p.nodes[i];
    if (!is_load(n) || n.space != Space::Full || keep[size_t(i)]) continue;
    const Strides& st = g.leaves[n.leaf].strides;
    bool same = true;
    for (int d = nk; d < rank; ++d) same = same && (st[d] == 0 || g.space[d] == 1);
    if (same) n.space = Space::Row;
  }
}

}  // namespace

namespace {

int64_t tile_bytes(const Program& p) {
  size_t width = 1;
  int64_t buffers = p.single.slots;
  unsigned spread = 0;  // operand positions that spread a per-row value (one buffer each)
  for (int id : p.single.nodes) {
    const GNode& n = p.nodes[id];
    width = std::max(width, ct_width(p.ct[id]));
    if (is_load(n)) {
      ++buffers;
      continue;
    }
    int k = 0;
    for (int a : {n.a, n.b, n.c, p.tail_arg[id]}) {
      if (a < 0) continue;
      if (p.nodes[a].space == Space::Row) spread |= 1u << k;
      ++k;
    }
  }
  return std::max<int64_t>(1, buffers + std::popcount(spread)) * int64_t(width);
}

// Program::idx_eq: eq(iota, t) / ne(iota, t) where the iota runs along the one reduced dim
// with stride 1 and t is the same across each row (cross entropy's one-hot of the target).
void mark_index_compares(Program& p, const Group& g, const std::vector<int>& uses) {
  p.idx_eq.assign(p.nodes.size(), -1);
  const int rank = int(g.space.size()), nk = g.n_kept;
  if (rank - nk != 1) return;
  auto column_invariant = [&](int id) {
    const GNode& n = p.nodes[id];
    if (n.space == Space::Row) return true;
    return is_load(n) && g.leaves[n.leaf].strides[rank - 1] == 0;
  };
  auto iota_along_row = [&](int id) {
    const GNode& n = p.nodes[id];
    if (n.op != Op::Iota || n.space != Space::Full || n.leaf < 0 || uses[id] != 1) return false;
    const Strides& st = g.leaves[n.leaf].strides;
    for (int d = 0; d < nk; ++d)
      if (st[d] != 0 && g.space[d] != 1) return false;
    return st[rank - 1] == 1;
  };
  for (int i = 0; i < int(p.nodes.size()); ++i) {
    GNode& n = p.nodes[i];
    if ((n.op != Op::Eq && n.op != Op::Ne) || n.space != Space::Full || n.a < 0 || n.b < 0)
      continue;
    const CT c = p.ct[n.a];
    if ((c != CT::I64 && c != CT::I32) || p.ct[n.b] != c) continue;
    const bool iota_a = iota_along_row(n.a);
    const int io = iota_a ? n.a : n.b, t = iota_a ? n.b : n.a;
    if (!iota_along_row(io) || !column_invariant(t)) continue;
    p.idx_eq[i] = p.nodes[io].leaf;
    n.a = t;
    n.b = -1;
  }
}

}  // namespace

Program build_program(const Group& g) {
  Program p;
  p.nodes = g.nodes;
  if (knob_flag(Knob::CpuRowLoads)) row_loads(p, g);
  p.passes = g.passes;
  p.last = g.passes - 1;
  for (auto& n : p.nodes) {  // (its spaces: row_loads may have made a load a Row node)
    p.ct.push_back(ct_of(n.dtype));
    p.row_slot.push_back(n.space == Space::Row ? p.n_row++ : -1);
    p.acc_slot.push_back(
        is_reduce(n.op)
            ? int(std::count_if(p.nodes.begin(), p.nodes.begin() + (&n - p.nodes.data()),
                                [](const GNode& m) { return is_reduce(m.op); }))
            : -1);
  }
  forward_copies(p, g);
  loads_into_copies(p, g);
  // exp(x - y) whose difference nothing else reads (softmax's exp): one pass instead of two.
  p.exp_sub.assign(p.nodes.size(), 0);
  std::vector<int> uses = count_uses(p, g);
  for (int i = 0; i < int(p.nodes.size()); ++i) {
    GNode& n = p.nodes[i];
    if (n.op != Op::Exp || n.space != Space::Full || n.a < 0 || uses[n.a] != 1) continue;
    const GNode& d = p.nodes[n.a];
    CT c = p.ct[i];
    if (d.op != Op::Sub || d.space != Space::Full || d.a < 0 || d.b < 0 || p.ct[n.a] != c) continue;
    if ((c != CT::F32 && c != CT::F64) || p.nodes[d.a].space != Space::Full) continue;
    n.b = d.b;
    n.a = d.a;
    p.exp_sub[i] = 1;
  }
  mark_index_compares(p, g, uses);
  fuse_pairs(p, g);
  fold_unary_operands(p, g);
  fold_tails(p, g);
  std::vector<std::vector<int>> targets(g.passes);
  std::vector<int> all_targets;
  for (int i = 0; i < int(g.nodes.size()); ++i) {
    const GNode& n = g.nodes[i];
    if (is_reduce(n.op)) {
      p.reduces.push_back(i);
      const int a = p.nodes[i].a;  // a forwarded copy's input (forward_copies)
      targets[p.nodes[a].pass].push_back(a);
      all_targets.push_back(a);
    }
  }
  for (auto& o : g.outputs)
    if (g.nodes[o.node].space == Space::Full) {
      targets[p.last].push_back(o.node);
      all_targets.push_back(o.node);
    }
  p.single.nodes = closure(p, all_targets);
  allocate(p, p.single);
  p.tile_bytes = tile_bytes(p);
  p.per_pass.resize(g.passes);
  p.row_nodes.resize(g.passes);
  for (int k = 0; k < g.passes; ++k) {
    p.per_pass[k].nodes = closure(p, targets[k]);
    allocate(p, p.per_pass[k]);
  }
  for (int i = 0; i < int(p.nodes.size()); ++i)
    if (p.nodes[i].space == Space::Row) p.row_nodes[p.nodes[i].pass].push_back(i);
  mark_store_casts(p, g);
  p.load_copy.assign(p.nodes.size(), 0);
  mark_load_copies(p, g, p.single);
  for (auto& sl : p.per_pass) mark_load_copies(p, g, sl);
  return p;
}

std::string Program::text() const {
  std::ostringstream os;
  os << "cpu tile program: " << passes << " pass(es)\n  whole rows:";
  for (size_t i = 0; i < single.nodes.size(); ++i)
    os << " %" << single.nodes[i] << "->r" << single.reg[i];
  os << "  (" << single.slots << " registers)\n";
  // instructions that end in a folded op (fold_tails), with its other operand
  for (int i : single.nodes)
    if (!tail_arg.empty() && tail_arg[i] >= 0) os << "  %" << i << " tail %" << tail_arg[i] << "\n";
  // instructions that compute their f's input from constants too (Program::pre)
  for (int i : single.nodes)
    if (!pre.empty() && pre[i][0].op != Op::Const) {
      os << "  %" << i << " pre";
      for (auto& st : pre[i])
        if (st.op != Op::Const) os << " " << op_name(st.op) << " %" << st.k;
      os << "\n";
    }
  // every instruction as the folds left it: its op and arguments, and what it folded in
  os << "  instructions:";
  for (int i = 0; i < int(nodes.size()); ++i) {
    const GNode& n = nodes[i];
    if (n.space != Space::Full || is_load(n) || n.leaf >= 0) continue;
    os << " %" << i << "=" << op_name(n.op) << "(";
    for (int a : {n.a, n.b, n.c})
      if (a >= 0) os << "%" << a << (a == n.c ? "" : ",");
    os << ")";
    if (exp_sub[i]) os << "exp_sub";
    if (idx_eq[i] >= 0) os << "idx_eq:leaf" << idx_eq[i];
    if (pair_op[i] != Op::Const)
      os << "pair:" << op_name(pair_op[i]) << (pair_first[i] ? "1" : "2");
    if (pair_relu[i]) os << "relu";
    if (pair_f[i] != Op::Const) os << "f:" << op_name(pair_f[i]);
    if (tail_op[i] != Op::Const)
      os << "tail:" << op_name(tail_op[i]) << (tail_first[i] ? "1" : "2");
  }
  os << "\n";
  for (int i = 0; i < int(nodes.size()); ++i)
    if (load_copy[i]) os << "  %" << i << " copied (an output overwrites its leaf)\n";
  for (size_t i = 0; i < store_cast.size(); ++i)
    if (store_cast[i]) os << "  %" << i << " rounded by its store\n";
  for (int k = 0; k < passes; ++k) {
    os << "  pass " << k << " rows:";
    for (int r : row_nodes[k]) os << " %" << r;
    os << " | chunks:";
    for (size_t i = 0; i < per_pass[k].nodes.size(); ++i)
      os << " %" << per_pass[k].nodes[i] << "->r" << per_pass[k].reg[i];
    os << "\n";
  }
  return os.str();
}

}  // namespace loom::cpu
