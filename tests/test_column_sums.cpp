// Column sums inside a row kernel (GOutput::colsum, BackendCaps::column_sums): a Sum over the
// rows of a value a row kernel computes (a norm's dgamma) or loads (its dbeta, the sum of dy)
// runs in that kernel. Against fusion off and float64 at every tiling the CPU runs (blocks of
// whole rows, rows walked in chunks, few long rows split into segments, transposed rows, no
// rows), and in an order that depends on the shape alone (the same bits with one thread).
#include <tbb/task_arena.h>

#include "helpers.h"

using namespace loom;
using lt::host;

namespace {

// A norm's backward over the last dim: dx from row statistics, and the sums over the rows
// (`lead`, every dim but the last) of dy * xhat (computed in the row kernel) and of dy (memory).
std::vector<Tensor> norm_backward(const Tensor& x, const Tensor& dy, const Dims& lead, bool keep) {
  const int last = x.dim() - 1;
  const double n = double(x.shape()[size_t(last)]);
  Tensor xc = x - sum(x, {last}, true) * (1.0 / n);
  Tensor r = rsqrt(sum(xc * xc, {last}, true) * (1.0 / n) + 1e-5);
  Tensor xh = xc * r;
  Tensor dx = (dy - sum(dy * xh, {last}, true) * (1.0 / n) * xh) * r;
  return {dx, sum(dy * xh, lead, keep), sum(dy, lead, keep)};
}

struct Run {
  std::vector<std::vector<double>> v;
  int64_t kernels = 0;
  std::string plan;
};

Run run(const Tensor& x, const Tensor& dy, const Dims& lead, bool keep) {
  loom::sync();
  reset_counters();
  std::vector<Tensor> out = norm_backward(x, dy, lead, keep);
  Run r;
  r.plan = explain(out[1]);
  loom::sync();
  for (auto& t : out) r.v.push_back(host(t));
  r.kernels = counters().kernels.load();
  return r;
}

bool has_sums() { return backend(Device{DeviceKind::CPU, 0}).caps().column_sums; }

}  // namespace

TEST_CASE("column sums: a norm's dgamma and dbeta inside dx's row kernel, at every tiling") {
  struct Case {
    Shape s;
    bool transposed = false;
  };
  // blocks of whole rows; one block; rows walked in chunks (cols * tile bytes > 1 MiB);
  // few long rows (segments); rows of a transposed view; no rows; no columns
  const Case cases[] = {{{256, 1000}},    {{3, 1000}}, {{10, 70000}}, {{2, 70000}},
                        {{96, 40}, true}, {{0, 100}},  {{5, 0}}};
  for (DType t : {DType::Float32, DType::Float64}) {
    for (const Case& c : cases) {
      CAPTURE(std::string(dtype_name(t)));
      CAPTURE(shape_str(c.s));
      Tensor x = c.transposed ? lt::random({c.s[1], c.s[0]}, t, 11).t() : lt::random(c.s, t, 11);
      Tensor dy = lt::random(c.s, t, 12);
      Run fused = run(x, dy, {0}, false);
      Run off;
      {
        lt::FusionOff o;
        off = run(x, dy, {0}, false);
      }
      Run ref64 = run(x.to(DType::Float64), dy.to(DType::Float64), {0}, false);
      if (has_sums() && c.s[0] != 1 && numel(c.s) > 0)
        CHECK(fused.kernels == 1);  // dx, dgamma and dbeta: one kernel
      if (has_sums() && numel(c.s) > 0) CHECK(fused.plan.find("column sum") != std::string::npos);
      const double f32 = t == DType::Float32;
      for (size_t k = 0; k < 3; ++k) {
        CAPTURE(k);
        REQUIRE(fused.v[k].size() == off.v[k].size());
        int bad = 0;
        for (size_t i = 0; i < fused.v[k].size(); ++i) {
          const double want = ref64.v[k][i];
          // a sum of R products of values near 1: float32 rounding of each, and of the sums
          const double tol = (f32 ? 2e-5 : 1e-12) * (std::fabs(want) + double(c.s[0]) + 1);
          bad += std::fabs(fused.v[k][i] - want) > tol || std::fabs(off.v[k][i] - want) > tol;
        }
        CHECK(bad == 0);
      }
      if (c.s[1] > 0 && c.s[0] == 0)  // a sum over no rows is zero
        for (size_t k = 1; k < 3; ++k)
          for (double v : fused.v[k]) CHECK(v == 0);
    }
  }
}

