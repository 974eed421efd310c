// The plan cache: a flush with the same DAG structure as an earlier one reuses its groups with
// this flush's storages and scalar values. Every case checks values (float64 references or
// fusion off), since a plan reused where it does not fit would compute the wrong thing.
#include <cstdlib>
#include <functional>

#include "fusion/plan_cache.h"
#include "helpers.h"

using namespace loom;
using lt::check_close;
using lt::host;

namespace {

int64_t plan_hits() { return counters().plan_hits.load(); }

}  // namespace

TEST_CASE("plan cache: a loop with new values and new inputs hits and stays right") {
  REQUIRE(fusion_enabled());
  loom::sync();
  int64_t hits0 = -1;
  for (int i = 0; i < 12; ++i) {
    Tensor x = lt::random({7, 33}, DType::Float32, 300 + i, -1, 1);
    Tensor b = lt::random({33}, DType::Float32, 400 + i, -1, 1);
    loom::sync();
    double s = 0.25 + 0.1 * i;
    Tensor y = ((x * s + b).tanh() - s).sum({1});
    std::vector<double> xv = host(x), bv = host(b), want(7, 0.0);
    for (int r = 0; r < 7; ++r)
      for (int k = 0; k < 33; ++k) want[r] += std::tanh(xv[r * 33 + k] * s + bv[k]) - s;
    if (i == 1) hits0 = plan_hits();
    check_close(y, want);
  }
  // LOOM_PLAN_CACHE=0: the values alone are checked.
  if (knob_flag(Knob::PlanCache)) CHECK(plan_hits() - hits0 >= 10);  // 2..11 reuse 1's plan
}

TEST_CASE("plan cache: the same ops over the same or different memory are told apart") {
  Tensor x = lt::random({100}, DType::Float32, 11, -1, 1);
  Tensor z = lt::random({100}, DType::Float32, 12, -1, 1);
  std::vector<double> xv = host(x), zv = host(z);
  for (int i = 0; i < 4; ++i) {
    const Tensor& y = i % 2 ? z : x;  // x * y: one input read twice, or two inputs
    const std::vector<double>& yv = i % 2 ? zv : xv;
    Tensor r = x * y + 0.5;
    std::vector<double> want(100);
    for (int k = 0; k < 100; ++k) want[k] = xv[k] * yv[k] + 0.5;
    check_close(r, want);
  }
  // A transposed view of x against x itself: same storage, other strides.
  Tensor X = x.reshape({10, 10});
  for (int i = 0; i < 3; ++i) {
    Tensor r = X + (i == 1 ? X.t() : X);
    std::vector<double> want(100);
    for (int a = 0; a < 10; ++a)
      for (int b = 0; b < 10; ++b)
        want[a * 10 + b] = xv[a * 10 + b] + (i == 1 ? xv[b * 10 + a] : xv[a * 10 + b]);
    check_close(r, want);
  }
}

// Inputs that are dense in the node's shape, or one value broadcast to it, take no key words
// (the node's shape determines their view): every other view of the same shape must still get
// its own plan. Alternating the forms over the same memory makes a wrong hit read wrong values.
TEST_CASE("plan cache: dense, broadcast, offset and strided views of one shape are told apart") {
  Tensor x = lt::random({48}, DType::Float32, 41, -1, 1);
  std::vector<double> xv = host(x);
  Tensor m = x.narrow(0, 0, 40).reshape({8, 5});  // dense, offset 0
  Tensor row = x.narrow(0, 40, 5);                // a row broadcast over 8 rows
  Tensor one = x.narrow(0, 47, 1);                // one value broadcast to every element
  for (int i = 0; i < 12; ++i) {
    int form = i % 6;
    Tensor v;
    std::function<double(int, int)> at;
    switch (form) {
      case 0:
        v = m, at = [&](int r, int c) { return xv[r * 5 + c]; };
        break;
      case 1:
        v = row.expand({8, 5}), at = [&](int, int c) { return xv[40 + c]; };
        break;
      case 2:
        v = one.expand({8, 5}), at = [&](int, int) { return xv[47]; };
        break;
      case 3:  // offset 1, dense strides
        v = x.narrow(0, 1, 40).reshape({8, 5}),
        at = [&](int r, int c) { return xv[1 + r * 5 + c]; };
        break;
      case 4:  // transposed: same shape via a 5x8 block
        v = x.narrow(0, 0, 40).reshape({5, 8}).t(),
        at = [&](int r, int c) { return xv[c * 8 + r]; };
        break;
      default:  // a column broadcast over 5 columns
        v = x.narrow(0, 0, 8).unsqueeze(1).expand({8, 5}), at = [&](int r, int) { return xv[r]; };
    }
    double s = 0.5 + 0.125 * i;
    Tensor r = (m * s + v).tanh();
    std::vector<double> want(40);
    for (int a = 0; a < 8; ++a)
      for (int b = 0; b < 5; ++b) want[a * 5 + b] = std::tanh(xv[a * 5 + b] * s + at(a, b));
    check_close(r, want);
  }
}

