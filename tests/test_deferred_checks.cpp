// Checks deferred to the next sync point (fusion/checks.h): an integer division by a zero
// element and cross_entropy's target range record no flush at the call, raise once at the
// sync point after their work ran, and lose nothing already computed.
#include <limits>

#include "helpers.h"

using namespace loom;

namespace {

// `sync_point` raises a loom::Error of `kind` whose message has every one of `parts`.
void check_raises(const std::function<void()>& sync_point, ErrorKind kind,
                  std::initializer_list<std::string> parts) {
  bool threw = false;
  try {
    sync_point();
  } catch (const Error& e) {
    threw = true;
    CHECK(e.kind() == kind);
    std::string msg = e.what();
    INFO("message: " << msg);
    for (auto& p : parts) CHECK_MESSAGE(msg.find(p) != std::string::npos, "missing '" << p << "'");
  }
  CHECK_MESSAGE(threw, "the sync point did not raise");
  CHECK(pending_checks() == 0);  // read once: the next sync point goes on
}

}  // namespace

TEST_CASE("deferred checks: integer division by a zero tensor element") {
  for (bool fused : {true, false}) {
    set_fusion(fused);
    INFO("fusion " << fused);
    Tensor a = lt::make({7, -7, 9, 5, 6, -8}, {2, 3}, DType::Int32);
    Tensor b = lt::make({2, 0, 4}, {3}, DType::Int32);  // broadcast over a's rows
    Tensor q = lt::recorded_without_flush([&] { return floor_divide(a, b); });
    check_raises([&] { (void)q.to_vector<int32_t>(); }, ErrorKind::Value,
                 {"floor_divide", "integer division by zero", "int32 [2, 3]", "int32 [3]"});
    // The quotient was computed (0 where the divisor is 0) and reads back now.
    lt::check_equal(q, {3, 0, 2, 2, 0, -2});
    Tensor r = lt::recorded_without_flush([&] { return remainder(a, b); });
    check_raises([] { loom::sync(); }, ErrorKind::Value, {"remainder", "division by zero"});
    lt::check_equal(r, {1, 0, 1, 1, 0, 0});
    Tensor f = lt::recorded_without_flush([&] { return fmod(a * 1, b); });
    check_raises([] { flush(); }, ErrorKind::Value, {"fmod"});
    lt::check_equal(f, {1, 0, 1, 1, 0, 0});
    // a scalar dividend: the tensor is the divisor
    Tensor s = lt::recorded_without_flush([&] { return floor_divide(12, b); });
    check_raises([&] { (void)s.sum().item<int64_t>(); }, ErrorKind::Value,
                 {"floor_divide", "the scalar 12 by int32 [3]"});
    // bool divisors compute in int64: false is a zero
    Tensor bb = lt::make({1, 0, 1}, {3}, DType::Bool);
    Tensor qb = lt::recorded_without_flush([&] { return floor_divide(a, bb); });
    check_raises([&] { (void)qb.to_vector<int64_t>(); }, ErrorKind::Value, {"floor_divide"});
  }
  set_fusion(true);
}

TEST_CASE("deferred checks: no error without a zero divisor, for floats, for empty results") {
  Tensor a = lt::random({5, 7}, DType::Int64, 11, -50, 50);
  Tensor b = lt::random({5, 7}, DType::Int64, 12, 1, 9);
  Tensor q = floor_divide(a, b) + remainder(a, -b) + fmod(a, b);
  std::vector<double> want;
  auto ha = lt::host(a), hb = lt::host(b);
  for (size_t i = 0; i < ha.size(); ++i) {
    double x = ha[i], y = hb[i];
    double fl = std::floor(x / y), rm = x - std::floor(x / -y) * -y;
    want.push_back(fl + rm + std::fmod(x, y));
  }
  lt::check_equal(q, want);
  CHECK(pending_checks() == 0);
  loom::sync();
  // float division by zero is IEEE (inf, NaN): nothing to check
  Tensor z = zeros({4});
  (void)floor_divide(ones({4}), z);
  (void)remainder(ones({4}), z);
  CHECK(pending_checks() == 0);
  // nothing is divided when the result is empty
  (void)floor_divide(zeros({0, 3}, DType::Int32), zeros({3}, DType::Int32));
  CHECK(pending_checks() == 0);
  loom::sync();
}

