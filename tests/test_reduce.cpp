// Reductions over single, several, all and negative dims, keepdim, strided inputs, against
// float64 references; index ties, NaN, empty dims, float16 accumulation and cumsum.
#include <limits>
#include <numeric>

#include "helpers.h"

using namespace loom;
using lt::check_close;
using lt::host;
using Vec = std::vector<double>;

namespace {

double r_sum(const Vec& v) { return std::accumulate(v.begin(), v.end(), 0.0); }
double r_mean(const Vec& v) { return r_sum(v) / double(v.size()); }
double r_prod(const Vec& v) {
  double p = 1;
  for (double x : v) p *= x;
  return p;
}
double r_max(const Vec& v) { return *std::max_element(v.begin(), v.end()); }
double r_min(const Vec& v) { return *std::min_element(v.begin(), v.end()); }
double r_var(const Vec& v, double c) {
  double m = r_mean(v), s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return s / (double(v.size()) - c);
}
double r_lse(const Vec& v) {
  double m = r_max(v), s = 0;
  for (double x : v) s += std::exp(x - m);
  return m + std::log(s);
}
double r_norm(const Vec& v, double p) {
  if (std::isinf(p)) {
    double m = 0;
    for (double x : v) m = std::max(m, std::fabs(x));
    return m;
  }
  double s = 0;
  for (double x : v) s += std::pow(std::fabs(x), p);
  return std::pow(s, 1 / p);
}

struct Red {
  const char* name;
  std::function<Tensor(const Tensor&, const Dims&, bool)> op;
  std::function<double(const Vec&)> ref;
};

std::vector<Red> float_reductions() {
  return {
      {"sum", [](auto& x, auto& d, bool k) { return sum(x, d, k); }, r_sum},
      {"mean", [](auto& x, auto& d, bool k) { return mean(x, d, k); }, r_mean},
      {"prod", [](auto& x, auto& d, bool k) { return prod(x, d, k); }, r_prod},
      {"amax", [](auto& x, auto& d, bool k) { return amax(x, d, k); }, r_max},
      {"amin", [](auto& x, auto& d, bool k) { return amin(x, d, k); }, r_min},
      {"var0", [](auto& x, auto& d, bool k) { return var(x, d, 0, k); },
       [](const Vec& v) { return r_var(v, 0); }},
      {"var1", [](auto& x, auto& d, bool k) { return var(x, d, 1, k); },
       [](const Vec& v) { return r_var(v, 1); }},
      {"std0", [](auto& x, auto& d, bool k) { return loom::std(x, d, 0, k); },
       [](const Vec& v) { return std::sqrt(r_var(v, 0)); }},
      {"std1", [](auto& x, auto& d, bool k) { return x.std(d, 1, k); },
       [](const Vec& v) { return std::sqrt(r_var(v, 1)); }},
      {"logsumexp", [](auto& x, auto& d, bool k) { return logsumexp(x, d, k); }, r_lse},
      {"norm1", [](auto& x, auto& d, bool k) { return norm(x, 1, d, k); },
       [](const Vec& v) { return r_norm(v, 1); }},
      {"norm2", [](auto& x, auto& d, bool k) { return x.norm(2, d, k); },
       [](const Vec& v) { return r_norm(v, 2); }},
      {"norminf",
       [](auto& x, auto& d, bool k) {
         return norm(x, std::numeric_limits<double>::infinity(), d, k);
       },
       [](const Vec& v) { return r_norm(v, INFINITY); }},
  };
}

const std::vector<Dims> kDimSets = {{0}, {1}, {2}, {-1}, {0, 2}, {-3, -1}, {1, 2}, {}};

}  // namespace

TEST_CASE("reduce: float reductions over dims, keepdim, contiguous and permuted inputs") {
  // Values near 1 keep prod well conditioned.
  Tensor base = lt::random({4, 5, 6}, DType::Float64, 61, 0.5, 1.5);
  Tensor permuted = lt::random({6, 4, 5}, DType::Float64, 62, 0.5, 1.5).permute({1, 2, 0});
  for (DType dt : {DType::Float32, DType::Float64}) {
    for (const Tensor& x0 : {base, permuted}) {
      Tensor x = x0.to(dt);
      auto v = host(x);
      for (auto& r : float_reductions()) {
        for (auto& dims : kDimSets) {
          for (bool keep : {false, true}) {
            INFO(std::string(r.name)
                 << " dims " << shape_str(Shape(dims.begin(), dims.end())) << " keepdim " << keep
                 << " " << dtype_name(dt) << (x.is_contiguous() ? " contiguous" : " permuted"));
            Tensor y = r.op(x, dims, keep);
            CHECK(y.dtype() == dt);
            CHECK(y.shape() == lt::reduced_shape(x.shape(), dims, keep));
            check_close(y, lt::ref_reduce(v, x.shape(), dims, r.ref),
                        dt == DType::Float32 ? lt::Tol{2e-5, 1e-6} : lt::tol(dt));
          }
        }
      }
    }
  }
}

