// Composites (softmax, log_softmax, layer_norm, rms_norm, dropout, cross_entropy) against
// float64 references and fusion off.
#include <limits>
#include <numeric>

#include "helpers.h"

using namespace loom;
using lt::check_close;
using lt::host;
using Vec = std::vector<double>;

namespace {

// Applies a row function along dim `d` of a row-major [.., n, ..] array; returns the same layout.
Vec along(const Vec& v, const Shape& s, int d, const std::function<Vec(const Vec&)>& f) {
  Strides st = contiguous_strides(s);
  int64_t n = s[d], outer = numel(s) / n / st[d], inner = st[d];
  Vec out(v.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      Vec row(static_cast<size_t>(n));
      for (int64_t k = 0; k < n; ++k) row[k] = v[size_t(o * n * inner + k * inner + i)];
      Vec r = f(row);
      for (int64_t k = 0; k < n; ++k) out[size_t(o * n * inner + k * inner + i)] = r[k];
    }
  return out;
}

Vec softmax_row(const Vec& r) {
  double m = *std::max_element(r.begin(), r.end()), s = 0;
  Vec e(r.size());
  for (size_t i = 0; i < r.size(); ++i) s += e[i] = std::exp(r[i] - m);
  for (auto& x : e) x /= s;
  return e;
}
Vec log_softmax_row(const Vec& r) {
  double m = *std::max_element(r.begin(), r.end()), s = 0;
  for (double x : r) s += std::exp(x - m);
  Vec o(r.size());
  for (size_t i = 0; i < r.size(); ++i) o[i] = r[i] - m - std::log(s);
  return o;
}

// layer_norm over the last `k` elements of each row (flattened trailing dims).
Vec layer_norm_ref(const Vec& v, int64_t k, const Vec* w, const Vec* b, double eps) {
  Vec out(v.size());
  for (size_t r = 0; r < v.size() / size_t(k); ++r) {
    double m = 0, var = 0;
    for (int64_t i = 0; i < k; ++i) m += v[r * k + i];
    m /= double(k);
    for (int64_t i = 0; i < k; ++i) var += (v[r * k + i] - m) * (v[r * k + i] - m);
    var /= double(k);
    for (int64_t i = 0; i < k; ++i) {
      double y = (v[r * k + i] - m) / std::sqrt(var + eps);
      if (w) y *= (*w)[i];
      if (b) y += (*b)[i];
      out[r * k + i] = y;
    }
  }
  return out;
}

Vec rms_norm_ref(const Vec& v, int64_t k, const Vec* w, double eps) {
  Vec out(v.size());
  for (size_t r = 0; r < v.size() / size_t(k); ++r) {
    double ms = 0;
    for (int64_t i = 0; i < k; ++i) ms += v[r * k + i] * v[r * k + i];
    ms /= double(k);
    for (int64_t i = 0; i < k; ++i)
      out[r * k + i] = v[r * k + i] / std::sqrt(ms + eps) * (w ? (*w)[i] : 1.0);
  }
  return out;
}

}  // namespace

TEST_CASE("composite: softmax and log_softmax along each dim") {
  for (DType dt : {DType::Float32, DType::Float64}) {
    Tensor x = lt::random({7, 33, 5}, dt, 81, -4, 4);
    auto v = host(x);
    for (int64_t d : {0, 1, 2, -1, -2}) {
      INFO("dim " << d << " " << std::string(dtype_name(dt)));
      int dd = int(d < 0 ? d + 3 : d);
      Tensor s = softmax(x, d);
      CHECK(s.dtype() == dt);
      CHECK(s.shape() == x.shape());
      check_close(s, along(v, x.shape(), dd, softmax_row));
      check_close(log_softmax(x, d), along(v, x.shape(), dd, log_softmax_row));
      check_close(s.sum({d}), Vec(size_t(x.numel() / x.shape()[dd]), 1.0));
    }
    // transposed input, method form
    Tensor xt = x.transpose(0, 2);  // [5, 33, 7]
    check_close(xt.softmax(-1), along(host(xt), xt.shape(), 2, softmax_row));
    check_close(xt.log_softmax(0), along(host(xt), xt.shape(), 0, log_softmax_row));
  }
}

