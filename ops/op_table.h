#pragma once
// The op table: the one list of loom's primitives. The C++ API, the bindings, the CPU
// and CUDA lowerings and the op tests all expand these lists, so adding a row here is how
// an op comes to exist everywhere.
//
// Unary rows: X(Name, api_name, Kind)
//   Kind FloatOut: integer/bool inputs promote to float32 (torch: exp(int) is float).
//   Kind Same:     result keeps the input dtype.
//   Kind BoolOut:  result is bool.
#include <cstdint>

#define LOOM_UNARY_OPS(X)            \
  X(Neg, neg, Same)                  \
  X(Abs, abs, Same)                  \
  X(Sign, sign, Same)                \
  X(Square, square, Same)            \
  X(Relu, relu, Same)                \
  X(Floor, floor, Same)              \
  X(Ceil, ceil, Same)                \
  X(Round, round, Same)              \
  X(Trunc, trunc, Same)              \
  X(BitwiseNot, bitwise_not, Same)   \
  X(Exp, exp, FloatOut)              \
  X(Exp2, exp2, FloatOut)            \
  X(Expm1, expm1, FloatOut)          \
  X(Log, log, FloatOut)              \
  X(Log2, log2, FloatOut)            \
  X(Log1p, log1p, FloatOut)          \
  X(Sqrt, sqrt, FloatOut)            \
  X(Rsqrt, rsqrt, FloatOut)          \
  X(Reciprocal, reciprocal, FloatOut)\
  X(Sin, sin, FloatOut)              \
  X(Cos, cos, FloatOut)              \
  X(Tan, tan, FloatOut)              \
  X(Tanh, tanh, FloatOut)            \
  X(Asin, asin, FloatOut)            \
  X(Acos, acos, FloatOut)            \
  X(Atan, atan, FloatOut)            \
  X(Sinh, sinh, FloatOut)            \
  X(Cosh, cosh, FloatOut)            \
  X(Erf, erf, FloatOut)              \
  X(Sigmoid, sigmoid, FloatOut)      \
  X(Gelu, gelu, FloatOut)            \
  X(GeluTanh, gelu_tanh, FloatOut)   \
  X(Silu, silu, FloatOut)            \
  X(Softplus, softplus, FloatOut)    \
  X(IsNan, isnan, BoolOut)           \
  X(IsInf, isinf, BoolOut)           \
  X(IsFinite, isfinite, BoolOut)     \
  X(LogicalNot, logical_not, BoolOut)

// Binary rows: X(Name, api_name, Kind)
//   Arith:   promoted dtype.       TrueDiv: promoted, integers to float32.
//   Compare: bool result.          Logical: bool result of truthiness.
//   Bitwise: integers and bool only.
#define LOOM_BINARY_OPS(X)                 \
  X(Add, add, Arith)                       \
  X(Sub, sub, Arith)                       \
  X(Mul, mul, Arith)                       \
  X(Div, div, TrueDiv)                     \
  X(FloorDiv, floor_divide, Arith)         \
  X(Remainder, remainder, Arith)           \
  X(Pow, pow, Arith)                       \
  X(Maximum, maximum, Arith)               \
  X(Minimum, minimum, Arith)               \
  X(Atan2, atan2, TrueDiv)                 \
  X(Eq, eq, Compare)                       \
  X(Ne, ne, Compare)                       \
  X(Lt, lt, Compare)                       \
  X(Le, le, Compare)                       \
  X(Gt, gt, Compare)                       \
  X(Ge, ge, Compare)                       \
  X(LogicalAnd, logical_and, Logical)      \
  X(LogicalOr, logical_or, Logical)        \
  X(LogicalXor, logical_xor, Logical)      \
  X(BitwiseAnd, bitwise_and, Bitwise)      \
  X(BitwiseOr, bitwise_or, Bitwise)        \
  X(BitwiseXor, bitwise_xor, Bitwise)

// Reduction rows: X(Name, api_name, Kind)
//   Sum: ints and bool accumulate to int64.  Keep: result keeps dtype.
//   Index: int64 index result.               Bool: bool result.
#define LOOM_REDUCE_OPS(X) \
  X(Sum, sum, Sum)         \
  X(Prod, prod, Sum)       \
  X(Max, amax, Keep)       \
  X(Min, amin, Keep)       \
  X(ArgMax, argmax, Index) \
  X(ArgMin, argmin, Index) \
  X(Any, any, Bool)        \
  X(All, all, Bool)

namespace loom {

// Every primitive the trace records. Besides the table rows: leaves and movement.
enum class Op : uint16_t {
#define LOOM_X(name, api, kind) name,
  LOOM_UNARY_OPS(LOOM_X) LOOM_BINARY_OPS(LOOM_X) LOOM_REDUCE_OPS(LOOM_X)
#undef LOOM_X
  Where,    // where(cond, a, b)
  Cast,     // to the node's dtype
  Copy,     // identity: materializes a view, or writes a value into a region
  Const,    // a scalar; its value is a kernel argument, never part of a signature
  Iota,     // integer index along one dim (arange, eye, linspace)
  Rand,     // counter-based uniform [0, 1) from (seed, element index)
  Randn,    // counter-based standard normal
  Empty,    // allocation only (the base of cat / stack)
  MatMul,   // not fusable: a group boundary, run by the backend's BLAS
  CumSum,   // inclusive scan along `dim`, converting to the node's dtype: a group boundary
  NumOps
};

enum class UnaryKind { Same, FloatOut, BoolOut };
enum class BinaryKind { Arith, TrueDiv, Compare, Logical, Bitwise };
enum class ReduceKind { Sum, Keep, Index, Bool };

const char* op_name(Op op);
bool is_unary(Op op);
bool is_binary(Op op);
bool is_reduce(Op op);
UnaryKind unary_kind(Op op);
BinaryKind binary_kind(Op op);
ReduceKind reduce_kind(Op op);
// Pointwise ops: fusable into a group's iteration space.
bool is_pointwise(Op op);
// Not fusable: each node is a group of its own, run by the backend's run_opaque.
bool is_opaque(Op op);

}  // namespace loom
