// The CPU's lowering of each pointwise primitive (fusion/prims.h); cpu/prims_reduce.cpp holds
// the reductions'. Every switch over Op in the two files names each enumerator and has no
// default (both build with -Werror=switch), so a new row fails the build until the CPU handles
// it or declines it: lower() holds each unary and binary op's loop for each dtype family and
// names the other primitives with where they are run instead.
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

// fix_exp_underflow and fix_exp_overflow are passes of their own after the Eigen expression, kept
// out of line so that the function holding the float loops (unary_float) is compiled without them.
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
      else if constexpr (kF32)  // exact, the same for every element (cpu/vmath_sqrt.cpp)
        return k.exact(sqrt_f32);
      return k.identity();
    case Op::Rsqrt:
      if constexpr (kF64)
        return k.scalar([](T v) { return T(1 / std::sqrt(sm::Wide<T>(v))); });  // rounded once
      else if constexpr (kF32)
        return k.exact(rsqrt_f32);
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
        return k.power([](T x, T y) { return std::pow(x, y); });
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
    case Op::Where:       // select() (cpu/math.cpp), from the interpreter's apply
    case Op::Cast:        // cast() (cpu/math.cpp)
    case Op::Copy:        // a memcpy or cast() (cpu/math.cpp)
    case Op::Const:       // a row value from the group's scalars (eval_row, cpu/interp_eval.cpp)
    case Op::Iota:        // the element's index (index_values, cpu/interp_eval.cpp)
    case Op::Rand:        // philox_uniform() (cpu/math.cpp)
    case Op::Randn:       // philox_normal() (cpu/math.cpp)
    case Op::Empty:       // memory only: the base region writes fill; no instruction
    case Op::MatMul:      // run_opaque: run_matmul (cpu/matmul.cpp)
    case Op::CumSum:      // run_opaque: run_scan (cpu/scan.cpp)
    case Op::Svdvals:     // run_opaque: run_svdvals (cpu/svd.cpp)
    case Op::Gather:      // run_opaque: run_gather (cpu/gather.cpp)
    case Op::ScatterAdd:  // run_opaque: run_scatter_add (cpu/scatter.cpp)
    case Op::NumOps:      // not an op
      LOOM_REDUCE_OPS(LOOM_CASE)  // and the reductions: fold_run() (cpu/prims_reduce.cpp)
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

#define LOOM_INST(ct, T, dtype)                                           \
  template void unary<T>(Op, const T*, T*, int64_t);                      \
  template void unary_bool<T>(Op, const T*, uint8_t*, int64_t);           \
  template void binary<T>(Op, const T*, int, const T*, int, T*, int64_t); \
  template void binary_bool<T>(Op, const T*, int, const T*, int, uint8_t*, int64_t);
LOOM_CPU_CTYPES(LOOM_INST)
#undef LOOM_INST
#undef LOOM_CASE

}  // namespace loom::cpu
