#pragma once
// Group: the backend-neutral IR of one kernel. The fuser builds it; a backend lowers its
// structure (cached by signature) and runs it with the group's runtime values (pointers,
// strides, sizes, scalars), which never take part in the signature.
//
// Iteration space: `space` holds the kept dims first, then the reduced dims (collapsed
// where every access allows). Rows = product of kept dims, cols = product of reduced dims.
// A group without reductions has no kept dims: one "row" spanning everything.
// Nodes live in Full space (one value per element) or Row space (one value per row:
// reductions, their epilogues, scalars). A node is computable in pass `pass`; a reduction
// over a pass-k value completes after pass k, so normalizations take several passes over
// a row (one read of memory when the row stays on chip).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fusion/node.h"

namespace loom {

enum class Space : uint8_t { Full, Row };

// Why the planner placed a node where it is: the join that brought it into its group, or why
// it starts one. Group::str() prints it beside the node, so the fusion log and explain() answer
// "why are these two in one kernel" and "why not". Never part of the signature.
#define LOOM_FUSE_RULES(X)                                                                        \
  X(None, "")                          /* loads and scalars: not placed by the planner */         \
  X(Start, "start")                    /* first of its group (no producer it could join) */       \
  X(Unfused, "unfused")                /* fusion off: one primitive a kernel */                   \
  X(Opaque, "opaque")                  /* matmul, scan: run by the backend directly */            \
  X(PointwiseChain, "pointwise_chain") /* a pointwise op over its producer's space */             \
  X(ReducePrologue, "reduce_prologue") /* a reduction of its group's pointwise values */          \
  X(RowEpilogue, "row_epilogue")       /* an op on the reduced values, one per row */             \
  X(BroadcastBack, "broadcast_back")   /* a row value read back over the row (softmax's e / s) */ \
  X(SiblingMerge, "sibling_merge")     /* its group merged into a reader's other producer's */    \
  X(MatmulEpilogue, "matmul_epilogue") /* a pointwise op over a matmul's result, run per block */ \
  X(RowGather, "row_gather")           /* one element a row picked from memory (caps.row_gather) */

// Why a node did not join the group of a producer in the flush (printed after "start").
#define LOOM_SPLIT_REASONS(X)                                                  \
  X(None, "")                                                                  \
  X(ProducerOpaque, "the producer runs alone (matmul, scan)")                  \
  X(ProducerRegionWrite, "the producer writes a region of memory")             \
  X(ProducerAlloc, "the producer is an allocation")                            \
  X(View, "read through a view (not in the producer's own order)")             \
  X(Shape, "another iteration space")                                          \
  X(Axes, "a reduction over other dims")                                       \
  X(Limit, "the producer's group is full (LOOM_MAX_GROUP_NODES, inputs)")      \
  X(OtherView, "it reads the producer's group through another view too")       \
  X(Cycle, "joining would close a cycle through another group")                \
  X(EpilogueOp, "a matmul's epilogue takes pointwise ops only")                \
  X(ReducedElsewhere, "only reductions over other dims read it")               \
  X(Recompute, "computed again where it is read: fewer bytes than writing it") \
  X(ColumnBody, "a column reduction leaves out a costly body its group writes anyway")

enum class Rule : uint8_t {
#define LOOM_X(name, text) name,
  LOOM_FUSE_RULES(LOOM_X)
#undef LOOM_X
};
enum class Split : uint8_t {
#define LOOM_X(name, text) name,
  LOOM_SPLIT_REASONS(LOOM_X)
#undef LOOM_X
};
const char* rule_name(Rule r);
const char* split_reason(Split s);

struct GNode {
  Op op;
  DType dtype;  // result dtype (Load: the leaf's storage dtype)
  Space space = Space::Full;
  int pass = 0;
  int a = -1, b = -1, c = -1;  // argument nodes
  int leaf = -1;               // Load / Iota / Rand / Randn
  int scalar = -1;             // Const: its value slot; Rand/Randn: seed slot (offset is +1)
  Rule rule = Rule::None;      // the planner's reason for placing it here (str() prints it)
  Split split = Split::None;   // Start: why it did not join a producer's group
  Op split_from = Op::NumOps;  // Start: that producer's op
};

// Load is spelled Op::Copy with a leaf and no arguments. A Gather in a group (Rule::RowGather)
// is a Row node: `a` a Full load of the gathered tensor, read at each row's index only (never as
// a tile), `b` the index, one value a row, clamped into the reduced dim as every gather does.
inline bool is_load(const GNode& n) { return n.op == Op::Copy && n.leaf >= 0 && n.a < 0; }

struct GLeaf {
  DType dtype;
  Strides strides;  // over `space`, in elements
  int64_t offset = 0;
  std::shared_ptr<Storage> st;  // null for index leaves (Iota, Rand)
  Space space = Space::Full;    // Row: strides over the reduced dims are all 0
};

struct GOutput {
  int node;
  std::shared_ptr<Storage> st;
  Strides strides;  // over `space`
  int64_t offset = 0;
  // Region writes: the output starts as a copy of `init` (or takes over its memory when
  // `take_init`, because nothing else reads it). Whole-buffer in-place updates set only
  // `take_init`-style reuse through `alias`.
  std::shared_ptr<Storage> init;
  std::shared_ptr<Storage> alias;  // take this storage's memory (in-place update)
  // The leaf whose memory `alias` hands over, when the group also reads it (x.add_(1) reads
  // the x it overwrites), else -1. Part of the signature: a backend must finish every read of
  // that leaf for an element before it stores the element (the planner only lets a group
  // overwrite memory it reads element for element in the output's own order).
  int overwrites = -1;
  // A column sum (BackendCaps::column_sums): the output holds the sum of the node's values over
  // the kept dims (every row): of a Full node one value a column, `strides` 0 over the kept
  // dims; of a Row node one value, strides 0. The node is float32 or float64, the output's
  // dtype unless `cast`. A backend adds the rows up in an order that depends on the shape alone
  // (blocks of rows into partial sums, then those in order).
  bool colsum = false;
  // A cast of a column sum that joined it (a bf16 norm weight's gradient): the sum rounded to
  // the node's dtype, then stored as `cast_to`, as the cast of a stored sum would be.
  bool cast = false;
  DType cast_to = DType::Float32;
  DType dtype(const std::vector<GNode>& nodes) const { return cast ? cast_to : nodes[node].dtype; }
};

struct Group {
  Shape space;
  int n_kept = 0;
  int passes = 1;
  std::vector<GNode> nodes;
  std::vector<GLeaf> leaves;
  std::vector<GOutput> outputs;
  std::vector<Scalar> scalars;
  std::shared_ptr<Node> opaque;  // a non-fusable op (matmul) run by the backend directly
  // A matmul's epilogue (where the backend's caps say matmul_epilogue): pointwise nodes over
  // the matmul's result C, over C's shape, lowered as a group of their own and run by the
  // backend on each block of C's rows right after the matmul wrote it. The epilogue reads C
  // through its leaf `c_leaf` only, element for element. `outputs` then holds C first where
  // something outside the group needs C (else C is never written to memory), then the
  // epilogue's outputs (the same records as epilogue->outputs).
  std::shared_ptr<Group> epilogue;
  int c_leaf = -1;
  uint64_t signature = 0;
  bool index64 = false;  // some offset needs 64-bit indexing

  bool has_reduce() const;
  int64_t rows() const;
  int64_t cols() const;
  std::string str() const;  // the plan, one line a node
};

// Structural hash: ops, dtypes, spaces, passes, wiring, ranks, stride classes, index width,
// device kind. Never sizes or scalar values.
uint64_t signature(const Group& g, DeviceKind target);

}  // namespace loom
