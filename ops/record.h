#pragma once
// Helpers every op uses to validate inputs and record nodes.
#include <memory>

#include "fusion/runtime_lock.h"
#include "fusion/trace.h"
#include "ops/autocast.h"
#include "ops/tensor.h"

namespace loom {

// A tensor over a fresh pending (or ready) storage, contiguous in `shape`.
Tensor make_result(std::shared_ptr<Storage> st, const Shape& shape, DType dt, Device d);
Input as_input(const Tensor& t);
// `t` cast to `dt` and broadcast to `shape`, as an input (a binary op's operand).
Input operand(const Tensor& t, DType dt, const Shape& shape);
// The same, appended to n.in in place (no Input temporary: its two views were copied and
// moved again, a tenth of a tiny op).
void add_input(Node& n, const Tensor& t);
void add_operand(Node& n, const Tensor& t, DType dt, const Shape& shape);
std::shared_ptr<Node> new_node(Op op, DType dt, const Shape& shape, Device d);
Tensor record_node(std::shared_ptr<Node> n);  // record + wrap
Tensor const_tensor(Scalar s, DType dt, Device d, const Shape& shape = {});
// Scalar operand `s` of node `n`, as dtype `dt`: an input without storage (Input::st null) whose
// value is n.value, read as one value over the node's shape. No Const node, Storage or trace
// entry of its own: a scalar op records one node. One a node (n.value holds it).
void add_scalar(Node& n, Scalar s, DType dt);
Tensor expand_to(const Tensor& t, const Shape& s);
// t [..., R, C] as a batched matmul's operand: copied contiguous where the backend's BLAS
// takes one batch stride an operand and t's batch dims do not collapse into one, or where
// neither matrix dim has unit stride (ops/matmul.cpp); else t itself.
Tensor gemm_operand(const Tensor& t);
// int64 [shape] holding each element's index along `dim` (one node, fused into its readers).
Tensor iota(const Shape& shape, int dim, Device d);  // broadcast view (no checks beyond rank)
void check_same_device(const char* op, const Tensor& a, const Tensor& b);
// torch's result_type for two tensors / a tensor and a Python scalar.
DType result_type(const Tensor& a, const Tensor& b);
DType result_type(const Tensor& a, Scalar s);
// Normalized, sorted, unique dims; empty `dims` means all of them.
std::vector<int> reduce_axes(const char* op, const Dims& dims, const Shape& shape);
// `s` with the axes `ax` (normalized) set to 1: a keepdim reduction's shape.
Shape keep_shape(const Shape& s, const std::vector<int>& ax);
// The type float work accumulates in: float32 for float16 and bfloat16, else `t` itself.
inline DType acc_float(DType t) { return is_reduced_float(t) ? DType::Float32 : t; }
// x cast to acc_float; an integer or bool x raises (`op` named) instead.
Tensor float_input(const char* op, const Tensor& x);
// The mean of a float tensor over `ax` (normalized), reduced dims kept as size 1, in its
// compute type (float16, bfloat16: float32); exact for a row of equal values (ops/reduce.cpp).
// `data`: the dtype x's values come from (x's own, or a narrow one x is a cast of).
Tensor mean_keep(const Tensor& x, const std::vector<int>& ax, DType data);
// An error when any element of `bad` (bool) is true, raised at the next sync point after the
// work ran instead of syncing now (fusion/checks.h); the same check recorded again before that
// is merged into this one (one flag per kind and message, however many steps record it).
void check_later(const Tensor& bad, ErrorKind kind, std::string message);
// Replaces t's elements (its view of its buffer) with `value` (same shape and dtype),
// recorded in eager order: later readers of t's buffer see the new values.
void assign_inplace(Tensor& t, const Tensor& value);

// The counter-based generator's stream: a range of n values reserved (the seed and the first
// offset), and the uniform values of a reserved range, the same every time they are asked for
// (dropout regenerates its mask in its backward instead of keeping it).
struct RandomRange {
  uint64_t seed, offset;
};
RandomRange reserve_random(int64_t n);
Tensor rand_at(const Shape& shape, Device d, RandomRange r);  // float32

}  // namespace loom
