// What a persistent row kernel keeps between passes (RowPlan), and the register bytes the
// launcher budgets for it (row_cache_bytes).
#include <functional>
#include <map>
#include <set>
#include <tuple>

#include "cuda/codegen_rows.h"
#include "cuda/launch_geometry.h"
#include "cuda/prims.h"

namespace loom::cuda::gen {

namespace {

// Persistent rows compute each Full node once, in its home pass: the first pass that uses it
// (its own pass when a reduction takes it in, or when nothing else reads it). A node read in a
// later pass than its home is cached in registers; one first read later (a weight) is loaded
// there rather than carried.
std::vector<int> home_passes(const Group& g) {
  int n = int(g.nodes.size());
  std::vector<int> home(n, -1);
  for (int id = n - 1; id >= 0; --id) {
    const GNode& x = g.nodes[id];
    if (x.space != Space::Full) continue;
    int h = -1;
    for (int c = id + 1; c < n; ++c) {
      const GNode& y = g.nodes[c];
      if (y.a != id && y.b != id && y.c != id) continue;
      int hc = y.space == Space::Full ? home[c] : x.pass;  // Row consumers are reductions
      h = h < 0 ? hc : std::min(h, hc);
    }
    home[id] = h < 0 ? x.pass : h;
  }
  return home;
}

// Full nodes a later home pass reads from registers.
std::vector<bool> cached_nodes(const Group& g, const std::vector<int>& home) {
  std::vector<bool> cached(g.nodes.size(), false);
  for (int m = 0; m < int(g.nodes.size()); ++m) {
    if (g.nodes[m].space != Space::Full) continue;
    for (int a : {g.nodes[m].a, g.nodes[m].b, g.nodes[m].c})
      if (a >= 0 && g.nodes[a].space == Space::Full && home[a] < home[m]) cached[a] = true;
  }
  return cached;
}

// Cheap Full nodes a later pass can recompute from retained chunk vectors instead of caching
// their values: loads of a leaf walked at unit stride along the one reduced dim (or read once a
// row, row_const), and casts,
// copies, +, - and * of those and Row values. A bf16 row then stays in registers as bf16 (half
// the registers of its f32 values) and a layer_norm's x - mean costs no registers at all. Level 2
// also recomputes exp (a softmax's e: about 10 instructions an element for 4 bytes of registers).
std::vector<bool> remat_nodes(const Group& g, const Emitter& e, int level) {
  int n = int(g.nodes.size()), R = e.rank;
  std::vector<bool> m(n, false);
  if (R - e.kept != 1) return m;
  for (int id = 0; id < n; ++id) {
    const GNode& x = g.nodes[id];
    if (x.space != Space::Full) continue;
    if (is_load(x)) {  // (a leaf with one value a row: read once a row, row_const)
      m[id] = (e.is_memory(x.leaf) && e.cls(x.leaf, R - 1) == Cls::One && e.vec_ok(x.leaf)) ||
              row_const(e, x.leaf);
      continue;
    }
    const int r = cuda_prim(x.op).remat;  // (cuda/prims.cpp: casts, +, -, *, neg; exp at 2)
    if (r == 0 || r > level) continue;
    bool ok = true, full = false;
    for (int a : {x.a, x.b, x.c}) {
      if (a < 0 || g.nodes[a].space == Space::Row) continue;
      ok = ok && m[a], full = true;
    }
    m[id] = ok && full;
  }
  return m;
}

}  // namespace

RowPlan row_plan(const Group& g, const Emitter& e, int remat) {
  RowPlan p;
  p.home = home_passes(g);
  p.cached = cached_nodes(g, p.home);
  int n = int(g.nodes.size());
  std::vector<bool> m = remat ? remat_nodes(g, e, remat) : std::vector<bool>(n, false);
  for (int id = 0; id < n; ++id)
    if (m[id]) p.cached[id] = false;
  p.again.assign(g.passes, std::vector<bool>(n, false));
  for (int q = 0; q < g.passes; ++q) {
    std::vector<bool>& ag = p.again[q];
    std::function<void(int)> add = [&](int a) {
      if (ag[a]) return;
      ag[a] = true;
      if (is_load(g.nodes[a]) && !row_const(e, g.nodes[a].leaf)) p.retained.insert(g.nodes[a].leaf);
      for (int b : {g.nodes[a].a, g.nodes[a].b, g.nodes[a].c})
        if (b >= 0 && g.nodes[b].space == Space::Full) add(b);
    };
    for (int id = 0; id < n; ++id) {
      if (g.nodes[id].space != Space::Full || p.home[id] != q) continue;
      for (int a : {g.nodes[id].a, g.nodes[id].b, g.nodes[id].c})
        if (a >= 0 && m[a] && p.home[a] < q) add(a);
    }
  }
  return p;
}

}  // namespace loom::cuda::gen

