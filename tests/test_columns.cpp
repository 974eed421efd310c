// Reductions whose data is contiguous along the kept dims (the CPU's column layout,
// cpu/interp_cols.cpp): every reduction over the shapes that take each of its splits (small,
// narrow and tall, wide blocks, odd widths, a partial column slice, a transposed view, a middle
// dim), with prologues, epilogues and several passes, every dtype; against float64 references,
// fusion off, and the same run on one thread (bit for bit).
#include <tbb/global_control.h>

#include <cstring>

#include "helpers.h"

using namespace loom;
using lt::check_close;
using lt::host;
using Vec = std::vector<double>;

namespace {

double r_sum(const Vec& v) {
  double s = 0;
  for (double x : v) s += x;
  return s;
}
double r_max(const Vec& v) {
  double m = -INFINITY;
  for (double x : v) m = std::isnan(x) || std::isnan(m) ? NAN : std::max(m, x);
  return m;
}
double r_min(const Vec& v) {
  double m = INFINITY;
  for (double x : v) m = std::isnan(x) || std::isnan(m) ? NAN : std::min(m, x);
  return m;
}
double r_var(const Vec& v) {
  double m = r_sum(v) / double(v.size()), s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return s / double(v.size() - 1);
}
double r_argmax(const Vec& v) {  // the first NaN, else the first largest
  size_t b = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    if (std::isnan(v[b])) break;
    if (std::isnan(v[i]) || v[i] > v[b]) b = i;
  }
  return double(b);
}

int64_t col_kernels() { return counters().col_kernels.load(); }

// Runs f, requires that it ran in the column layout, and returns its result.
Tensor in_cols(const std::function<Tensor()>& f) {
  int64_t before = col_kernels();
  Tensor y = f();
  host(y);
  CHECK_MESSAGE(col_kernels() > before, "expected the column layout");
  return y;
}

// Shapes reduced over dim 0 that take each split of the layout: one task; few rows many
// columns; narrow tall (segments); a width over the block limit (16384) and an odd one; few
// reduced rows (<= kColStreams) over a long kept dim (narrower blocks, one tile each, the last
// one partial).
const std::vector<Shape> kShapes = {{7, 16},     {3, 4, 5},    {300, 257}, {70000, 5},
                                    {40, 20001}, {1500, 4097}, {20, 5000}, {31, 3001}};

}  // namespace

TEST_CASE("columns: every reduction over dim 0 matches float64, each split of the layout") {
  for (const Shape& s : kShapes) {
    Tensor x = lt::random(s, DType::Float32, 301);
    auto v = host(x);
    INFO("shape " << shape_str(s));
    check_close(in_cols([&] { return sum(x, {0}); }), lt::ref_reduce(v, s, {0}, r_sum),
                lt::Tol{2e-6, 2e-6});
    check_close(in_cols([&] { return mean(x, {0}, true); }),
                lt::ref_reduce(v, s, {0}, [](const Vec& c) { return r_sum(c) / double(c.size()); }),
                lt::Tol{2e-6, 1e-7});
    check_close(in_cols([&] { return amax(x, {0}); }), lt::ref_reduce(v, s, {0}, r_max),
                lt::Tol{0, 0});
    check_close(in_cols([&] { return amin(x, {0}); }), lt::ref_reduce(v, s, {0}, r_min),
                lt::Tol{0, 0});
    check_close(in_cols([&] { return argmax(x, 0); }), lt::ref_reduce(v, s, {0}, r_argmax),
                lt::Tol{0, 0});
    check_close(in_cols([&] { return var(x, {0}); }), lt::ref_reduce(v, s, {0}, r_var),
                lt::Tol{1e-5, 1e-6});
    Tensor near1 = lt::random(s, DType::Float64, 302, 0.999, 1.001);
    check_close(in_cols([&] { return prod(near1, {0}); }),
                lt::ref_reduce(host(near1), s, {0},
                               [](const Vec& c) {
                                 double p = 1;
                                 for (double e : c) p *= e;
                                 return p;
                               }),
                lt::Tol{1e-12, 0});
  }
}

