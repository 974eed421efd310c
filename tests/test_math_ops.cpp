// The math library's semantics at its edges (torch's, checked against torch 2.x by hand): shifts
// by out-of-range counts, fmod's sign and integer zero divisors, xlogy at 0, the poles and
// signed zeros of the special functions, isclose / allclose, nan_to_num, clamp with tensor
// bounds, dtype rules and errors naming the op. Values over whole ranges: tests/test_math_ulp.cpp.
#include <cmath>
#include <limits>

#include "helpers.h"

using namespace loom;
using lt::check_close;
using lt::check_equal;
using lt::host;

namespace {
const double kInf = std::numeric_limits<double>::infinity();
const double kNan = std::numeric_limits<double>::quiet_NaN();

// Each value of `got` bit for bit (the sign of zeros and infinities; any NaN matches NaN).
void check_bits(const Tensor& got, const std::vector<double>& want) {
  std::vector<double> g = host(got);
  REQUIRE(g.size() == want.size());
  const bool f32 = got.dtype() == DType::Float32;
  for (size_t i = 0; i < g.size(); ++i) {
    double w = f32 ? double(float(want[i])) : want[i];  // the reference rounded to the dtype
    INFO("element " << i << ": got " << g[i] << ", want " << w);
    if (std::isnan(w)) {
      CHECK(std::isnan(g[i]));
    } else {
      CHECK(g[i] == w);
      CHECK(std::signbit(g[i]) == std::signbit(w));
    }
  }
}
}  // namespace

TEST_CASE("math: shifts follow torch for counts out of range, fused and fusion off") {
  // torch: a << b is 0 for b < 0 or b >= width; a >> b fills with the sign bit there
  struct Case {
    DType dt;
    int bits;
  };
  for (Case c : {Case{DType::Int8, 8}, Case{DType::Int16, 16}, Case{DType::Int32, 32},
                 Case{DType::Int64, 64}}) {
    INFO("dtype " << dtype_name(c.dt));
    std::vector<double> counts = {-1, 0, 1, double(c.bits - 1), double(c.bits), 70};
    Tensor a = lt::make({5, 5, 5, 5, 5, 5, -3, -3, -3, -3, -3, -3}, {2, 6}, c.dt);
    Tensor b = lt::make(counts, {6}, c.dt);
    double top = -std::ldexp(1.0, c.bits - 1);  // 5 or -3 shifted to the sign bit wraps there
    lt::check_fused_matches_unfused([&] { return bitwise_left_shift(a, b); });
    check_equal(a << b, {0, 5, 10, top, 0, 0, 0, -3, -6, top, 0, 0});
    check_equal(a >> b, {0, 5, 2, 0, 0, 0, -1, -3, -2, -1, -1, -1});
    lt::check_fused_matches_unfused([&] { return (a >> b) + (a << 2); });
  }
  Tensor u = lt::make({200, 1}, {2}, DType::UInt8);
  check_equal(u << lt::make({7, 8}, {2}, DType::UInt8), {0, 0});  // 200 << 7 wraps to 0
  check_equal(u >> lt::make({3, 200}, {2}, DType::UInt8), {25, 0});
  // the wider unsigned types: logical right shifts up to the width - 1, 0 from the width on
  for (auto [dt, bits] : {std::pair{DType::UInt16, 16}, {DType::UInt32, 32}, {DType::UInt64, 64}}) {
    INFO("dtype " << dtype_name(dt));
    const uint64_t top = uint64_t(1) << (bits - 1);
    Tensor w = tensor<uint64_t>({top, top, top, 3}, {4}, Options(dt));
    Tensor k = lt::make({double(bits - 1), double(bits), 1, double(bits - 1)}, {4}, dt);
    CHECK((w >> k).to_vector<uint64_t>() == std::vector<uint64_t>{1, 0, top >> 1, 0});
    CHECK((w << k).to_vector<uint64_t>() == std::vector<uint64_t>{0, 0, 0, top});
    lt::check_fused_matches_unfused([&] { return (w >> k) + (w << k); });
  }
  // dtypes and operators: bool << int promotes to int64, as in torch
  Tensor bl = lt::make({1, 0}, {2}, DType::Bool);
  CHECK((bl << 1).dtype() == DType::Int64);
  check_equal(bl << 1, {2, 0});
  check_equal(1 << lt::make({3, 4}, {2}, DType::Int32), {8, 16});
  Tensor t = lt::make({1, 8}, {2}, DType::Int32);
  t <<= 2;
  check_equal(t, {4, 32});
  t >>= lt::make({1, 3}, {2}, DType::Int32);
  check_equal(t, {2, 4});
  Tensor f = lt::make({1, 2}, {2});
  LT_CHECK_ERROR(f << 1, "bitwise_left_shift", "float32", "[2]");
  LT_CHECK_ERROR(bitwise_right_shift(bl, bl), "bitwise_right_shift", "bool");
}

