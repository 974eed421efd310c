#pragma once
// Scalar math of the ops the CPU computes one element at a time, each in a wider type than its
// result (float through double, double through long double) and rounded once at the end, so the
// result is within an ulp of the correctly rounded one: the libm functions of the narrow type are
// not (glibc's double sinh, erfc and lgamma miss by 2-5 ulp, the product of two rounded factors
// by more than one). tests/test_math_ulp.cpp checks every unary op against a wider reference.
#include <cmath>
#include <limits>
#include <type_traits>

namespace loom::cpu::sm {

// The type a T op is computed in.
template <typename T>
using Wide = std::conditional_t<std::is_same_v<T, float>, double, long double>;

template <typename W>
inline constexpr W kPi = W(3.141592653589793238462643383279502884L);

// sin(pi x) with the argument reduced exactly: x - 2 round(x / 2) is exact, then folded into
// [-1/2, 1/2] (1 - r is exact for r in [1/2, 1]), so integers give exactly 0.
template <typename W>
W sinpi(W x) {
  W r = std::remainder(x, W(2));  // [-1, 1]
  if (r > W(0.5)) r = W(1) - r;
  if (r < W(-0.5)) r = W(-1) - r;
  return std::sin(kPi<W> * r);
}

// cos(pi x), the same reduction (cos is even: |r| into [0, 1], then cos(pi r) = -cos(pi (1 - r))
// and = sin(pi (1/2 - r))).
template <typename W>
W cospi(W x) {
  W r = std::fabs(std::remainder(x, W(2)));  // [0, 1]
  return sinpi(W(0.5) - r);
}

// sinc(x) = sin(pi x) / (pi x), 1 at 0 (torch.sinc); even, so from |x| (+0 at every integer).
template <typename T>
T sinc(T x) {
  using W = Wide<T>;
  if (x == 0) return T(1);
  if (std::isinf(x)) return std::numeric_limits<T>::quiet_NaN();
  W w = std::fabs(W(x));
  return T(sinpi(w) / (kPi<W> * w));
}

// The inverse of erf: a rough start (Winitzki's closed form, ~2e-3; a Taylor term near 0, where
// that form cancels), then Halley steps on erf(y) = x, or on erfc(y) = 1 - x past 1/2 (exact
// there), which converge cubically: three reach the wide type's precision.
template <typename T>
T erfinv(T x) {
  using W = Wide<T>;
  if (x != x) return x;
  if (x == 0) return x;  // keeps -0
  W a = std::fabs(W(x));
  if (a > 1) return std::numeric_limits<T>::quiet_NaN();
  if (a == 1) return std::copysign(std::numeric_limits<T>::infinity(), x);
  const W sqrtpi = W(1.772453850905516027298167483341145183L);
  W y;
  if (a < W(1e-3)) {
    y = sqrtpi / 2 * a * (1 + kPi<W> * a * a / 12);
  } else {
    const W k = W(0.147);
    W l = std::log1p(-a * a);
    W t = 2 / (kPi<W> * k) + l / 2;
    y = std::sqrt(std::sqrt(t * t - l / k) - t);
  }
  const bool tail = a > W(0.5);
  const W c = 1 - a;  // exact
  for (int i = 0; i < 3; ++i) {
    W fp = 2 / sqrtpi * std::exp(-y * y);  // d erf / dy
    W d = tail ? -(std::erfc(y) - c) / fp : (std::erf(y) - a) / fp;
    if (d != d || fp == 0) break;
    y -= d / (1 + y * d);
  }
  return std::copysign(T(y), x);
}

// digamma for x > 0 far from its root: the recurrence up to x >= 20, then the asymptotic
// series ln x - 1/(2x) - sum B_2k / (2k x^2k), whose terms past x^-16 are below the wide
// type's precision there.
template <typename W>
W digamma_pos(W x) {
  W acc = 0;
  while (x < 20) acc -= 1 / x, x += 1;
  W r = 1 / (x * x);
  // B_2k / 2k for k = 1..8
  W s = r * (W(1) / 12 -
             r * (W(1) / 120 -
                  r * (W(1) / 252 -
                       r * (W(1) / 240 -
                            r * (W(1) / 132 -
                                 r * (W(691) / 32760 - r * (W(1) / 12 - r * W(3617) / 8160)))))));
  return acc + std::log(x) - W(0.5) / x - s;
}

// The Hurwitz zeta zeta(s, a) = sum_k (a + k)^-s for a >= 60 by Euler-Maclaurin (its first
// terms; the next one is below 1e-20 relative).
template <typename W>
W hurwitz_tail(int s, W a) {
  W as = std::pow(a, -s);
  W r = 1 / a;
  return as * (a / (s - 1) + W(0.5) + s * r / 12 - W(s) * (s + 1) * (s + 2) * r * r * r / 720 +
               W(s) * (s + 1) * (s + 2) * (s + 3) * (s + 4) * r * r * r * r * r / 30240);
}

// Near its positive root x0 digamma is small and the series above loses all its relative
// precision to cancellation; there digamma(x) = digamma(x) - digamma(x0)
//   = (x - x0) sum_k 1 / ((x + k)(x0 + k)),
// summed directly for k < 60 and as Hurwitz zetas beyond: with m = (x + x0)/2, h = (x - x0)/2,
// 1 / ((m + k)^2 - h^2) = sum_j h^2j / (m + k)^(2j+2).
template <typename W>
W digamma_near_root(W x) {
  // x0 = 1.46163214496836234126265954232572132846819...: the W nearest it and the remainder
  // (a x0 rounded to W alone would put its rounding error into every x - x0 near the root).
  constexpr __float128 kX0 = 1.4616321449683623412626595423257213284681962Q;
  const W x0 = W(kX0);
  const W x0lo = W(kX0 - __float128(x0));
  W d = (x - x0) - x0lo;  // x - x0 is exact (Sterbenz): d is x - kX0 rounded once
  W m = x - d / 2, h = d / 2;
  W sum = 0;
  for (int k = 59; k >= 0; --k) sum += 1 / ((x + k) * (x0 + k));
  W h2 = h * h;
  sum += hurwitz_tail(2, m + 60) + h2 * hurwitz_tail(4, m + 60) + h2 * h2 * hurwitz_tail(6, m + 60);
  return d * sum;
}

// torch.digamma: -inf at +0 and +inf at -0 (SciPy's and C's convention for the gamma family),
// NaN at the negative integers and -inf; reflection below 0 through cot(pi x) reduced exactly.
template <typename T>
T digamma(T x) {
  using W = Wide<T>;
  if (x != x) return x;
  if (x == 0) return std::copysign(std::numeric_limits<T>::infinity(), -x);
  if (std::isinf(x)) return x > 0 ? x : std::numeric_limits<T>::quiet_NaN();
  W w = W(x);
  if (w < 0) {
    if (w == std::floor(w)) return std::numeric_limits<T>::quiet_NaN();
    // digamma(x) = digamma(1 - x) - pi cot(pi x)
    W one_minus = 1 - w;
    W cot = cospi(w) / sinpi(w);
    W p = std::fabs(one_minus - W(1.4616321449683623)) < W(0.25) ? digamma_near_root(one_minus)
                                                                 : digamma_pos(one_minus);
    return T(p - kPi<W> * cot);
  }
  if (std::fabs(w - W(1.4616321449683623)) < W(0.25)) return T(digamma_near_root(w));
  return T(digamma_pos(w));
}

// lgamma by the reentrant libm form (std::lgamma writes the global signgam: a race between
// threads).
inline double lgamma_wide(double x) {
  int s;
  return ::lgamma_r(x, &s);
}
inline long double lgamma_wide(long double x) {
  int s;
  return ::lgammal_r(x, &s);
}
template <typename T>
T lgamma(T x) {
  return T(lgamma_wide(Wide<T>(x)));
}

// log(e^a + e^b), exact at equal infinities (torch: logaddexp(inf, inf) = inf, (-inf, -inf) -inf).
template <typename T>
T logaddexp(T a, T b) {
  using W = Wide<T>;
  if (a == b && std::isinf(a)) return a;
  W m = std::fmax(W(a), W(b)), d = -std::fabs(W(a) - W(b));
  if (a != a || b != b) return std::numeric_limits<T>::quiet_NaN();
  return T(m + std::log1p(std::exp(d)));
}
// log2(2^a + 2^b)
template <typename T>
T logaddexp2(T a, T b) {
  using W = Wide<T>;
  if (a == b && std::isinf(a)) return a;
  if (a != a || b != b) return std::numeric_limits<T>::quiet_NaN();
  W m = std::fmax(W(a), W(b)), d = -std::fabs(W(a) - W(b));
  const W ln2 = W(0.693147180559945309417232121458176568L);
  return T(m + std::log1p(std::exp2(d)) / ln2);
}

// torch.xlogy: 0 where x == 0 (even for y = inf or 0), NaN where y is NaN.
template <typename T>
T xlogy(T x, T y) {
  using W = Wide<T>;
  if (y != y) return y;
  if (x == 0) return T(0);
  return T(W(x) * std::log(W(y)));
}

template <typename T>
T hypot(T a, T b) {
  return T(std::hypot(Wide<T>(a), Wide<T>(b)));
}

// torch's (Python's) floor_divide of floats: the floor of the exact quotient, not floor(x / y)
// of the rounded one (1 // 0.1 is 9: 0.1 is a little above 1/10, yet 1 / 0.1 rounds to 10).
// fmod is exact; in the wide type (x - mod) / y is within 2^-(p_W - 1) relative of the integer
// quotient n, so rounding it to the nearest integer recovers n exactly for every |n| < 2^p(T),
// and the result rounds once. Special values as torch: x / y at y == 0, NaN for an infinite x,
// -1 for x / inf of the other sign, and a zero quotient keeps the sign of x / y.
template <typename T>
T floor_divide(T x, T y) {
  using W = Wide<T>;
  if (y == 0) return x / y;
  W a = x, b = y;
  W mod = std::fmod(a, b);
  W div = (a - mod) / b;
  if (mod != 0 && (b < 0) != (mod < 0)) div -= 1;
  if (div == 0) return std::copysign(T(0), x / y);
  W fl = std::floor(div);
  if (div - fl > W(0.5)) fl += 1;
  return T(fl);
}

// Integer fmod (C's: the dividend's sign); a zero divisor gives 0, as the other integer divisions.
template <typename T>
T int_fmod(T a, T b) {
  if (b == 0) return 0;
  if constexpr (std::is_signed_v<T>)
    if (b == -1) return 0;  // INT_MIN % -1 overflows
  return T(a % b);
}

// torch's shifts: a left shift by a negative count or by the width or more gives 0; a right
// shift by such a count fills with the sign bit (0 for unsigned types), as a >> (width - 1).
template <typename T>
T shift_left(T a, T b) {
  using U = std::make_unsigned_t<T>;
  constexpr int kBits = sizeof(T) * 8;
  if (b < 0 || b >= T(kBits)) return 0;
  return T(U(a) << b);
}
template <typename T>
T shift_right(T a, T b) {
  constexpr int kMax = sizeof(T) * 8 - (std::is_signed_v<T> ? 1 : 0);
  if (b < 0 || b >= T(kMax)) {
    if constexpr (std::is_signed_v<T>)
      return T(a >> (kMax));
    else
      return 0;
  }
  return T(a >> b);
}

}  // namespace loom::cpu::sm
