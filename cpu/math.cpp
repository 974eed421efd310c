#include "cpu/math.h"

#include <Eigen/Core>
#include <unsupported/Eigen/SpecialFunctions>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "cpu/arith.h"
#include "cpu/vmath.h"
#include "fusion/philox.h"
#include "tensor/half.h"

namespace loom::cpu {
namespace {

template <typename T>
using Arr = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
template <typename T>
using CArr = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;

template <typename T, typename F>
inline void map1(const T* a, T* o, int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) o[i] = f(a[i]);
}

template <typename T, typename U, typename F>
inline void map2(const T* a, int sa, const T* b, int sb, U* o, int64_t n, F f) {
  if (sa && sb) {
    for (int64_t i = 0; i < n; ++i) o[i] = f(a[i], b[i]);
  } else if (sa) {
    const T bv = b[0];
    for (int64_t i = 0; i < n; ++i) o[i] = f(a[i], bv);
  } else if (sb) {
    const T av = a[0];
    for (int64_t i = 0; i < n; ++i) o[i] = f(av, b[i]);
  } else {
    const U v = f(a[0], b[0]);
    for (int64_t i = 0; i < n; ++i) o[i] = v;
  }
}

template <typename T>
inline T floor_div(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::floor(a / b);
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
// Does any x[i] satisfy pred? Lane flags OR-ed without an early exit, so the compiler
// vectorizes it (Eigen's any() is a scalar loop that cost as much as the exp it guarded).
template <typename T, typename P>
bool any_lane(const T* x, int64_t n, P pred) {
  constexpr int L = 64;
  int f[L] = {};
  int64_t i = 0;
  for (; i + L <= n; i += L)
    for (int k = 0; k < L; ++k) f[k] |= int(pred(x[i + k]));
  int r = 0;
  for (; i < n; ++i) r |= int(pred(x[i]));
  for (int k = 0; k < L; ++k) r |= f[k];
  return r != 0;
}

template <typename T>
void fix_at_inf(const T* a, T* out, int64_t n, T value) {
  const T inf = std::numeric_limits<T>::infinity();
  if (!any_lane(a, n, [inf](T v) { return v == inf; })) return;
  for (int64_t i = 0; i < n; ++i)
    if (a[i] == std::numeric_limits<T>::infinity()) out[i] = value;
}

// Eigen's vector exp clamps its argument (about -709 for double, -88 for float), so lanes
// below that, -inf included, give a tiny positive value instead of 0 (logsumexp of an all
// -inf row became -708). Those lanes take std::exp.
template <typename T>
void fix_exp_underflow(const T* a, T* out, int64_t n) {
  const T lo = std::is_same_v<T, double> ? T(-708) : T(-87);
  // A vector test first: the lane-by-lane fixup loop (a call in it) does not vectorize and
  // cost as much as the exp itself. NaN lanes need no fixup either way.
  if (!any_lane(a, n, [lo](T v) { return v < lo; })) return;
  for (int64_t i = 0; i < n; ++i)
    if (a[i] < lo) out[i] = std::exp(a[i]);
}

template <typename T>
void unary_float(Op op, const T* a, T* out, int64_t n) {
  if (std::is_same_v<T, float> && vmath_on()) {  // own kernels (cpu/vmath.h): a few ulp
    const float* af = reinterpret_cast<const float*>(a);
    float* of = reinterpret_cast<float*>(out);
    switch (op) {
      case Op::Exp: return exp_f32(af, of, n);
      case Op::Tanh: return tanh_f32(af, of, n);
      case Op::Sigmoid: return sigmoid_f32(af, of, n);
      default: break;
    }
  }
  CArr<T> x(a, n);
  Arr<T> o(out, n);
  const T half = T(0.5);
  switch (op) {
    case Op::Exp:
      o = x.exp();
      fix_exp_underflow(a, out, n);
      break;
    case Op::Exp2: map1(a, out, n, [](T v) { return std::exp2(v); }); break;
    case Op::Expm1: o = x.expm1(); break;
    case Op::Log: o = x.log(); break;
    case Op::Log2: map1(a, out, n, [](T v) { return std::log2(v); }); break;
    case Op::Log1p: o = x.log1p(); break;
    case Op::Sqrt: o = x.sqrt(); fix_at_inf(a, out, n, std::numeric_limits<T>::infinity()); break;
    case Op::Rsqrt: o = x.sqrt().inverse(); fix_at_inf(a, out, n, T(0)); break;
    case Op::Reciprocal: o = x.inverse(); break;
    case Op::Sin: o = x.sin(); break;
    case Op::Cos: o = x.cos(); break;
    case Op::Tan: map1(a, out, n, [](T v) { return std::tan(v); }); break;
    case Op::Tanh: o = x.tanh(); break;
    case Op::Asin: map1(a, out, n, [](T v) { return std::asin(v); }); break;
    case Op::Acos: map1(a, out, n, [](T v) { return std::acos(v); }); break;
    case Op::Atan: map1(a, out, n, [](T v) { return std::atan(v); }); break;
    case Op::Sinh: map1(a, out, n, [](T v) { return std::sinh(v); }); break;
    case Op::Cosh: map1(a, out, n, [](T v) { return std::cosh(v); }); break;
    case Op::Erf: o = x.erf(); break;
    case Op::Sigmoid: o = x.logistic(); break;
    case Op::Gelu: o = half * x * (T(1) + (x * T(M_SQRT1_2)).erf()); break;
    case Op::GeluTanh: {
      const T k = T(0.7978845608028654);  // sqrt(2/pi)
      o = half * x * (T(1) + (k * (x + T(0.044715) * x * x * x)).tanh());
      break;
    }
    case Op::Silu: o = x * x.logistic(); break;
    case Op::Softplus: map1(a, out, n, [](T v) { return v > T(20) ? v : std::log1p(std::exp(v)); }); break;
    case Op::Floor: o = x.floor(); break;
    case Op::Ceil: o = x.ceil(); break;
    case Op::Round: map1(a, out, n, [](T v) { return std::nearbyint(v); }); break;
    case Op::Trunc: map1(a, out, n, [](T v) { return std::trunc(v); }); break;
    default: break;
  }
}

}  // namespace

template <typename T>
void unary(Op op, const T* a, T* out, int64_t n) {
  switch (op) {
    case Op::Neg: map1(a, out, n, [](T v) { return T(-v); }); return;
    case Op::Abs: map1(a, out, n, [](T v) { return v < 0 ? T(-v) : v; }); return;
    case Op::Square: map1(a, out, n, [](T v) { return T(v * v); }); return;
    case Op::Sign:
      map1(a, out, n, [](T v) {
        if constexpr (std::is_floating_point_v<T>)
          if (v != v) return v;
        return T((v > 0) - (v < 0));
      });
      return;
    case Op::Relu:
      map1(a, out, n, [](T v) { return v > 0 ? v : (v != v ? v : T(0)); });
      return;
    case Op::BitwiseNot:
      if constexpr (std::is_integral_v<T>) {
        if constexpr (std::is_same_v<T, uint8_t>)
          map1(a, out, n, [](T v) { return T(!v); });
        else
          map1(a, out, n, [](T v) { return T(~v); });
      }
      return;
    default: break;
  }
  if constexpr (std::is_floating_point_v<T>) {
    unary_float(op, a, out, n);
  } else {
    // Rounding ops on integers are the identity; the op layer routes the rest to floats.
    for (int64_t i = 0; i < n; ++i) out[i] = a[i];
  }
}

template <typename T>
void unary_bool(Op op, const T* a, uint8_t* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    T v = a[i];
    bool r = false;
    switch (op) {
      case Op::IsNan: r = v != v; break;
      case Op::IsInf:
        if constexpr (std::is_floating_point_v<T>) r = std::isinf(v);
        break;
      case Op::IsFinite:
        if constexpr (std::is_floating_point_v<T>)
          r = std::isfinite(v);
        else
          r = true;
        break;
      case Op::LogicalNot: r = v == T(0); break;
      default: break;
    }
    out[i] = r;
  }
}