TEST_CASE("plan cache: sizes, live intermediates and random ops") {
  for (int n : {50, 51, 50}) {  // sizes are part of the key
    Tensor x = lt::random({n}, DType::Float32, 20 + n, -1, 1);
    std::vector<double> xv = host(x), want(n);
    for (int k = 0; k < n; ++k) want[k] = std::exp(xv[k] * 2);
    check_close((x * 2).exp(), want);
  }
  Tensor x = lt::random({64}, DType::Float32, 21, -1, 1);
  std::vector<double> xv = host(x);
  for (int i = 0; i < 4; ++i) {
    // Odd iterations keep the intermediate alive: one more output, another plan.
    Tensor t = x * 3.0;
    Tensor r = t.sin() + 1.0;
    if (i % 2) {
      std::vector<double> wt(64);
      for (int k = 0; k < 64; ++k) wt[k] = xv[k] * 3;
      check_close(t, wt);
    } else {
      t = Tensor();
    }
    std::vector<double> want(64);
    for (int k = 0; k < 64; ++k) want[k] = std::sin(xv[k] * 3) + 1;
    check_close(r, want);
  }
  // Random ops: a reused plan takes this flush's seed; fused equals fusion off per seed.
  std::vector<double> first;
  for (int i = 0; i < 3; ++i) {
    auto f = [&] {
      manual_seed(uint64_t(90 + i));
      return randn({300}) * 0.5 + x.sum();
    };
    auto v = lt::check_fused_matches_unfused(f);
    if (i == 0) first = v;
    if (i > 0) CHECK(v != first);
  }
}

TEST_CASE("plan cache: in-place updates and region writes are planned every time") {
  Tensor p = lt::random({40}, DType::Float32, 31, -1, 1);
  std::vector<double> pv = host(p);
  for (int i = 0; i < 3; ++i) {
    p.mul_(0.5).add_(1.0);
    for (auto& v : pv) v = v * 0.5 + 1;
    Tensor q = p.narrow(0, 5, 10);
    q.add_(2.0);
    for (int k = 5; k < 15; ++k) pv[k] += 2;
    check_close(p, pv);
  }
}

// A hit lends the cached groups to the flush with its storages put in: when the flush ends
// they are taken out again, so the cache keeps no intermediate or result alive (their memory
// goes back as soon as the tensors go), and the next hit sees its own storages.
TEST_CASE("plan cache: a hit keeps no memory of the flush alive") {
  REQUIRE(fusion_enabled());
  loom::sync();
  Tensor x = lt::random({3000}, DType::Float32, 21, -1, 1);
  std::vector<double> xv = host(x);
  int64_t live0 = counters().bytes_live.load();
  int64_t hits0 = plan_hits();
  for (int i = 0; i < 4; ++i) {
    {
      // Two kernels (the chain passes the ops-a-kernel limit): an intermediate and a result.
      Tensor y = x;
      for (int k = 0; k < 120; ++k) y = (k % 2) ? y * 1.001 : y + 0.002 * (i + 1);
      std::vector<double> want(xv);
      for (int k = 0; k < 120; ++k)
        for (double& v : want) v = (k % 2) ? v * 1.001 : v + 0.002 * (i + 1);
      check_close(y, want, lt::Tol{1e-4, 1e-5});  // 120 f32 roundings
    }
    CHECK(counters().bytes_live.load() == live0);
  }
  if (knob_flag(Knob::PlanCache)) CHECK(plan_hits() - hits0 >= 3);
}

// A training step's flush (matmuls with epilogues, in-place AdamW updates whose old versions
// the planner hands over, saved tensors, cross entropy): from its third step (Adam's state
// exists from the second) it reuses the plan, and updates exactly as the same steps planned
// afresh every flush.
TEST_CASE("plan cache: a training step hits and updates exactly as when planned afresh") {
  REQUIRE(fusion_enabled());
  Tensor x = lt::random({32, 8}, DType::Float32, 31, -1, 1);
  Tensor y = lt::random({32}, DType::Int64, 32, 0, 3);
  auto train = [&](bool afresh, int64_t& hits) {
    Tensor w1 = lt::random({16, 8}, DType::Float32, 33, -0.5, 0.5).requires_grad_();
    Tensor b1 = lt::random({16}, DType::Float32, 34, -0.5, 0.5).requires_grad_();
    Tensor w2 = lt::random({4, 16}, DType::Float32, 35, -0.5, 0.5).requires_grad_();
    optim::AdamOptions o = optim::adamw_defaults();
    o.lr = 0.05;
    optim::AdamW opt({w1, b1, w2}, o);
    loom::sync();
    std::vector<double> losses;
    hits = 0;
    for (int step = 0; step < 6; ++step) {
      Tensor h = gelu(x.matmul(w1.t()) + b1, "none");
      Tensor loss = cross_entropy(h.matmul(w2.t()), y);
      opt.zero_grad();
      loss.backward();
      opt.step();
      if (afresh) clear_plan_cache();
      int64_t h0 = counters().plan_hits.load();
      losses.push_back(loss.item<float>());
      hits += counters().plan_hits.load() - h0;
    }
    std::vector<double> all = losses;
    for (const Tensor& p : {w1, b1, w2})
      for (double v : host(p)) all.push_back(v);
    return all;
  };
  int64_t hits_cached = 0, hits_afresh = 0;
  std::vector<double> cached = train(false, hits_cached), afresh = train(true, hits_afresh);
  CHECK(hits_afresh == 0);
  if (knob_flag(Knob::PlanCache)) CHECK(hits_cached >= 4);
  REQUIRE(cached.size() == afresh.size());
  for (size_t i = 0; i < cached.size(); ++i) REQUIRE_MESSAGE(cached[i] == afresh[i], "at " << i);
  CHECK(cached[5] < cached[0]);  // it trains
}
