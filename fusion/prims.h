#pragma once
// The primitives: the one list of what a trace records. The C++ API, the bindings, each
// backend's table of lowerings (cpu/prims.cpp with cpu/prims_reduce.cpp, cuda/prims.cpp) and
// the op tests expand these rows, so adding a row is how an op comes to exist everywhere; a backend that lacks a case for
// a row fails to compile (its switch has no default and -Werror=switch).
//
// Unary rows: X(Name, api_name, Kind)
//   Kind FloatOut: integer/bool inputs promote to float32 (torch: exp(int) is float).
//   Kind Same:     result keeps the input dtype.
//   Kind BoolOut:  result is bool.
#include <cstddef>
#include <cstdint>

#define LOOM_UNARY_OPS(X)             \
  X(Neg, neg, Same)                   \
  X(Abs, abs, Same)                   \
  X(Sign, sign, Same)                 \
  X(Square, square, Same)             \
  X(Relu, relu, Same)                 \
  X(Floor, floor, Same)               \
  X(Ceil, ceil, Same)                 \
  X(Round, round, Same)               \
  X(Trunc, trunc, Same)               \
  X(BitwiseNot, bitwise_not, Same)    \
  X(Exp, exp, FloatOut)               \
  X(Exp2, exp2, FloatOut)             \
  X(Expm1, expm1, FloatOut)           \
  X(Log, log, FloatOut)               \
  X(Log2, log2, FloatOut)             \
  X(Log1p, log1p, FloatOut)           \
  X(Sqrt, sqrt, FloatOut)             \
  X(Rsqrt, rsqrt, FloatOut)           \
  X(Reciprocal, reciprocal, FloatOut) \
  X(Sin, sin, FloatOut)               \
  X(Cos, cos, FloatOut)               \
  X(Tan, tan, FloatOut)               \
  X(Tanh, tanh, FloatOut)             \
  X(Asin, asin, FloatOut)             \
  X(Acos, acos, FloatOut)             \
  X(Atan, atan, FloatOut)             \
  X(Sinh, sinh, FloatOut)             \
  X(Cosh, cosh, FloatOut)             \
  X(Erf, erf, FloatOut)               \
  X(Sigmoid, sigmoid, FloatOut)       \
  X(Gelu, gelu, FloatOut)             \
  X(GeluTanh, gelu_tanh, FloatOut)    \
  X(Silu, silu, FloatOut)             \
  X(Softplus, softplus, FloatOut)     \
  X(IsNan, isnan, BoolOut)            \
  X(IsInf, isinf, BoolOut)            \
  X(IsFinite, isfinite, BoolOut)      \
  X(LogicalNot, logical_not, BoolOut) \
  X(Log10, log10, FloatOut)           \
  X(Cbrt, cbrt, FloatOut)             \
  X(Asinh, asinh, FloatOut)           \
  X(Acosh, acosh, FloatOut)           \
  X(Atanh, atanh, FloatOut)           \
  X(Erfc, erfc, FloatOut)             \
  X(Erfinv, erfinv, FloatOut)         \
  X(Lgamma, lgamma, FloatOut)         \
  X(Digamma, digamma, FloatOut)       \
  X(Sinc, sinc, FloatOut)             \
  X(Deg2rad, deg2rad, FloatOut)       \
  X(Rad2deg, rad2deg, FloatOut)       \
  X(Frac, frac, Same)                 \
  X(Signbit, signbit, BoolOut)

