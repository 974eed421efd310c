// Scalar operands (`x * 0.5`, `2 - x`) are carried by the consuming node: one recorded
// node an op, values as kernel arguments (signatures and plans shared across values), results
// equal to float64 references and to fusion off.
#include "helpers.h"

using namespace loom;
using lt::check_close;
using lt::host;

namespace {

std::vector<double> ref_chain(const std::vector<double>& x, int ops, double step) {
  std::vector<double> y = x;
  for (int k = 0; k < ops; ++k)
    for (double& v : y) v = (k % 2) ? v * (1 - step * k) : v + step * k;
  return y;
}

Tensor chain(const Tensor& x, int ops, double step) {
  Tensor y = x;
  for (int k = 0; k < ops; ++k) y = (k % 2) ? y * (1 - step * k) : y + step * k;
  return y;
}

}  // namespace

TEST_CASE("scalar operand: a scalar op records one node, and no Const") {
  Tensor x = lt::random({257}, DType::Float32, 11);
  loom::sync();
  int64_t before = pending_nodes(kCPU);
  Tensor y = x * 0.5;
  CHECK(pending_nodes(kCPU) == before + 1);
  Tensor z = 3 - y;
  CHECK(pending_nodes(kCPU) == before + 2);
  check_close(z, lt::ref_unary(host(x), [](double v) { return 3 - v * 0.5; }));
}

TEST_CASE("scalar operand: both sides, every binary kind, fused and fusion off, vs float64") {
  std::vector<double> xv = lt::uniform(300, 0.5, 3, 21);
  Tensor x = lt::make(xv, {300});
  Tensor xi = lt::random({300}, DType::Int32, 22, 1, 9);
  std::vector<double> xiv = host(xi);
  struct Case {
    const char* name;
    std::function<Tensor()> f;
    std::function<double(double)> ref;
    bool int_in;   // reads xi (else x)
    bool integer;  // an integer result: bitwise equal
  };
  std::vector<Case> cases = {
      {"x - 1.25", [&] { return x - 1.25; }, [](double v) { return v - 1.25; }, false, false},
      {"1.25 - x", [&] { return 1.25 - x; }, [](double v) { return 1.25 - v; }, false, false},
      {"x / 4", [&] { return x / 4; }, [](double v) { return v / 4; }, false, false},
      {"2 / x", [&] { return 2.0 / x; }, [](double v) { return 2 / v; }, false, false},
      {"pow(x, 1.5)", [&] { return pow(x, 1.5); }, [](double v) { return std::pow(v, 1.5); }, false,
       false},
      {"pow(2, x)", [&] { return pow(2.0, x); }, [](double v) { return std::pow(2, v); }, false,
       false},
      {"maximum(x, 1.5)", [&] { return maximum(x, 1.5); },
       [](double v) { return std::max(v, 1.5); }, false, false},
      {"(x > 1.5) as float", [&] { return cast(x > 1.5, DType::Float32); },
       [](double v) { return v > 1.5 ? 1.0 : 0.0; }, false, false},
      {"xi * 3 - 7", [&] { return xi * 3 - 7; }, [](double v) { return v * 3 - 7; }, true, true},
      {"17 % xi", [&] { return remainder(17, xi); },
       [](double v) { return double(17 % int64_t(v)); }, true, true},
      {"xi // 2", [&] { return floor_divide(xi, 2); }, [](double v) { return std::floor(v / 2); },
       true, true},
      {"xi * 0.5 (float result)", [&] { return xi * 0.5; }, [](double v) { return v * 0.5; }, true,
       false},
  };
  for (auto& c : cases) {
    INFO(c.name);
    std::vector<double> got = lt::check_fused_matches_unfused(c.f);
    std::vector<double> want = lt::ref_unary(c.int_in ? xiv : xv, c.ref);
    Tensor r = c.f();
    check_close(r, want, c.integer ? lt::Tol{0, 0} : lt::tol(r.dtype()));
    CHECK(got.size() == want.size());
  }
}

TEST_CASE("scalar operand: new values every iteration share one kernel and one plan") {
  Tensor x = lt::random({1000}, DType::Float32, 31);
  std::vector<double> xv = host(x);
  loom::sync();
  reset_counters();
  for (int it = 0; it < 6; ++it) {
    double step = 0.001 * (it + 1);
    Tensor y = chain(x, 40, step);
    check_close(y, ref_chain(xv, 40, step), lt::Tol{1e-5, 1e-5});
  }
  // The first flush compiles (or finds) the chain's one kernel; the others hit both caches
  // with their own scalar values put in.
  CHECK(counters().kernels.load() == 6);
  CHECK(counters().cache_misses.load() <= 1);
  CHECK(counters().plan_hits.load() >= 5);
}

TEST_CASE("scalar operand: the scalar's kind is part of the plan, not only its value") {
  Tensor x = lt::random({64}, DType::Int64, 41, 1, 9);
  std::vector<double> xv = host(x);
  for (int rep = 0; rep < 2; ++rep) {
    Tensor a = x * 2;    // int64 result
    Tensor b = x * 2.5;  // float32 result
    CHECK(a.dtype() == DType::Int64);
    CHECK(b.dtype() == DType::Float32);
    lt::check_equal(a, lt::ref_unary(xv, [](double v) { return v * 2; }));
    check_close(b, lt::ref_unary(xv, [](double v) { return v * 2.5; }));
    Tensor f = lt::random({64}, DType::Float32, 42);
    // Float tensor with an integer and with a float scalar: the same result dtype, two kinds.
    Tensor c = f * 3, d = f * 3.0;
    check_close(c, host(d));
  }
}

TEST_CASE("scalar operand: a 100-op chain is one kernel and explain() shows its scalar slots") {
  Tensor x = lt::random({1024}, DType::Float32, 51);
  loom::sync();
  Tensor y = chain(x, 100, 0.0001);
  std::string e = explain(y);
  CHECK(e.find("100 nodes -> 1 kernel(s)") != std::string::npos);
  CHECK(e.find("$99") != std::string::npos);  // the 100th op's scalar slot
  reset_counters();
  check_close(y, ref_chain(host(x), 100, 0.0001), lt::Tol{1e-4, 1e-5});
  CHECK(counters().kernels.load() == 1);
}
