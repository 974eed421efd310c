// cumsum: the CPU scan primitive against float64 / int64 references on random data, over
// every dim, non-contiguous and broadcast views, empty dims and long rows.
#include "helpers.h"

using namespace loom;
using lt::check_close;
using lt::host;

namespace {

using Vec = std::vector<double>;

// Inclusive prefix sums of row-major `v` (shape `s`) along dim `d`, in float64.
Vec ref_cumsum(const Vec& v, const Shape& s, int d) {
  int64_t len = s[size_t(d)], inner = 1, outer = 1;
  for (size_t k = size_t(d) + 1; k < s.size(); ++k) inner *= s[k];
  for (int k = 0; k < d; ++k) outer *= s[size_t(k)];
  Vec r(v.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      double acc = 0;
      for (int64_t k = 0; k < len; ++k) {
        size_t at = size_t((o * len + k) * inner + i);
        acc += v[at];
        r[at] = acc;
      }
    }
  return r;
}

// cumsum of `x` along every dim (and one negative spelling) against the reference.
void check_all_dims(const Tensor& x, std::optional<lt::Tol> t = {}) {
  auto v = host(x);
  for (int d = -1; d < x.dim(); ++d) {
    CAPTURE(d);
    int dd = d < 0 ? d + x.dim() : d;
    Tensor c = cumsum(x, d);
    CHECK(c.shape() == x.shape());
    lt::check_close(c, ref_cumsum(v, x.shape(), dd), t);
  }
}

}  // namespace

TEST_CASE("scan: cumsum of random floats along each dim, every float dtype") {
  uint32_t seed = 900;
  for (DType dt : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16}) {
    CAPTURE(dtype_name(dt));
    for (Shape s : {Shape{37}, Shape{7, 33}, Shape{4, 5, 6}, Shape{3, 1, 700}, Shape{2, 3, 4, 5}}) {
      CAPTURE(shape_str(s));
      Tensor x = lt::random(s, dt, seed++);
      CHECK(cumsum(x, 0).dtype() == dt);
      // reduced floats: the result is the float32-or-better sum rounded once to the dtype
      std::optional<lt::Tol> t;
      if (dt == DType::Float16) t = lt::Tol{2e-3, 2e-3};
      if (dt == DType::BFloat16) t = lt::Tol{1e-2, 1e-2};
      check_all_dims(x, t);
    }
  }
}

TEST_CASE("scan: integer and bool inputs sum exactly to int64") {
  Tensor i = lt::random({6, 9}, DType::Int32, 910, -50, 50);
  CHECK(cumsum(i, 1).dtype() == DType::Int64);
  auto v = host(i);
  lt::check_equal(cumsum(i, 0), ref_cumsum(v, i.shape(), 0));
  lt::check_equal(cumsum(i, 1), ref_cumsum(v, i.shape(), 1));
  Tensor b = lt::random({5, 8}, DType::Bool, 911);
  CHECK(cumsum(b, 1).dtype() == DType::Int64);
  lt::check_equal(cumsum(b, 1), ref_cumsum(host(b), b.shape(), 1));
  lt::check_equal(cumsum(b, 0), ref_cumsum(host(b), b.shape(), 0));
  // int64 values beyond float32's exact range stay exact
  Tensor big = lt::make({3e12 + 1, 5e12 + 3, -7e12 + 5, 11}, {4}, DType::Int64);
  lt::check_equal(cumsum(big, 0), {3e12 + 1, 8e12 + 4, 1e12 + 9, 1e12 + 20});
}

TEST_CASE("scan: non-contiguous and broadcast inputs") {
  Tensor base = lt::random({6, 10, 8}, DType::Float32, 920);
  check_all_dims(base.transpose(0, 2));                    // permuted strides
  check_all_dims(base.permute({1, 2, 0}));                 // inner dims that do not collapse
  check_all_dims(base.slice(1, 1, 9, 3));                  // stepped slice
  check_all_dims(base.select(2, 5));                       // a strided 2-d view
  check_all_dims(base.narrow(0, 2, 3).slice(2, 0, 8, 2));  // offset + steps
  check_all_dims(lt::random({1, 7}, DType::Float64, 921).expand({5, 7}));  // stride 0
  check_all_dims(lt::random({4}, DType::Float32, 922).reshape({4, 1}).expand({4, 6}));
  // a pending (not yet computed) input, and a constant that must be materialized for it
  Tensor x = lt::random({9, 13}, DType::Float32, 923);
  Tensor y = (x * 2 + 1).t();
  check_close(cumsum(y, 1), ref_cumsum(host(y), y.shape(), 1));
  check_close(cumsum(full({3, 4}, 2.5), 1), {2.5, 5, 7.5, 10, 2.5, 5, 7.5, 10, 2.5, 5, 7.5, 10});
  check_close(cumsum(ones({4, 2}), 0), {1, 1, 2, 2, 3, 3, 4, 4});
}

TEST_CASE("scan: empty dims, size-1 dims and 0-dim tensors") {
  for (Shape s : {Shape{0}, Shape{0, 5}, Shape{3, 0}, Shape{2, 0, 4}}) {
    CAPTURE(shape_str(s));
    Tensor x = lt::random(s, DType::Float32, 930);
    for (int d = 0; d < int(s.size()); ++d) {
      Tensor c = cumsum(x, d);
      CHECK(c.shape() == s);
      CHECK(host(c).empty());
    }
  }
  Tensor one = lt::random({1, 1}, DType::Float32, 931);
  check_close(cumsum(one, 1), host(one));
  Tensor z = full({}, 3.5);
  CHECK(cumsum(z, 0).dim() == 0);
  check_close(cumsum(z, -1), {3.5});
}

TEST_CASE("scan: long rows (100k elements) in linear time") {
  // Along the last dim (one row scanned in chunks) and along the first (vector tiles).
  Tensor x = lt::random({3, 100000}, DType::Float32, 940);
  auto v = host(x);
  // float32 output of a float64-accumulated sum: one rounding of the result
  check_close(cumsum(x, 1), ref_cumsum(v, x.shape(), 1), lt::Tol{1e-6, 1e-5});
  Tensor y = lt::random({100000, 3}, DType::Float64, 941);
  check_close(cumsum(y, 0), ref_cumsum(host(y), y.shape(), 0));
  Tensor r = lt::random({100000}, DType::Int32, 942, -1000, 1000);
  lt::check_equal(cumsum(r, 0), ref_cumsum(host(r), r.shape(), 0));
}

TEST_CASE("scan: a group boundary; fused programs around it equal fusion off") {
  Tensor x = lt::random({64, 300}, DType::Float32, 950);
  auto v = lt::check_fused_matches_unfused([&] { return (x * 0.5).cumsum(1).exp() + x; });
  loom::sync();
  reset_counters();
  Tensor c = (x * 0.5 + 1).cumsum(1).tanh();
  auto plan = explain(c);
  CAPTURE(plan);
  CHECK(plan.find("opaque cumsum") != std::string::npos);
  c.to_vector<float>();
  CHECK(counters().kernels.load() == 3);  // producer, scan, consumer
  Vec want = ref_cumsum(lt::ref_unary(host(x), [](double a) { return a * 0.5 + 1; }), x.shape(), 1);
  check_close(c, lt::ref_unary(want, [](double a) { return std::tanh(a); }));
  lt::check_fused_matches_unfused([&] { return cumsum(x.t() > 0, 0) + cumsum(x, 0).argmax(1); });
}