TEST_CASE("deferred checks: a zero integer scalar divisor raises at the call") {
  Tensor a = lt::make({1, 2}, {2}, DType::Int64);
  LT_CHECK_ERROR(floor_divide(a, 0), "floor_divide", "division by zero", "int64", "[2]");
  LT_CHECK_ERROR(remainder(a, 0), "remainder", "division by zero", "int64", "[2]");
  LT_CHECK_ERROR(fmod(a, 0), "fmod", "division by zero", "int64", "[2]");
  const double inf = std::numeric_limits<double>::infinity();
  lt::check_close(floor_divide(cast(a, DType::Float64), 0.0), std::vector<double>{inf, inf});
}

TEST_CASE("deferred checks: cross_entropy's target range, with no sync at the call") {
  Tensor logits = lt::random({4, 10}, DType::Float32, 21);
  for (bool fused : {true, false}) {
    set_fusion(fused);
    INFO("fusion " << fused);
    for (int64_t bad : {10, -3}) {
      Tensor t = lt::make({0, 2, double(bad), 1}, {4}, DType::Int64);
      Tensor loss = lt::recorded_without_flush([&] { return cross_entropy(logits, t); });
      check_raises([&] { (void)loss.item<float>(); }, ErrorKind::Index,
                   {"cross_entropy", "out of range [0, 10)", "[4, 10]", "int64 of shape [4]"});
      // the loss was computed; reading it again goes on
      CHECK(std::isfinite(loss.item<float>()));
    }
    // in range: no error, and the same loss as a float64 reference
    Tensor t = lt::make({0, 9, 3, 1}, {4}, DType::Int32);
    Tensor loss = cross_entropy(logits, t);
    auto hl = lt::host(logits);
    double ref = 0;
    std::vector<int> tv{0, 9, 3, 1};
    for (int r = 0; r < 4; ++r) {
      double m = -1e300, s = 0;
      for (int c = 0; c < 10; ++c) m = std::max(m, hl[size_t(r * 10 + c)]);
      for (int c = 0; c < 10; ++c) s += std::exp(hl[size_t(r * 10 + c)] - m);
      ref += m + std::log(s) - hl[size_t(r * 10 + tv[size_t(r)])];
    }
    CHECK(loss.item<double>() == doctest::Approx(ref / 4).epsilon(1e-5));
    CHECK(pending_checks() == 0);
  }
  set_fusion(true);
}

TEST_CASE("deferred checks: a flush for the trace's limits runs the check, a sync point raises") {
  loom::sync();
  Tensor ready = ones({1}) * 2;
  CHECK(ready.item<float>() == 2);
  TraceLimits saved = trace_limits();
  trace_limits().max_nodes = 8;
  Tensor loss = cross_entropy(zeros({2, 4}), lt::make({0, 5}, {2}, DType::Int64));  // 5 of 4
  Tensor x = ones({16});
  int64_t flushes = counters().flushes.load();
  for (int i = 0; i < 40; ++i) x = x + 1;  // limit flushes: they raise nothing
  trace_limits() = saved;
  CHECK(counters().flushes.load() > flushes);
  CHECK(pending_checks() == 1);
  // reading a tensor that was ready before is a sync point too
  check_raises([&] { (void)ready.item<float>(); }, ErrorKind::Index, {"cross_entropy", "[2, 4]"});
  CHECK(x.sum().item<float>() == 16 * 41);
  CHECK(loss.item<float>() == doctest::Approx(std::log(4.0)));
}

TEST_CASE("deferred checks: the same check recorded every step is one check until a sync point") {
  loom::sync();
  Tensor a = lt::make({7, 8, 9}, {3}, DType::Int64);
  Tensor bad = lt::make({2, 0, 4}, {3}, DType::Int64);
  Tensor good = lt::make({2, 3, 4}, {3}, DType::Int64);
  TraceLimits saved = trace_limits();
  trace_limits().max_nodes = 16;  // limit flushes in between: some flags are computed, some not
  Tensor acc = zeros({3}, DType::Int64);
  for (int step = 0; step < 300; ++step) acc = acc + floor_divide(a, step == 5 ? bad : good);
  trace_limits() = saved;
  CHECK(pending_checks() == 1);  // one kind of failure (the same op, dtypes and shapes)
  check_raises([] { loom::sync(); }, ErrorKind::Value, {"floor_divide", "division by zero"});
  lt::check_equal(acc, {299 * 3 + 3, 299 * 2 + 0, 299 * 2 + 2});
  // other shapes are another check
  (void)floor_divide(a, good);
  (void)floor_divide(zeros({2, 3}, DType::Int64), good);
  CHECK(pending_checks() == 2);
  loom::sync();
  CHECK(pending_checks() == 0);
}
