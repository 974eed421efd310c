#pragma once
// The Add / Sub / Mul / Div (and Copy: x itself) a folded tile instruction applies, chosen once per
// loop: with_op calls f with the op and the argument order as compile-time constants, so each
// combination is its own loop (cpu/math.cpp binary_pair, cpu/vmath.cpp pair_unary_f32).
#include <type_traits>

#include "fusion/prims.h"

namespace loom::cpu {

// x op y (y - x when Swap); T a float type or a SIMD vector with its operators.
template <Op O, bool Swap, typename T>
inline T arith(T x, T y) {
  if constexpr (O == Op::Copy)
    return x;
  else if constexpr (O == Op::Add)
    return x + y;
  else if constexpr (O == Op::Mul)
    return x * y;
  else if constexpr (O == Op::Div && Swap)
    return y / x;
  else if constexpr (O == Op::Div)
    return x / y;
  else if constexpr (Swap)
    return y - x;
  else
    return x - y;
}

// f(integral_constant<Op, O>, bool_constant<Swap>) for op (Add, Mul, Copy, and Div where
// WithDiv: binary_pair's loops; anything else is Sub), Sub and Div reversed when `swap`.
template <bool WithDiv = false, typename F>
void with_op(Op op, bool swap, F f) {
  if constexpr (WithDiv)
    if (op == Op::Div) {
      if (swap) return f(std::integral_constant<Op, Op::Div>{}, std::true_type{});
      return f(std::integral_constant<Op, Op::Div>{}, std::false_type{});
    }
  switch (op) {
    case Op::Add:
      return f(std::integral_constant<Op, Op::Add>{}, std::false_type{});
    case Op::Mul:
      return f(std::integral_constant<Op, Op::Mul>{}, std::false_type{});
    case Op::Copy:
      return f(std::integral_constant<Op, Op::Copy>{}, std::false_type{});
    default:
      if (swap) return f(std::integral_constant<Op, Op::Sub>{}, std::true_type{});
      return f(std::integral_constant<Op, Op::Sub>{}, std::false_type{});
  }
}

}  // namespace loom::cpu
