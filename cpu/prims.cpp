// The CPU's lowering of each primitive (fusion/prims.h). Every switch over Op here names each
// enumerator and has no default (this file builds with -Werror=switch), so a new row fails the
// build until the CPU handles it or declines it: lower() holds each unary and binary op's loop
// for each dtype family and names the other primitives with where they are run instead;
// fold_run() holds each reduction's fold. The identity, combine and result of a reduction are
// read from its row's columns (Identity, Combine, ReduceKind), each a switch without default.
#include "cpu/prims.h"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <unsupported/Eigen/SpecialFunctions>

#include "cpu/erfc_wide.h"
#include "cpu/lanes.h"
#include "cpu/loops.h"
#include "cpu/scalar_math.h"
#include "cpu/vmath.h"

// The case labels of a family of rows (LOOM_REDUCE_OPS(LOOM_CASE)), for a switch that handles
// each row of the other families and declines this one whole: its rows have their cases in
// the switch that handles them.
#define LOOM_CASE(name, ...) case Op::name:

namespace loom::cpu {
namespace {

// Integer + - * wrap as torch's do (two's complement), computed in the unsigned type: a signed
// overflow is undefined in C++ (uint16 values computed in int32: 65230 * 47334).
template <typename T>
inline auto as_wrapping(T v) {
  if constexpr (std::is_integral_v<T> && sizeof(T) >= sizeof(int))
    return std::make_unsigned_t<T>(v);
  else
    return v;
}

template <typename T>
inline T floor_div(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    return sm::floor_divide(a, b);  // the floor of the exact quotient (cpu/scalar_math.h)
  } else {
    if (b == 0) return 0;  // integer division by zero: defined as 0 (no trap inside a kernel)
    T q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
    return q;
  }
}

template <typename T>
inline T py_mod(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    T r = std::fmod(a, b);
    if (r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
  } else {
    if (b == 0) return 0;
    T r = a % b;
    if (r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
  }
}

template <typename T>
inline T int_pow(T a, T e) {
  if (e < 0) return a == 1 ? 1 : a == -1 ? ((e & 1) ? -1 : 1) : 0;
  T r = 1;
  while (e) {
    if (e & 1) r = T(r * a);
    a = T(a * a);
    e >>= 1;
  }
  return r;
}

template <typename T>
inline T nan_max(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (a != a) return a;
    if (b != b) return b;
  }
  return a > b ? a : b;
}
template <typename T>
inline T nan_min(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (a != a) return a;
    if (b != b) return b;
  }
  return a < b ? a : b;
}

// Eigen's fast vector sqrt (an rsqrt estimate refined by Newton) gives NaN for +inf, while
// its scalar tail gives inf: set the +inf lanes explicitly.
// fix_at_inf and fix_exp_underflow are passes of their own after the Eigen expression, kept out
// of line so that the function holding the float loops (unary_float) is compiled without them.
template <typename T>
[[gnu::noinline]] void fix_at_inf(const T* a, T* out, int64_t n, T value) {
  const T inf = std::numeric_limits<T>::infinity();
  if (!any_lane(a, n, [inf](T v) { return v == inf; })) return;
  for (int64_t i = 0; i < n; ++i)
    if (a[i] == std::numeric_limits<T>::infinity()) out[i] = value;
}

// Eigen's vector exp clamps its argument (about -709 for double, -88 for float), so lanes
// below that, -inf included, give a tiny positive value instead of 0 (the logsumexp of an all
// -inf row would come out near -708, not -inf). Those lanes take `exact`, the op in scalar math:
// exp itself, and sigmoid and silu, whose logistic clamps its argument the same way (sigmoid(-inf)
// came out 2.9e-39, so sigmoid(-inf) * inf was inf, not NaN).
template <typename T, typename F>
[[gnu::noinline]] void fix_exp_underflow(const T* a, T* out, int64_t n, F exact) {
  const T lo = std::is_same_v<T, double> ? T(-708) : T(-87);
  // A vector test first: the lane-by-lane fixup loop (a call in it) does not vectorize and
  // costs about as much as the exp itself. NaN lanes need no fixup either way.
  if (!any_lane(a, n, [lo](T v) { return v < lo; })) return;
  for (int64_t i = 0; i < n; ++i)
    if (a[i] < lo) out[i] = exact(a[i]);
}

// Eigen's vector log clamps its argument to the smallest normal number, so a subnormal x gave
// log(FLT_MIN) (log(1e-45f) was -87.3, not -103.3): those lanes take the scalar log.
template <typename T>
[[gnu::noinline]] void fix_subnormal_log(const T* a, T* out, int64_t n) {
  const T lo = std::numeric_limits<T>::min();
  if (!any_lane(a, n, [lo](T v) { return v > 0 && v < lo; })) return;
  for (int64_t i = 0; i < n; ++i)
    if (a[i] > 0 && a[i] < lo) out[i] = std::log(a[i]);
}

// Eigen's vector sqrt flushes subnormal inputs to 0 (sqrt(1e-310) = 0, rsqrt = inf) and gives
// +0 for -0 (IEEE and torch: -0, so rsqrt(-0) = -inf): those lanes take the scalar sqrt.
template <typename T>
[[gnu::noinline]] void fix_sqrt_small(const T* a, T* out, int64_t n, bool recip) {
  const T lo = std::numeric_limits<T>::min();
  // zeros, subnormals and negatives: below AVX-512, Eigen's rsqrt-based sqrt of a negative
  // subnormal is inf, not NaN
  auto small = [lo](T v) { return v < lo; };
  if (!any_lane(a, n, small)) return;
  for (int64_t i = 0; i < n; ++i)
    if (small(a[i])) out[i] = recip ? T(1) / std::sqrt(a[i]) : std::sqrt(a[i]);
}

