#pragma once
// Reference forms of the math-library functions that <cmath> lacks (digamma, erfinv, sinc),
// written apart from cpu/scalar_math.h (other methods, another precision) and templated on the
// type they run in and its functions M (M::log, sin, exp, erf, erfc as static functions):
// long double (LdMath) for the tolerance tests, __float128 for the float64 ulp sweep.
#include <cmath>
#include <limits>

namespace lt::ref {

struct LdMath {
  using W = long double;
  static W log(W x) { return std::log(x); }
  static W sin(W x) { return std::sin(x); }
  static W exp(W x) { return std::exp(x); }
  static W erf(W x) { return std::erf(x); }
  static W erfc(W x) { return std::erfc(x); }
};

template <typename M>
inline const typename M::W kPi = typename M::W(3.14159265358979323846264338327950288L);

// sin(pi r) for r an exactly representable fraction in [0, 2): by symmetry into [0, 1/2].
template <typename M>
typename M::W sin_pi(typename M::W r) {
  using W = typename M::W;
  W sgn = 1;
  if (r >= 1) r -= 1, sgn = -1;  // sin(pi (r + 1)) = -sin(pi r)
  if (r == 0) return 0;          // an exact zero: unsigned (+0), as sinc(-19) = +0
  if (r > W(0.5)) r = 1 - r;
  return sgn * M::sin(kPi<M> * r);
}

// digamma by a plain recurrence to x + 1000 and a 5-term asymptotic series there (error
// below 1e-30 relative), reflection below 0: digamma(x) = digamma(1 - x) - pi cot(pi x).
template <typename M>
typename M::W digamma(typename M::W x) {
  using W = typename M::W;
  if (x <= 0) {
    double fl = std::floor(double(x));
    if (double(x) == fl && x == W(fl)) return W(std::numeric_limits<double>::quiet_NaN());
    // cot has period 1: r = x - round(x) in [-1/2, 1/2] is exact; cos(pi r) = sin(pi (1/2 - |r|))
    W r = x - W(std::nearbyint(double(x)));
    W ar = r < 0 ? -r : r;
    W cot = M::sin(kPi<M> * (W(0.5) - ar)) / M::sin(kPi<M> * r);
    return digamma<M>(W(1) - x) - kPi<M> * cot;
  }
  W acc = 0;
  for (int k = 0; k < 1000; ++k) acc -= 1 / (x + k);
  W z = x + 1000, r = 1 / (z * z);
  return acc + M::log(z) - W(0.5) / z -
         r * (W(1) / 12 - r * (W(1) / 120 - r * (W(1) / 252 - r * (W(1) / 240 - r / 132))));
}

// erfinv by bisection on erf (erfc past 1/2, where 1 - x is exact), then Newton steps; x in
// (-1, 1), not 0.
template <typename M>
typename M::W erfinv(typename M::W x) {
  using W = typename M::W;
  W a = x < 0 ? -x : x;
  if (a < W(1e-30)) return x * W(0.8862269254527580136490837416705725914L);  // sqrt(pi) / 2 x
  bool tail = a > W(0.5);
  W c = 1 - a;
  W lo = 0, hi = 30;
  for (int i = 0; i < 80; ++i) {
    W mid = (lo + hi) / 2;
    bool below = tail ? M::erfc(mid) > c : M::erf(mid) < a;
    (below ? lo : hi) = mid;
  }
  W y = (lo + hi) / 2;
  const W k = 2 / W(1.7724538509055160272981674833411451828L);
  for (int i = 0; i < 4 && y > 0; ++i) {
    W f = tail ? c - M::erfc(y) : M::erf(y) - a;
    y -= f / (k * M::exp(-y * y));
  }
  return x < 0 ? -y : y;
}

// sin(pi x) / (pi x), 1 at 0; x a double (exact in W).
template <typename M>
typename M::W sinc(typename M::W x) {
  using W = typename M::W;
  if (x == 0) return 1;
  double ax = std::fabs(double(x));
  if (ax >= 0x1p52) return 0;  // an even or odd integer: sin(pi x) = 0
  W a = x < 0 ? -x : x;
  W r = a - W(2 * std::floor(ax / 2));  // [0, 2), exact
  return sin_pi<M>(r) / (kPi<M> * a);
}

}  // namespace lt::ref