template <typename T>
void binary(Op op, const T* a, int sa, const T* b, int sb, T* out, int64_t n) {
  switch (op) {
    case Op::Add:
      if constexpr (std::is_same_v<T, uint8_t>)  // bool: true + true is true (stays 0/1)
        return map2(a, sa, b, sb, out, n, [](T x, T y) { return T(x | y); });
      return map2(a, sa, b, sb, out, n, [](T x, T y) { return T(x + y); });
    case Op::Sub: return map2(a, sa, b, sb, out, n, [](T x, T y) { return T(x - y); });
    case Op::Mul: return map2(a, sa, b, sb, out, n, [](T x, T y) { return T(x * y); });
    case Op::Div:
      if constexpr (std::is_floating_point_v<T>)
        return map2(a, sa, b, sb, out, n, [](T x, T y) { return x / y; });
      return;
    case Op::FloorDiv: return map2(a, sa, b, sb, out, n, [](T x, T y) { return floor_div(x, y); });
    case Op::Remainder: return map2(a, sa, b, sb, out, n, [](T x, T y) { return py_mod(x, y); });
    case Op::Pow:
      if constexpr (std::is_floating_point_v<T>)
        return map2(a, sa, b, sb, out, n, [](T x, T y) { return std::pow(x, y); });
      else
        return map2(a, sa, b, sb, out, n, [](T x, T y) { return int_pow(x, y); });
    case Op::Maximum: return map2(a, sa, b, sb, out, n, [](T x, T y) { return nan_max(x, y); });
    case Op::Minimum: return map2(a, sa, b, sb, out, n, [](T x, T y) { return nan_min(x, y); });
    case Op::Atan2:
      if constexpr (std::is_floating_point_v<T>)
        return map2(a, sa, b, sb, out, n, [](T x, T y) { return std::atan2(x, y); });
      return;
    case Op::BitwiseAnd:
      if constexpr (std::is_integral_v<T>)
        return map2(a, sa, b, sb, out, n, [](T x, T y) { return T(x & y); });
      return;
    case Op::BitwiseOr:
      if constexpr (std::is_integral_v<T>)
        return map2(a, sa, b, sb, out, n, [](T x, T y) { return T(x | y); });
      return;
    case Op::BitwiseXor:
      if constexpr (std::is_integral_v<T>)
        return map2(a, sa, b, sb, out, n, [](T x, T y) { return T(x ^ y); });
      return;
    default: return;
  }
}