// Eigen's float exp clamps its argument near 88.4, so exp(88.72) (3.39e38, finite) came out
// wrong (inf): the lanes above 88 take the scalar exp.
template <typename T>
[[gnu::noinline]] void fix_exp_overflow(const T* a, T* out, int64_t n) {
  const T hi = std::is_same_v<T, double> ? T(709) : T(88);
  if (!any_lane(a, n, [hi](T v) { return v > hi; })) return;
  for (int64_t i = 0; i < n; ++i)
    if (a[i] > hi) out[i] = std::exp(a[i]);
}

// Eigen's float tanh (built for SSE2 or AVX2) rounds to +-1 from |x| = 7.9 on, where tanh is
// still 1 - 2.6e-7 (4 ulp below 1): those lanes take the double tanh.
template <typename T>
[[gnu::noinline]] void fix_tanh_tail(const T* a, T* out, int64_t n) {
  const T edge = T(7.5);
  auto tail = [edge](T v) { return v > edge || v < -edge; };
  if (!any_lane(a, n, tail)) return;
  for (int64_t i = 0; i < n; ++i)
    if (tail(a[i])) out[i] = T(std::tanh(double(a[i])));
}

// The one switch over the pointwise ops: each case hands its op's loop for T's dtype family to
// the sink k (cpu/loops.h), which compiles it or ignores it; the other primitives are declined.
template <typename T, typename K>
void lower(Op op, K& k) {
  constexpr bool kFloat = std::is_floating_point_v<T>;
  constexpr bool kInt = std::is_integral_v<T>;
  constexpr bool kBool = std::is_same_v<T, uint8_t>;
  constexpr bool kF32 = std::is_same_v<T, float>, kF64 = std::is_same_v<T, double>;
  switch (op) {
    // ---- unary, Same: the input's dtype ----
    case Op::Neg:
      return k.same([](T v) { return T(-v); });
    case Op::Abs:  // floats by fabs: abs(-0.0) is +0.0
      if constexpr (kFloat) return k.same([](T v) { return std::fabs(v); });
      return k.same([](T v) { return v < 0 ? T(-v) : v; });
    case Op::Sign:
      return k.same([](T v) {
        if constexpr (kFloat)
          if (v != v) return v;
        return T((v > 0) - (v < 0));
      });
    case Op::Square:
      return k.same([](T v) { return T(v * v); });
    case Op::Relu:
      return k.same([](T v) { return v > 0 ? v : (v != v ? v : T(0)); });
    case Op::Floor:  // not Eigen's: without SSE4.1 it rounds by a magic add and loses -0.0
      if constexpr (kFloat) return k.scalar([](T v) { return std::floor(v); });
      return k.identity();
    case Op::Ceil:
      if constexpr (kFloat) return k.scalar([](T v) { return std::ceil(v); });
      return k.identity();
    case Op::Round:
      if constexpr (kFloat) return k.scalar([](T v) { return std::nearbyint(v); });
      return k.identity();
    case Op::Trunc:
      if constexpr (kFloat) return k.scalar([](T v) { return std::trunc(v); });
      return k.identity();
    case Op::BitwiseNot:  // integers and bool only (the op layer rejects floats)
      if constexpr (kBool)
        return k.same([](T v) { return T(!v); });
      else if constexpr (kInt)
        return k.same([](T v) { return T(~v); });
      return k.none();

    // ---- unary, FloatOut: the op layer promotes integer inputs to float32 ----
    case Op::Exp:
      if constexpr (kF64)  // glibc's exp: Eigen's double exp is off by up to 1.2 ulp
        return k.scalar([](T v) { return std::exp(v); });
      else if constexpr (kFloat)
        return k.eigen([](const auto& x) { return x.exp(); },
                       [](const T* a, T* o, int64_t n) {
                         fix_exp_underflow(a, o, n, [](T v) { return std::exp(v); });
                         fix_exp_overflow(a, o, n);
                       },
                       exp_f32);
      return k.identity();
    case Op::Exp2:
      if constexpr (kFloat) return k.scalar([](T v) { return std::exp2(v); });
      return k.identity();
    case Op::Expm1:  // float: Eigen's overflows below the float range's end (expm1(88.72) = inf)
      if constexpr (kF32) return k.scalar([](T v) { return T(std::expm1(double(v))); });
      if constexpr (kFloat) return k.eigen([](const auto& x) { return x.expm1(); });
      return k.identity();
    case Op::Log:
      if constexpr (kF64)  // glibc's log: Eigen's double log for SSE2 misses by 1.5 ulp
        return k.scalar([](T v) { return std::log(v); });
      else if constexpr (kFloat)
        return k.eigen([](const auto& x) { return x.log(); },
                       [](const T* a, T* o, int64_t n) { fix_subnormal_log(a, o, n); });
      return k.identity();
    case Op::Log2:
      if constexpr (kFloat) return k.scalar([](T v) { return std::log2(v); });
      return k.identity();
    case Op::Log1p:
      if constexpr (kFloat) return k.eigen([](const auto& x) { return x.log1p(); });
      return k.identity();
    case Op::Sqrt:  // double: Eigen's (an rsqrt estimate and Newton steps) misses by 2.6 ulp
      if constexpr (kF64)
        return k.scalar([](T v) { return std::sqrt(v); });
      else if constexpr (kFloat)
        return k.eigen([](const auto& x) { return x.sqrt(); },
                       [](const T* a, T* o, int64_t n) {
                         fix_at_inf(a, o, n, std::numeric_limits<T>::infinity());
                         fix_sqrt_small(a, o, n, false);
                       });
      return k.identity();
    case Op::Rsqrt:
      if constexpr (kF64)
        return k.scalar([](T v) { return T(1 / std::sqrt(sm::Wide<T>(v))); });  // rounded once
      else if constexpr (kFloat)
        return k.eigen([](const auto& x) { return x.sqrt().inverse(); },
                       [](const T* a, T* o, int64_t n) {
                         fix_at_inf(a, o, n, T(0));
                         fix_sqrt_small(a, o, n, true);
                       });
      return k.identity();
    case Op::Reciprocal:
      if constexpr (kFloat) return k.eigen([](const auto& x) { return x.inverse(); });
      return k.identity();
    case Op::Sin:
      if constexpr (kFloat) return k.eigen([](const auto& x) { return x.sin(); });
      return k.identity();
    case Op::Cos:
      if constexpr (kFloat) return k.eigen([](const auto& x) { return x.cos(); });
      return k.identity();
    case Op::Tan:
      if constexpr (kFloat) return k.scalar([](T v) { return std::tan(v); });
      return k.identity();
    case Op::Tanh:
      if constexpr (kF64)  // glibc's double tanh misses by up to 2 ulp
        return k.scalar([](T v) { return T(std::tanh(sm::Wide<T>(v))); });
      else if constexpr (kFloat)
        return k.eigen([](const auto& x) { return x.tanh(); },
                       [](const T* a, T* o, int64_t n) { fix_tanh_tail(a, o, n); }, tanh_f32);
      return k.identity();
    case Op::Asin:
      if constexpr (kFloat) return k.scalar([](T v) { return std::asin(v); });
      return k.identity();
    case Op::Acos:
      if constexpr (kFloat) return k.scalar([](T v) { return std::acos(v); });
      return k.identity();
    case Op::Atan:
      if constexpr (kFloat) return k.scalar([](T v) { return std::atan(v); });
      return k.identity();
    case Op::Sinh:  // glibc's double sinh misses by up to 1.2 ulp
      if constexpr (kFloat) return k.scalar([](T v) { return T(std::sinh(sm::Wide<T>(v))); });
      return k.identity();
    case Op::Cosh:
      if constexpr (kFloat) return k.scalar([](T v) { return std::cosh(v); });
      return k.identity();
    case Op::Erf:  // float: Eigen's rational form misses by up to 35 ulp (subnormals, tails)
      if constexpr (kF32)  // float64 lanes (cpu/vmath_erfc.cpp)
        if (vmath_on()) return k.eigen([](const auto& x) { return x; }, NoFix{}, erf_f32);
      if constexpr (kF32) return k.scalar([](T v) { return T(std::erf(double(v))); });
      if constexpr (kFloat) return k.eigen([](const auto& x) { return x.erf(); });
      return k.identity();
    case Op::Sigmoid:
      if constexpr (kF64)  // 1 / (1 + e^-x) in double rounds twice: up to 1.8 ulp
        return k.scalar([](T v) { return T(1 / (1 + std::exp(-sm::Wide<T>(v)))); });
      else if constexpr (kFloat)
        // 1 / (1 + e^-x): Eigen's logistic() missed by 5600 ulp near x = -8.7
        return k.eigen([](const auto& x) { return (T(1) + (-x).exp()).inverse(); },
                       [](const T* a, T* o, int64_t n) {
                         // below the clamp, sigmoid(v) = e^v / (1 + e^v) rounds to e^v
                         fix_exp_underflow(a, o, n, [](T v) { return std::exp(v); });
                       },
                       sigmoid_f32);
      return k.identity();
    // The activations in the wide type, in forms that do not cancel for negative x: Eigen's
    // 0.5 x (1 + erf(x / sqrt 2)) lost every digit below x = -5 in float32 (1 + erf(z) =
    // erfc(-z)), and 1 + tanh(u) = 2 sigmoid(2u). At -inf they give torch's NaN (-inf * 0).
    case Op::Gelu:
      if constexpr (kF32)  // x/2 erfc(-x/sqrt 2) in float64 vectors (cpu/vmath_erfc.cpp)
        if (vmath_on()) return k.eigen([](const auto& x) { return x; }, NoFix{}, gelu_f32);
      if constexpr (kF32)  // the same in Eigen's float64 arrays (cpu/erfc_wide.h)
        return k.wide([](const auto& x) {
          using A = std::decay_t<decltype(x)>;
          A e = sm::erfc_wide<A>(x * -0.707106781186547524400844362104849039);
          return A(x * 0.5 * e);
        });
      if constexpr (kFloat)
        return k.scalar([](T v) {
          using W = sm::Wide<T>;
          W x = v;
          return T(x / 2 * std::erfc(-x * W(0.707106781186547524400844362104849039L)));
        });
      return k.identity();
    case Op::GeluTanh:
      if constexpr (kF32)  // own kernel (cpu/vmath.h) where vmath is on: 3 ulp
        if (vmath_on()) return k.eigen([](const auto& x) { return x; }, NoFix{}, gelu_tanh_f32);
      if constexpr (kF32)  // else the same form in float64 vectors (Eigen's exp): one rounding
        return k.wide([](const auto& x) {
          auto u = 0.797884560802865355879892119868763737 * (x + 0.044715 * x * x * x);
          return x / (1 + (-2 * u).exp());
        });
      if constexpr (kFloat)
        return k.scalar([](T v) {
          using W = sm::Wide<T>;
          W x = v, u = W(0.797884560802865355879892119868763737L) * (x + W(0.044715L) * x * x * x);
          return T(x / (1 + std::exp(-2 * u)));
        });
      return k.identity();
    case Op::Silu:
      if constexpr (kF32) return k.wide([](const auto& x) { return x * (1 / (1 + (-x).exp())); });
      if constexpr (kFloat)
        return k.scalar([](T v) {
          using W = sm::Wide<T>;
          W x = v;
          return T(x * (1 / (1 + std::exp(-x))));
        });
      return k.identity();
    case Op::Softplus:  // torch's threshold: x itself above 20
      if constexpr (kFloat)
        return k.scalar([](T v) {
          using W = sm::Wide<T>;
          return v > T(20) ? v : T(std::log1p(std::exp(W(v))));
        });
      return k.identity();

    // ---- unary, BoolOut ----
    case Op::IsNan:
      return k.pred([](T v) { return uint8_t(v != v); });
    case Op::IsInf:
      if constexpr (kFloat) return k.pred([](T v) { return uint8_t(std::isinf(v)); });
      return k.pred([](T) { return uint8_t(0); });
    case Op::IsFinite:
      if constexpr (kFloat) return k.pred([](T v) { return uint8_t(std::isfinite(v)); });
      return k.pred([](T) { return uint8_t(1); });
    case Op::LogicalNot:
      return k.pred([](T v) { return uint8_t(v == T(0)); });

    // ---- the math library (cpu/scalar_math.h): each in a wider type, rounded once ----
    case Op::Log10:
      if constexpr (kFloat) return k.scalar([](T v) { return T(std::log10(sm::Wide<T>(v))); });
      return k.identity();
    case Op::Cbrt:
      if constexpr (kFloat) return k.scalar([](T v) { return T(std::cbrt(sm::Wide<T>(v))); });
      return k.identity();
    case Op::Asinh:
      if constexpr (kFloat) return k.scalar([](T v) { return T(std::asinh(sm::Wide<T>(v))); });
      return k.identity();
    case Op::Acosh:
      if constexpr (kFloat) return k.scalar([](T v) { return T(std::acosh(sm::Wide<T>(v))); });
      return k.identity();
    case Op::Atanh:
      if constexpr (kFloat) return k.scalar([](T v) { return T(std::atanh(sm::Wide<T>(v))); });
      return k.identity();
    case Op::Erfc:
      if constexpr (kF32)
        if (vmath_on()) return k.eigen([](const auto& x) { return x; }, NoFix{}, erfc_f32);
      if constexpr (kF32) return k.wide([](const auto& x) { return sm::erfc_wide(x.eval()); });
      if constexpr (kFloat) return k.scalar([](T v) { return T(std::erfc(sm::Wide<T>(v))); });
      return k.identity();
    case Op::Erfinv:
      if constexpr (kFloat) return k.scalar([](T v) { return sm::erfinv(v); });
      return k.identity();
    case Op::Lgamma:
      if constexpr (kFloat) return k.scalar([](T v) { return sm::lgamma(v); });
      return k.identity();
    case Op::Digamma:
      if constexpr (kFloat) return k.scalar([](T v) { return sm::digamma(v); });
      return k.identity();
    case Op::Sinc:
      if constexpr (kFloat) return k.scalar([](T v) { return sm::sinc(v); });
      return k.identity();
    case Op::Deg2rad:  // x * (pi / 180) with the constant and product exact before one rounding
      if constexpr (kFloat)
        return k.scalar([](T v) { return T(sm::Wide<T>(v) * (sm::kPi<sm::Wide<T>> / 180)); });
      return k.identity();
    case Op::Rad2deg:
      if constexpr (kFloat)
        return k.scalar([](T v) { return T(sm::Wide<T>(v) * (180 / sm::kPi<sm::Wide<T>>)); });
      return k.identity();
    case Op::Frac:  // x - trunc(x), exact (floats only: the op layer rejects integers)
      if constexpr (kFloat) return k.same([](T v) { return T(v - std::trunc(v)); });
      return k.none();
    case Op::Signbit:
      if constexpr (kFloat) return k.pred([](T v) { return uint8_t(std::signbit(v)); });
      if constexpr (kBool) return k.pred([](T) { return uint8_t(0); });
      return k.pred([](T v) { return uint8_t(v < 0); });

    // ---- binary, Arith and TrueDiv: the promoted dtype ----
    case Op::Add:
      if constexpr (kBool)  // bool: true + true is true (stays 0/1)
        return k.arith([](T x, T y) { return T(x | y); });
      return k.arith([](T x, T y) { return T(as_wrapping(x) + as_wrapping(y)); });
    case Op::Sub:
      return k.arith([](T x, T y) { return T(as_wrapping(x) - as_wrapping(y)); });
    case Op::Mul:
      return k.arith([](T x, T y) { return T(as_wrapping(x) * as_wrapping(y)); });
    case Op::Div:  // TrueDiv: the op layer promotes integer operands to float32
      if constexpr (kFloat) return k.arith([](T x, T y) { return x / y; });
      return k.none();
    case Op::FloorDiv:
      return k.arith([](T x, T y) { return floor_div(x, y); });
    case Op::Remainder:
      return k.arith([](T x, T y) { return py_mod(x, y); });
    case Op::Pow:
      if constexpr (kFloat)
        return k.arith([](T x, T y) { return std::pow(x, y); });
      else
        return k.arith([](T x, T y) { return int_pow(x, y); });
    case Op::Maximum:
      return k.arith([](T x, T y) { return nan_max(x, y); });
    case Op::Minimum:
      return k.arith([](T x, T y) { return nan_min(x, y); });
    case Op::Atan2:  // TrueDiv, as Div
      if constexpr (kFloat) return k.arith([](T x, T y) { return std::atan2(x, y); });
      return k.none();

    // ---- binary, Compare and Logical: a bool result ----
    case Op::Eq:
      return k.test([](T x, T y) { return uint8_t(x == y); });
    case Op::Ne:
      return k.test([](T x, T y) { return uint8_t(x != y); });
    case Op::Lt:
      return k.test([](T x, T y) { return uint8_t(x < y); });
    case Op::Le:
      return k.test([](T x, T y) { return uint8_t(x <= y); });
    case Op::Gt:
      return k.test([](T x, T y) { return uint8_t(x > y); });
    case Op::Ge:
      return k.test([](T x, T y) { return uint8_t(x >= y); });
    case Op::LogicalAnd:
      return k.test([](T x, T y) { return uint8_t(x != T(0) && y != T(0)); });
    case Op::LogicalOr:
      return k.test([](T x, T y) { return uint8_t(x != T(0) || y != T(0)); });
    case Op::LogicalXor:
      return k.test([](T x, T y) { return uint8_t((x != T(0)) != (y != T(0))); });

    // ---- binary, Bitwise: integers and bool only (the op layer rejects floats) ----
    case Op::BitwiseAnd:
      if constexpr (kInt) return k.arith([](T x, T y) { return T(x & y); });
      return k.none();
    case Op::BitwiseOr:
      if constexpr (kInt) return k.arith([](T x, T y) { return T(x | y); });
      return k.none();
    case Op::BitwiseXor:
      if constexpr (kInt) return k.arith([](T x, T y) { return T(x ^ y); });
      return k.none();
    case Op::BitwiseLeftShift:  // integers only (the op layer rejects bool and floats)
      if constexpr (kInt && !kBool) return k.arith([](T x, T y) { return sm::shift_left(x, y); });
      return k.none();
    case Op::BitwiseRightShift:
      if constexpr (kInt && !kBool) return k.arith([](T x, T y) { return sm::shift_right(x, y); });
      return k.none();

    // ---- binary math (TrueDiv: floats; cpu/scalar_math.h) ----
    case Op::Hypot:
      if constexpr (kFloat) return k.arith([](T x, T y) { return sm::hypot(x, y); });
      return k.none();
    case Op::Copysign:
      if constexpr (kFloat) return k.arith([](T x, T y) { return std::copysign(x, y); });
      return k.none();
    case Op::Nextafter:
      if constexpr (kFloat) return k.arith([](T x, T y) { return std::nextafter(x, y); });
      return k.none();
    case Op::Logaddexp:
      if constexpr (kFloat) return k.arith([](T x, T y) { return sm::logaddexp(x, y); });
      return k.none();
    case Op::Logaddexp2:
      if constexpr (kFloat) return k.arith([](T x, T y) { return sm::logaddexp2(x, y); });
      return k.none();
    case Op::Xlogy:
      if constexpr (kFloat) return k.arith([](T x, T y) { return sm::xlogy(x, y); });
      return k.none();
    case Op::Fmod:  // C's fmod: the dividend's sign
      if constexpr (kFloat)
        return k.arith([](T x, T y) { return std::fmod(x, y); });
      else if constexpr (kBool)  // bool promotes to int64 in the op layer
        return k.none();
      else
        return k.arith([](T x, T y) { return sm::int_fmod(x, y); });

    // ---- the other primitives: not per-op loops; each is run where named ----
    case Op::Where:    // select() (cpu/math.cpp), from the interpreter's apply
    case Op::Cast:     // cast() (cpu/math.cpp)
    case Op::Copy:     // a memcpy or cast() (cpu/math.cpp)
    case Op::Const:    // a row value from the group's scalars (eval_row, cpu/interp_eval.cpp)
    case Op::Iota:     // the element's index (index_values, cpu/interp_eval.cpp)
    case Op::Rand:     // philox_uniform() (cpu/math.cpp)
    case Op::Randn:    // philox_normal() (cpu/math.cpp)
    case Op::Empty:    // memory only: the base region writes fill; no instruction
    case Op::MatMul:   // run_opaque: run_matmul (cpu/matmul.cpp)
    case Op::CumSum:   // run_opaque: run_scan (cpu/scan.cpp)
    case Op::Svdvals:  // run_opaque: run_svdvals (cpu/svd.cpp)
    case Op::NumOps:   // not an op
      LOOM_REDUCE_OPS(LOOM_CASE)  // and the reductions: fold_run() below
      return;
  }
}

