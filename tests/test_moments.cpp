// Moments of rows: mean, var, std and layer_norm. A row whose elements are all equal has its
// value as mean and variance 0 exactly, for every float dtype, fused and with fusion off, short
// rows and rows longer than a tile; other rows match float64 references; each op stays one kernel.
#include <cstdio>
#include <numeric>
#include <random>

#include "helpers.h"

using namespace loom;
using lt::host;
using Vec = std::vector<double>;

namespace {

const DType kFloats[] = {DType::Float16, DType::BFloat16, DType::Float32, DType::Float64};

// Row lengths: 1, tiny, odd, a tile, beyond a tile, beyond the CPU's whole-row limit, and a few
// random ones.
std::vector<int64_t> row_lengths() {
  std::vector<int64_t> n = {1, 2, 3, 7, 100, 1000, 1024, 4097, 32768};
  std::mt19937 g(4242);
  std::uniform_int_distribution<int64_t> d(5, 6000);
  for (int i = 0; i < 4; ++i) n.push_back(d(g));
  return n;
}

// Constants of every sign and magnitude the dtype holds, many with full mantissas (0.1, 1/3,
// random draws), up to near the largest: float32's sums overflow float32 (not float64);
// bfloat16's stop at 1e33, as its rows of up to 65535 sum in float32 (ops/reduce.cpp).
Vec constants(DType dt, uint32_t seed) {
  Vec c = {0.1, -3.7, 1.0 / 3, -2.0 / 7, 1.0, 0.0, 1234.5678};
  std::mt19937 g(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  double big = dt == DType::Float16    ? 6e4
               : dt == DType::Float64  ? 1e300
               : dt == DType::BFloat16 ? 1e33
                                       : 3e38;
  double small = dt == DType::Float16 ? 1e-4 : dt == DType::Float64 ? 1e-300 : 1e-30;
  for (int i = 0; i < 4; ++i) c.push_back(u(g) * 100);
  c.push_back(big * u(g));
  c.push_back(small * u(g));
  c.push_back(-big);
  c.push_back(small);
  return c;
}

// One row a constant: [c.size(), n], on `dev`.
Tensor constant_rows(const Vec& c, int64_t n, DType dt, Device dev = kCPU) {
  Vec v;
  for (double x : c) v.insert(v.end(), size_t(n), x);
  return lt::make(v, {int64_t(c.size()), n}, dt).to(dev);
}

std::string g17(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.17g", v);
  return b;
}

// Every element of t is exactly 0 (either sign).
void check_zero(const Tensor& t, const char* what) {
  Vec v = host(t);
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i] != 0 && bad++ == 0) first = i;
  CHECK_MESSAGE(bad == 0, what << ": " << bad << " of " << v.size() << " elements not 0; first at "
                               << first << ": " << g17(v[first]));
}

void check_constant_rows(const Tensor& x, int64_t n) {
  Vec xs = host(x);
  Vec m = host(mean(x, {1}));
  for (size_t r = 0; r < m.size(); ++r)
    CHECK_MESSAGE(m[r] == xs[r * size_t(n)],
                  "mean of row " << r << ": " << g17(m[r]) << " vs " << g17(xs[r * size_t(n)]));
  check_zero(layer_norm(x, {n}), "layer_norm");
  check_zero(var(x, {1}, 0), "var");
  check_zero(loom::std(x, {1}, 0), "std");
  if (n > 1) check_zero(var(x, {1}, 1, true), "var (correction 1)");
  // layer_norm and var over two trailing dims: the same rows as [rows, 1, n]
  if (n > 1) {
    Tensor x3 = x.reshape({x.shape()[0], 1, n});
    check_zero(layer_norm(x3, {1, n}), "layer_norm over 2 dims");
    check_zero(var(x3, {1, 2}, 0), "var over 2 dims");
  }
}

double r_mean(const Vec& v) { return std::accumulate(v.begin(), v.end(), 0.0) / double(v.size()); }
double r_var(const Vec& v) {
  double m = r_mean(v), s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return s / double(v.size());
}
Vec r_layer_norm(const Vec& v, int64_t n) {
  Vec out(v.size());
  for (size_t r = 0; r < v.size() / size_t(n); ++r) {
    Vec row(v.begin() + r * n, v.begin() + (r + 1) * n);
    double m = r_mean(row), s = std::sqrt(r_var(row) + 1e-5);
    for (int64_t i = 0; i < n; ++i) out[r * n + i] = (row[i] - m) / s;
  }
  return out;
}