template <typename T>
void binary_bool(Op op, const T* a, int sa, const T* b, int sb, uint8_t* out, int64_t n) {
  switch (op) {
    case Op::Eq: return map2(a, sa, b, sb, out, n, [](T x, T y) { return uint8_t(x == y); });
    case Op::Ne: return map2(a, sa, b, sb, out, n, [](T x, T y) { return uint8_t(x != y); });
    case Op::Lt: return map2(a, sa, b, sb, out, n, [](T x, T y) { return uint8_t(x < y); });
    case Op::Le: return map2(a, sa, b, sb, out, n, [](T x, T y) { return uint8_t(x <= y); });
    case Op::Gt: return map2(a, sa, b, sb, out, n, [](T x, T y) { return uint8_t(x > y); });
    case Op::Ge: return map2(a, sa, b, sb, out, n, [](T x, T y) { return uint8_t(x >= y); });
    case Op::LogicalAnd:
      return map2(a, sa, b, sb, out, n, [](T x, T y) { return uint8_t(x != T(0) && y != T(0)); });
    case Op::LogicalOr:
      return map2(a, sa, b, sb, out, n, [](T x, T y) { return uint8_t(x != T(0) || y != T(0)); });
    case Op::LogicalXor:
      return map2(a, sa, b, sb, out, n, [](T x, T y) { return uint8_t((x != T(0)) != (y != T(0))); });
    default: return;
  }
}

