// In-place ops in eager order, through aliasing views; an in-place Adam step fused vs fusion off
// vs float64, and its peak memory.
#include "helpers.h"

using namespace loom;
using lt::check_close;
using lt::check_equal;
using lt::host;
using Vec = std::vector<double>;

TEST_CASE("inplace: arithmetic with tensors, scalars, alpha and broadcasting") {
  Tensor x = lt::random({4, 5}, DType::Float64, 101);
  Tensor o = lt::random({5}, DType::Float64, 102, 0.5, 2);
  auto vx = host(x), vo = lt::broadcast(host(o), {5}, {4, 5});
  auto expect = [&](auto f) {
    Vec r(vx.size());
    for (size_t i = 0; i < r.size(); ++i) r[i] = f(vx[i], vo[i]);
    return r;
  };
  Tensor a = x.clone();
  Tensor& ra = a.add_(o);
  CHECK(&ra == &a);
  check_close(a, expect([](double p, double q) { return p + q; }));
  a = x.clone();
  a.add_(o, 2.5);
  check_close(a, expect([](double p, double q) { return p + 2.5 * q; }));
  a = x.clone();
  a.sub_(o, 3);
  check_close(a, expect([](double p, double q) { return p - 3 * q; }));
  a = x.clone();
  a.mul_(o).div_(o.unsqueeze(0));
  check_close(a, vx);
  a = x.clone();
  a.add_(1.5).sub_(0.25).mul_(2).div_(4);
  check_close(a, lt::ref_unary(vx, [](double p) { return (p + 1.25) * 2 / 4; }));
  a = x.clone();
  a.clamp_(-0.5, 0.5);
  check_close(a, lt::ref_unary(vx, [](double p) { return std::clamp(p, -0.5, 0.5); }));
  a = x.clone();
  a.clamp_(std::nullopt, 0.0);
  check_close(a, lt::ref_unary(vx, [](double p) { return std::min(p, 0.0); }));
  a = x.clone();
  a.addcmul_(o, o, 0.5).addcdiv_(o, o.expand({4, 5}), 2).lerp_(zeros({4, 5}, DType::Float64), 0.25);
  check_close(a, expect([](double p, double q) { return (p + 0.5 * q * q + 2) * 0.75; }));
  // integer tensors stay integer
  Tensor i = lt::make({1, 2, 3}, {3}, DType::Int32);
  i.mul_(3).add_(1);
  CHECK(i.dtype() == DType::Int32);
  check_equal(i, {4, 7, 10});
}

TEST_CASE("inplace: copy_ fill_ zero_ convert and broadcast") {
  Tensor x = zeros({2, 3}, DType::Float64);
  x.copy_(lt::make({1, 2, 3}, {3}, DType::Int32));  // broadcast + convert
  check_equal(x, {1, 2, 3, 1, 2, 3});
  Tensor i = zeros({3}, DType::Int64);
  i.copy_(lt::make({1.7, -2.7, 3.2}, {3}, DType::Float64));  // copy_ truncates like torch
  check_equal(i, {1, -2, 3});
  x.fill_(2.5);
  check_equal(x, {2.5, 2.5, 2.5, 2.5, 2.5, 2.5});
  x.t().select(0, 1).zero_();  // column 1
  check_equal(x, {2.5, 0, 2.5, 2.5, 0, 2.5});
  x.zero_();
  check_equal(x, {0, 0, 0, 0, 0, 0});
  // copy_ from an overlapping view of itself reads the old values
  Tensor y = lt::make({1, 2, 3, 4}, {4}, DType::Float64);
  y.slice(0, 1, 4).copy_(y.slice(0, 0, 3));
  check_equal(y, {1, 1, 2, 3});
  Tensor z = lt::make({1, 2, 3, 4}, {2, 2}, DType::Float64);
  z.copy_(z.t());
  check_equal(z, {1, 3, 2, 4});
}

