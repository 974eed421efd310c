// Emitting the planned groups: each as a Group the backends lower, with its loads, scalars,
// outputs, and the memory each output may take over (an in-place update's own buffer, when this
// group is the only reader and reads it in the order it writes).
#include "fusion/canonical.h"
#include "fusion/plan_state.h"
#include "tensor/error.h"

namespace loom::plan_impl {
namespace {

// `in` viewed over shape S (as many elements, in the same order): a reshape without a copy,
// which the planner checked exists.
Input over(const Input& in, const Shape& S) {
  Input r = in;
  std::optional<Strides> st = view_strides(in.view.shape, in.view.strides, S);
  LOOM_CHECK(st, Runtime, "fusion: a load over ", shape_str(in.view.shape),
             " cannot be viewed over the space ", shape_str(S));
  r.view.shape = S;
  r.view.strides = *st;
  return r;
}

}  // namespace

std::optional<Input> through(const Input& q, const Input& in, const Shape& P) {
  const View& v = in.view;
  const int rv = int(v.shape.size()), rp = int(P.size());
  if (v.offset != 0 || rv < rp || q.view.shape != P) return std::nullopt;
  const Strides cs = contiguous_strides(P);
  Input r = q;
  r.view.shape = v.shape;
  r.view.strides.assign(size_t(rv), 0);
  for (int k = 0; k < rv; ++k) {
    const int j = k - (rv - rp);
    if (v.shape[k] == 1 || v.strides[k] == 0) continue;  // one element, or the same one again
    if (j < 0 || v.shape[k] != P[j] || v.strides[k] != cs[j]) return std::nullopt;
    r.view.strides[k] = q.view.strides[j];
  }
  return r;
}

// May node `w` of group `gi` write over `st`'s memory? Only when nothing outside the
// group reads `st`, and (for in-place updates) the group reads it element for element
// in the order it writes, so each element is read before it is overwritten.
bool GroupEmitter::only_reader(const Storage* st, int w, int gi, bool same_order) {
  if (st->kept) return false;
  if (st->pending() && s_.idx(st) >= 0 && s_.nodes[s_.idx(st)].root) return false;
  const PGroup& G = s_.groups[gi];
  if (same_order && !G.axes.empty()) return false;
  if (!readers_built_) {
    readers_built_ = true;
    for (int i = 0; i < int(s_.nodes.size()); ++i) {
      const Node& n = *s_.nodes[i].n;
      auto note = [&](const Storage* s) {
        if (!s) return;
        auto& v = readers_[s];
        if (v.empty() || v.back() != i) v.push_back(i);
      };
      note(n.base.get());
      for (auto& in : n.in) note(in.st.get());
    }
  }
  auto it = readers_.find(st);
  if (it == readers_.end()) return true;
  for (int i : it->second) {
    const Node& n = *s_.nodes[i].n;
    if (n.base.get() == st && i != w) return false;
    for (auto& in : n.in) {
      if (in.st.get() != st) continue;
      // A matmul in the writer's group reads all of B (and A) while its epilogue writes.
      if (!same_order || s_.nodes[i].group != gi || is_opaque(n.op)) return false;
      // A kernel may store an output as soon as it is computed (the CPU tile does): a
      // reader evaluated after the writer (later in dag order) would see the new values.
      if (i > w) return false;
      if (in.view.offset != 0 || in.view.shape != G.S || in.view.strides != contiguous_strides(G.S))
        return false;
    }
  }
  return true;
}

Group GroupEmitter::build(int gi) {
  const PGroup& G = s_.groups[gi];
  if (srcs_) srcs_->emplace_back();
  Group g;
  const int first = G.opaque ? G.members[0] : -1;  // a matmul with an epilogue: its node
  if (G.opaque) {
    const PNode& pn = s_.nodes[first];
    g.opaque = pn.st->node;
    if (pn.materialize) g.outputs.push_back({0, pn.st, {}, 0});
    for (auto& in : pn.n->in)
      g.leaves.push_back({in.dtype, in.view.strides, in.view.offset, in.st});
    if (G.members.size() == 1) return g;
  }
  GroupBuilder b(G.S, G.axes);
  // Builder ids by planner index (members, and constants as scalars), without a hash map
  // per group: entries set here are reset before returning.
  if (member_id_.size() < s_.nodes.size()) {
    member_id_.assign(s_.nodes.size(), -1);
    const_id_.assign(s_.nodes.size(), -1);
  }
  // Scalar slots added since `before` come from node p (in order: its parts).
  auto note_scalars = [&](size_t before, int p) {
    if (srcs_)
      for (size_t k = before; k < b.scalars(); ++k) srcs_->back().push_back({p, int(k - before)});
  };
  auto scalar_of = [&](int p) {
    if (const_id_[p] < 0) {
      size_t before = b.scalars();
      const_id_[p] = b.add_const(*s_.nodes[p].n), set_.push_back(p);
      note_scalars(before, p);
    }
    return const_id_[p];
  };
  for (int m : G.members) {
    if (m == first) continue;
    const PNode& pn = s_.nodes[m];
    const Node& n = *pn.n;
    if (pn.colsum) {  // an output of its input's values, summed over the rows
      // A cast of a column sum (Planner::colsum_cast_group): the sum's values, stored as its dtype.
      const bool cast = n.op == Op::Cast;
      const Node& sum = cast ? *s_.nodes[s_.producer(n.in[0])].n : n;
      const Input& in = sum.in[0];
      const int p = s_.producer(in);
      const int id =
          p >= 0 && s_.nodes[p].group == gi ? member_id_[p] : b.add_load(in, pn.space, G.S);
      GOutput o{id, pn.st};
      o.cast = cast, o.cast_to = n.dtype;
      // (the cast reads the sum's elements in their order, maybe reshaped: the sum's shape lays
      // its columns out)
      if (pn.materialize) b.add_colsum_output(std::move(o), sum);
      continue;
    }
    // A member shaped otherwise than the space, joined through a reshape (Planner::
    // reshapes_into): its loads and its output are the same elements viewed over the space.
    const bool reshaped =
        !is_reduce(n.op) && pn.space == Space::Full && (n.base ? n.region->shape : n.shape) != G.S;
    SmallVec<int, 4> args;
    if (prim_class(n.op) == PrimClass::Scalar) args.push_back(scalar_of(m));
    for (auto& in : n.in) {
      int p = s_.producer(in);
      if (!in.st) {  // the node's scalar operand: a scalar slot of its own
        size_t before = b.scalars();
        args.push_back(b.add_scalar(n.value, in.dtype));
        note_scalars(before, m);
      } else if (p >= 0 && s_.nodes[p].group == gi && !s_.is_const(p) && p != first) {
        args.push_back(member_id_[p]);
      } else if (s_.is_const(p)) {
        args.push_back(scalar_of(p));
      } else if (p >= 0 && s_.nodes[p].inlined) {
        // A cast of memory (Planner::inline_cast): that memory through this read's view, cast.
        const Node& c = *s_.nodes[p].n;
        const Input q = *through(c.in[0], in, c.shape);
        const Space ls = is_reduce(n.op) ? Space::Full : pn.space;
        const int id = reshaped ? b.add_load(over(q, G.S), ls, G.S)
                                : b.add_load(q, ls, n.base ? n.region->shape : n.shape);
        args.push_back(b.add_node(c, ls, &id, 1));
      } else {
        // A reduction, and a row gather's tensor (read at one index a row), load over the space.
        Space ls =
            is_reduce(n.op) || (n.op == Op::Gather && &in == &n.in[0]) ? Space::Full : pn.space;
        args.push_back(reshaped ? b.add_load(over(in, G.S), ls, G.S)
                                : b.add_load(in, ls, n.base ? n.region->shape : n.shape));
      }
    }
    size_t before = b.scalars();
    int id = b.add_node(n, pn.space, args.data(), int(args.size()));
    b.set_rule(id, pn.rule, pn.split, pn.split_from);
    note_scalars(before, m);
    member_id_[m] = id;
    set_.push_back(m);
    if (pn.materialize) {
      GOutput o{id, pn.st};
      if (n.base) {
        o.init = n.base;
        if (only_reader(n.base.get(), m, gi, false)) o.alias = n.base;
      } else if (auto r = n.reuse.lock()) {
        // A chain of in-place updates (m.mul_(b).add_(x)): versions in between that live
        // only in this group's registers pass the first version's memory on to the last.
        for (int k = s_.idx(r.get());
             r->pending() && k >= 0 && s_.nodes[k].group == gi && !s_.nodes[k].materialize;
             k = s_.idx(r.get())) {
          auto prev = r->node->reuse.lock();
          if (!prev) break;
          r = std::move(prev);
        }
        if (only_reader(r.get(), m, gi, true)) o.alias = r;
      }
      b.add_output(o, n, reshaped);
    }
  }
  for (int p : set_) member_id_[p] = const_id_[p] = -1;
  set_.clear();
  if (first < 0) return b.finish();
  // The matmul's epilogue: its own group, reading C through one leaf (every read of C is
  // element for element, so the loads share it).
  const std::shared_ptr<Storage>& c = s_.nodes[first].st;
  for (auto& o : b.outputs())
    if (o.alias == c) o.alias.reset();  // C has no memory of its own to hand over
  g.epilogue = std::make_shared<Group>(b.finish());
  for (int l = 0; l < int(g.epilogue->leaves.size()); ++l)
    if (g.epilogue->leaves[l].st == c) g.c_leaf = l;
  for (auto& o : g.epilogue->outputs) g.outputs.push_back(o);
  return g;
}

}  // namespace loom::plan_impl