// The loops of each group of ops and dtypes, each in a function of its own (see Sink): the
// float math is not inlined into unary().
template <typename T>
[[gnu::noinline]] void unary_float(Op op, const T* a, T* out, int64_t n) {
  FloatSink<T> k(a, out, n);
  lower<T>(op, k);
}

}  // namespace

template <typename T>
void unary(Op op, const T* a, T* out, int64_t n) {
  SameSink<T> k(a, out, n);
  lower<T>(op, k);
  if (k.done) return;
  if constexpr (std::is_floating_point_v<T>)
    unary_float(op, a, out, n);
  else
    for (int64_t i = 0; i < n; ++i) out[i] = a[i];  // identity(): integers through a float op
}

template <typename T>
void unary_bool(Op op, const T* a, uint8_t* out, int64_t n) {
  PredSink<T> k(a, out, n);
  lower<T>(op, k);
}

template <typename T>
void binary(Op op, const T* a, int sa, const T* b, int sb, T* out, int64_t n) {
  ArithSink<T> k(a, sa, b, sb, out, n);
  lower<T>(op, k);
}

template <typename T>
void binary_bool(Op op, const T* a, int sa, const T* b, int sb, uint8_t* out, int64_t n) {
  TestSink<T> k(a, sa, b, sb, out, n);
  lower<T>(op, k);
}