namespace loom::cuda {

namespace {

struct RowBytes {
  int held = 0;      // cached values and retained leaf vectors, bytes a column
  int retained = 0;  // the retained leaf vectors alone
  // Each pass's own chunk arrays (lw), bytes a column: of leaves with a chunk a row, and of
  // leaves every row reads alike (one chunk held at a time).
  std::vector<std::pair<int, int>> walk;
};

int column_bytes(const Group& g, int leaf, int vw) {
  int isz = int(itemsize(g.leaves[leaf].dtype));
  return vw > 0 ? (vw * isz + 3) / 4 * 4 / vw : isz;
}

RowBytes row_bytes(const Group& g, int remat, int vw, uint64_t novec) {
  // The launcher asks on every launch, and planning takes a while: remembered per thread by
  // signature, which covers everything the answer depends on (ops, dtypes, stride classes).
  thread_local std::map<std::tuple<uint64_t, int, int, uint64_t>, RowBytes> memo;
  std::tuple<uint64_t, int, int, uint64_t> key{g.signature, remat, vw, novec};
  if (g.signature != 0) {
    auto it = memo.find(key);
    if (it != memo.end()) return it->second;
    if (memo.size() > 4096) memo.clear();
  }
  gen::Emitter e(g);
  e.novec = novec;
  gen::RowPlan p = gen::row_plan(g, e, remat);
  RowBytes b;
  for (size_t i = 0; i < p.cached.size(); ++i)
    if (p.cached[i]) b.held += itemsize(compute_dtype(g.nodes[i].dtype)) > 4 ? 8 : 4;
  for (int leaf : p.retained) b.retained += column_bytes(g, leaf, vw);
  b.held += b.retained;
  // A pass's walk loads every unit-stride leaf it reads and no later pass reads again into
  // arrays of its own (RowWalk::walk), live beside the held values while that pass runs: all
  // of a lane's chunks before it computes, or one at a time for a leaf every row reads alike.
  for (int q = 0; q < g.passes; ++q) {
    std::set<int> own;
    for (int id = 0; id < int(g.nodes.size()); ++id) {
      const GNode& x = g.nodes[id];
      if (x.space != Space::Full || !is_load(x) || p.retained.count(x.leaf)) continue;
      if (p.home[id] != q && !p.again[q][id]) continue;
      if (gen::unit_access(e, x.leaf)) own.insert(x.leaf);
    }
    int w = 0, one = 0;
    for (int leaf : own) (gen::row_invariant(e, leaf) ? one : w) += column_bytes(g, leaf, vw);
    b.walk.push_back({w, one});
  }
  if (g.signature != 0) memo.emplace(key, b);
  return b;
}

}  // namespace

int row_cache_bytes(const Group& g, int remat, int vw, bool retained_only, uint64_t novec) {
  RowBytes b = row_bytes(g, remat, vw, novec);
  return retained_only ? b.retained : b.held;
}

int row_walk_regs(const Group& g, const Variant& v) {
  if (v.k == 0) return 0;
  const bool peel = v.shift >= 0 && v.vw > 1;  // peeled rows load every leaf's chunks first
  int64_t most = 0;
  for (auto [w, one] : row_bytes(g, v.remat, v.vw, v.novec).walk)
    most = std::max(most, peel ? cdiv(int64_t(v.k) * v.vw * (w + one), 4)
                               : cdiv(int64_t(v.k) * v.vw * w, 4) + cdiv(int64_t(v.vw) * one, 4));
  return int(most);
}

}  // namespace loom::cuda