TEST_CASE("math: fmod keeps the dividend's sign and dtype; integer zero divisors") {
  Tensor a = lt::make({7, -7, 7, -7, 0, 5}, {6}, DType::Int32);
  Tensor b = lt::make({2, 2, -2, -2, 3, 0}, {6}, DType::Int32);
  Tensor r = fmod(a, b);
  CHECK(r.dtype() == DType::Int32);
  // a zero divisor element raises at the next sync point (torch raises at the call); the
  // quotient's element is 0
  CHECK_THROWS_WITH_AS(loom::sync(), doctest::Contains("fmod: integer division by zero"), Error);
  check_equal(r, {1, -1, 1, -1, 0, 0});
  LT_CHECK_ERROR(fmod(a, 0), "fmod", "division by zero", "int32");
  check_equal(fmod(lt::make({INT32_MIN}, {1}, DType::Int32), -1), {0});
  Tensor fa = lt::make({5.5, -5.5, 1, -0.0, kInf, 3}, {6}, DType::Float64);
  Tensor fb = lt::make({2, 2, 0, 1, 1, kInf}, {6}, DType::Float64);
  check_bits(fmod(fa, fb), {1.5, -1.5, kNan, -0.0, kNan, 3});
  lt::check_fused_matches_unfused([&] { return fmod(fa, fb) * 2; });
  CHECK(fmod(lt::make({1, 0}, {2}, DType::Bool), lt::make({1, 1}, {2}, DType::Bool)).dtype() ==
        DType::Int64);
}

TEST_CASE("math: binary special values (xlogy, copysign, nextafter, logaddexp, hypot)") {
  Tensor x = lt::make({0, 0, 0, 1, 2, 0}, {6}, DType::Float64);
  Tensor y = lt::make({kNan, kInf, 0, 0, kInf, -1}, {6}, DType::Float64);
  check_bits(xlogy(x, y), {kNan, 0, 0, -kInf, kInf, 0});
  Tensor ci = copysign(lt::make({1, 2}, {2}, DType::Int64), lt::make({-1, 0}, {2}, DType::Int64));
  CHECK(ci.dtype() == DType::Float32);  // torch: copysign of integers is float
  check_bits(ci, {-1, 2});
  check_bits(copysign(lt::make({1, 1, 0}, {3}), lt::make({-0.0, kNan, -2}, {3})), {-1, 1, -0.0});
  Tensor one = lt::make({1, 0, 1}, {3});
  Tensor dir = lt::make({2, 1, 0}, {3});
  check_bits(nextafter(one, dir), {1 + 0x1p-23, 0x1p-149, 1 - 0x1p-24});
  check_bits(nextafter(cast(one, DType::Float64), cast(dir, DType::Float64)),
             {1 + 0x1p-52, 0x1p-1074, 1 - 0x1p-53});
  LT_CHECK_ERROR(nextafter(lt::make({1}, {1}, DType::Int32), lt::make({1}, {1}, DType::Int32)),
                 "nextafter", "int32");
  Tensor la = lt::make({-kInf, kInf, 1000, -kInf, kNan, 1}, {6}, DType::Float64);
  Tensor lb = lt::make({-kInf, kInf, 1000, 3, 1, -kInf}, {6}, DType::Float64);
  check_close(logaddexp(la, lb), {-kInf, kInf, 1000 + std::log(2.0), 3, kNan, 1});
  check_close(logaddexp2(la, lb), {-kInf, kInf, 1001, 3, kNan, 1});
  check_close(logaddexp(lt::make({-1000}, {1}, DType::Float64), -1000.0), {-1000 + std::log(2.0)});
  check_close(hypot(lt::make({3, 1e300, kInf, kNan}, {4}, DType::Float64),
                    lt::make({4, 1e300, kNan, kInf}, {4}, DType::Float64)),
              {5, 1e300 * std::sqrt(2.0), kInf, kInf});
}