namespace {

// The integer accumulator of an extreme (Max, Min, ArgMax, ArgMin) for value v: v itself, but
// a uint64 with its top bit flipped, so that int64 order (combine()'s compares) is uint64 order
// and the identities Lowest and Highest (int64's limits) are 0 and 2^64 - 1.
template <typename T>
inline int64_t order_key(T v) {
  if constexpr (std::is_same_v<T, uint64_t>)
    return int64_t(v ^ (uint64_t(1) << 63));
  else
    return int64_t(v);
}
// The value of key k as T: a key outside T's range is an identity (int64's limits), which
// stands for T's own limits (an int32 column min started from int32(INT64_MAX), that is -1).
template <typename T>
inline T from_key(int64_t k) {
  if constexpr (std::is_same_v<T, uint64_t>)
    return uint64_t(k) ^ (uint64_t(1) << 63);
  else if constexpr (std::is_integral_v<T> && sizeof(T) < 8)
    return T(std::clamp<int64_t>(k, std::numeric_limits<T>::min(), std::numeric_limits<T>::max()));
  else
    return T(k);
}

// Is `v` a better arg{max,min} candidate than the current best (NaN beats everything)?
template <typename T>
bool better(Op op, T v, T best, bool have) {
  if (!have) return true;
  if constexpr (std::is_floating_point_v<T>) {
    if (best != best) return false;
    if (v != v) return true;
  }
  return op == Op::ArgMax ? v > best : v < best;
}

// Folds a float run's extreme m into accumulator a (NaN-propagating: a NaN stays, and wins).
inline void fold_extreme(Acc& a, double m, bool mx) {
  if (a.f != a.f) return;
  if (m != m || (mx ? m > a.f : m < a.f)) a.f = m;
}

// Folds x[0, n) (columns col0...) into a; `out`: the reduction's result type.
template <typename T>
void fold_run(Op op, CT out, const T* x, int64_t n, int64_t col0, Acc& a) {
  switch (op) {
    case Op::Sum:
      if constexpr (std::is_same_v<T, float>)
        if (out == CT::F64) {  // a float64 sum of floats (the mean's): in double lanes
          a.f += sum_wide(x, n);
          break;
        }
      if constexpr (std::is_floating_point_v<T>)
        a.f += lanes<T, false>(x, n);
      else
        for (int64_t j = 0; j < n; ++j) a.i = int64_t(uint64_t(a.i) + uint64_t(x[j]));  // wraps
      break;
    case Op::Prod:
      if constexpr (std::is_floating_point_v<T>)
        a.f *= lanes<T, true>(x, n);
      else
        for (int64_t j = 0; j < n; ++j) a.i = int64_t(uint64_t(a.i) * uint64_t(x[j]));
      break;
    case Op::Max:
    case Op::Min: {
      if (n == 0) break;
      bool mx = op == Op::Max;
      if constexpr (std::is_floating_point_v<T>) {
        fold_extreme(
            a, mx ? double(lanes_extreme<T, true>(x, n)) : double(lanes_extreme<T, false>(x, n)),
            mx);
      } else {
        int64_t m = order_key(mx ? lanes_extreme<T, true>(x, n) : lanes_extreme<T, false>(x, n));
        if (mx ? m > a.i : m < a.i) a.i = m;
      }
      break;
    }
    case Op::ArgMax:
    case Op::ArgMin: {
      bool have = a.idx >= 0;
      T best = have ? (std::is_floating_point_v<T> ? T(a.f) : from_key<T>(a.i)) : T(0);
      int64_t bi = a.idx;
      for (int64_t j = 0; j < n; ++j)
        if (better(op, x[j], best, have)) best = x[j], bi = col0 + j, have = true;
      a.idx = bi;
      if (have) {
        if constexpr (std::is_floating_point_v<T>)
          a.f = double(best);
        else
          a.i = order_key(best);
      }
      break;
    }
    case Op::Any:
      for (int64_t j = 0; j < n && !a.i; ++j) a.i |= x[j] != T(0);
      break;
    case Op::All:
      for (int64_t j = 0; j < n && a.i; ++j) a.i &= x[j] != T(0);
      break;

    // ---- not reductions: lower() above, or run where it says ----
    case Op::NumOps:
      LOOM_UNARY_OPS(LOOM_CASE)
      LOOM_BINARY_OPS(LOOM_CASE)
      LOOM_OTHER_PRIMS(LOOM_CASE)
      break;
  }
}

// The column fold of Sum, Prod, Max and Min: rows in blocks of B lanes kept in registers
// across the tile's n columns (the accumulators are read and written once a tile, not once a
// column), then the rows past the last whole block one at a time. step(acc, v) folds value v
// into accumulator acc, both of type A; get and put move an accumulator between A and the
// ColAcc's arrays.
template <int B, typename A, typename T, typename Get, typename Put, typename Step>
[[gnu::always_inline]] inline void fold_cols_block(const T* __restrict x, int64_t ld, int64_t n,
                                                   int64_t i0, Get get, Put put, Step step) {
  A acc[B];
  for (int k = 0; k < B; ++k) acc[k] = get(i0 + k);
  for (int64_t j = 0; j < n; ++j) {
    const T* __restrict r = x + j * ld + i0;
    for (int k = 0; k < B; ++k) acc[k] = step(acc[k], A(r[k]));
  }
  for (int k = 0; k < B; ++k) put(i0 + k, acc[k]);
}

template <typename A, typename T, typename Get, typename Put, typename Step>
[[gnu::always_inline]] inline void fold_cols_blocked(const T* __restrict x, int64_t ld,
                                                     int64_t rows, int64_t n, Get get, Put put,
                                                     Step step) {
  int64_t i0 = 0;
  for (; i0 + 32 <= rows; i0 += 32) fold_cols_block<32, A>(x, ld, n, i0, get, put, step);
  // Short blocks (a few rows: the tile has many columns) keep their lanes in registers too.
  if (i0 + 16 <= rows) fold_cols_block<16, A>(x, ld, n, i0, get, put, step), i0 += 16;
  if (i0 + 8 <= rows) fold_cols_block<8, A>(x, ld, n, i0, get, put, step), i0 += 8;
  if (i0 + 4 <= rows) fold_cols_block<4, A>(x, ld, n, i0, get, put, step), i0 += 4;
  for (; i0 < rows; ++i0) {
    A acc = get(i0);
    for (int64_t j = 0; j < n; ++j) acc = step(acc, A(x[j * ld + i0]));
    put(i0, acc);
  }
}

// The column fold of a float Max or Min, NaN-propagating as lanes_extreme() is: a
// compare-select per element (a NaN accumulator stays, since no compare with it holds) and each
// lane's NaNs flagged beside it, made NaN at the end; a select that also tested for a NaN
// element would not vectorize.
template <int B, bool Max, typename T>
[[gnu::always_inline]] inline void extreme_cols_block(const T* __restrict x, int64_t ld, int64_t n,
                                                      int64_t i0, double* __restrict f) {
  using Flag = std::conditional_t<sizeof(T) == 8, int64_t, int32_t>;
  T acc[B];
  Flag nan[B];
  for (int k = 0; k < B; ++k) acc[k] = T(f[i0 + k]), nan[k] = 0;
  for (int64_t j = 0; j < n; ++j) {
    const T* __restrict r = x + j * ld + i0;
    for (int k = 0; k < B; ++k) {
      T v = r[k];
      acc[k] = (Max ? v > acc[k] : v < acc[k]) ? v : acc[k];
      nan[k] |= Flag(v != v);
    }
  }
  for (int k = 0; k < B; ++k)
    f[i0 + k] = nan[k] ? std::numeric_limits<double>::quiet_NaN() : double(acc[k]);
}

template <bool Max, typename T>
void extreme_cols(const T* __restrict x, int64_t ld, int64_t rows, int64_t n,
                  double* __restrict f) {
  int64_t i0 = 0;
  for (; i0 + 32 <= rows; i0 += 32) extreme_cols_block<32, Max>(x, ld, n, i0, f);
  if (i0 + 16 <= rows) extreme_cols_block<16, Max>(x, ld, n, i0, f), i0 += 16;
  if (i0 + 8 <= rows) extreme_cols_block<8, Max>(x, ld, n, i0, f), i0 += 8;
  for (; i0 < rows; ++i0) extreme_cols_block<1, Max>(x, ld, n, i0, f);
}

// fold_cols() for one compute type: each row's accumulator a lane.
template <typename T>
void fold_cols_t(Op op, const T* __restrict x, int64_t ld, int64_t rows, int64_t n, int64_t col0,
                 ColAcc a) {
  double* __restrict f = a.f;
  int64_t* __restrict iv = a.i;
  int64_t* __restrict idx = a.idx;
  constexpr bool fl = std::is_floating_point_v<T>;
  // Float sums and products in float64; integer ones in int64; extremes in T (exact).
  using W = std::conditional_t<fl, double, int64_t>;
  auto getw = [&](int64_t i) {
    if constexpr (fl)
      return f[i];
    else
      return iv[i];
  };
  auto putw = [&](int64_t i, W v) {
    if constexpr (fl)
      f[i] = v;
    else
      iv[i] = v;
  };
  // extremes: as order keys (order_key above)
  auto gett = [&](int64_t i) { return fl ? T(f[i]) : from_key<T>(iv[i]); };
  auto putt = [&](int64_t i, T v) {
    if constexpr (fl)
      f[i] = double(v);
    else
      iv[i] = order_key(v);
  };
  switch (op) {
    case Op::Sum:
      fold_cols_blocked<W>(x, ld, rows, n, getw, putw, [](W c, W v) { return c + v; });
      return;
    case Op::Prod:
      fold_cols_blocked<W>(x, ld, rows, n, getw, putw, [](W c, W v) { return c * v; });
      return;
    case Op::Max:
    case Op::Min:
      if constexpr (fl) {
        if (op == Op::Max)
          extreme_cols<true>(x, ld, rows, n, f);
        else
          extreme_cols<false>(x, ld, rows, n, f);
      } else if (op == Op::Max) {
        fold_cols_blocked<T>(x, ld, rows, n, gett, putt, [](T c, T v) { return v > c ? v : c; });
      } else {
        fold_cols_blocked<T>(x, ld, rows, n, gett, putt, [](T c, T v) { return v < c ? v : c; });
      }
      return;
    case Op::ArgMax:
    case Op::ArgMin:
      for (int64_t j = 0; j < n; ++j) {
        const T* __restrict r = x + j * ld;
        for (int64_t i = 0; i < rows; ++i) {
          bool have = idx[i] >= 0;
          T best = have ? gett(i) : T(0);
          if (!better(op, r[i], best, have)) continue;
          idx[i] = col0 + j;
          putt(i, r[i]);
        }
      }
      return;
    case Op::Any:
      for (int64_t j = 0; j < n; ++j)
        for (int64_t i = 0; i < rows; ++i) iv[i] |= int64_t(x[j * ld + i] != T(0));
      return;
    case Op::All:
      for (int64_t j = 0; j < n; ++j)
        for (int64_t i = 0; i < rows; ++i) iv[i] &= int64_t(x[j * ld + i] != T(0));
      return;

    // ---- not reductions ----
    case Op::NumOps:
      LOOM_UNARY_OPS(LOOM_CASE)
      LOOM_BINARY_OPS(LOOM_CASE)
      LOOM_OTHER_PRIMS(LOOM_CASE)
      return;
  }
}

// The reduction's result from its accumulator, as its ReduceKind reads it.
template <typename T>
T acc_value(ReduceKind k, const Acc& a) {
  switch (k) {
    case ReduceKind::Index:
      return T(a.idx < 0 ? 0 : a.idx);
    case ReduceKind::Bool:
      return T(a.i != 0);
    case ReduceKind::Keep:  // an extreme: its order key
      if constexpr (std::is_floating_point_v<T>)
        return T(a.f);
      else
        return from_key<T>(a.i);
    case ReduceKind::Sum:
      break;
  }
  if constexpr (std::is_floating_point_v<T>)
    return T(a.f);
  else
    return T(a.i);
}

}  // namespace

