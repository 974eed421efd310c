// Every float-valued unary row of the op table over the whole float32 and float64 range (random
// values in every binade, subnormals, signed zeros, infinities, NaN), fusion off and fused,
// against a wider reference: long double for float32, __float128 (libquadmath) for float64.
// Bounds: 4 ulp in float32, 1 ulp in float64; where the reference is 0, inf or NaN the result
// must be that value exactly (the sign of a zero included). ctest runs this file again with
// LOOM_CPU_VMATH=0 (Eigen's kernels instead of loom's own vector math).
#include <sstream>

#include "math_ulp.h"

using namespace loom;
using namespace lt::ulp;

namespace {

template <typename T, typename M>
void sweep(DType dt, double bound, uint32_t seed) {
  std::vector<double> xs = sweep_values<T>(seed);
  // NaN signs survive the host conversion: the tensor is built from the T values' bits
  std::vector<T> tv(xs.size());
  for (size_t i = 0; i < xs.size(); ++i) tv[i] = T(xs[i]);
  Tensor x = loom::tensor<T>(tv, {int64_t(tv.size())});
  REQUIRE(x.dtype() == dt);
  for (const Row& r : rows()) {
    bool known;
    reference<M>(r.name, 0, known);
    if (!known) continue;
    if (r.kind == UnaryKind::BoolOut) continue;  // exact: tests/test_math_ops.cpp and below
    for (bool fused : {false, true}) {
      INFO("op " << r.name << ", " << dtype_name(dt) << (fused ? ", fused" : ", fusion off"));
      std::vector<double> got;
      if (fused) {
        // x * 1 before and after: one group, the op between two multiplications (each exact)
        got = lt::host(r.fn(x * 1.0) * 1.0);
      } else {
        lt::FusionOff off;
        got = lt::host(r.fn(x));
      }
      // float64 digamma near its negative roots: in ulps of the reflection's terms
      Worst w = measure<T, M>(r.name, xs, got, bound, sizeof(T) == 8 ? 0x1p-6 : 0);
      std::ostringstream os;
      os.precision(17);
      os << r.name << " " << dtype_name(dt) << (fused ? " fused" : " fusion-off") << ": max "
         << w.ulp << " ulp at x = " << w.x << " (got " << w.got << ", want " << w.want << "); "
         << w.bad << " of " << xs.size() << " values past " << bound << " ulp";
      MESSAGE(os.str());
      CHECK_MESSAGE(w.bad == 0, os.str());
    }
  }
}

}  // namespace

TEST_CASE("ulp: every float unary row within 4 ulp in float32 (long double reference)") {
  sweep<float, LMath>(DType::Float32, 4, 1);
}

TEST_CASE("ulp: every float unary row within 1 ulp in float64 (__float128 reference)") {
  sweep<double, QMath>(DType::Float64, 1, 2);
}

TEST_CASE("ulp: the bool rows on the sweep values are exact") {
  std::vector<double> xs = sweep_values<float>(3);
  std::vector<float> tv(xs.begin(), xs.end());
  tv.push_back(-std::numeric_limits<float>::quiet_NaN());
  Tensor x = loom::tensor<float>(tv, {int64_t(tv.size())});
  std::vector<double> nan_, inf_, fin_, sb;
  for (float v : tv) {
    nan_.push_back(std::isnan(v)), inf_.push_back(std::isinf(v));
    fin_.push_back(std::isfinite(v)), sb.push_back(std::signbit(v));
  }
  CHECK(std::signbit(tv.back()));
  for (bool fused : {false, true}) {
    std::optional<lt::FusionOff> off;
    if (!fused) off.emplace();
    lt::check_equal(isnan(x), nan_);
    lt::check_equal(isinf(x), inf_);
    lt::check_equal(isfinite(x), fin_);
    lt::check_equal(signbit(x * 1.0), sb);
    lt::check_equal(signbit(cast(x, DType::Float64)), sb);
  }
}