TEST_CASE("columns: integer and bool columns, any and all") {
  for (const Shape& s : std::vector<Shape>{{9, 33}, {5000, 6}}) {
    Tensor i = lt::random(s, DType::Int32, 303, -50, 50);
    auto vi = host(i);
    Tensor si = in_cols([&] { return sum(i, {0}); });
    CHECK(si.dtype() == DType::Int64);
    lt::check_equal(si, lt::ref_reduce(vi, s, {0}, r_sum));
    lt::check_equal(in_cols([&] { return amax(i, {0}); }), lt::ref_reduce(vi, s, {0}, r_max));
    lt::check_equal(in_cols([&] { return argmax(i, 0); }), lt::ref_reduce(vi, s, {0}, r_argmax));
    Tensor b = lt::random(s, DType::Bool, 304);
    auto vb = host(b);
    lt::check_equal(in_cols([&] { return any(b, {0}); }),
                    lt::ref_reduce(vb, s, {0}, [](const Vec& c) { return double(r_sum(c) > 0); }));
    lt::check_equal(in_cols([&] { return all(b, {0}); }),
                    lt::ref_reduce(vb, s, {0}, [](const Vec& c) {
                      return double(r_sum(c) == double(c.size()));
                    }));
    lt::check_equal(in_cols([&] { return sum(b, {0}); }), lt::ref_reduce(vb, s, {0}, r_sum));
  }
}

TEST_CASE("columns: float64, float16 and bfloat16 columns accumulate wide") {
  Tensor d = lt::random({3000, 100}, DType::Float64, 305);
  check_close(in_cols([&] { return sum(d, {0}); }), lt::ref_reduce(host(d), d.shape(), {0}, r_sum),
              lt::Tol{1e-13, 1e-12});
  // 4096 ones down each column: a float16 accumulator would stop at 2048.
  for (DType dt : {DType::Float16, DType::BFloat16}) {
    Tensor h = lt::make(Vec(4096 * 40, 1.0), {4096, 40}, dt);
    Tensor s = in_cols([&] { return sum(h, {0}); });
    CHECK(s.dtype() == dt);
    lt::check_equal(s, Vec(40, 4096.0));
    Tensor x = lt::random({700, 300}, dt, 306, 0, 1);
    check_close(in_cols([&] { return mean(x, {0}); }),
                lt::ref_reduce(host(x), x.shape(), {0},
                               [](const Vec& c) { return r_sum(c) / double(c.size()); }));
  }
}

TEST_CASE("columns: NaN propagates down its own column only; argmax takes the first NaN") {
  Tensor x = lt::random({5000, 64}, DType::Float32, 307);
  auto v = host(x);
  for (int64_t r : {0, 17, 4999}) v[size_t(r * 64 + 3)] = NAN;
  v[size_t(100 * 64 + 40)] = NAN;
  Tensor y = lt::make(v, {5000, 64});
  for (auto* f : {+[](const Tensor& t) { return amax(t, {0}); },
                  +[](const Tensor& t) { return amin(t, {0}); }}) {
    auto got = host(in_cols([&] { return f(y); }));
    for (int64_t c = 0; c < 64; ++c) CHECK(std::isnan(got[size_t(c)]) == (c == 3 || c == 40));
  }
  check_close(in_cols([&] { return argmax(y, 0); }), lt::ref_reduce(v, {5000, 64}, {0}, r_argmax),
              lt::Tol{0, 0});
  // Ties: the first index of the largest.
  Tensor t = lt::make(Vec(300 * 70, 0.0), {300, 70});
  lt::check_equal(in_cols([&] { return argmax(t, 0); }), Vec(70, 0.0));
}

TEST_CASE("columns: views — a partial column slice, a transposed matrix, a middle dim, keepdim") {
  Tensor x = lt::random({600, 300}, DType::Float32, 308);
  Tensor part = x.slice(1, 20, 257);
  check_close(in_cols([&] { return sum(part, {0}); }),
              lt::ref_reduce(host(part), part.shape(), {0}, r_sum), lt::Tol{2e-6, 2e-6});
  Tensor rows = x.slice(0, 100, 500);  // partial rows of whole columns
  check_close(in_cols([&] { return amax(rows, {0}, true); }),
              lt::ref_reduce(host(rows), rows.shape(), {0}, r_max), lt::Tol{0, 0});
  Tensor tr = lt::random({300, 600}, DType::Float32, 309).transpose(0, 1);  // [600, 300] view
  check_close(in_cols([&] { return sum(tr, {1}); }),
              lt::ref_reduce(host(tr), {600, 300}, {1}, r_sum), lt::Tol{2e-6, 2e-6});
  Tensor m = lt::random({8, 500, 96}, DType::Float32, 310);
  Tensor mm = in_cols([&] { return mean(m, {1}, true); });
  CHECK(mm.shape() == Shape{8, 1, 96});
  check_close(mm,
              lt::ref_reduce(host(m), m.shape(), {1},
                             [](const Vec& c) { return r_sum(c) / double(c.size()); }),
              lt::Tol{2e-6, 1e-7});
  check_close(in_cols([&] {
                return sum(m, {0, 1});
              }),
              lt::ref_reduce(host(m), m.shape(), {0, 1}, r_sum), lt::Tol{2e-6, 2e-5});
}