TEST_CASE("inplace: index_put (slice assignment)") {
  Tensor x = zeros({4, 5}, DType::Float64);
  x.index_put({Slice::range(1, 3), Slice::range(std::nullopt, std::nullopt, 2)}, 7.0);
  check_equal(x, {0, 0, 0, 0, 0, 7, 0, 7, 0, 7, 7, 0, 7, 0, 7, 0, 0, 0, 0, 0});
  x.index_put({Slice::at(-1)}, lt::make({1, 2, 3, 4, 5}, {5}, DType::Float64));
  x.index_put({Slice::ellipsis(), Slice::at(0)}, lt::make({9}, {1}, DType::Float64));
  check_equal(x, {9, 0, 0, 0, 0, 9, 0, 7, 0, 7, 9, 0, 7, 0, 7, 9, 2, 3, 4, 5});
  // a value computed from the target itself (read before write)
  x.index_put({Slice::all(), Slice::range(1, 3)},
              x.index({Slice::all(), Slice::range(3, 5)}) * 10.0);
  check_equal(x, {9, 0, 0, 0, 0, 9, 0, 70, 0, 7, 9, 0, 70, 0, 7, 9, 40, 50, 4, 5});
}

TEST_CASE("inplace: eager order with aliasing views") {
  SUBCASE("a reader recorded before the update sees the old values") {
    Tensor x = lt::make({1, 2, 3, 4, 5, 6}, {2, 3}, DType::Float64);
    Tensor y = x[0];
    Tensor z = x * 2.0;
    y.mul_(3);
    check_equal(z, {2, 4, 6, 8, 10, 12});
    check_equal(x, {3, 6, 9, 4, 5, 6});
    check_equal(y, {3, 6, 9});
    Tensor w = x * 2.0;  // recorded after: sees the new values
    check_equal(w, {6, 12, 18, 8, 10, 12});
  }
  SUBCASE("interleaved updates through several views before one flush") {
    Tensor x = zeros({3, 3}, DType::Float64);
    Tensor r = x[1], c = x.select(1, 1), d = x.t();
    r.add_(1.0);
    Tensor s1 = x.sum();
    c.add_(10.0);
    Tensor snap = x.clone();
    d.mul_(2.0);
    Tensor s2 = x.sum();
    x.index_put({Slice::at(0), Slice::at(0)}, -5.0);
    CHECK(s1.item<double>() == 3);
    check_equal(snap, {0, 10, 0, 1, 11, 1, 0, 10, 0});
    CHECK(s2.item<double>() == 66);
    check_equal(x, {-5, 20, 0, 2, 22, 2, 0, 20, 0});
    check_equal(d, {-5, 2, 0, 20, 22, 20, 0, 2, 0});
  }
  SUBCASE("same results with fusion off") {
    auto program = [] {
      Tensor x = lt::random({6, 8}, DType::Float32, 103);
      Tensor v = x.slice(1, 2, 6);
      Tensor a = x.exp();
      v.mul_(-1);
      Tensor b = x + a;
      x.t()[3].add_(100);
      x[0].copy_(x[5]);
      return cat({a, b, x});
    };
    lt::check_fused_matches_unfused(program);
  }
}

namespace {

struct AdamState {
  Tensor p, m, v;
};

// One in-place Adam step (torch.optim.Adam, no weight decay).
void adam_step(AdamState& s, const Tensor& g, int t, double lr = 1e-2, double b1 = 0.9,
               double b2 = 0.999, double eps = 1e-8) {
  s.m.mul_(b1).add_(g * (1 - b1));
  s.v.mul_(b2).addcmul_(g, g, 1 - b2);
  double bc1 = 1 - std::pow(b1, t), bc2 = 1 - std::pow(b2, t);
  Tensor denom = s.v.sqrt() / std::sqrt(bc2) + eps;
  s.p.addcdiv_(s.m, denom, -lr / bc1);
}

void adam_ref(Vec& p, Vec& m, Vec& v, const Vec& g, int t, double lr = 1e-2, double b1 = 0.9,
              double b2 = 0.999, double eps = 1e-8) {
  double bc1 = 1 - std::pow(b1, t), bc2 = 1 - std::pow(b2, t);
  for (size_t i = 0; i < p.size(); ++i) {
    m[i] = b1 * m[i] + (1 - b1) * g[i];
    v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
    p[i] -= lr / bc1 * m[i] / (std::sqrt(v[i]) / std::sqrt(bc2) + eps);
  }
}

// Runs `steps` Adam steps on float32 state; returns the final parameters and the peak bytes
// above what was live before the loop.
std::pair<Vec, int64_t> run_adam(int64_t n, int steps) {
  loom::sync();
  AdamState s{lt::random({n}, DType::Float32, 104), zeros({n}), zeros({n})};
  std::vector<Tensor> grads;
  for (int t = 0; t < steps; ++t) grads.push_back(lt::random({n}, DType::Float32, 200 + t));
  loom::sync();
  reset_counters();
  int64_t live0 = counters().bytes_live.load();
  for (int t = 1; t <= steps; ++t) {
    adam_step(s, grads[size_t(t - 1)], t);
    loom::sync();
  }
  int64_t peak = counters().bytes_peak.load() - live0;
  return {host(s.p), peak};
}

}  // namespace