TEST_CASE("reduce: integer and bool inputs") {
  Tensor x = lt::random({3, 4, 5}, DType::Int32, 63, -9, 9);
  auto v = host(x);
  CHECK(sum(x).dtype() == DType::Int64);
  lt::check_equal(sum(x, {1}), lt::ref_reduce(v, x.shape(), {1}, r_sum));
  lt::check_equal(prod(x, {2}), lt::ref_reduce(v, x.shape(), {2}, r_prod));
  CHECK(prod(x).dtype() == DType::Int64);
  CHECK(amax(x, {0}).dtype() == DType::Int32);
  lt::check_equal(amax(x, {0, 2}), lt::ref_reduce(v, x.shape(), {0, 2}, r_max));
  lt::check_equal(amin(x, {-1}), lt::ref_reduce(v, x.shape(), {-1}, r_min));
  lt::check_equal(sum(x, {1}, false, DType::Float64), lt::ref_reduce(v, x.shape(), {1}, r_sum));
  CHECK(sum(x, {1}, false, DType::Float64).dtype() == DType::Float64);
  Tensor b = x > 0;
  CHECK(sum(b).dtype() == DType::Int64);
  lt::check_equal(sum(b, {2}), lt::ref_reduce(host(b), b.shape(), {2}, r_sum));
  // int64 sums are exact beyond 2^53
  int64_t big = int64_t(1) << 60;
  Tensor l = loom::tensor<int64_t>({big, 1, 2, 3}, {4});
  CHECK(sum(l).item<int64_t>() == big + 6);
}

TEST_CASE("reduce: all and any") {
  Tensor x = lt::make({1, 0, 2, 3, 4, 5, 0, 0, 0}, {3, 3}, DType::Int64);
  lt::check_equal(all(x, {1}), {0, 1, 0});
  lt::check_equal(any(x, {1}), {1, 1, 0});
  lt::check_equal(all(x, {0}), {0, 0, 0});
  lt::check_equal(any(x, {0}, true), {1, 1, 1});
  CHECK(any(x, {0}, true).shape() == Shape{1, 3});
  CHECK(all(x).dtype() == DType::Bool);
  CHECK_FALSE(all(x).item<bool>());
  CHECK(any(x).item<bool>());
  Tensor f = lt::make({0.5, -1, std::nan("")}, {3});
  CHECK(all(f).item<bool>());  // NaN is truthy
  CHECK(x.t().all({0}).to_vector<bool>() == std::vector<bool>{false, true, false});
  CHECK(all(zeros({0})).item<bool>());
  CHECK_FALSE(any(zeros({0})).item<bool>());
}

TEST_CASE("reduce: argmax and argmin, ties take the first index") {
  Tensor x = lt::random({5, 7}, DType::Float32, 64);
  auto v = host(x);
  auto argf = [](bool mx) {
    return [mx](const Vec& s) {
      size_t b = 0;
      for (size_t i = 1; i < s.size(); ++i)
        if (mx ? s[i] > s[b] : s[i] < s[b]) b = i;
      return double(b);
    };
  };
  for (int64_t d : {0, 1, -1}) {
    CAPTURE(d);
    lt::check_equal(argmax(x, d), lt::ref_reduce(v, x.shape(), {d}, argf(true)));
    lt::check_equal(argmin(x, d), lt::ref_reduce(v, x.shape(), {d}, argf(false)));
    CHECK(argmax(x, d, true).shape() == lt::reduced_shape(x.shape(), {d}, true));
  }
  CHECK(argmax(x).item<int64_t>() == int64_t(argf(true)(v)));
  CHECK(argmin(x).dtype() == DType::Int64);
  CHECK(argmax(x, std::nullopt, true).shape() == Shape{1, 1});
  lt::check_equal(x.t().argmax(1), lt::ref_reduce(v, x.shape(), {0}, argf(true)));

  Tensor ties = lt::make({3, 1, 3, 3, 0, 0, 2, 0, 2, 2, 2, 2}, {3, 4});
  lt::check_equal(argmax(ties, 1), {0, 2, 0});
  lt::check_equal(argmin(ties, 1), {1, 0, 0});
  lt::check_equal(argmax(ties, 0), {0, 2, 0, 0});
  CHECK(argmax(ties).item<int64_t>() == 0);
  CHECK(argmin(ties).item<int64_t>() == 4);
  // a long row split across tiles and threads still takes the first of equal maxima
  Tensor longrow = zeros({1, 200000});
  longrow.index_put({Slice::at(0), Slice::range(150000, 150001)}, 5.0);
  longrow.index_put({Slice::at(0), Slice::range(199999, 200000)}, 5.0);
  longrow.index_put({Slice::at(0), Slice::range(70000, 70001)}, 5.0);
  CHECK(argmax(longrow, 1).item<int64_t>() == 70000);
  CHECK(argmin(-longrow).item<int64_t>() == 70000);
}