TEST_CASE("composite: softmax is stable for large logits and long rows") {
  Tensor x = lt::make({1000, 1001, 1002, -1000, -1001, -1002}, {2, 3});
  check_close(softmax(x, 1), along(host(x), {2, 3}, 1, softmax_row));
  check_close(log_softmax(x, 1), along(host(x), {2, 3}, 1, log_softmax_row));
  double inf = std::numeric_limits<double>::infinity();
  check_close(softmax(lt::make({-inf, 0, 0}, {3}), 0), {0, 0.5, 0.5});
  // masked and far-below-max logits: exactly 0 where exp underflows (the CPU computes
  // exp(x - max) in one instruction and must not keep Eigen's clamped tiny values)
  for (DType dt : {DType::Float32, DType::Float64}) {
    Tensor m = lt::make({0, -inf, -1000, 1, -inf, -inf, 2, -inf, -800, -100, 3, 2}, {3, 4}, dt);
    auto want = along(host(m), {3, 4}, 1, softmax_row);
    auto got = lt::check_fused_matches_unfused([&] { return softmax(m, 1); });
    check_close(softmax(m, 1), want);
    for (size_t i = 0; i < want.size(); ++i)
      if (want[i] == 0) CHECK(got[i] == 0);
  }
  // rows longer than the on-chip row (two-pass plan)
  Tensor big = lt::random({3, 40000}, DType::Float32, 82, -5, 5);
  check_close(softmax(big, 1), along(host(big), big.shape(), 1, softmax_row));
  check_close(log_softmax(big, 1), along(host(big), big.shape(), 1, log_softmax_row));
}

TEST_CASE("composite: softmax of float16 and bfloat16 computes in float32") {
  for (DType dt : {DType::Float16, DType::BFloat16}) {
    Tensor x = lt::random({4, 100}, dt, 83, -3, 3);
    Tensor s = softmax(x, 1);
    CHECK(s.dtype() == dt);
    check_close(s, along(host(x), x.shape(), 1, softmax_row));
  }
}

TEST_CASE("composite: layer_norm with and without weight and bias") {
  for (DType dt : {DType::Float32, DType::Float64}) {
    INFO(std::string(dtype_name(dt)));
    Tensor x = lt::random({4, 6, 10}, dt, 84, -3, 5);
    Tensor w = lt::random({10}, dt, 85), b = lt::random({10}, dt, 86);
    auto v = host(x), vw = host(w), vb = host(b);
    check_close(layer_norm(x, {10}), layer_norm_ref(v, 10, nullptr, nullptr, 1e-5));
    check_close(layer_norm(x, {10}, w), layer_norm_ref(v, 10, &vw, nullptr, 1e-5));
    check_close(layer_norm(x, {10}, std::nullopt, b), layer_norm_ref(v, 10, nullptr, &vb, 1e-5));
    check_close(layer_norm(x, {10}, w, b, 1e-3), layer_norm_ref(v, 10, &vw, &vb, 1e-3));
    // two trailing dims
    Tensor w2 = lt::random({6, 10}, dt, 87);
    auto vw2 = host(w2);
    check_close(layer_norm(x, {6, 10}, w2), layer_norm_ref(v, 60, &vw2, nullptr, 1e-5));
    CHECK(layer_norm(x, {6, 10}).dtype() == dt);
    // strided input
    Tensor xt = x.transpose(0, 1).contiguous().transpose(0, 1);
    CHECK_FALSE(xt.is_contiguous());
    check_close(layer_norm(xt, {10}, w, b), layer_norm_ref(v, 10, &vw, &vb, 1e-5));
  }
  Tensor h = lt::random({8, 64}, DType::Float16, 88);
  Tensor y = layer_norm(h, {64});
  CHECK(y.dtype() == DType::Float16);
  check_close(y, layer_norm_ref(host(h), 64, nullptr, nullptr, 1e-5));
}

TEST_CASE("composite: rms_norm") {
  Tensor x = lt::random({5, 3, 16}, DType::Float64, 89);
  Tensor w = lt::random({16}, DType::Float64, 90);
  auto v = host(x), vw = host(w);
  check_close(rms_norm(x, {16}, w, 1e-6), rms_norm_ref(v, 16, &vw, 1e-6));
  check_close(rms_norm(x, {3, 16}),
              rms_norm_ref(v, 48, nullptr, std::numeric_limits<double>::epsilon()));
  Tensor xf = x.to(DType::Float32);
  check_close(rms_norm(xf, {16}),
              rms_norm_ref(host(xf), 16, nullptr, std::numeric_limits<float>::epsilon()));
  // tiny rows: eps dominates
  Tensor z = lt::make({1e-4, -1e-4}, {1, 2}, DType::Float64);
  check_close(rms_norm(z, {2}, std::nullopt, 1e-2), rms_norm_ref(host(z), 2, nullptr, 1e-2));
}

