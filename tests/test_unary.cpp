// Every unary row of the op table against std:: math in double, on float and integer inputs.
#include <limits>
#include <map>

#include "helpers.h"
#include "math_refs.h"

using namespace loom;
using lt::check_close;
using lt::host;

namespace {

// One row of the table, expanded from LOOM_UNARY_OPS so new rows are covered automatically.
struct UnaryRow {
  const char* name;
  Tensor (*fn)(const Tensor&);
  UnaryKind kind;
};

const std::vector<UnaryRow>& unary_rows() {
  static const std::vector<UnaryRow> rows = {
#define LOOM_X(name, api, kind) \
  {#api, static_cast<Tensor (*)(const Tensor&)>(&loom::api), UnaryKind::kind},
      LOOM_UNARY_OPS(LOOM_X)
#undef LOOM_X
  };
  return rows;
}

// A float64 reference and the input domain the op is defined on.
struct UnaryRef {
  double (*f)(double);
  double lo = -3, hi = 3;       // float inputs
  int64_t ilo = -20, ihi = 20;  // integer inputs
  bool ints = true;             // takes integer (and bool) inputs
  bool floats = true;           // takes float inputs
};

double sigmoid_ref(double x) { return 1 / (1 + std::exp(-x)); }

const std::map<std::string, UnaryRef>& unary_refs() {
  static const std::map<std::string, UnaryRef> refs = {
      {"neg", {[](double x) { return -x; }}},
      {"abs", {[](double x) { return std::fabs(x); }}},
      {"sign", {[](double x) { return double((x > 0) - (x < 0)); }}},
      {"square", {[](double x) { return x * x; }}},
      {"relu", {[](double x) { return x > 0 ? x : 0.0; }}},
      {"floor", {[](double x) { return std::floor(x); }, -10, 10}},
      {"ceil", {[](double x) { return std::ceil(x); }, -10, 10}},
      {"round", {[](double x) { return std::nearbyint(x); }, -10, 10}},
      {"trunc", {[](double x) { return std::trunc(x); }, -10, 10}},
      {"bitwise_not",
       {[](double x) { return double(~int64_t(x)); }, 0, 0, -1000, 1000, true, false}},
      {"exp", {[](double x) { return std::exp(x); }, -5, 5, -10, 10}},
      {"exp2", {[](double x) { return std::exp2(x); }, -5, 5, -10, 10}},
      {"expm1", {[](double x) { return std::expm1(x); }, -5, 5, -10, 10}},
      {"log", {[](double x) { return std::log(x); }, 0.05, 10, 1, 100}},
      {"log2", {[](double x) { return std::log2(x); }, 0.05, 10, 1, 100}},
      {"log1p", {[](double x) { return std::log1p(x); }, -0.9, 10, 0, 100}},
      {"sqrt", {[](double x) { return std::sqrt(x); }, 0.01, 10, 1, 100}},
      {"rsqrt", {[](double x) { return 1 / std::sqrt(x); }, 0.01, 10, 1, 100}},
      {"reciprocal", {[](double x) { return 1 / x; }, -10, 10}},
      {"sin", {[](double x) { return std::sin(x); }, -6, 6}},
      {"cos", {[](double x) { return std::cos(x); }, -6, 6}},
      {"tan", {[](double x) { return std::tan(x); }, -1.4, 1.4, -1, 1}},
      {"tanh", {[](double x) { return std::tanh(x); }, -5, 5}},
      {"asin", {[](double x) { return std::asin(x); }, -0.99, 0.99, -1, 1}},
      {"acos", {[](double x) { return std::acos(x); }, -0.99, 0.99, -1, 1}},
      {"atan", {[](double x) { return std::atan(x); }, -10, 10}},
      {"sinh", {[](double x) { return std::sinh(x); }, -5, 5, -10, 10}},
      {"cosh", {[](double x) { return std::cosh(x); }, -5, 5, -10, 10}},
      {"erf", {[](double x) { return std::erf(x); }, -3, 3}},
      {"sigmoid", {sigmoid_ref, -8, 8}},
      {"gelu", {[](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }, -5, 5}},
      {"gelu_tanh",
       {[](double x) {
          double k = std::sqrt(2 / M_PI);
          return 0.5 * x * (1 + std::tanh(k * (x + 0.044715 * x * x * x)));
        },
        -5, 5}},
      {"silu", {[](double x) { return x * sigmoid_ref(x); }, -8, 8}},
      {"softplus", {[](double x) { return std::log1p(std::exp(x)); }, -8, 8, -10, 10}},
      {"isnan", {[](double x) { return double(std::isnan(x)); }}},
      {"isinf", {[](double x) { return double(std::isinf(x)); }}},
      {"isfinite", {[](double x) { return double(std::isfinite(x)); }}},
      {"logical_not", {[](double x) { return double(x == 0); }}},
      {"log10", {[](double x) { return std::log10(x); }, 0.05, 10, 1, 100}},
      {"cbrt", {[](double x) { return std::cbrt(x); }}},
      {"asinh", {[](double x) { return std::asinh(x); }, -5, 5}},
      {"acosh", {[](double x) { return std::acosh(x); }, 1.01, 10, 1, 20}},
      {"atanh", {[](double x) { return std::atanh(x); }, -0.95, 0.95, 0, 0}},
      {"erfc", {[](double x) { return std::erfc(x); }}},
      {"erfinv",
       {[](double x) {
          if (std::fabs(x) == 1) return std::copysign(INFINITY, x);  // bool inputs
          return x == 0 ? 0.0 : double(lt::ref::erfinv<lt::ref::LdMath>(x));
        },
        -0.99, 0.99, 0, 0}},
      {"lgamma", {[](double x) { return std::lgamma(x); }, 0.1, 10, 1, 20}},
      {"digamma",
       {[](double x) { return x == 0 ? -INFINITY : double(lt::ref::digamma<lt::ref::LdMath>(x)); },
        0.1, 10, 1, 20}},
      {"sinc", {[](double x) { return double(lt::ref::sinc<lt::ref::LdMath>(x)); }, -5, 5}},
      {"deg2rad", {[](double x) { return x * M_PI / 180; }, -400, 400}},
      {"rad2deg", {[](double x) { return x * 180 / M_PI; }}},
      {"frac", {[](double x) { return x - std::trunc(x); }, -10, 10, 0, 0, false}},
      {"signbit", {[](double x) { return double(std::signbit(x)); }}},
  };
  return refs;
}

DType expected_dtype(UnaryKind k, DType in) {
  if (k == UnaryKind::BoolOut) return DType::Bool;
  if (k == UnaryKind::FloatOut && !is_floating(in)) return DType::Float32;
  return in;
}

// Relative slack for transcendental functions computed in float32 by vectorized code.
lt::Tol op_tol(DType out) {
  lt::Tol t = lt::tol(out);
  if (out == DType::Float32) t = {2e-6 * 8, 1e-6};
  if (out == DType::Float64) t = {1e-12, 1e-13};
  return t;
}

const UnaryRef* ref_for(const char* name) {
  auto it = unary_refs().find(name);
  return it == unary_refs().end() ? nullptr : &it->second;
}

}  // namespace

TEST_CASE("unary: every op table row has a reference") {
  for (auto& row : unary_rows()) {
    INFO("op " << std::string(row.name));
    CHECK_MESSAGE(ref_for(row.name) != nullptr, "add a float64 reference for the new row");
  }
}

TEST_CASE("unary: every row on float32 and float64 matches float64 std:: math") {
  uint32_t seed = 100;
  for (auto& row : unary_rows()) {
    const UnaryRef* r = ref_for(row.name);
    if (!r) continue;
    for (DType dt : {DType::Float32, DType::Float64}) {
      INFO("op " << std::string(row.name));
      INFO("dtype " << std::string(dtype_name(dt)));
      Tensor x = lt::random({7, 33}, dt, ++seed, r->lo, r->hi);
      if (!r->floats) {
        LT_CHECK_ERROR(row.fn(x), row.name, dtype_name(dt));
        continue;
      }
      Tensor y = row.fn(x);
      CHECK(y.dtype() == expected_dtype(row.kind, dt));
      CHECK(y.shape() == x.shape());
      check_close(y, lt::ref_unary(host(x), r->f), op_tol(y.dtype()));
    }
  }
}

TEST_CASE("unary: every row on int32, int64 and bool inputs") {
  uint32_t seed = 200;
  for (auto& row : unary_rows()) {
    const UnaryRef* r = ref_for(row.name);
    if (!r || !r->ints) continue;
    for (DType dt : {DType::Int32, DType::Int64, DType::Bool}) {
      INFO("op " << std::string(row.name));
      INFO("dtype " << std::string(dtype_name(dt)));
      Tensor x = dt == DType::Bool ? lt::random({5, 9}, dt, ++seed)
                                   : lt::random({5, 9}, dt, ++seed, double(r->ilo), double(r->ihi));
      std::string name = row.name;
      if (dt == DType::Bool && name == "neg") {
        LT_CHECK_ERROR(row.fn(x), "neg", "bool");
        continue;
      }
      Tensor y = row.fn(x);
      CHECK(y.dtype() == expected_dtype(row.kind, dt));
      auto in = host(x);
      std::vector<double> want;
      if (dt == DType::Bool && name == "bitwise_not") {
        want = lt::ref_unary(in, [](double v) { return double(v == 0); });
      } else if (dt == DType::Bool && row.kind == UnaryKind::Same) {
        // torch keeps bool for these; the value is the truth of the op on 0/1
        want = lt::ref_unary(in, [&](double v) { return double(r->f(v) != 0); });
      } else {
        want = lt::ref_unary(in, r->f);
      }
      check_close(y, want, op_tol(y.dtype()));
    }
  }
}

TEST_CASE("unary: fused chain of every float row equals fusion off") {
  // Each op follows a clamp into its domain, so one kernel evaluates the whole table.
  Tensor x = lt::random({64, 65}, DType::Float32, 7, -0.9, 0.9);
  lt::check_fused_matches_unfused([&] {
    Tensor acc = zeros({64, 65});
    for (auto& row : unary_rows()) {
      const UnaryRef* r = ref_for(row.name);
      if (!r || !r->floats) continue;
      // positive, inside every domain (acosh's starts at 1)
      Tensor y = row.fn(x.abs() + (std::string(row.name) == "acosh" ? 1.05 : 0.05));
      acc = acc + cast(y, DType::Float32);
    }
    return acc;
  });
}

// A value recomputed inside another kernel must equal the one saved to the bit (an amin's
// gradient finds its minimum by equality): an element's result may not depend on where the
// run that computes it starts or ends (its alignment, the loop's head and tail).
TEST_CASE("unary: an element's bits do not depend on where its run starts") {
  uint32_t seed = 300;
  for (bool fused : {false, true}) {
    bool was = fusion_enabled();
    set_fusion(fused);
    for (auto& row : unary_rows()) {
      const UnaryRef* r = ref_for(row.name);
      if (!r || !r->floats) continue;
      for (DType dt : {DType::Float32, DType::Float64}) {
        INFO("op " << std::string(row.name) << " " << std::string(dtype_name(dt)) << " fused "
                   << fused);
        const int64_t n = 203;
        Tensor x = lt::random({n}, dt, ++seed, r->lo, r->hi);
        std::vector<double> whole = row.fn(x).to_vector<double>();
        int differ = 0;
        for (int64_t k = 1; k <= 17; ++k) {
          std::vector<double> part = row.fn(x.slice(0, k, n).contiguous()).to_vector<double>();
          for (int64_t i = k; i < n; ++i) {
            double a = whole[size_t(i)], b = part[size_t(i - k)];
            differ += !(a == b || (a != a && b != b));
          }
        }
        CHECK(differ == 0);
      }
    }
    set_fusion(was);
  }
}

TEST_CASE("unary: special values (nan, inf, signed zero, halves)") {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  Tensor x = lt::make({nan, inf, -inf, 1.0, -0.0, 0.5}, {6});
  lt::check_equal(isnan(x), {1, 0, 0, 0, 0, 0});
  lt::check_equal(isinf(x), {0, 1, 1, 0, 0, 0});
  lt::check_equal(isfinite(x), {0, 0, 0, 1, 1, 1});
  lt::check_equal(logical_not(x), {0, 0, 0, 0, 1, 0});
  check_close(relu(x), {nan, inf, 0, 1, 0, 0.5});
  check_close(sign(x), {nan, 1, -1, 1, 0, 1});
  check_close(exp(x), {nan, inf, 0, std::exp(1.0), 1, std::exp(0.5)});
  check_close(sigmoid(lt::make({-inf, inf, 0}, {3})), {0, 1, 0.5});
  // round is half to even, like torch
  check_close(round(lt::make({0.5, 1.5, 2.5, -0.5, -2.5, 3.7}, {6})), {0, 2, 2, -0.0, -2, 4});
  check_close(log(lt::make({0, -1}, {2})), {-inf, nan});
  check_close(sqrt(lt::make({-1}, {1})), {nan});
}

// Eigen's logistic clamps its argument near -88: sigmoid(-inf) came out 2.9e-39, not 0, so
// sigmoid(-inf) * inf was inf, not NaN. Values below the clamp must follow e^x down.
TEST_CASE("unary: sigmoid and silu below the exp clamp, fused and fusion off") {
  const double inf = std::numeric_limits<double>::infinity();
  for (DType dt : {DType::Float32, DType::Float64}) {
    INFO("dtype " << std::string(dtype_name(dt)));
    std::vector<double> xs = {-inf, -1000, -100, -90, -87.5, -20, 0, 20};
    Tensor x = cast(lt::make(xs, {8}), dt);
    std::vector<double> got = lt::check_fused_matches_unfused([&] { return sigmoid(x); });
    std::vector<double> silu_got = lt::check_fused_matches_unfused([&] { return silu(x); });
    for (size_t i = 0; i < xs.size(); ++i) {
      INFO("x " << xs[i]);
      double want = 1 / (1 + std::exp(-xs[i]));
      if (dt == DType::Float32) want = double(float(want));  // rounds to the subnormal grid
      CHECK(std::abs(got[i] - want) <= 1e-6 * want + 1.5e-45);
      if (xs[i] == -inf) {
        CHECK(got[i] == 0.0);
        CHECK(std::isnan(silu_got[i]));  // -inf * 0
      } else {
        double w = xs[i] * want;
        CHECK(std::abs(silu_got[i] - w) <= 1e-6 * std::abs(w) + 1.5e-42);
      }
    }
    std::vector<double> prod = lt::check_fused_matches_unfused([&] { return sigmoid(x) * -x; });
    CHECK(std::isnan(prod[0]));  // 0 * inf
  }
}

TEST_CASE("unary: float16 and bfloat16 compute in float32 and round once") {
  for (DType dt : {DType::Float16, DType::BFloat16}) {
    INFO("dtype " << std::string(dtype_name(dt)));
    Tensor x = lt::random({100}, dt, 11, -3, 3);
    Tensor y = exp(x);
    CHECK(y.dtype() == dt);
    check_close(y, lt::ref_unary(host(x), [](double v) { return std::exp(v); }));
    Tensor t = tanh(x);
    check_close(t, lt::ref_unary(host(x), [](double v) { return std::tanh(v); }));
  }
}

TEST_CASE("unary: methods, gelu(approximate) and non-contiguous inputs") {
  Tensor x = lt::random({6, 10}, DType::Float64, 12);
  Tensor xt = x.t();  // [10, 6], strided
  auto v = host(xt);
  check_close(xt.exp(), lt::ref_unary(v, [](double a) { return std::exp(a); }));
  check_close(xt.sigmoid(), lt::ref_unary(v, sigmoid_ref));
  check_close(gelu(xt, "tanh"), host(gelu_tanh(xt)));
  check_close(gelu(xt, "none"), host(gelu(xt)));
  Tensor s = x.slice(1, 1, std::nullopt, 3);  // [6, 3], step 3
  check_close(s.neg(), lt::ref_unary(host(s), [](double a) { return -a; }));
  // -x operator and empty / 0-dim tensors
  check_close(-x, lt::ref_unary(host(x), [](double a) { return -a; }));
  CHECK(exp(zeros({0, 3})).shape() == Shape{0, 3});
  CHECK(exp(full({}, 1.0)).item<double>() == doctest::Approx(std::exp(1.0)));
}