TEST_CASE("reduce: NaN propagates through amax, amin and sum") {
  double nan = std::nan("");
  Tensor x = lt::make({1, nan, 3, 4, 5, 6}, {2, 3});
  check_close(amax(x, {1}), {nan, 6});
  check_close(amin(x, {1}), {nan, 4});
  check_close(amax(x, {0}), {4, nan, 6});
  CHECK(std::isnan(amax(x).item<double>()));
  check_close(sum(x, {1}), {nan, 15});
  lt::check_equal(argmax(x, 1), {1, 2});  // torch: NaN is the maximum
}

TEST_CASE("reduce: a NaN anywhere in a long row makes its amax and amin NaN") {
  // rows of 1000 and 5000 (vector lanes, then a scalar tail; a tile or chunks): a NaN at the
  // start, in the first and a later lane block, in the tail; one row without, one with infs
  for (DType dt : {DType::Float32, DType::Float64}) {
    for (int64_t n : {1000, 5000}) {
      INFO(std::string(dtype_name(dt)) << ", rows of " << n);
      std::vector<int64_t> at = {0, 1, 63, 64, 500, n - 1};
      int64_t rows = int64_t(at.size()) + 2;
      Vec v = lt::uniform(rows * n, -5, 5, uint32_t(n));
      for (size_t r = 0; r < at.size(); ++r) v[r * size_t(n) + size_t(at[r])] = std::nan("");
      v[size_t((rows - 1) * n + 7)] = INFINITY;
      v[size_t((rows - 1) * n + n - 2)] = -INFINITY;
      Tensor x = lt::make(v, {rows, n}, dt);
      v = host(x);  // as stored
      auto want = [&](bool mx) {
        Vec w;
        for (int64_t r = 0; r < rows; ++r) {
          double m = v[size_t(r * n)];
          for (int64_t i = 0; i < n; ++i) {
            double e = v[size_t(r * n + i)];
            if (e != e || m != m)
              m = NAN;
            else
              m = mx ? std::max(m, e) : std::min(m, e);
          }
          w.push_back(m);
        }
        return w;
      };
      lt::check_equal(amax(x, {1}), want(true));
      lt::check_equal(amin(x, {1}), want(false));
    }
  }
}

TEST_CASE("reduce: empty dims") {
  Tensor e = zeros({3, 0});
  check_close(sum(e, {1}), {0, 0, 0});
  CHECK(sum(e, {1}).shape() == Shape{3});
  check_close(prod(e, {1}), {1, 1, 1});
  CHECK(sum(e).item<float>() == 0.0f);
  CHECK(sum(e, {0}).shape() == Shape{0});
  CHECK(sum(zeros({0}, DType::Int32)).item<int64_t>() == 0);
  CHECK(std::isnan(mean(zeros({0})).item<float>()));
}

TEST_CASE("reduce: float16 and bfloat16 inputs accumulate in float32") {
  // 4096 ones: a float16 accumulator would stop at 2048.
  Tensor h = ones({4096}, DType::Float16);
  CHECK(sum(h).dtype() == DType::Float16);
  CHECK(sum(h).item<double>() == 4096.0);
  CHECK(mean(h).item<double>() == 1.0);
  Tensor x = lt::random({8, 512}, DType::Float16, 65, 0, 1);
  auto v = host(x);
  check_close(sum(x, {1}), lt::ref_reduce(v, x.shape(), {1}, r_sum));
  check_close(mean(x, {0}), lt::ref_reduce(v, x.shape(), {0}, r_mean));
  check_close(var(x, {1}),
              lt::ref_reduce(v, x.shape(), {1}, [](const Vec& s) { return r_var(s, 1); }));
  Tensor b = lt::random({4, 300}, DType::BFloat16, 66, 0, 1);
  check_close(sum(b, {1}), lt::ref_reduce(host(b), b.shape(), {1}, r_sum));
  CHECK(sum(x, {1}, false, DType::Float32).dtype() == DType::Float32);
  check_close(sum(x, {1}, false, DType::Float32), lt::ref_reduce(v, x.shape(), {1}, r_sum),
              lt::Tol{1e-6, 1e-6});
}

