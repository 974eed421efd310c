#pragma once
// The autograd graph (ops/autograd.h): what an op records for its backward, and the helpers
// ops use to record it.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ops/tensor.h"

namespace loom {

struct GradNode;

// A tensor's place in the graph, shared by the copies of one Tensor.
struct AutogradMeta {
  bool requires_grad = false;         // a leaf's flag; true for every tensor with a grad_fn
  std::shared_ptr<GradNode> grad_fn;  // null for a leaf
  Tensor grad;                        // accumulated into a leaf (a non-leaf's when retained)
  bool retains_grad = false;
  std::vector<std::pair<int, std::function<Tensor(const Tensor&)>>> hooks;  // id, hook
  int next_hook_id = 0;
  // A view's: its buffer's version when the view was taken. An in-place write to the buffer
  // since (through its base) leaves the view's graph behind its values: using it then raises.
  uint32_t view_version = 0;
};

// Where an input's gradient goes: the node that made it, or the leaf it is.
struct Edge {
  std::shared_ptr<GradNode> fn;
  std::shared_ptr<AutogradMeta> leaf;
  Shape shape;  // the input's: its gradient has this shape and dtype
  DType dtype = DType::Float32;
};

// A tensor a rule reads, with the version of its buffer when it was saved: an in-place write
// to it before the backward runs is an error, never a silently wrong gradient. An op's own
// result is kept without its graph (the node would own itself); unpacking it for a double
// backward gives it the node back.
// Every saved tensor is kept without its graph place: an input's place may later end in a node
// that reaches this one (an in-place update of it), which would be a reference cycle. Its node
// (or its leaf place) at save time is kept beside it, for a double backward's unpacking.
struct SavedTensor {
  Tensor data;
  uint32_t version = 0;
  bool is_output = false;
  std::shared_ptr<GradNode> fn;        // an input's grad_fn when saved
  std::shared_ptr<AutogradMeta> leaf;  // an input that is a leaf requiring grad
};

// The backward of one op: the result's gradient in, one gradient per input out (an undefined
// Tensor where the input gets none). `need[i]`: whether input i's gradient is wanted.
using GradRule = std::function<std::vector<Tensor>(
    const Tensor& grad, const std::vector<Tensor>& saved, const std::vector<bool>& need)>;

// counters().saved_bytes counts each saved tensor once however many nodes hold it (a layer's
// output saved by its own node and by the next layer's matmul): the memory the graph keeps.
struct SavedKey {
  const void* buf;
  int64_t offset, bytes;
  bool operator==(const SavedKey&) const = default;
};
namespace autograd {
SavedKey saved_key(const Tensor& t);
// The backward graph that reaches t: each node, the tensors it keeps and what its rule
// computes again instead of keeping it; the saved bytes, each tensor counted once (explain()).
std::string explain_graph(const Tensor& t);
// What result's node recomputes in the backward from what it keeps (explain_graph prints it).
void note_recompute(const Tensor& result, std::string what);
}  // namespace autograd

struct GradNode : std::enable_shared_from_this<GradNode> {
  std::string name;        // torch's name: MulBackward0, SumBackward1, ...
  std::vector<Edge> next;  // one per input
  std::vector<SavedTensor> saved;
  GradRule rule;
  std::weak_ptr<AutogradMeta> out;  // the result's place (hooks, retain_grad)
  std::string what;                 // the forward's operands, for error messages
  bool released = false;
  bool is_view = false;    // the result shares its input's memory
  std::string recomputes;  // what the rule computes again rather than keeping it, if anything
  uint64_t seq = 0;        // creation order: later nodes run first
  void free_saved();       // drops the saved tensors (and their count)
  ~GradNode() { free_saved(); }
};

namespace autograd {

// Whether an op on these inputs records a backward node (grad mode on, an input needs one).
bool needs_grad(const Tensor& a);
bool needs_grad(const Tensor& a, const Tensor& b);
bool needs_grad(const std::vector<Tensor>& xs);

// Records the backward node of `result` (made from `inputs` by op `name`): `result` becomes a
// non-leaf with that grad_fn. `saved` are the tensors the rule reads; `result_saved` marks
// which of them is `result` itself (stored without its graph). A floating result only.
void record(Tensor& result, const char* name, const std::vector<Tensor>& inputs,
            std::vector<Tensor> saved, GradRule rule, int result_saved = -1);

// A view's backward node (the view shares x's memory): `back` maps the view's gradient to x's.
void record_view(Tensor& result, const char* name, const Tensor& x,
                 std::function<Tensor(const Tensor&)> back);

// Marks result's node as a view's, stamped with the buffer's version (check_view_current).
void mark_view(Tensor& result);
// Raises when x is a view whose buffer was written in place after it was taken (`where`: the
// op using it).
void check_view_current(const Tensor& x, const char* where);

// The gradient of a region view (slice, select, narrow): zeros of the base's shape with the
// region set to `src`. The view's rule returns `whole` and tells the engine its parts, so that
// the gradients of several regions of one base (split, chunk, the q/k/v thirds of one
// projection) sum as one cat, or one buffer with each region added in, instead of a sum of
// mostly-zero tensors (a fill and a full pass each).
struct RegionGrad {
  int dim = 0;  // the region along one dim: [start, stop), every `step`-th
  int64_t start = 0, stop = 0, step = 1;
  bool selected = false;  // a select of index `start`: src lacks `dim` (unsqueezed to be catted)
  Tensor whole;           // the gradient when it arrives alone
  Tensor src;             // the region's values, shaped as the view
  // The same view of another tensor of the base's shape.
  Tensor view_of(const Tensor& base) const {
    return selected ? base.select(dim, start) : base.slice(dim, start, stop, step);
  }
};
// Called by a rule while the engine runs it; ignored elsewhere.
void note_region_grad(RegionGrad r);

// The backward nodes of the primitives' families, their rules in ops/grad_rules.cpp (a switch
// over every row: a new primitive without a rule fails the build).
void record_unary(Op op, const Tensor& x, Tensor& y);
void record_binary(Op op, const Tensor& a, const Tensor& b, Tensor& y);
// y: the reduction of x over `ax` (sorted), with or without the reduced dims kept.
void record_reduce(Op op, const Tensor& x, const std::vector<int>& ax, Tensor& y);
void record_where(const Tensor& cond, const Tensor& a, const Tensor& b, Tensor& y);
void record_matmul(const Tensor& a, const Tensor& b, Tensor& y);  // a, b: 2+ dims, batch broadcast
void record_cumsum(const Tensor& x, int dim, Tensor& y);
// y = gather(x, dim, index) / scatter_add(self, dim, index, src) (ops/index_prims.h).
void record_gather(const Tensor& x, int dim, const Tensor& index, Tensor& y);
void record_scatter_add(const Tensor& self, int dim, const Tensor& index, const Tensor& src,
                        Tensor& y);
void record_same(const char* name, const Tensor& x, Tensor& y);  // cast, clone, to(device)

// The composites' own nodes (ops/grad_composite.cpp). Their forwards run with grad mode off.
void record_softmax(const Tensor& x, int dim, Tensor& y, bool log);
void record_logsumexp(const Tensor& x, const std::vector<int>& ax, Tensor& y);
void record_mean(const Tensor& x, const std::vector<int>& ax, Tensor& y);
void record_var(const Tensor& x, const std::vector<int>& ax, double correction, Tensor& y,
                bool is_std);
// Layer norm (mean defined) or RMS norm (mean undefined) over the trailing `dims`; mean and rstd
// with those dims kept; w, b undefined when absent.
void record_norm(const char* name, const Tensor& x, const Dims& dims, const Tensor& w,
                 const Tensor& b, const Tensor& mean, const Tensor& rstd, double eps, Tensor& y);
// Cross entropy of rows x [M, C] against class indices t [M]: lse per row, w the class
// weights (undefined: none), denom the mean's divisor (Mean only), eps the label smoothing.
void record_cross_entropy(const Tensor& x, const Tensor& t, const Tensor& lse, const Tensor& w,
                          const Tensor& denom, int64_t ignore_index, Reduction reduction,
                          double eps, Tensor& y);
// nll_loss of rows x [M, C] (log-probabilities) against class indices t [M]: its gradient, -w_t
// (scaled) at each row's target and 0 elsewhere, needs t, w and the mean's divisor, not x.
void record_nll_loss(const Tensor& x, const Tensor& t, const Tensor& w, const Tensor& denom,
                     int64_t ignore_index, Reduction reduction, Tensor& y);

// An in-place write of `value` into t: t's graph place now ends in value's node. Checks before
// the write (a leaf that requires grad, a view of a tensor in the graph).
void check_inplace(const char* op, const Tensor& t, const Tensor& value);
// t's current values as a tensor of its own (same graph place, the storage version kept): the
// operand an in-place op computes from, so its rule reads the values before the write.
Tensor snapshot(const Tensor& t);
void rebase_inplace(Tensor& t, const Tensor& value);

// `g` (a gradient of broadcast shape) summed down to `shape` and cast to `dt`.
Tensor sum_to(const Tensor& g, const Shape& shape, DType dt);

// The node's description of its inputs for errors: "float32 [3, 4] and float32 [4]".
std::string describe(const std::vector<Tensor>& xs);

}  // namespace autograd
}  // namespace loom