TEST_CASE("inplace: Adam step fused vs fusion off vs float64") {
  const int64_t n = 1000;
  const int steps = 5;
  AdamState s{lt::random({n}, DType::Float32, 104), zeros({n}), zeros({n})};
  Vec p = host(s.p), m(size_t(n), 0), v(size_t(n), 0);
  for (int t = 1; t <= steps; ++t) {
    Tensor g = lt::random({n}, DType::Float32, 200 + t);
    adam_ref(p, m, v, host(g), t);
    adam_step(s, g, t);
  }
  check_close(s.p, p, lt::Tol{1e-5, 1e-6});
  check_close(s.m, m, lt::Tol{1e-5, 1e-6});
  check_close(s.v, v, lt::Tol{1e-5, 1e-7});

  auto fused = run_adam(n, steps).first;
  Vec off;
  {
    lt::FusionOff guard;
    off = run_adam(n, steps).first;
  }
  REQUIRE(fused.size() == off.size());
  for (size_t i = 0; i < fused.size(); ++i)
    CHECK(fused[i] == doctest::Approx(off[i]).epsilon(1e-6));
}

TEST_CASE("inplace: peak memory of the fused Adam loop is at most fusion off's") {
  const int64_t n = int64_t(1) << 20;  // 4 MB a tensor
  int64_t fused = run_adam(n, 3).second;
  int64_t off;
  {
    lt::FusionOff guard;
    off = run_adam(n, 3).second;
  }
  INFO("fused peak " << fused << " bytes, fusion off peak " << off << " bytes");
  CHECK(fused <= off);
  // p, m and v are updated in place, chained updates (m.mul_(b1).add_(..)) included: the one
  // fused kernel needs no full-size buffer of its own.
  CHECK(fused < 4 * n);
}

TEST_CASE("inplace: chained updates of one tensor write in place and keep eager order") {
  const int64_t n = 1 << 16;
  Tensor m = lt::random({n}, DType::Float32, 105);
  auto v = host(m);
  loom::sync();
  reset_counters();
  int64_t live0 = counters().bytes_live.load();
  m.mul_(2);
  Tensor mid = m + 0.0;  // reads the version in between
  m.add_(1).sub_(0.5);
  loom::sync();
  // m's versions share its memory: only `mid` is new
  CHECK(counters().bytes_peak.load() - live0 <= 4 * n);
  check_close(mid, lt::ref_unary(v, [](double x) { return 2 * x; }));
  check_close(m, lt::ref_unary(v, [](double x) { return 2 * x + 0.5; }));
  Tensor before = m * 1.0;  // reads the version before the updates
  m.mul_(-1).add_(before);
  check_close(before, lt::ref_unary(v, [](double x) { return 2 * x + 0.5; }));
  check_close(m, std::vector<double>(v.size(), 0.0));
  lt::check_fused_matches_unfused([] {
    Tensor a = lt::random({300}, DType::Float32, 106);
    Tensor r = a * 3.0;
    a.mul_(0.5).add_(r).div_(2);
    Tensor s = a.sum();
    a.sub_(s).clamp_(-1, 1);
    return cat({a, r, s.reshape({1})});
  });
}