Acc acc_init(Op op) {
  switch (prim(op).identity) {
    case Identity::One:
      return {1.0, 1, -1};
    case Identity::Lowest:
      return {-std::numeric_limits<double>::infinity(), std::numeric_limits<int64_t>::min(), -1};
    case Identity::Highest:
      return {std::numeric_limits<double>::infinity(), std::numeric_limits<int64_t>::max(), -1};
    case Identity::Zero:
    case Identity::None:
      break;
  }
  return {0.0, 0, -1};
}

namespace {

#if LOOM_LANES_AVX512
// Float sums and extremes of rows [0, k * G) of x, G rows at a time through their trees'
// last levels together (cpu/lanes_avx512.h): the values fold_run() folds, each row's own.
// Returns the rows done.
int64_t fold_runs(Op op, CT in, CT out, const void* x, int64_t rows, int64_t n, Acc* acc) {
  namespace v = avx512;
  using v::Comb;
  const bool sum = op == Op::Sum, mx = op == Op::Max;
  if (n <= 0 || (!sum && !mx && op != Op::Min) || (in != CT::F32 && in != CT::F64)) return 0;
  const bool wide = in == CT::F32 && out == CT::F64;  // the mean's float64 sum (sum_wide)
  double val[16];
  int64_t i = 0;
  auto each = [&](auto t) {
    using T = decltype(t);
    const int64_t g = wide ? 8 : v::Vec<T>::W;
    for (; i + g <= rows; i += g) {
      const T* r = static_cast<const T*>(x) + i * n;
      if constexpr (std::is_same_v<T, float>)
        if (wide) {
          v::runs8_wide(r, n, val);
          for (int k = 0; k < 8; ++k)  // sum_wide: a float partial sum overflowed
            if (!std::isfinite(val[k])) val[k] = lanes_wide<false>(r + k * n, n);
        }
      if (!wide) {
        sum  ? v::runs<Comb::Add>(r, n, val)
        : mx ? v::runs<Comb::Max>(r, n, val)
             : v::runs<Comb::Min>(r, n, val);
      }
      for (int64_t k = 0; k < g; ++k)
        sum ? void(acc[i + k].f += val[k]) : fold_extreme(acc[i + k], val[k], mx);
    }
  };
  in == CT::F32 ? each(float{}) : each(double{});
  return i;
}
#endif

}  // namespace

