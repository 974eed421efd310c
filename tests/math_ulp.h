#pragma once
// The ulp sweeps' parts, shared by the CPU sweeps (tests/test_math_ulp.cpp, the binary rows'
// tests/test_math_ulp_binary.cpp) and the CUDA one (tests/cuda/test_gpu_ulp.cpp): wide
// references of every float unary and binary row (long double for float32, __float128 from
// libquadmath for float64), the ulp distance with its special-value rules, and the value set
// (specials, every binade, a dense [-20, 20]).
#include <quadmath.h>

#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "helpers.h"
#include "math_refs.h"

namespace lt::ulp {

using loom::Tensor;
using loom::UnaryKind;

struct QMath {
  using W = __float128;
  static W log(W x) { return logq(x); }
  static W sin(W x) { return sinq(x); }
  static W exp(W x) { return expq(x); }
  static W erf(W x) { return erfq(x); }
  static W erfc(W x) { return erfcq(x); }
  static W log2(W x) { return log2q(x); }
  static W log10(W x) { return log10q(x); }
  static W log1p(W x) { return log1pq(x); }
  static W exp2(W x) { return exp2q(x); }
  static W expm1(W x) { return expm1q(x); }
  static W sqrt(W x) { return sqrtq(x); }
  static W cbrt(W x) { return cbrtq(x); }
  static W cos(W x) { return cosq(x); }
  static W tan(W x) { return tanq(x); }
  static W tanh(W x) { return tanhq(x); }
  static W sinh(W x) { return sinhq(x); }
  static W cosh(W x) { return coshq(x); }
  static W asin(W x) { return asinq(x); }
  static W acos(W x) { return acosq(x); }
  static W atan(W x) { return atanq(x); }
  static W asinh(W x) { return asinhq(x); }
  static W acosh(W x) { return acoshq(x); }
  static W atanh(W x) { return atanhq(x); }
  static W lgamma(W x) { return lgammaq(x); }
  static W floor(W x) { return floorq(x); }
  static W ceil(W x) { return ceilq(x); }
  static W rint(W x) { return rintq(x); }
  static W trunc(W x) { return truncq(x); }
  static W fabs(W x) { return fabsq(x); }
  static W atan2(W y, W x) { return atan2q(y, x); }
  static W hypot(W x, W y) { return hypotq(x, y); }
  static W pow(W x, W y) { return powq(x, y); }
  static W fmod(W x, W y) { return fmodq(x, y); }
  static W copysign(W x, W y) { return copysignq(x, y); }
};

struct LMath : lt::ref::LdMath {
  using W = long double;
#define LOOM_FN(f) \
  static W f(W x) { return std::f(x); }
  LOOM_FN(log2)
  LOOM_FN(log10)
  LOOM_FN(log1p)
  LOOM_FN(exp2)
  LOOM_FN(expm1)
  LOOM_FN(sqrt)
  LOOM_FN(cbrt)
  LOOM_FN(cos)
  LOOM_FN(tan)
  LOOM_FN(tanh)
  LOOM_FN(sinh)
  LOOM_FN(cosh)
  LOOM_FN(asin)
  LOOM_FN(acos)
  LOOM_FN(atan)
  LOOM_FN(asinh)
  LOOM_FN(acosh)
  LOOM_FN(atanh)
  LOOM_FN(lgamma)
  LOOM_FN(floor)
  LOOM_FN(ceil)
  LOOM_FN(rint)
  LOOM_FN(trunc)
  LOOM_FN(fabs)
#undef LOOM_FN
#define LOOM_FN2(f) \
  static W f(W x, W y) { return std::f(x, y); }
  LOOM_FN2(atan2)
  LOOM_FN2(hypot)
  LOOM_FN2(pow)
  LOOM_FN2(fmod)
  LOOM_FN2(copysign)
#undef LOOM_FN2
};

template <typename W>
bool is_nan(W x) {
  return x != x;
}
template <typename W>
bool is_inf(W x) {
  return x == x && x - x != x - x;
}

// The reference of a row in M's type; `known`: false for a row without one.
template <typename M>
typename M::W reference(const std::string& op, typename M::W x, bool& known) {
  using W = typename M::W;
  known = true;
  const W nanw = W(std::numeric_limits<double>::quiet_NaN());
  const W pi = lt::ref::kPi<M>;
  auto sigmoid = [&](W v) { return 1 / (1 + M::exp(-v)); };
  if (op == "neg") return -x;
  if (op == "abs") return M::fabs(x);
  if (op == "sign") return is_nan(x) ? x : W((x > 0) - (x < 0));
  if (op == "square") return x * x;
  if (op == "relu") return x > 0 ? x : is_nan(x) ? x : W(0);
  if (op == "floor") return M::floor(x);
  if (op == "ceil") return M::ceil(x);
  if (op == "round") return M::rint(x);
  if (op == "trunc") return M::trunc(x);
  if (op == "exp") return M::exp(x);
  if (op == "exp2") return M::exp2(x);
  if (op == "expm1") return M::expm1(x);
  if (op == "log") return M::log(x);
  if (op == "log2") return M::log2(x);
  if (op == "log1p") return M::log1p(x);
  if (op == "sqrt") return M::sqrt(x);
  if (op == "rsqrt") return 1 / M::sqrt(x);
  if (op == "reciprocal") return 1 / x;
  if (op == "sin") return M::sin(x);
  if (op == "cos") return M::cos(x);
  if (op == "tan") return M::tan(x);
  if (op == "tanh") return M::tanh(x);
  if (op == "asin") return M::asin(x);
  if (op == "acos") return M::acos(x);
  if (op == "atan") return M::atan(x);
  if (op == "sinh") return M::sinh(x);
  if (op == "cosh") return M::cosh(x);
  if (op == "erf") return M::erf(x);
  if (op == "sigmoid") return sigmoid(x);
  // torch's formulas give NaN at -inf (-inf * 0); elsewhere the exact function, in forms that
  // do not cancel (1 + erf(-z) = erfc(z); 1 + tanh(u) = 2 sigmoid(2u))
  if (op == "gelu") return is_inf(x) && x < 0 ? nanw : x / 2 * M::erfc(-x / M::sqrt(W(2)));
  if (op == "gelu_tanh") {
    if (is_inf(x) && x < 0) return nanw;
    W u = M::sqrt(2 / pi) * (x + W(0.044715L) * x * x * x);
    return x * sigmoid(2 * u);
  }
  if (op == "silu") return is_inf(x) && x < 0 ? nanw : x * sigmoid(x);
  if (op == "softplus") return x > 20 ? x : M::log1p(M::exp(x));  // torch's threshold 20
  if (op == "log10") return M::log10(x);
  if (op == "cbrt") return M::cbrt(x);
  if (op == "asinh") return M::asinh(x);
  if (op == "acosh") return M::acosh(x);
  if (op == "atanh") return M::atanh(x);
  if (op == "erfc") return M::erfc(x);
  if (op == "erfinv") {
    if (is_nan(x) || M::fabs(x) > 1) return nanw;
    if (x == 0) return x;
    if (M::fabs(x) == 1) return x * W(INFINITY);
    return lt::ref::erfinv<M>(x);
  }
  if (op == "lgamma") return M::lgamma(x);
  if (op == "digamma") {
    if (is_nan(x)) return x;
    if (x == 0) return std::signbit(double(x)) ? W(INFINITY) : -W(INFINITY);
    if (is_inf(x)) return x > 0 ? x : nanw;
    return lt::ref::digamma<M>(x);
  }
  if (op == "sinc") return is_nan(x) || is_inf(x) ? nanw : lt::ref::sinc<M>(x);
  if (op == "deg2rad") return x * (pi / 180);
  if (op == "rad2deg") return x * (180 / pi);
  if (op == "frac") return x - M::trunc(x);
  known = false;
  return 0;
}

// The reference of a float binary row in M's type (x, y: T values, exact in W); `known`: false
// for a row without one. torch's special values: C99 Annex F for atan2, hypot, pow, fmod and
// copysign (the libm references follow it), torch's formulas for the others.
template <typename T, typename M>
typename M::W binary_reference(const std::string& op, typename M::W x, typename M::W y,
                               bool& known) {
  using W = typename M::W;
  known = true;
  const W nanw = W(std::numeric_limits<double>::quiet_NaN());
  auto fmax = [](W a, W b) { return a > b ? a : b; };
  if (op == "div") return x / y;
  if (op == "atan2") return M::atan2(x, y);
  if (op == "hypot") return M::hypot(x, y);
  if (op == "pow") return M::pow(x, y);
  if (op == "fmod") return M::fmod(x, y);
  if (op == "copysign") return M::copysign(x, y);
  if (op == "remainder") {  // torch: fmod, moved into the divisor's sign (a zero keeps its own)
    W r = M::fmod(x, y);
    if (r != 0 && (r < 0) != (y < 0)) r += y;
    return r;
  }
  if (op == "floor_divide") {
    // torch's (and Python's) floor of the exact quotient: x / y at a zero divisor, NaN for an
    // infinite dividend, -1 for x / inf of the other sign; in W, exact while |x / y| < 2^p(T)
    if (y == 0) return x / y;
    W mod = M::fmod(x, y), div = (x - mod) / y;
    if (mod != 0 && (y < 0) != (mod < 0)) div -= 1;
    if (div == 0) return M::copysign(W(0), x / y);
    W fl = M::floor(div);
    return div - fl > W(0.5) ? fl + 1 : fl;
  }
  if (op == "nextafter") {  // exact in T: the neighbour of x towards y, y itself when equal
    T a = T(x), b = T(y);
    if (a != a || b != b) return nanw;
    if (a == b) return y;
    if (a == 0) return W(std::copysign(std::numeric_limits<T>::denorm_min(), b));
    using U = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
    U bits = std::bit_cast<U>(a);
    bits += ((a < b) == (a > 0)) ? 1 : U(-1);  // away from zero or towards it
    return W(std::bit_cast<T>(bits));
  }
  if (op == "logaddexp" || op == "logaddexp2") {
    if (x == y && is_inf(x)) return x;  // logaddexp(-inf, -inf) = -inf, not NaN
    if (is_nan(x) || is_nan(y)) return nanw;
    W d = -M::fabs(x - y);
    if (op == "logaddexp") return fmax(x, y) + M::log1p(M::exp(d));
    return fmax(x, y) + M::log1p(M::exp2(d)) / M::log(W(2));
  }
  if (op == "xlogy") {  // torch: NaN for a NaN y, else 0 where x == 0 (even at y = 0 or inf)
    if (is_nan(y)) return nanw;
    if (x == 0) return 0;
    return x * M::log(y);
  }
  known = false;
  return 0;
}

// |got - want| in ulps of T at want (the subnormal spacing below T's smallest normal); 0 for
// matching NaN or infinities, or an inf where want rounds past T's largest finite value;
// 1e30 for any other mismatch of a special value (NaN, inf, or a zero's sign).
template <typename T, typename W>
double ulp_error(T got, W want) {
  constexpr int p = std::numeric_limits<T>::digits;
  const long double maxt = std::numeric_limits<T>::max();
  if (is_nan(want) || std::isnan(got)) return is_nan(want) && std::isnan(got) ? 0 : 1e30;
  long double w = (long double)want;  // exponent and sign; the difference is taken in W
  if (std::isinf(got)) {
    bool past =
        std::fabs(w) >= maxt + std::ldexp(1.0L, std::numeric_limits<T>::max_exponent - p - 1);
    return past && std::signbit(got) == (w < 0) ? 0 : 1e30;
  }
  if (is_inf(want)) return 1e30;
  if (want == 0 && got == 0) return std::signbit(got) == std::signbit(double(w)) ? 0 : 1e30;
  if (want == 0) return 1e30;  // an exact zero must be exact
  int e;
  std::frexp(std::fabs(w), &e);
  int emin = std::numeric_limits<T>::min_exponent - p;  // the subnormal spacing's exponent
  long double ulp = std::ldexp(1.0L, std::max(e - p, emin));
  W diff = W(got) - want;
  long double d = (long double)(diff < 0 ? -diff : diff);
  return double(d / ulp);
}

// The special values of T: zeros, infinities, NaNs of both signs, the ends of the subnormal
// and normal ranges, 1's neighbours, the edges of exp's and lgamma's ranges, the integers and
// halves of [-20, 20]. The start of sweep_values; the binary sweep's grid.
template <typename T>
std::vector<double> special_values() {
  using L = std::numeric_limits<T>;
  std::vector<double> v = {0.0,
                           -0.0,
                           double(L::infinity()),
                           -double(L::infinity()),
                           double(L::quiet_NaN()),
                           -double(L::quiet_NaN()),
                           double(L::denorm_min()),
                           -double(L::denorm_min()),
                           double(L::min()),
                           -double(L::min()),
                           double(L::min() - L::denorm_min()),  // the largest subnormal
                           double(L::max()),
                           -double(L::max()),
                           double(L::epsilon()),
                           double(std::nextafter(T(1), T(2))),
                           double(std::nextafter(T(1), T(0))),
                           -double(std::nextafter(T(1), T(0))),
                           1e-40,
                           1e-30,
                           1e10,
                           1e30,
                           -1e30,
                           M_PI,
                           -M_PI / 2,
                           1.4616321449683623,
                           88.72,
                           -87.5,
                           -103.9,
                           709.7,
                           -745.1,
                           710.5};
  for (int i = -20; i <= 20; ++i) v.push_back(i), v.push_back(i + 0.5);
  return v;
}

// The value set: each special value, then random values in every binade of T (both signs),
// then a dense uniform set over [-20, 20] where most functions change fastest.
template <typename T>
std::vector<double> sweep_values(uint32_t seed) {
  using L = std::numeric_limits<T>;
  std::vector<double> v = special_values<T>();
  std::mt19937_64 g(seed);
  constexpr int p = L::digits;
  const int per_binade = sizeof(T) == 4 ? 10 : 3;
  for (int e = L::min_exponent - p; e < L::max_exponent; ++e)
    for (int k = 0; k < per_binade; ++k)
      for (double s : {1.0, -1.0}) {
        // a random significand in [1, 2) (in the subnormal binades: a random multiple of the
        // spacing below 2^(e + 1))
        double m = 1 + double(g() >> 11) * 0x1p-53;
        double x = s * std::ldexp(m, e);
        v.push_back(double(T(x)));
      }
  std::uniform_real_distribution<double> u(-20, 20);
  for (int i = 0; i < 3000; ++i) v.push_back(double(T(u(g))));
  return v;
}

struct Row {
  std::string name;
  Tensor (*fn)(const Tensor&);
  UnaryKind kind;
};

inline std::vector<Row> rows() {
  return {
#define LOOM_X(name, api, kind) \
  {#api, static_cast<Tensor (*)(const Tensor&)>(&loom::api), UnaryKind::kind},
      LOOM_UNARY_OPS(LOOM_X)
#undef LOOM_X
  };
}

// The worst error of one op over the values, with where it was.
struct Worst {
  double ulp = 0;
  double x = 0, got = 0, want = 0;
  int64_t bad = 0;
};

// digamma below 0 is digamma(1 - x) - pi cot(pi x). Where the two terms nearly cancel (about
// its roots) a result computed in any fixed precision keeps the larger term's rounding, so there
// the error is taken in ulps of |digamma(1 - x)| + |pi cot(pi x)|, the function's own condition,
// instead of the result's: where |result| < `cancel` times that sum (0: nowhere, 1: all x < 0).
template <typename T, typename M>
double digamma_reflection_error(double x, T got, typename M::W ref, double cancel) {
  using W = typename M::W;
  W right = lt::ref::digamma<M>(1 - W(x)), cot = right - ref;
  W sum = (right < 0 ? -right : right) + (cot < 0 ? -cot : cot);
  W aref = ref < 0 ? -ref : ref;
  if (!(aref < W(cancel) * sum) || std::isnan(got) || std::isinf(got)) return -1;
  int e;
  std::frexp(double(sum), &e);
  W diff = W(got) - ref;
  return double((long double)(diff < 0 ? -diff : diff) /
                std::ldexp(1.0L, e - std::numeric_limits<T>::digits));
}

template <typename T, typename M>
Worst measure(const std::string& op, const std::vector<double>& xs, const std::vector<double>& got,
              double bound, double digamma_cancel = 0) {
  Worst w;
  for (size_t i = 0; i < xs.size(); ++i) {
    bool known;
    typename M::W ref = reference<M>(op, typename M::W(T(xs[i])), known);
    double e = -1;
    if (op == "digamma" && xs[i] < 0 && std::isfinite(xs[i]) && xs[i] != std::floor(xs[i]))
      e = digamma_reflection_error<T, M>(xs[i], T(got[i]), ref, digamma_cancel);
    if (e < 0) e = ulp_error<T>(T(got[i]), ref);
    if (e > bound) ++w.bad;
    if (e > w.ulp || (e == w.ulp && w.bad == 1 && e > bound))
      w.ulp = e, w.x = xs[i], w.got = got[i], w.want = double((long double)ref);
  }
  return w;
}

}  // namespace lt::ulp
