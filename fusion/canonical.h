#pragma once
// GroupBuilder: turns a planned set of nodes into a Group: maps every access into the
// group's iteration space, computes passes, then canonicalizes the space (kept dims first,
// size-1 dims dropped, dims merged where every access allows) and hashes the signature.
#include <unordered_map>
#include <vector>

#include "fusion/group.h"

namespace loom {

class GroupBuilder {
 public:
  GroupBuilder(Shape S, std::vector<int> axes);
  // A constant's value as a scalar node (the caller adds each constant once).
  int add_const(const Node& c) { return add_scalar(c.value, c.dtype); }
  // A scalar operand (kernel argument) of dtype `dt` as a row-space node.
  int add_scalar(Scalar v, DType dt);
  int add_load(const Input& in, Space sp, const Shape& node_shape);
  // `args`: the builder ids of n's inputs (for a materialized constant, its add_const id).
  int add_node(const Node& n, Space sp, const int* args, int nargs);
  // Why the planner placed node `id` (GNode::rule; printed, never hashed).
  void set_rule(int id, Rule r, Split s, Op from) {
    g_.nodes[id].rule = r, g_.nodes[id].split = s, g_.nodes[id].split_from = from;
  }
  // `reshaped`: n is shaped otherwise than the space (a reshape of it, Planner::reshapes_into):
  // its output (or region) is viewed over the space.
  void add_output(GOutput o, const Node& n, bool reshaped = false);
  // Output o (node o.node) as the column sum `sum` computes: sum's axes are the space's kept
  // dims (GOutput::colsum).
  void add_colsum_output(GOutput o, const Node& sum);
  Group finish();
  size_t scalars() const { return g_.scalars.size(); }    // scalar slots so far
  std::vector<GOutput>& outputs() { return g_.outputs; }  // added so far

 private:
  Strides to_space(const Strides& st, const Shape& shape, bool row) const;
  int push(GNode g);
  Shape S_;
  std::vector<int> axes_;
  Group g_;
  std::unordered_map<const Storage*, std::vector<int>> loads_;  // load nodes by storage
};

}  // namespace loom