void fold(Op op, CT in, CT out, const void* x, int64_t rows, int64_t n, int64_t col0, Acc* acc) {
  int64_t done = 0;
#if LOOM_LANES_AVX512
  if (rows >= 8) done = fold_runs(op, in, out, x, rows, n, acc);
#endif
  dispatch_ct(in, [&](auto t) {
    using T = decltype(t);
    for (int64_t i = done; i < rows; ++i)
      fold_run<T>(op, out, static_cast<const T*>(x) + i * n, n, col0, acc[i]);
  });
}

void fold_cols(Op op, CT in, const void* x, int64_t ld, int64_t rows, int64_t n, int64_t col0,
               ColAcc acc) {
  dispatch_ct(in, [&](auto t) {
    using T = decltype(t);
    fold_cols_t<T>(op, static_cast<const T*>(x), ld, rows, n, col0, acc);
  });
}

void combine_cols(Op op, CT in, ColAcc a, ColAcc b, int64_t n) {
  double* __restrict af = a.f;
  int64_t* __restrict ai = a.i;
  const double* __restrict bf = b.f;
  const int64_t* __restrict bi = b.i;
  switch (prim(op).combine) {  // the sums and products vectorize; the rest as combine() does
    case Combine::Add:
      for (int64_t k = 0; k < n; ++k) af[k] += bf[k], ai[k] += bi[k];
      return;
    case Combine::Mul:
      for (int64_t k = 0; k < n; ++k) af[k] *= bf[k], ai[k] *= bi[k];
      return;
    case Combine::Max:
    case Combine::Min:
    case Combine::ArgMax:
    case Combine::ArgMin:
    case Combine::Or:
    case Combine::And:
    case Combine::None:
      break;
  }
  for (int64_t k = 0; k < n; ++k) {
    Acc x{a.f[k], a.i[k], a.idx[k]};
    combine(op, in, x, Acc{b.f[k], b.i[k], b.idx[k]});
    a.f[k] = x.f, a.i[k] = x.i, a.idx[k] = x.idx;
  }
}

