// The unary ulp sweep of tests/test_math_ulp.cpp on the GPU: every float unary row over the whole
// float32 and float64 range (specials, every binade, a dense [-20, 20]), one kernel per op and
// fused between two exact multiplications, against the same wide references. The bound of a row
// is the CUDA math library's documented maximum error of the function it calls (CUDA C++
// Programming Guide, "Mathematical Functions": those are against the correctly rounded result,
// so half an ulp more against the exact one); a composite row's bound follows from its parts
// and is stated beside it. A row missing from the table fails: a new row needs its bound.
// LOOM_ULP_REPORT=1 prints every row's worst error. Skips itself where CUDA is unavailable.
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>

#include "../math_ulp.h"

using namespace loom;
using namespace lt::ulp;

namespace {

const Device kGPU{DeviceKind::CUDA, 0};

struct Bound {
  double f32, f64;
};

// Against the exact value. Library functions: the documented bound + 0.5. Composites: the sum
// of their parts' errors, each term named.
const std::map<std::string, Bound>& bounds() {
  static const std::map<std::string, Bound> b = {
      // exact or one IEEE operation (correctly rounded): half an ulp
      {"neg", {0, 0}},
      {"abs", {0, 0}},
      {"sign", {0, 0}},
      {"relu", {0, 0}},
      {"floor", {0, 0}},
      {"ceil", {0, 0}},
      {"round", {0, 0}},
      {"trunc", {0, 0}},
      {"frac", {0, 0}},  // x - trunc(x) is exact
      {"square", {0.5, 0.5}},
      {"sqrt", {0.5, 0.5}},
      {"reciprocal", {0.5, 0.5}},
      {"rsqrt", {1.5, 1.5}},  // 1 / sqrt(x): two correctly rounded steps
      {"deg2rad", {1, 1}},    // x * c: c's rounding and the product's
      {"rad2deg", {1, 1}},
      // the library's documented bounds (+ 0.5)
      {"exp", {2.5, 1.5}},
      {"exp2", {2.5, 1.5}},
      {"expm1", {1.5, 1.5}},
      {"log", {1.5, 1.5}},
      {"log2", {1.5, 1.5}},
      {"log10", {2.5, 1.5}},
      {"log1p", {1.5, 1.5}},
      {"sin", {2.5, 2.5}},
      {"cos", {2.5, 2.5}},
      {"tan", {4.5, 2.5}},
      {"asin", {2.5, 2.5}},
      {"acos", {2.5, 2.5}},
      {"atan", {2.5, 2.5}},
      {"sinh", {3.5, 2.5}},
      {"cosh", {2.5, 1.5}},
      {"tanh", {2.5, 1.5}},
      {"asinh", {3.5, 3.5}},
      {"acosh", {4.5, 3.5}},
      {"atanh", {3.5, 2.5}},
      {"cbrt", {1.5, 1.5}},
      {"erf", {2.5, 2.5}},
      {"erfc", {4.5, 5.5}},
      {"erfinv", {2.5, 5.5}},
      {"lgamma", {1, 4.5}},  // float: in double, rounded once; double: outside the intervals
                             // its bound is stated for (lgamma_unbounded)
      // composites: the sum of their steps' errors (library calls as above, IEEE steps 0.5)
      {"sigmoid", {3.5, 2.5}},  // e^-|x|, the sum, the quotient
      {"silu", {4, 3}},         // sigmoid's and the product's
      {"softplus", {4, 3}},     // exp, log1p (whose argument's error passes through)
      {"gelu", {5.5, 6.5}},     // erfc, the product, the argument's correction term
      {"gelu_tanh", {4.5, 3}},  // exp2f / exp, sum and quotient (argument in double / a pair)
      {"digamma", {1, 4}},      // float: in double; double: log, the series and recurrence sums
      {"sinc", {1, 3}},         // float: in double; double: sinpi, pi x, the quotient
  };
  return b;
}

// The interval the library states no double lgamma bound for (its documented bound holds
// outside; float lgamma is evaluated in double).
bool lgamma_unbounded(double x, bool f64) { return f64 && x > -11.0001 && x < -2.2637; }

template <typename T, typename M>
void gpu_sweep(DType dt, uint32_t seed) {
  if (!backend_available(DeviceKind::CUDA)) {
    MESSAGE("CUDA unavailable, skipping the GPU ulp sweep");
    return;
  }
  const bool f64 = sizeof(T) == 8;
  const bool report = std::getenv("LOOM_ULP_REPORT") != nullptr;
  std::vector<double> xs = sweep_values<T>(seed);
  std::vector<T> tv(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) tv[i] = T(xs[i]);
  Tensor x = loom::tensor<T>(tv, {int64_t(tv.size())}).to(kGPU);
  for (const Row& r : rows()) {
    bool known;
    reference<M>(r.name, 0, known);
    if (!known || r.kind == UnaryKind::BoolOut) continue;
    INFO("op " << r.name << ", " << dtype_name(dt));
    auto it = bounds().find(r.name);
    CHECK_MESSAGE(it != bounds().end(), "no CUDA ulp bound for " << r.name);
    if (it == bounds().end()) continue;
    const double bound = f64 ? it->second.f64 : it->second.f32;
    // The values the library bounds: all but lgamma's stated intervals.
    std::vector<double> keep_x;
    std::vector<size_t> keep_i;
    for (size_t i = 0; i < xs.size(); ++i)
      if (r.name != "lgamma" || !lgamma_unbounded(xs[i], f64))
        keep_x.push_back(xs[i]), keep_i.push_back(i);
    for (bool fused : {false, true}) {
      std::vector<double> all;
      if (fused) {
        all = lt::host(r.fn(x * 1.0) * 1.0);
      } else {
        lt::FusionOff off;
        all = lt::host(r.fn(x));
      }
      std::vector<double> got;
      for (size_t i : keep_i) got.push_back(all[i]);
      // digamma below 0 in double: in ulps of the reflection's terms everywhere
      Worst w = measure<T, M>(r.name, keep_x, got, bound, f64 ? 1 : 0);
      std::ostringstream os;
      os.precision(17);
      os << "cuda " << r.name << " " << dtype_name(dt) << (fused ? " fused" : " fusion-off")
         << ": max " << w.ulp << " ulp at x = " << w.x << " (got " << w.got << ", want " << w.want
         << "); " << w.bad << " of " << keep_x.size() << " values past " << bound << " ulp";
      if (report) std::printf("%s\n", os.str().c_str());
      CHECK_MESSAGE(w.bad == 0, os.str());
    }
  }
}

}  // namespace