TEST_CASE("reduce: long rows and many rows (tiles, chunks, threads)") {
  Tensor x = lt::random({3, 100001}, DType::Float64, 67);
  auto v = host(x);
  check_close(sum(x, {1}), lt::ref_reduce(v, x.shape(), {1}, r_sum), lt::Tol{1e-10, 1e-9});
  check_close(amax(x, {1}), lt::ref_reduce(v, x.shape(), {1}, r_max));
  check_close(var(x, {1}),
              lt::ref_reduce(v, x.shape(), {1}, [](const Vec& s) { return r_var(s, 1); }),
              lt::Tol{1e-10, 1e-12});
  Tensor y = lt::random({20000, 3}, DType::Float32, 68);
  check_close(sum(y, {1}), lt::ref_reduce(host(y), y.shape(), {1}, r_sum));
  check_close(sum(y, {0}), lt::ref_reduce(host(y), y.shape(), {0}, r_sum), lt::Tol{1e-4, 1e-4});
}

// Few long rows run split: each pass in chunks (32768 elements for a pass of few steps, 4096
// where a load converts, 2048 otherwise), a fixed number of chunks a parallel segment. Lengths
// that leave several segments and a short last chunk, for each chunk size; and rows as long
// but enough of them to stay whole.
TEST_CASE("reduce: long rows in chunks and segments, each chunk size, match float64") {
  struct Case {
    Shape s;
    DType dt;
  };
  for (const Case& c :
       {Case{{1, 3 * 32768 + 100}, DType::Float32}, Case{{3, 40000}, DType::Float32},
        Case{{9, 40000}, DType::Float32},  // enough rows: whole, L2-sized
        Case{{2, 2 * 16 * 4096 + 77}, DType::BFloat16},
        Case{{1, 5 * 32 * 2048 + 5}, DType::Float16}}) {
    INFO(dtype_name(c.dt) << " " << shape_str(c.s));
    Tensor x = lt::random(c.s, c.dt, 71);
    auto v = host(x);
    const lt::Tol t = c.dt == DType::Float32 ? lt::Tol{1e-5, 1e-5} : lt::Tol{2e-3, 2e-3};
    check_close(sum(x, {1}), lt::ref_reduce(v, c.s, {1}, r_sum), t);
    check_close(amax(x, {1}), lt::ref_reduce(v, c.s, {1}, r_max), lt::Tol{0, 0});
    check_close(mean(x, {1}), lt::ref_reduce(v, c.s, {1}, r_mean), t);
    // several passes of several steps (kChunk): x - logsumexp, summed back
    Tensor ls = log_softmax(x.to(DType::Float32), 1).exp().sum({1});
    check_close(ls, std::vector<double>(size_t(c.s[0]), 1.0), lt::Tol{1e-4, 1e-4});
  }
}

TEST_CASE("reduce: logsumexp is stable and handles -inf rows") {
  Tensor x = lt::make({1000, 1000, -1000, -1000}, {2, 2});
  check_close(logsumexp(x, {1}), {1000 + std::log(2.0), -1000 + std::log(2.0)});
  double inf = std::numeric_limits<double>::infinity();
  Tensor m = lt::make({-inf, -inf, 0, -inf}, {2, 2});
  check_close(logsumexp(m, {1}), {-inf, 0});
}

TEST_CASE("reduce: cumsum along each dim") {
  Tensor x = lt::random({4, 5, 3}, DType::Float64, 69);
  auto v = host(x);
  Shape s = x.shape();
  for (int64_t d : {0, 1, 2, -1}) {
    CAPTURE(d);
    int dd = int(d < 0 ? d + 3 : d);
    Vec want(v.size());
    loom::Strides st = contiguous_strides(s);
    for (size_t i = 0; i < v.size(); ++i) {
      int64_t idx = (int64_t(i) / st[dd]) % s[dd];
      double acc = 0;
      for (int64_t k = 0; k <= idx; ++k) acc += v[i - size_t((idx - k) * st[dd])];
      want[i] = acc;
    }
    Tensor c = cumsum(x, d);
    CHECK(c.shape() == s);
    check_close(c, want);
  }
  Tensor i = lt::make({1, 2, 3, 4}, {4}, DType::Int32);
  CHECK(cumsum(i, 0).dtype() == DType::Int64);
  lt::check_equal(i.cumsum(0), {1, 3, 6, 10});
  lt::check_equal(cumsum(lt::make({1, 2, 3, 4}, {2, 2}).t(), 1), {1, 4, 2, 6});
}

TEST_CASE("reduce: fused reduction chains equal fusion off") {
  Tensor x = lt::random({64, 300}, DType::Float32, 70);
  lt::check_fused_matches_unfused([&] {
    Tensor a = (x * 2 + 1).exp().sum({1}, true);
    Tensor b = (x - x.mean({1}, true)).abs().amax({1}, true);
    return (a.log() + b * 3).squeeze(1) + x.var({1}) + x.norm(2, {1});
  });
  lt::check_fused_matches_unfused([&] { return (x > 0).sum({0}); });
  lt::check_fused_matches_unfused([&] { return (x * x).argmax(1) + x.t().argmin(0); });
}
