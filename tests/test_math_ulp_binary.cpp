// Every float-valued binary row of the op table over pairs of the unary sweep's values (the
// special values against each other, random pairs over every binade, pairs of nearby magnitudes,
// values near 1 against the rest), fusion off and fused, against a wider reference: long double
// for float32, __float128 (libquadmath) for float64. The correctly rounded rows (div, fmod,
// remainder, floor_divide, copysign, nextafter) must give the reference rounded once, bit for
// bit; the others are within 4 ulp in float32, 1 ulp in float64. Where the reference is 0, inf
// or NaN the result must be that value exactly (the sign of a zero included). ctest runs this
// file again with LOOM_CPU_VMATH=0.
#include <sstream>

#include "math_ulp.h"

using namespace loom;
using namespace lt::ulp;

namespace {

using BinFn = Tensor (*)(const Tensor&, const Tensor&);

// How a row's result is checked: within the dtype's ulp bound; correctly rounded (the
// reference's bits); or, for floor_divide, exact where the floor is an integer T holds
// (|x / y| < 2^p) and within 1 ulp beyond, where T's integers are spaced wider than 1 and the
// wide type's quotient (torch's formula, x - fmod(x, y) over y) rounds twice.
enum class Check { Bound, Exact, Floor };

struct BinRow {
  std::string name;
  BinFn fn;
  Check check;
};

std::vector<BinRow> binary_rows() {
  auto f = [](BinFn fn) { return fn; };
  return {
      {"div", f(&loom::div), Check::Exact},
      {"atan2", f(&loom::atan2), Check::Bound},
      {"hypot", f(&loom::hypot), Check::Bound},
      {"copysign", f(&loom::copysign), Check::Exact},
      {"nextafter", f(&loom::nextafter), Check::Exact},
      {"logaddexp", f(&loom::logaddexp), Check::Bound},
      {"logaddexp2", f(&loom::logaddexp2), Check::Bound},
      {"xlogy", f(&loom::xlogy), Check::Bound},
      {"fmod", f(&loom::fmod), Check::Exact},
      {"remainder", f(&loom::remainder), Check::Exact},
      {"floor_divide", f(&loom::floor_divide), Check::Floor},
      {"pow", f(&loom::pow), Check::Bound},
  };
}

// The pairs: the special values against each other (every sign and special combination), then
// random pairs of the value set, then the value set against the specials (integer exponents,
// divisors), then pairs of nearby magnitudes (fmod and remainder of many quotient bits, atan2
// and hypot of equal sides), then values within a few hundred ulp of 1 against the rest (pow's
// and xlogy's ill-conditioned region).
template <typename T>
void sweep_pairs(uint32_t seed, int random, std::vector<T>& xs, std::vector<T>& ys) {
  std::vector<double> sp = special_values<T>(), all = sweep_values<T>(seed);
  auto add = [&](double a, double b) { xs.push_back(T(a)), ys.push_back(T(b)); };
  for (double a : sp)
    for (double b : sp) add(a, b);
  std::mt19937_64 g(seed);
  auto pick = [&](const std::vector<double>& v) { return v[g() % v.size()]; };
  std::uniform_real_distribution<double> ratio(0.5, 2);
  for (int i = 0; i < random; ++i) {
    add(pick(all), pick(all));
    if (i % 2 == 0) add(pick(all), pick(sp)), add(pick(sp), pick(all));
    double a = pick(all), r = ratio(g) * (g() & 1 ? -1 : 1);
    add(a, double(T(a * r)));
    if (i % 4 == 0) {
      int k = int(g() % 512) - 256;
      double near1 = 1 + k * double(std::numeric_limits<T>::epsilon());
      add(near1, pick(all)), add(pick(all), near1);
    }
  }
}

// Whether `got` is `want` rounded to T (any NaN for a NaN; a zero's sign counts).
template <typename T, typename W>
bool rounds_to(T got, W want) {
  T w = T(want);
  if (w != w) return got != got;
  return got == w && std::signbit(got) == std::signbit(w);
}

template <typename T, typename M>
void sweep(DType dt, double bound, uint32_t seed, int random) {
  using W = typename M::W;
  std::vector<T> xv, yv;
  sweep_pairs<T>(seed, random, xv, yv);
  const int64_t n = int64_t(xv.size());
  // NaN signs survive: the tensors are built from the T values' bits
  Tensor x = loom::tensor<T>(xv, {n}), y = loom::tensor<T>(yv, {n});
  REQUIRE(x.dtype() == dt);
  const W kTwoP = W(std::ldexp(1.0, std::numeric_limits<T>::digits));
  auto abs_below = [](W v, W lim) { return v < lim && -v < lim; };  // false for NaN
  for (const BinRow& r : binary_rows()) {
    std::vector<W> ref(n);
    bool known = true;
    for (int64_t i = 0; i < n && known; ++i)
      ref[i] = binary_reference<T, M>(r.name, W(xv[i]), W(yv[i]), known);
    REQUIRE_MESSAGE(known, r.name << ": no reference in tests/math_ulp.h");
    for (bool fused : {false, true}) {
      std::vector<double> got;
      if (fused) {
        // x * 1 before and after: one group, the op between multiplications (each exact)
        got = lt::host(r.fn(x * 1.0, y * 1.0) * 1.0);
      } else {
        lt::FusionOff off;
        got = lt::host(r.fn(x, y));
      }
      double worst = -1;
      int64_t bad = 0, at = 0;
      for (int64_t i = 0; i < n; ++i) {
        double e = ulp_error<T>(T(got[i]), ref[i]);
        bool ok = r.check == Check::Bound ? e <= bound
                  : r.check == Check::Floor && !(abs_below(ref[i], kTwoP))
                      ? e <= 1
                      : rounds_to(T(got[i]), ref[i]);
        if (!ok) ++bad;
        // the first failure, else the largest error
        if ((!ok && bad == 1) || (bad == 0 && e > worst)) worst = e, at = i;
      }
      std::ostringstream os;
      os.precision(17);
      os << r.name << " " << dtype_name(dt) << (fused ? " fused" : " fusion-off") << ": "
         << (bad ? "first failure " : "max ") << worst << " ulp at (" << double(xv[at]) << ", "
         << double(yv[at]) << ") (got " << got[at] << ", want " << double((long double)ref[at])
         << "); " << bad << " of " << n << " pairs "
         << (r.check == Check::Bound ? "past the bound" : "not correctly rounded");
      MESSAGE(os.str());
      CHECK_MESSAGE(bad == 0, os.str());
    }
  }
}

}  // namespace

TEST_CASE("ulp: every float binary row in float32 (long double reference; 4 ulp or exact)") {
  sweep<float, LMath>(DType::Float32, 4, 11, 40000);
}

TEST_CASE("ulp: every float binary row in float64 (__float128 reference; 1 ulp or exact)") {
  sweep<double, QMath>(DType::Float64, 1, 12, 40000);
}