TEST_CASE("gpu: ulp: every float unary row within the device library's bounds in float32") {
  gpu_sweep<float, LMath>(DType::Float32, 1);
}

TEST_CASE("gpu: ulp: every float unary row within the device library's bounds in float64") {
  gpu_sweep<double, QMath>(DType::Float64, 2);
}

TEST_CASE("gpu: ulp: bfloat16 and float16 gelu within an ulp of the exact result") {
  // The narrow form (lm_gelu_narrow) leaves out the float form's correction of the argument's
  // rounding: its error, about 2 z^2 2^-24 of the result, stays far below a 16-bit ulp.
  if (!backend_available(DeviceKind::CUDA)) {
    MESSAGE("CUDA unavailable, skipping the narrow gelu sweep");
    return;
  }
  for (DType dt : {DType::BFloat16, DType::Float16}) {
    const bool bf = dt == DType::BFloat16;
    const int p = bf ? 8 : 11, emin = bf ? -126 : -14;
    const double big = bf ? 1e38 : 60000.0;
    std::vector<float> xs;
    for (double v : sweep_values<float>(3))
      if (std::isfinite(v) && std::abs(v) < big) xs.push_back(float(v));
    Tensor xn = cast(loom::tensor<float>(xs, {int64_t(xs.size())}), dt);
    std::vector<double> in = lt::host(xn);  // the rounded inputs, exactly
    Tensor xg = xn.to(kGPU);
    for (bool fused : {false, true}) {
      std::vector<double> got;
      if (fused) {
        got = lt::host(gelu(xg * 1.0, "none") * 1.0);
      } else {
        lt::FusionOff off;
        got = lt::host(gelu(xg, "none"));
      }
      int bad = 0;
      double worst_x = 0;
      for (size_t i = 0; i < in.size(); ++i) {
        const double x = in[i], want = x / 2 * std::erfc(-x / std::sqrt(2.0));
        const double a = std::abs(want);
        const int e = a > 0 ? std::max(int(std::floor(std::log2(a))), emin) : emin;
        const double ulp = std::ldexp(1.0, e - p + 1);
        if (!(std::abs(got[i] - want) <= ulp)) ++bad, worst_x = x;
      }
      CHECK_MESSAGE(bad == 0, dtype_name(dt) << (fused ? " fused" : " fusion-off") << ": " << bad
                                             << " of " << in.size()
                                             << " values past an ulp, e.g. x = " << worst_x);
    }
  }
}