TEST_CASE("math: unary poles, domains and signed zeros") {
  for (DType dt : {DType::Float32, DType::Float64}) {
    INFO("dtype " << dtype_name(dt));
    auto t = [&](std::vector<double> v) { return lt::make(v, {int64_t(v.size())}, dt); };
    check_bits(abs(t({-0.0, -kInf, kNan})), {0.0, kInf, kNan});
    check_bits(asinh(t({kInf, -kInf, -0.0, 0.0})), {kInf, -kInf, -0.0, 0.0});
    check_bits(acosh(t({0.5, -1, 1, kInf, -kInf})), {kNan, kNan, 0, kInf, kNan});
    check_bits(atanh(t({1, -1, 2, -0.0})), {kInf, -kInf, kNan, -0.0});
    check_bits(cbrt(t({-8, -0.0, -kInf})), {-2, -0.0, -kInf});
    check_bits(log10(t({1000, 0, -1, kInf})), {3, -kInf, kNan, kInf});
    check_bits(erfc(t({-kInf, kInf, 0})), {2, 0, 1});
    check_bits(erfinv(t({1, -1, 1.5, -0.0, 0})), {kInf, -kInf, kNan, -0.0, 0});
    check_bits(lgamma(t({0, -1, -2, 1, 2, kInf, -kInf})), {kInf, kInf, kInf, 0, 0, kInf, kInf});
    check_bits(digamma(t({0, -0.0, -1, -kInf, kInf, 1})),
               {-kInf, kInf, kNan, kNan, kInf, -0.57721566490153286});
    check_bits(sinc(t({0, 1, -2, kInf, kNan})), {1, 0, 0, kNan, kNan});
    check_bits(frac(t({-2.5, -0.0, kInf, 3})), {-0.5, 0, kNan, 0});
    check_bits(signbit(t({-0.0, 0.0, -kNan, kNan, -kInf, 1})), {1, 0, 1, 0, 1, 0});
    check_bits(sign(t({-0.0, kNan})), {0, kNan});
    check_close(deg2rad(t({180, -90})), {M_PI, -M_PI / 2});
    check_close(rad2deg(t({M_PI})), {180});
  }
  // Subnormal inputs of log: Eigen's vector log clamped them to the smallest normal number
  check_close(log(lt::make({1e-45, 1e-40}, {2})), {std::log(0x1p-149), std::log(1e-40f)},
              lt::Tol{1e-6, 0});
  check_close(log(lt::make({5e-324, 1e-310}, {2}, DType::Float64)),
              {-744.44007192138122, std::log(1e-310)}, lt::Tol{1e-15, 0});
}

TEST_CASE("math: dtype rules and errors of the unary rows") {
  Tensor i = lt::make({1, 10, 100}, {3}, DType::Int64);
  for (Tensor y : {log10(i), cbrt(i), deg2rad(i), lgamma(i), erfc(i)})
    CHECK(y.dtype() == DType::Float32);
  check_close(log10(i), {0, 1, 2});
  CHECK(signbit(lt::make({-1, 2}, {2}, DType::Int32)).dtype() == DType::Bool);
  check_equal(signbit(lt::make({-1, 2}, {2}, DType::Int32)), {1, 0});
  check_equal(signbit(lt::make({1, 0}, {2}, DType::Bool)), {0, 0});
  LT_CHECK_ERROR(frac(i), "frac", "int64", "[3]");
  CHECK(frac(lt::make({1.25}, {1}, DType::Float16)).dtype() == DType::Float16);
}