// Binary rows: X(Name, api_name, Kind)
//   Arith:   promoted dtype.       TrueDiv: promoted, integers to float32.
//   Floating: floating tensors only (torch has no integer kernel for them; nextafter's next
//            value of an int is no int).
//   Compare: bool result.          Logical: bool result of truthiness.
//   Bitwise: integers and bool only (the shifts: integers only).
//   Fmod follows C's fmod (the dividend's sign); Remainder Python's (the divisor's). Integer
//   fmod, remainder and floor_divide by a zero element give 0 (no trap inside a kernel) and raise
//   at the next sync point (fusion/checks.h); a zero integer scalar divisor is an error at the
//   call.
#define LOOM_BINARY_OPS(X)                           \
  X(Add, add, Arith)                                 \
  X(Sub, sub, Arith)                                 \
  X(Mul, mul, Arith)                                 \
  X(Div, div, TrueDiv)                               \
  X(FloorDiv, floor_divide, Arith)                   \
  X(Remainder, remainder, Arith)                     \
  X(Pow, pow, Arith)                                 \
  X(Maximum, maximum, Arith)                         \
  X(Minimum, minimum, Arith)                         \
  X(Atan2, atan2, TrueDiv)                           \
  X(Eq, eq, Compare)                                 \
  X(Ne, ne, Compare)                                 \
  X(Lt, lt, Compare)                                 \
  X(Le, le, Compare)                                 \
  X(Gt, gt, Compare)                                 \
  X(Ge, ge, Compare)                                 \
  X(LogicalAnd, logical_and, Logical)                \
  X(LogicalOr, logical_or, Logical)                  \
  X(LogicalXor, logical_xor, Logical)                \
  X(BitwiseAnd, bitwise_and, Bitwise)                \
  X(BitwiseOr, bitwise_or, Bitwise)                  \
  X(BitwiseXor, bitwise_xor, Bitwise)                \
  X(BitwiseLeftShift, bitwise_left_shift, Bitwise)   \
  X(BitwiseRightShift, bitwise_right_shift, Bitwise) \
  X(Hypot, hypot, Floating)                          \
  X(Copysign, copysign, TrueDiv)                     \
  X(Nextafter, nextafter, Floating)                  \
  X(Logaddexp, logaddexp, Floating)                  \
  X(Logaddexp2, logaddexp2, Floating)                \
  X(Xlogy, xlogy, TrueDiv)                           \
  X(Fmod, fmod, Arith)

// Reduction rows: X(Name, api_name, Kind, Identity, Combine)
//   Kind Sum: ints and bool accumulate to int64.  Keep: result keeps dtype.
//        Index: int64 index result.               Bool: bool result.
//   Identity: the fold's starting value (Lowest / Highest: -inf / +inf for floats, the
//   dtype's limits for integers). Combine: how two partial results of a row merge (ArgMax /
//   ArgMin keep the earlier index on ties and prefer NaN).
#define LOOM_REDUCE_OPS(X)                  \
  X(Sum, sum, Sum, Zero, Add)               \
  X(Prod, prod, Sum, One, Mul)              \
  X(Max, amax, Keep, Lowest, Max)           \
  X(Min, amin, Keep, Highest, Min)          \
  X(ArgMax, argmax, Index, Lowest, ArgMax)  \
  X(ArgMin, argmin, Index, Highest, ArgMin) \
  X(Any, any, Bool, Zero, Or)               \
  X(All, all, Bool, One, And)

// The primitives outside the three op families: X(Name, name, Class, Arity)
//   Class: see PrimClass. Their result dtype is the node's, chosen by the op layer.
//   Gather (input, index): out[.., j, ..] = input[.., index[.., j, ..], ..] along `dim`, in
//   index's shape (input's view already cut to it in the other dims).
//   ScatterAdd (input, index, src): input with src[.., j, ..] added at index[.., j, ..] along
//   `dim`, duplicates summed in increasing j. Both clamp an index to the dim's range (the op
//   layer raises for one outside it at the next sync point), so no kernel reads or writes
//   outside its tensors.
#define LOOM_OTHER_PRIMS(X)      \
  X(Where, where, Pointwise, 3)  \
  X(Cast, cast, Pointwise, 1)    \
  X(Copy, copy, Pointwise, 1)    \
  X(Const, const, Scalar, 0)     \
  X(Iota, iota, Index, 0)        \
  X(Rand, rand, Random, 0)       \
  X(Randn, randn, Random, 0)     \
  X(Empty, empty, Alloc, 0)      \
  X(MatMul, matmul, Opaque, 2)   \
  X(CumSum, cumsum, Opaque, 1)   \
  X(Svdvals, svdvals, Opaque, 1) \
  X(Gather, gather, Opaque, 2)   \
  X(ScatterAdd, scatter_add, Opaque, 3)