TEST_CASE("column sums: over several leading dims, keepdim, and the same bits on one thread") {
  for (bool keep : {false, true}) {
    CAPTURE(keep);
    Tensor x = lt::random({4, 33, 257}, DType::Float32, 21);
    Tensor dy = lt::random({4, 33, 257}, DType::Float32, 22);
    Run fused = run(x, dy, {0, 1}, keep);
    Run ref64 = run(x.to(DType::Float64), dy.to(DType::Float64), {0, 1}, keep);
    if (has_sums()) CHECK(fused.kernels == 1);
    for (size_t k = 1; k < 3; ++k)
      for (size_t i = 0; i < fused.v[k].size(); ++i)
        CHECK(std::fabs(fused.v[k][i] - ref64.v[k][i]) <= 2e-5 * (std::fabs(ref64.v[k][i]) + 133));
    // The partial sums cover fixed blocks of rows, added in order: no thread count changes them.
    tbb::task_arena one(1);
    Run alone;
    one.execute([&] { alone = run(x, dy, {0, 1}, keep); });
    for (size_t k = 0; k < 3; ++k) CHECK(alone.v[k] == fused.v[k]);
  }
}

TEST_CASE("column sums: a row value summed over every row inside its row kernel") {
  // A loss's mean of its per-row terms: logsumexp(x) - x[:, 0], each row's term divided first.
  // (no columns: each row's term a sum over none, 0)
  for (Shape s : {Shape{256, 1000}, Shape{10, 70000}, Shape{2, 70000}, Shape{0, 100}, Shape{1, 9},
                  Shape{4, 0}})
    for (DType t : {DType::Float32, DType::Float64}) {
      CAPTURE(shape_str(s));
      CAPTURE(std::string(dtype_name(t)));
      Tensor x = lt::random(s, t, 31);
      auto loss = [&](const Tensor& v) {
        Tensor per = s[1] ? logsumexp(v, {1}) - v.select(1, 0) : sum(v, {1}) * 2.0;
        return sum(per / double(std::max<int64_t>(s[0], 1)));
      };
      loom::sync();
      reset_counters();
      Tensor y = loss(x);
      const std::string plan = explain(y);
      const double got = y.item<double>();
      const int64_t kernels = counters().kernels.load();
      const double want = loss(x.to(DType::Float64)).item<double>();
      CHECK(std::fabs(got - want) <= (t == DType::Float32 ? 1e-5 : 1e-12) * (std::fabs(want) + 1));
      if (s[0] == 0 || s[1] == 0) CHECK(got == 0);
      if (has_sums() && s[0] != 1 && s[1] > 0) {
        CHECK(kernels == 1);
        CHECK(plan.find("column sum") != std::string::npos);
      }
    }
}

TEST_CASE("column sums: a cast of the sum is its stored dtype, rounded as the stored sum's cast") {
  // A column of 1, 2^-8 and 2^-30: its sum is 1 + 2^-8 in float32 (2^-30 is below its half ulp)
  // and the cast of that to bfloat16 a tie, to even: 1. The double partials hold the exact
  // 1 + 2^-8 + 2^-30, whose direct bfloat16 rounding is 1 + 2^-7: the float32 rounding first
  // is what makes the stored cast the eager one.
  const int64_t C = 8;
  std::vector<double> v;
  for (double r : {1.0, std::ldexp(1.0, -8), std::ldexp(1.0, -30)})
    for (int64_t c = 0; c < C; ++c) v.push_back(r);
  Tensor x = lt::make(v, {3, C});
  loom::sync();
  reset_counters();
  Tensor y = x + amax(x, {1}, true) * 0.0;  // a value of a row group
  Tensor s = sum(y, {0}).to(DType::BFloat16);
  const std::string plan = explain(s);
  const std::vector<double> got = host(s);
  const int64_t kernels = counters().kernels.load();
  for (double g : got) CHECK(g == 1.0);
  if (has_sums()) {
    CHECK(kernels == 1);
    CHECK(plan.find("as bfloat16") != std::string::npos);
  }
  // On random rows, with the float32 sum stored beside it: the stored cast is that sum's cast
  // bit for bit, for bfloat16 and float16 and every CPU tiling.
  for (Shape sh : {Shape{256, 1000}, Shape{10, 70000}, Shape{2, 70000}})
    for (DType t : {DType::BFloat16, DType::Float16}) {
      CAPTURE(shape_str(sh));
      CAPTURE(std::string(dtype_name(t)));
      Tensor a = lt::random(sh, DType::Float32, 41), dy = lt::random(sh, DType::Float32, 42);
      loom::sync();
      std::vector<Tensor> out = norm_backward(a, dy, {0}, false);
      Tensor dw = out[1].to(t), db = out[2].to(t);
      const std::vector<double> w32 = host(out[1]), b32 = host(out[2]);
      lt::check_equal(dw, host(lt::make(w32, out[1].shape()).to(t)));
      lt::check_equal(db, host(lt::make(b32, out[2].shape()).to(t)));
    }
}