namespace {

// One loop for the two ops of binary_pair; the common stride patterns get a loop each so
// the compiler vectorizes them (a row scalar is read once, not per element).
template <typename T, typename FI, typename FO>
void pair_loop(const T* a, int sa, const T* c, int sc, const T* b, int sb, T* o, int64_t n, FI fi,
               FO fo) {
  if (sa && !sc && !sb) {
    const T cv = c[0], bv = b[0];
    for (int64_t i = 0; i < n; ++i) o[i] = fo(fi(a[i], cv), bv);
  } else if (sa && sc && !sb) {
    const T bv = b[0];
    for (int64_t i = 0; i < n; ++i) o[i] = fo(fi(a[i], c[i]), bv);
  } else if (sa && sc && sb) {
    for (int64_t i = 0; i < n; ++i) o[i] = fo(fi(a[i], c[i]), b[i]);
  } else if (sa && !sc && sb) {
    const T cv = c[0];
    for (int64_t i = 0; i < n; ++i) o[i] = fo(fi(a[i], cv), b[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) o[i] = fo(fi(a[i * sa], c[i * sc]), b[i * sb]);
  }
}

}  // namespace

template <typename T>
void binary_pair(Op inner, const T* a, int sa, const T* c, int sc, Op outer, bool first, const T* b,
                 int sb, bool relu, T* out, int64_t n) {
  if (inner == Op::Copy) sc = sa, c = a;  // not read; keeps to the vectorized loops
  with_op(inner, false, [&](auto I, auto) {
    with_op(outer, !first, [&](auto O, auto swap) {
      auto fi = [](T x, T y) { return arith<decltype(I)::value, false>(x, y); };
      auto fo = [](T x, T y) { return arith<decltype(O)::value, decltype(swap)::value>(x, y); };
      if (!relu) return pair_loop(a, sa, c, sc, b, sb, out, n, fi, fo);
      // relu as unary() computes it: NaN stays NaN
      auto fr = [fo](T x, T y) {
        T v = fo(x, y);
        return v > 0 ? v : (v != v ? v : T(0));
      };
      pair_loop(a, sa, c, sc, b, sb, out, n, fi, fr);
    });
  });
}
template void binary_pair<float>(Op, const float*, int, const float*, int, Op, bool, const float*,
                                 int, bool, float*, int64_t);
template void binary_pair<double>(Op, const double*, int, const double*, int, Op, bool,
                                  const double*, int, bool, double*, int64_t);

template <typename T>
void exp_sub(const T* a, int sa, const T* b, int sb, T* out, int64_t n) {
  if constexpr (std::is_same_v<T, float>)
    if (vmath_on()) return exp_sub_f32(a, sa, b, sb, out, n);
  Arr<T> o(out, n);
  if (sa && !sb) {
    o = (CArr<T>(a, n) - b[0]).exp();
  } else if (sa && sb) {
    o = (CArr<T>(a, n) - CArr<T>(b, n)).exp();
  } else {
    binary<T>(Op::Sub, a, sa, b, sb, out, n);
    unary<T>(Op::Exp, out, out, n);
    return;
  }
  // Eigen clamps exp's argument (see fix_exp_underflow): lanes at or below what the clamp
  // gives are recomputed exactly (-inf differences become 0, not a tiny positive value).
  const T tiny = std::is_same_v<T, double> ? T(3.4e-308) : T(1.7e-38);  // exp(-708), exp(-87)
  if (!any_lane(out, n, [tiny](T v) { return v < tiny; })) return;
  for (int64_t i = 0; i < n; ++i)
    if (out[i] < tiny) out[i] = std::exp(a[i * sa] - b[i * sb]);
}
template void exp_sub<float>(const float*, int, const float*, int, float*, int64_t);
template void exp_sub<double>(const double*, int, const double*, int, double*, int64_t);

template <typename T>
void select(const uint8_t* c, int sc, const T* a, int sa, const T* b, int sb, T* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = c[i * sc] ? a[i * sa] : b[i * sb];
}

namespace {

template <typename To, typename From>
inline To convert(From v, DType to) {
  if constexpr (std::is_same_v<To, uint8_t>) {
    return uint8_t(v != From(0));
  } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>) {
    // Out-of-range float -> int is undefined in C++; saturate, NaN to 0.
    if (!(v == v)) return 0;
    if (to == DType::UInt8) {  // wraps like torch's uint8 cast of in-range values
      return To(uint8_t(int64_t(std::fmax(std::fmin(v, From(9.2e18)), From(-9.2e18)))));
    }
    if (v >= From(std::numeric_limits<To>::max())) return std::numeric_limits<To>::max();
    if (v <= From(std::numeric_limits<To>::min())) return std::numeric_limits<To>::min();
    To r = To(v);
    if (to == DType::Int8) r = To(int8_t(r));
    return r;
  } else {
    To r = To(v);
    if constexpr (std::is_same_v<To, float>) {
      if (to == DType::Float16) r = f16_to_f32(f32_to_f16(r));
      if (to == DType::BFloat16) r = bf16_to_f32(f32_to_bf16(r));
    }
    if constexpr (std::is_integral_v<To>) {
      if (to == DType::Int8) r = To(int8_t(r));
      if (to == DType::UInt8) r = To(uint8_t(r));
    }
    return r;
  }
}

}  // namespace

void cast(CT from, const void* a, int sa, DType to, void* out, int64_t n) {
  dispatch_ct(from, [&](auto f) {
    using F = decltype(f);
    const F* src = static_cast<const F*>(a);
    dispatch_ct(ct_of(to), [&](auto t) {
      using T = decltype(t);
      T* dst = static_cast<T*>(out);
      for (int64_t i = 0; i < n; ++i) dst[i] = convert<T, F>(src[i * sa], to);
    });
  });
}

void philox_uniform(const int64_t* idx, uint64_t seed, uint64_t offset, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = philox_uniform_at(seed, offset + uint64_t(idx[i]));
}
void philox_normal(const int64_t* idx, uint64_t seed, uint64_t offset, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = philox_normal_at(seed, offset + uint64_t(idx[i]));
}

#define LOOM_INST(ct, T, dtype)                                                              \
  template void unary<T>(Op, const T*, T*, int64_t);                                         \
  template void unary_bool<T>(Op, const T*, uint8_t*, int64_t);                              \
  template void binary<T>(Op, const T*, int, const T*, int, T*, int64_t);                    \
  template void binary_bool<T>(Op, const T*, int, const T*, int, uint8_t*, int64_t);         \
  template void select<T>(const uint8_t*, int, const T*, int, const T*, int, T*, int64_t);
LOOM_CPU_CTYPES(LOOM_INST)
#undef LOOM_INST

}  // namespace loom::cpu