namespace loom {

// Every primitive the trace records: the rows above, in order.
enum class Op : uint16_t {
#define LOOM_X(name, ...) name,
  LOOM_UNARY_OPS(LOOM_X) LOOM_BINARY_OPS(LOOM_X) LOOM_REDUCE_OPS(LOOM_X) LOOM_OTHER_PRIMS(LOOM_X)
#undef LOOM_X
      NumOps
};

// What the fuser knows of a primitive: its class and arity, never which op it is.
enum class PrimClass : uint8_t {
  Pointwise,  // each element from the same element of its operands
  Reduce,     // folds the node's axes of its operand, from Identity by Combine
  Scalar,     // Const: one value, passed to the kernel as an argument (never in a signature)
  Index,      // Iota: the element's index along the node's dim
  Random,     // Rand, Randn: from the element's linear index, with (seed, offset) arguments
  Alloc,      // memory only: the base that region writes fill (cat / stack)
  Opaque,     // not fusable: a group of its own, run by the backend (BLAS, scan)
};

enum class UnaryKind : uint8_t { Same, FloatOut, BoolOut };
enum class BinaryKind : uint8_t { Arith, TrueDiv, Floating, Compare, Logical, Bitwise };
enum class ReduceKind : uint8_t { Sum, Keep, Index, Bool };
enum class Identity : uint8_t { None, Zero, One, Lowest, Highest };
enum class Combine : uint8_t { None, Add, Mul, Max, Min, ArgMax, ArgMin, Or, And };

// One row of the list, as data.
struct Prim {
  const char* name;  // the API name (sum's is "sum", amax's "amax")
  PrimClass cls;
  int arity;     // tensor operands (a binary op's scalar operand counts: it is an Input)
  uint8_t rule;  // the family's dtype rule: UnaryKind, BinaryKind or ReduceKind as a number
  Identity identity = Identity::None;
  Combine combine = Combine::None;
};

inline constexpr Prim kPrims[] = {
#define LOOM_U(name, api, kind) {#api, PrimClass::Pointwise, 1, uint8_t(UnaryKind::kind)},
#define LOOM_B(name, api, kind) {#api, PrimClass::Pointwise, 2, uint8_t(BinaryKind::kind)},
#define LOOM_R(name, api, kind, id, comb) \
  {#api, PrimClass::Reduce, 1, uint8_t(ReduceKind::kind), Identity::id, Combine::comb},
#define LOOM_O(name, api, cls, arity) {#api, PrimClass::cls, arity, 0},
    LOOM_UNARY_OPS(LOOM_U) LOOM_BINARY_OPS(LOOM_B) LOOM_REDUCE_OPS(LOOM_R) LOOM_OTHER_PRIMS(LOOM_O)
#undef LOOM_U
#undef LOOM_B
#undef LOOM_R
#undef LOOM_O
};
static_assert(sizeof(kPrims) / sizeof(kPrims[0]) == size_t(Op::NumOps));

constexpr const Prim& prim(Op op) { return kPrims[size_t(op)]; }
constexpr PrimClass prim_class(Op op) { return prim(op).cls; }
constexpr const char* op_name(Op op) { return op < Op::NumOps ? prim(op).name : "?"; }

// The op families: the rows of LOOM_UNARY_OPS, LOOM_BINARY_OPS and LOOM_REDUCE_OPS, in order.
#define LOOM_ONE_(...) +1
inline constexpr int kNumUnary = 0 LOOM_UNARY_OPS(LOOM_ONE_);
inline constexpr int kNumBinary = 0 LOOM_BINARY_OPS(LOOM_ONE_);
inline constexpr int kNumReduce = 0 LOOM_REDUCE_OPS(LOOM_ONE_);
#undef LOOM_ONE_
constexpr bool is_unary(Op op) { return int(op) < kNumUnary; }
constexpr bool is_binary(Op op) { return int(op) >= kNumUnary && int(op) < kNumUnary + kNumBinary; }
constexpr bool is_reduce(Op op) { return op < Op::NumOps && prim_class(op) == PrimClass::Reduce; }
constexpr bool is_opaque(Op op) { return op < Op::NumOps && prim_class(op) == PrimClass::Opaque; }
static_assert(kNumUnary + kNumBinary + kNumReduce == int(Op::Where));
static_assert(is_reduce(Op(kNumUnary + kNumBinary)) && !is_reduce(Op::Where));

constexpr UnaryKind unary_kind(Op op) {
  return is_unary(op) ? UnaryKind(prim(op).rule) : UnaryKind::Same;
}
constexpr BinaryKind binary_kind(Op op) {
  return is_binary(op) ? BinaryKind(prim(op).rule) : BinaryKind::Arith;
}
constexpr ReduceKind reduce_kind(Op op) {
  return is_reduce(op) ? ReduceKind(prim(op).rule) : ReduceKind::Keep;
}

}  // namespace loom
