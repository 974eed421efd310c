#pragma once
// erfc over float64 vectors (Eigen arrays), for the float32 rows built on it (erfc, gelu): for
// z >= 0, erfc(z) = e^(-z^2) erfcx(z) with erfcx a degree-12 polynomial in t = (z - 3)/(z + 3),
// fitted over z in [0, 10.5] (relative error below 1.6e-10, so a float32 result rounds once to
// within 0.51 ulp; e^(-z^2) keeps z^2's rounding at 2 z^2 2^-53, harmless for float32). Past
// 10.5 float32's erfc is below its smallest subnormal; z is clamped there, the exponential
// still decays. Below 0, 2 - erfc(-z), which does not cancel.
#include <algorithm>
#include <cmath>
#include <limits>

namespace loom::cpu::sm {

// erfcx(z) ~ sum kErfcxPoly[i] t^i, t = (z - 3)/(z + 3), z in [0, 10.5].
inline constexpr double kErfcxPoly[] = {
    0.1790011511728172,     -0.32623356016426214,  0.24560380304860335,   -0.15011593016634717,
    0.07166580551102256,    -0.02439260322498665,  0.004269388292744574,  0.0007085144549908013,
    -0.0005977989198559993, 4.251855982023283e-05, 6.432614610872934e-05, -8.549277863573002e-06,
    -6.285083710293175e-06};

// erf(x) = x sum kErfTaylor[n] x^2n, kErfTaylor[n] = 2/sqrt(pi) (-1)^n / (n! (2n + 1)).
inline constexpr double kErfTaylor[] = {
    1.1283791670955126,      -0.37612638903183754,   0.11283791670955126,
    -0.026866170645131252,   0.005223977625442188,   -0.0008548327023450853,
    0.00012055332981789664,  -1.492565035840625e-05, 1.6462114365889248e-06,
    -1.6365844691234924e-07, 1.4807192815879218e-08, -1.2290555301717928e-09};

template <typename A>
A erfc_wide(const A& z) {
  const auto& kC = kErfcxPoly;
  const A az = z.abs(), c = az.min(10.5), t = (c - 3.0) / (c + 3.0);
  // Horner as one expression: one pass over the run with the partial sums in registers
  const auto p =
      (((((((((((kC[12] * t + kC[11]) * t + kC[10]) * t + kC[9]) * t + kC[8]) * t + kC[7]) * t +
            kC[6]) *
               t +
           kC[5]) *
              t +
          kC[4]) *
             t +
         kC[3]) *
            t +
        kC[2]) *
           t +
       kC[1]) *
          t +
      kC[0];
  // (Eigen's exp clamps its argument: at |z| = inf e^(-z^2) must be 0 itself)
  const A e = (az == std::numeric_limits<double>::infinity()).select(0.0, (-(az * az)).exp() * p);
  return (z >= 0).select(e, 2.0 - e);
}

}  // namespace loom::cpu::sm
