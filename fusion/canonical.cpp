#include "fusion/canonical.h"

#include <algorithm>

#include "tensor/backend.h"
#include "tensor/counters.h"
#include "tensor/error.h"

namespace loom {

GroupBuilder::GroupBuilder(Shape S, std::vector<int> axes)
    : S_(std::move(S)), axes_(std::move(axes)) {}

int GroupBuilder::push(GNode g) {
  g_.nodes.push_back(g);
  return int(g_.nodes.size()) - 1;
}

// Strides over a node's own shape (the group shape, its keepdim form or its squeezed
// form) -> strides over the group shape S, with 0 on reduced dims for row values.
Strides GroupBuilder::to_space(const Strides& st, const Shape& shape, bool row) const {
  if (shape.size() == S_.size()) {
    Strides out = st;
    if (row)
      for (int a : axes_) out[a] = 0;
    for (size_t d = 0; d < S_.size(); ++d)
      if (S_[d] == 1) out[d] = 0;
    return out;
  }
  Strides out(S_.size(), 0);
  size_t k = 0;
  for (int d = 0; d < int(S_.size()); ++d) {
    if (std::find(axes_.begin(), axes_.end(), d) != axes_.end()) continue;
    out[d] = S_[d] == 1 ? 0 : st.at(k);
    ++k;
  }
  return out;
}

int GroupBuilder::add_scalar(Scalar v, DType dt) {
  GNode g{Op::Const, dt, Space::Row};
  g.scalar = int(g_.scalars.size());
  g_.scalars.push_back(v);
  return push(g);
}

int GroupBuilder::add_load(const Input& in, Space sp, const Shape& node_shape) {
  Strides st = sp == Space::Full ? to_space(in.view.strides, S_, false)
                                 : to_space(in.view.strides, node_shape, true);
  auto& same = loads_[in.st.get()];
  for (int i : same) {
    const GNode& n = g_.nodes[i];
    const GLeaf& l = g_.leaves[n.leaf];
    if (l.strides == st && l.offset == in.view.offset && n.space == sp) return i;
  }
  g_.leaves.push_back({in.dtype, st, in.view.offset, in.st, sp});
  GNode g{Op::Copy, in.dtype, sp};
  g.leaf = int(g_.leaves.size()) - 1;
  same.push_back(push(g));
  return same.back();
}

int GroupBuilder::add_node(const Node& n, Space sp, const int* args, int nargs) {
  GNode g{n.op, n.dtype, sp};
  const Shape& own = n.base ? n.region->shape : n.shape;
  if (prim_class(n.op) ==
      PrimClass::Scalar) {  // materializing a constant: a row scalar copied over the space
    g = GNode{Op::Copy, n.dtype, sp};
    g.a = args[0];
  } else if (PrimClass c = prim_class(n.op); c == PrimClass::Index || c == PrimClass::Random) {
    Strides idx(own.size(), 0);
    if (c == PrimClass::Index) {
      if (!own.empty()) idx[n.dim] = 1;
    } else {
      idx = contiguous_strides(own);
    }
    g_.leaves.push_back({DType::Int64, to_space(idx, own, sp == Space::Row), 0, nullptr, sp});
    g.leaf = int(g_.leaves.size()) - 1;
    if (c == PrimClass::Random) {
      g.scalar = int(g_.scalars.size());
      g_.scalars.push_back(Scalar(int64_t(n.seed)));
      g_.scalars.push_back(Scalar(int64_t(n.offset)));
    }
  } else {
    if (nargs > 0) g.a = args[0];
    if (nargs > 1) g.b = args[1];
    if (nargs > 2) g.c = args[2];
    // A reduction reads one value per element: spread a row scalar (an inlined constant,
    // as in sum(ones(n))) over the space first, else it would reduce nothing.
    if (is_reduce(n.op) && g.a >= 0 && g_.nodes[g.a].space == Space::Row) {
      GNode c{Op::Copy, g_.nodes[g.a].dtype, Space::Full};
      c.a = g.a;
      g.a = push(c);
    }
  }
  return push(g);
}

void GroupBuilder::add_output(GOutput o, const Node& n, bool reshaped) {
  const GNode& g = g_.nodes[o.node];
  if (n.base) {
    std::optional<Strides> st;
    if (reshaped) st = view_strides(n.region->shape, n.region->strides, S_);
    LOOM_CHECK(!reshaped || st, Runtime, "fusion: a region ", shape_str(n.region->shape),
               " cannot be written over the space ", shape_str(S_));
    o.strides = to_space(reshaped ? *st : n.region->strides, S_, false);
    o.offset = n.region->offset;
  } else if (reshaped) {
    o.strides = to_space(contiguous_strides(S_), S_, false);
  } else {
    o.strides = to_space(contiguous_strides(n.shape), n.shape, g.space == Space::Row);
  }
  g_.outputs.push_back(std::move(o));
}

void GroupBuilder::add_colsum_output(GOutput o, const Node& sum) {
  // The sum's shape keeps the space's reduced dims (its columns), with or without its own
  // summed dims as 1s.
  const Strides cs = contiguous_strides(sum.shape);
  const bool keep = sum.shape.size() == S_.size();
  o.strides.assign(S_.size(), 0);
  size_t k = 0;
  // (a Row value's sum over the rows is one value: strides 0 everywhere)
  for (int d = 0; d < int(S_.size()) && g_.nodes[o.node].space == Space::Full; ++d) {
    const bool column = std::find(axes_.begin(), axes_.end(), d) != axes_.end();
    if (column && S_[d] != 1) o.strides[d] = keep ? cs[d] : cs.at(k);
    if (column && !keep) ++k;
  }
  o.colsum = true;
  g_.outputs.push_back(std::move(o));
}

namespace {

void compute_passes(Group& g) {
  int last = 0;
  for (auto& n : g.nodes) {
    int p = 0;
    for (int a : {n.a, n.b, n.c})
      if (a >= 0) p = std::max(p, g.nodes[a].pass);
    n.pass = is_reduce(n.op) ? p + 1 : p;
    last = std::max(last, n.pass);
  }
  g.passes = last + 1;
}

// Kept dims first; drop size-1 dims; merge neighbours that every access walks as one.
void canonicalize(Group& g, const Shape& S, const std::vector<int>& axes) {
  std::vector<int> perm;
  std::vector<bool> red;
  for (int d = 0; d < int(S.size()); ++d)
    if (std::find(axes.begin(), axes.end(), d) == axes.end() && !axes.empty()) perm.push_back(d);
  for (int d = 0; d < int(S.size()); ++d)
    if (axes.empty() || std::find(axes.begin(), axes.end(), d) != axes.end()) perm.push_back(d);
  std::vector<Strides*> all;
  for (auto& l : g.leaves) all.push_back(&l.strides);
  for (auto& o : g.outputs) all.push_back(&o.strides);

  Shape sp;
  std::vector<Strides> ns(all.size());
  for (int d : perm) {
    if (S[d] == 1) continue;
    bool r = axes.empty() || std::find(axes.begin(), axes.end(), d) != axes.end();
    bool merged = false;
    if (!sp.empty() && red.back() == r) {
      merged = true;
      for (size_t k = 0; k < all.size(); ++k)
        if (ns[k].back() != (*all[k])[d] * S[d]) merged = false;
    }
    if (merged) {
      sp.back() *= S[d];
      for (size_t k = 0; k < all.size(); ++k) ns[k].back() = (*all[k])[d];
    } else {
      sp.push_back(S[d]);
      red.push_back(r);
      for (size_t k = 0; k < all.size(); ++k) ns[k].push_back((*all[k])[d]);
    }
  }
  for (size_t k = 0; k < all.size(); ++k) *all[k] = ns[k];
  g.space = sp;
  g.n_kept = int(std::count(red.begin(), red.end(), false));

  int64_t limit = int64_t(1) << 31;
  g.index64 = numel(sp) >= limit;
  // A lowering may move up to kMaxAlignShift elements of a pointer's misalignment into the
  // offset (tensor/backend.h).
  auto check = [&](const Strides& st, int64_t off) {
    int64_t hi = off + kMaxAlignShift;
    for (size_t d = 0; d < st.size(); ++d) hi += std::abs(st[d]) * (sp[d] - 1);
    if (hi >= limit) g.index64 = true;
  };
  for (auto& l : g.leaves) check(l.strides, l.offset);
  for (auto& o : g.outputs) check(o.strides, o.offset);
}

}  // namespace

Group GroupBuilder::finish() {
  // An output taking over memory the group reads names that leaf (GOutput::overwrites). The
  // planner admits one view of it (the output's own); two leaves of it keep their memory.
  for (auto& o : g_.outputs) {
    if (!o.alias) continue;
    int hits = 0;
    for (int l = 0; l < int(g_.leaves.size()); ++l)
      if (g_.leaves[l].st == o.alias) o.overwrites = l, ++hits;
    if (hits > 1) o.alias.reset(), o.overwrites = -1;
  }
  compute_passes(g_);
  canonicalize(g_, S_, axes_);
  return std::move(g_);
}

}  // namespace loom