TEST_CASE("composite: dropout") {
  Tensor x = lt::random({100000}, DType::Float32, 91, 0.5, 1.5);
  auto v = host(x);
  SUBCASE("p = 0 and eval mode are the identity") {
    check_close(dropout(x, 0.0), v, lt::Tol{0, 0});
    check_close(dropout(x, 0.7, false), v, lt::Tol{0, 0});
  }
  SUBCASE("p = 1 gives zeros") {
    Tensor y = dropout(x, 1.0);
    CHECK(y.shape() == x.shape());
    CHECK(sum(y != 0.0).item<int64_t>() == 0);
  }
  SUBCASE("kept fraction ~ 1-p, kept values scaled by 1/(1-p)") {
    for (double p : {0.1, 0.5, 0.8}) {
      CAPTURE(p);
      manual_seed(1234);
      auto y = host(dropout(x, p));
      int64_t kept = 0;
      bool scaled = true;
      for (size_t i = 0; i < y.size(); ++i) {
        if (y[i] == 0) continue;
        ++kept;
        if (std::fabs(y[i] - v[i] / (1 - p)) > 1e-5 * std::fabs(y[i])) scaled = false;
      }
      CHECK(scaled);
      // binomial std is at most 0.0016 at n = 1e5; allow 6 sigma
      CHECK(std::fabs(double(kept) / 1e5 - (1 - p)) < 0.01);
    }
  }
  SUBCASE("same seed, same mask; new draws differ; fused equals fusion off") {
    manual_seed(7);
    auto a = host(dropout(x, 0.5));
    manual_seed(7);
    auto b = host(dropout(x, 0.5));
    CHECK(a == b);
    auto c = host(dropout(x, 0.5));  // the generator advanced
    CHECK(a != c);
    lt::check_fused_matches_unfused(
        [&] {
          manual_seed(99);
          return dropout(x * 2.0, 0.3) + 1.0;
        },
        std::nullopt, true);
  }
}

TEST_CASE("composite: cross_entropy against float64") {
  for (DType tdt : {DType::Int64, DType::Int32}) {
    Tensor logits = lt::random({16, 10}, DType::Float64, 92, -4, 4);
    Tensor target = lt::make(lt::uniform_int(16, 0, 9, 93, true), {16}, tdt);
    auto lv = host(logits), tv = host(target);
    double loss = 0;
    for (int n = 0; n < 16; ++n) {
      Vec row(lv.begin() + n * 10, lv.begin() + n * 10 + 10);
      loss -= log_softmax_row(row)[size_t(tv[n])];
    }
    loss /= 16;
    Tensor ce = cross_entropy(logits, target);
    CHECK(ce.dim() == 0);
    CHECK(ce.dtype() == DType::Float64);
    CHECK(ce.item<double>() == doctest::Approx(loss).epsilon(1e-12));
    Tensor ce32 = cross_entropy(logits.to(DType::Float32), target);
    CHECK(ce32.dtype() == DType::Float32);
    CHECK(ce32.item<double>() == doctest::Approx(loss).epsilon(1e-5));
  }
}

TEST_CASE("composite: fused composites equal fusion off") {
  Tensor x = lt::random({32, 200}, DType::Float32, 94);
  Tensor w = lt::random({200}, DType::Float32, 95), b = lt::random({200}, DType::Float32, 96);
  lt::check_fused_matches_unfused([&] { return softmax(x * 1.5, 1); });
  lt::check_fused_matches_unfused([&] { return log_softmax(x, 0); });
  lt::check_fused_matches_unfused([&] { return layer_norm(x, {200}, w, b); });
  lt::check_fused_matches_unfused([&] { return rms_norm(x + 1, {200}, w); });
  lt::check_fused_matches_unfused([&] {
    Tensor t = lt::make(lt::uniform_int(32, 0, 199, 97, true), {32}, DType::Int64);
    return cross_entropy(x, t);
  });
}