void combine(Op op, CT in, Acc& a, const Acc& b) {
  const bool f = is_float(in);
  const Combine c = prim(op).combine;
  switch (c) {
    case Combine::Add:
      a.f += b.f, a.i += b.i;
      return;
    case Combine::Mul:
      a.f *= b.f, a.i *= b.i;
      return;
    case Combine::Max:
    case Combine::Min: {
      bool mx = c == Combine::Max;
      if (f) {
        if (a.f != a.f) return;
        if (b.f != b.f || (mx ? b.f > a.f : b.f < a.f)) a.f = b.f;
      } else if (mx ? b.i > a.i : b.i < a.i) {
        a.i = b.i;
      }
      return;
    }
    case Combine::ArgMax:  // the earlier index on ties; NaN first
    case Combine::ArgMin: {
      if (b.idx < 0) return;
      bool take;
      if (a.idx < 0)
        take = true;
      else if (f)
        take = a.f == a.f && (b.f != b.f || (c == Combine::ArgMax ? b.f > a.f : b.f < a.f));
      else
        take = c == Combine::ArgMax ? b.i > a.i : b.i < a.i;
      if (take) a = b;
      return;
    }
    case Combine::Or:
      a.i |= b.i;
      return;
    case Combine::And:
      a.i &= b.i;
      return;
    case Combine::None:  // not a reduction
      return;
  }
}

void acc_values(Op op, CT out_ct, const Acc* acc, int64_t n, void* out) {
  const ReduceKind k = reduce_kind(op);
  dispatch_ct(out_ct, [&](auto t) {
    using T = decltype(t);
    for (int64_t i = 0; i < n; ++i) static_cast<T*>(out)[i] = acc_value<T>(k, acc[i]);
  });
}

#define LOOM_INST(ct, T, dtype)                                           \
  template void unary<T>(Op, const T*, T*, int64_t);                      \
  template void unary_bool<T>(Op, const T*, uint8_t*, int64_t);           \
  template void binary<T>(Op, const T*, int, const T*, int, T*, int64_t); \
  template void binary_bool<T>(Op, const T*, int, const T*, int, uint8_t*, int64_t);
LOOM_CPU_CTYPES(LOOM_INST)
#undef LOOM_INST
#undef LOOM_CASE

}  // namespace loom::cpu