TEST_CASE("math: isclose and allclose (torch's rule and defaults)") {
  Tensor a = lt::make({1, 1, kInf, kInf, kNan, 1e-9, 100}, {7}, DType::Float64);
  Tensor b = lt::make({1 + 1e-6, 1.1, kInf, -kInf, kNan, 0, 100.0009}, {7}, DType::Float64);
  check_equal(isclose(a, b), {1, 0, 1, 0, 0, 1, 1});
  check_equal(isclose(a, b, 1e-05, 1e-08, true), {1, 0, 1, 0, 1, 1, 1});
  check_equal(isclose(a, b, 0, 0), {0, 0, 1, 0, 0, 0, 0});
  check_equal(isclose(a, b, 0.2, 0), {1, 1, 1, 0, 0, 0, 1});
  // broadcast, integers (the error in float32)
  check_equal(isclose(lt::make({1, 2, 3}, {3}, DType::Int32), lt::make({2}, {1}, DType::Int32)),
              {0, 1, 0});
  CHECK(allclose(a.slice(0, 0, 1), b.slice(0, 0, 1)));
  CHECK_FALSE(allclose(a, b));
  CHECK(allclose(a, a, 1e-05, 1e-08, true));
  CHECK_FALSE(allclose(a, a));  // NaN != NaN without equal_nan
  LT_CHECK_ERROR(isclose(a, cast(b, DType::Float32)), "isclose", "float64", "float32");
  LT_CHECK_ERROR(isclose(a, b, -1), "isclose", "non-negative");
  LT_CHECK_ERROR(isclose(a, lt::make({1, 2}, {2}, DType::Float64)), "isclose", "[7]", "[2]");
}

TEST_CASE("math: nan_to_num and clamp with tensor bounds") {
  Tensor x = lt::make({kNan, kInf, -kInf, 1.5}, {4});
  check_equal(nan_to_num(x), {0, double(std::numeric_limits<float>::max()),
                              double(std::numeric_limits<float>::lowest()), 1.5});
  check_equal(nan_to_num(x, 2, 3, -4), {2, 3, -4, 1.5});
  Tensor h = cast(x, DType::Float16);
  CHECK(nan_to_num(h).dtype() == DType::Float16);
  check_equal(nan_to_num(h), {0, 65504, -65504, 1.5});
  check_equal(nan_to_num(cast(x, DType::Float64)),
              {0, std::numeric_limits<double>::max(), std::numeric_limits<double>::lowest(), 1.5});
  Tensor n = lt::make({1, 2}, {2}, DType::Int32);
  check_equal(nan_to_num(n), {1, 2});
  lt::check_fused_matches_unfused([&] { return nan_to_num(x * 2) + 1; });
  // clamp(x, min, max) = min(max(x, min), max): tensor bounds broadcast; min > max gives max
  Tensor v = lt::make({-2, 0, 2, 5, -5, 1}, {2, 3});
  Tensor lo = lt::make({-1, 1, -1}, {3}), hi = lt::make({1}, {1});
  check_equal(clamp(v, std::optional<Tensor>(lo), std::optional<Tensor>(hi)), {-1, 1, 1, 1, 1, 1});
  check_equal(clamp(v, std::optional<Tensor>(lo), std::nullopt), {-1, 1, 2, 5, 1, 1});
  check_equal(clamp(v, std::optional<Tensor>(lt::make({3}, {1})), std::optional<Tensor>(hi)),
              {1, 1, 1, 1, 1, 1});
  check_close(clamp(lt::make({kNan}, {1}), std::optional<Tensor>(lo.slice(0, 0, 1)), std::nullopt),
              {kNan});
}