TEST_CASE("columns: prologues, epilogues and several passes equal fusion off") {
  for (const Shape& s : std::vector<Shape>{{9, 20}, {3000, 130}, {50, 20001}}) {
    INFO("shape " << shape_str(s));
    Tensor x = lt::random(s, DType::Float32, 311);
    Tensor b = lt::random({s[1]}, DType::Float32, 312);
    Tensor w = lt::random({s[0], 1}, DType::Float32, 313);
    auto fused = [&](const std::function<Tensor()>& f) {
      return lt::check_fused_matches_unfused([&] { return in_cols(f); });
    };
    fused([&] { return sum(x * 2.0 + b, {0}) * 3.0 + b; });  // the bias-gradient shape
    fused([&] { return sum(exp(x) * w, {0}); });             // a per-row weight
    fused([&] { return x - mean(x, {0}, true); });           // a Full output, two passes
    fused([&] { return softmax(x, 0); });                    // three passes
    fused([&] {
      Tensor m = mean(x, {0}, true);
      Tensor c = x - m;
      return c / sqrt(mean(c * c, {0}, true) + 1e-5);  // a norm over columns
    });
  }
}

TEST_CASE("columns: an in-place update of the columns it reduces") {
  Tensor x = lt::random({2000, 300}, DType::Float32, 314);
  auto v = host(x);
  auto mu = lt::ref_reduce(v, x.shape(), {0}, [](const Vec& c) { return r_sum(c) / c.size(); });
  int64_t before = col_kernels();
  x.sub_(mean(x, {0}, true));
  auto got = host(x);
  CHECK(col_kernels() > before);
  Vec want(v.size());
  for (size_t i = 0; i < v.size(); ++i) want[i] = v[i] - mu[i % 300];
  check_close(x, want, lt::Tol{1e-6, 1e-6});
}

TEST_CASE("columns: results do not depend on the number of threads") {
  for (const Shape& s : std::vector<Shape>{{70000, 5}, {40, 20001}, {3000, 4097}}) {
    Tensor x = lt::random(s, DType::Float32, 315);
    auto run = [&] { return Vec{host(in_cols([&] { return sum(x * x, {0}) + var(x, {0}); }))}; };
    Vec many = run(), one;
    {
      tbb::global_control g(tbb::global_control::max_allowed_parallelism, 1);
      one = run();
    }
    REQUIRE(many.size() == one.size());
    for (size_t i = 0; i < many.size(); ++i) CHECK(many[i] == one[i]);
  }
}

TEST_CASE("columns: a plain load folded in place equals the same fold of a copied tile, bit for bit") {
  // sum(x, 0) folds x's columns where they lie in memory (cpu/interp_cols.cpp in_place_load);
  // x * 1 (exact) goes through a tile register first: the same fold of the same values.
  auto same_bits = [](const Tensor& a, const Tensor& b) {
    auto va = host(a), vb = host(b);
    REQUIRE(va.size() == vb.size());
    for (size_t i = 0; i < va.size(); ++i)
      if (std::memcmp(&va[i], &vb[i], sizeof(double)) != 0) {
        FAIL_CHECK("element " << i << ": " << va[i] << " vs " << vb[i]);
        return;
      }
  };
  const std::vector<Shape> shapes = {{16, 1 << 16}, {5, 70001}, {300, 257}, {40, 20001},
                                     {1500, 4097},  {7, 3, 65}};
  for (const Shape& s : shapes)
    for (DType dt : {DType::Float32, DType::Float64, DType::Int64}) {
      INFO("shape " << shape_str(s) << " " << dtype_name(dt));
      Tensor x = lt::random(s, dt, 77, -1e3, 1e3);
      same_bits(in_cols([&] { return sum(x, {0}); }), sum(x * 1, {0}));
      same_bits(in_cols([&] { return amax(x, {0}); }), amax(x * 1, {0}));
      same_bits(in_cols([&] { return argmin(x, 0); }), argmin(x * 1, 0));
      // a partial slice of the kept dim and of the reduced one: other strides and offsets
      Tensor v = x.narrow(0, 1, s[0] - 2).narrow(-1, 3, s.back() - 5);
      same_bits(in_cols([&] { return sum(v, {0}); }), sum(v * 1, {0}));
      if (s.size() == 3) same_bits(in_cols([&] { return sum(x, {1}); }), sum(x * 1, {1}));
    }
}
