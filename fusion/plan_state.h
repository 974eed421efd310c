#pragma once
// The planner's view of one flush, shared by the placement (fusion/planner.cpp: which group each
// node joins, and by which rule) and the emitter (fusion/plan_emit.cpp: each group as a Group,
// with the memory its outputs may take over). Not an API.
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "fusion/group.h"
#include "fusion/node.h"
#include "fusion/planner.h"

namespace loom::plan_impl {

struct PNode {
  std::shared_ptr<Storage> st;
  Node* n;
  int group = -1;
  Space space = Space::Full;
  bool root = false;
  bool materialize = false;
  bool in_memory = false;  // read as memory by a region write or an opaque op
  // A Sum over its group's kept dims (every row) of a value of the group: written by the group
  // as a column sum output of that value (GOutput::colsum), not a node of its own.
  bool colsum = false;
  Rule rule = Rule::Start;    // why it is in its group (Group::str() prints it)
  Split split = Split::None;  // Start: why it did not join its first producer in the flush
  Op split_from = Op::NumOps;
  // Recomputation (Planner::mark_recompute): the group a first planning put this node in, and
  // for a node moved out of it to be computed where it is read, that group again (-1: none).
  int home = -1;
  int barrier = -1;
  // A cast of memory in no group of its own: each reader's group loads that memory through
  // the reader's view and casts it there (Planner::inline_cast).
  bool inlined = false;
};

struct PGroup {
  Shape S;
  std::vector<int> axes;  // empty: no reduction yet
  std::vector<int> members;
  bool alive = true;
  bool opaque = false;
  // An opaque matmul whose backend runs pointwise consumers as its epilogue (members after the
  // first); S is the matmul's result shape.
  bool epilogue_ok = false;
  int leaves = 0;  // rough count of distinct memory inputs, for limits
};

inline bool region_write(const Node& n) { return n.base != nullptr; }

// Input `q` of a pointwise node over shape P (its values contiguous over P), as read through
// `in`, a view of those values that broadcasts them (dims of P from the right, each whole or
// of stride 0; new leading dims of stride 0): q's memory viewed over in's shape, or none where
// `in` reads the values otherwise (plan_emit.cpp).
std::optional<Input> through(const Input& q, const Input& in, const Shape& P);

// The pending nodes of one flush, in dag order, and the groups they are placed in.
struct PlanState {
  std::vector<PNode> nodes;
  std::vector<PGroup> groups;
  uint64_t epoch = next_mark_epoch();
  // Index of a pending storage of this flush, or -1.
  int idx(const Storage* s) const { return s->mark_epoch == epoch ? int(s->mark) : -1; }
  // Index of the pending producer of an input in this flush, or -1 (ready memory, or a scalar
  // operand: no storage).
  int producer(const Input& in) const {
    if (!in.st || !in.st->pending()) return -1;
    return idx(in.st.get());
  }
  bool is_const(int p) const { return p >= 0 && prim_class(nodes[p].n->op) == PrimClass::Scalar; }
};

// Turns placed groups into Groups (GroupBuilder), one at a time, in run order.
class GroupEmitter {
 public:
  GroupEmitter(const PlanState& s, std::vector<std::vector<ScalarSrc>>* srcs)
      : s_(s), srcs_(srcs) {}
  Group build(int gi);

 private:
  // May node `w` of group `gi` write over `st`'s memory?
  bool only_reader(const Storage* st, int w, int gi, bool same_order);
  const PlanState& s_;
  // The nodes that read each storage (an input or a region write's base), in dag order; built
  // at the first only_reader: asking every in-place output over all nodes was quadratic in an
  // optimizer step's flush.
  std::unordered_map<const Storage*, std::vector<int>> readers_;
  bool readers_built_ = false;
  std::vector<std::vector<ScalarSrc>>* srcs_;    // when asked: each group's scalar sources
  std::vector<int> member_id_, const_id_, set_;  // builder ids by planner index
};

}  // namespace loom::plan_impl