void check_constants(Device dev) {
  for (DType dt : kFloats) {
    uint32_t seed = 1;
    for (int64_t n : row_lengths()) {
      INFO(std::string(dtype_name(dt)) << ", rows of " << n);
      Tensor x = constant_rows(constants(dt, seed++), n, dt, dev);
      check_constant_rows(x, n);
      lt::FusionOff off;
      check_constant_rows(x, n);
    }
  }
}

void check_produced_constants(Device dev) {
  for (DType dt : kFloats) {
    INFO(std::string(dtype_name(dt)));
    Vec c = constants(dt, 99);
    // [n, rows] transposed: each row strided in memory
    Tensor xt = constant_rows(c, 1000, dt, dev).t().contiguous().t();
    CHECK_FALSE(xt.is_contiguous());
    check_constant_rows(xt, 1000);
    // a pointwise producer fused into the moments' kernel; 4 rows of 40000: each row split
    // into segments summed in parallel
    for (int64_t n : {1000, 40000}) {
      Tensor p = (constant_rows(Vec(c.begin(), c.begin() + 4), n, dt, dev) * 3.0).abs();
      check_constant_rows(p, n);
    }
  }
}

void check_random_rows(Device dev) {
  for (DType dt : kFloats) {
    for (int64_t n : row_lengths()) {
      if (n == 1) continue;
      INFO(std::string(dtype_name(dt)) << ", rows of " << n);
      // an offset mean, so that a careless variance cancels
      Tensor x = lt::random({3, n}, dt, uint32_t(n), 5, 9).to(dev);
      Vec v = host(x);
      Vec means, vars;
      for (int r = 0; r < 3; ++r) {
        Vec row(v.begin() + r * n, v.begin() + (r + 1) * n);
        means.push_back(r_mean(row));
        vars.push_back(r_var(row));
      }
      Vec stds;
      for (double s : vars) stds.push_back(std::sqrt(s));
      auto check = [&] {
        lt::check_close(mean(x, {1}), means);
        lt::check_close(var(x, {1}, 0), vars);
        lt::check_close(loom::std(x, {1}, 0), stds);
        lt::check_close(layer_norm(x, {n}), r_layer_norm(v, n));
      };
      check();
      lt::FusionOff off;
      check();
    }
  }
}

}  // namespace

TEST_CASE("moments: a constant row has mean c and variance 0 exactly, fused and fusion off") {
  check_constants(kCPU);
}

TEST_CASE("moments: constant rows through a strided view, a pointwise producer, few long rows") {
  check_produced_constants(kCPU);
}

TEST_CASE("moments: other rows match float64") { check_random_rows(kCPU); }

TEST_CASE("gpu: moments of constant rows are exact and other rows match float64") {
  if (!backend_available(DeviceKind::CUDA)) {
    MESSAGE("CUDA unavailable, skipping the GPU moments");
    return;
  }
  Device gpu{DeviceKind::CUDA, 0};
  check_constants(gpu);
  check_produced_constants(gpu);
  check_random_rows(gpu);
}

TEST_CASE("moments: layer_norm, var and mean stay one kernel for every float dtype") {
  struct Case {
    const char* what;
    std::function<Tensor(const Tensor& x, const Tensor& w, const Tensor& b)> f;
    bool narrow;  // also for float16 and bfloat16 (their weight's casts are kernels of their own)
  };
  const Case cases[] = {
      {"layer_norm", [](auto& x, auto& w, auto& b) { return layer_norm(x, {1000}, w, b); }, false},
      {"layer_norm, no weight or bias", [](auto& x, auto&, auto&) { return layer_norm(x, {1000}); },
       true},
      {"layer_norm of a pointwise producer",
       [](auto& x, auto&, auto&) { return layer_norm(x * 2.0 + 1.0, {1000}); }, true},
      {"var", [](auto& x, auto&, auto&) { return var(x, {1}); }, true},
      {"std", [](auto& x, auto&, auto&) { return loom::std(x, {1}); }, true},
      {"mean", [](auto& x, auto&, auto&) { return mean(x, {1}); }, true},
  };
  for (DType dt : kFloats) {
    Tensor x = lt::random({64, 1000}, dt, 7);
    Tensor w = lt::random({1000}, dt, 8), b = lt::random({1000}, dt, 9);
    for (const Case& c : cases) {
      if (is_reduced_float(dt) && !c.narrow) continue;
      INFO(std::string(dtype_name(dt)) << " " << c.what);
      loom::sync();
      reset_counters();
      Tensor y = c.f(x, w, b);
      loom::sync();
      CHECK(counters().kernels.load() == 1);
    }
  }
}
