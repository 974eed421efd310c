// svdvals against a one-sided Jacobi SVD in long double written here (an independent method:
// Eigen's divide and conquer computes loom's), over shapes, batches, strided views and dtypes.
#include <algorithm>
#include <cmath>
#include <limits>

#include "helpers.h"

using namespace loom;

namespace {

// Singular values of the m x n row-major matrix a, descending: rotate column pairs until they
// are orthogonal (Hestenes); the column norms are then the singular values.
std::vector<double> jacobi_svdvals(std::vector<long double> a, int64_t m, int64_t n) {
  if (m < n) {  // the transpose has the same values
    std::vector<long double> t(size_t(m * n));
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) t[size_t(j * m + i)] = a[size_t(i * n + j)];
    return jacobi_svdvals(t, n, m);
  }
  auto at = [&](int64_t i, int64_t j) -> long double& { return a[size_t(i * n + j)]; };
  for (int sweep = 0; sweep < 60; ++sweep) {
    long double off = 0;
    for (int64_t p = 0; p < n; ++p)
      for (int64_t q = p + 1; q < n; ++q) {
        long double al = 0, be = 0, ga = 0;
        for (int64_t i = 0; i < m; ++i)
          al += at(i, p) * at(i, p), be += at(i, q) * at(i, q), ga += at(i, p) * at(i, q);
        if (ga == 0) continue;
        off = std::max(off, std::fabs(ga) / std::sqrt(al * be));
        long double zeta = (be - al) / (2 * ga);
        long double t = (zeta >= 0 ? 1 : -1) / (std::fabs(zeta) + std::sqrt(1 + zeta * zeta));
        long double c = 1 / std::sqrt(1 + t * t), s = c * t;
        for (int64_t i = 0; i < m; ++i) {
          long double x = at(i, p), y = at(i, q);
          at(i, p) = c * x - s * y, at(i, q) = s * x + c * y;
        }
      }
    if (off < 1e-19L) break;
  }
  std::vector<double> sv(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) {
    long double s = 0;
    for (int64_t i = 0; i < m; ++i) s += at(i, j) * at(i, j);
    sv[size_t(j)] = double(std::sqrt(s));
  }
  std::sort(sv.begin(), sv.end(), std::greater<>());
  return sv;
}

// The reference for every matrix of x (last two dims), concatenated.
std::vector<double> reference(const Tensor& x) {
  std::vector<double> v = lt::host(x.contiguous());
  int64_t m = x.shape()[x.dim() - 2], n = x.shape()[x.dim() - 1], per = m * n;
  std::vector<double> out;
  for (size_t b = 0; per > 0 && b < v.size() / size_t(per); ++b) {
    std::vector<long double> a(v.begin() + b * per, v.begin() + (b + 1) * per);
    for (double s : jacobi_svdvals(a, m, n)) out.push_back(s);
  }
  return out;
}

void check_svdvals(const Tensor& x, double rtol) {
  Tensor s = svdvals(x);
  Shape want(x.shape().begin(), x.shape().end() - 1);
  want.back() = std::min(x.shape()[x.dim() - 2], x.shape()[x.dim() - 1]);
  REQUIRE(s.shape() == want);
  CHECK(s.dtype() == x.dtype());
  std::vector<double> got = lt::host(s), ref = reference(x);
  REQUIRE(got.size() == ref.size());
  double scale = 0;
  for (double r : ref) scale = std::max(scale, r);
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("value " << i << ": got " << got[i] << ", want " << ref[i]);
    CHECK(std::fabs(got[i] - ref[i]) <= rtol * scale);
  }
}

}  // namespace

TEST_CASE("svdvals: shapes, batches and dtypes against a long double Jacobi SVD") {
  uint32_t seed = 1;
  for (Shape s : {Shape{5, 4}, Shape{4, 5}, Shape{1, 1}, Shape{1, 7}, Shape{9, 1}, Shape{3, 6, 6},
                  Shape{2, 3, 8, 5}, Shape{33, 17}}) {
    INFO("shape " << shape_str(s));
    check_svdvals(lt::random(s, DType::Float64, ++seed), 1e-14);
    check_svdvals(lt::random(s, DType::Float32, ++seed), 2e-7);
  }
  // float16 and bfloat16: computed from the stored values, rounded once
  check_svdvals(lt::random({6, 4}, DType::BFloat16, 50), 8e-3);
  check_svdvals(lt::random({6, 4}, DType::Float16, 51), 1e-3);
}

TEST_CASE("svdvals: strided and broadcast views, rank-deficient and scaled matrices") {
  Tensor x = lt::random({4, 7, 5}, DType::Float64, 60);
  check_svdvals(x.transpose(-1, -2), 1e-14);
  check_svdvals(x.slice(1, 1, 7, 2), 1e-14);
  check_svdvals(lt::random({1, 5, 3}, DType::Float64, 61).expand({4, 5, 3}), 1e-14);
  // rank 1: one value, the rest (rounding-level) zeros
  Tensor u = lt::random({6, 1}, DType::Float64, 62), v = lt::random({1, 4}, DType::Float64, 63);
  check_svdvals(matmul(u, v), 1e-14);
  // large and tiny magnitudes (no overflow in the squares of the reference's norms)
  check_svdvals(lt::random({5, 5}, DType::Float64, 64) * 1e150, 1e-14);
  check_svdvals(lt::random({5, 5}, DType::Float64, 65) * 1e-150, 1e-14);
}

TEST_CASE("svdvals: fused around, the same as fusion off") {
  Tensor x = lt::random({3, 6, 4}, DType::Float32, 70);
  lt::check_fused_matches_unfused([&] { return svdvals(x * 2.0 + 1.0) * 3.0 - 1.0; });
}

TEST_CASE("svdvals: NaN and infinity give NaNs; empty matrices; bad input errors") {
  std::vector<double> v(12, 1.0);
  v[5] = std::numeric_limits<double>::quiet_NaN();
  v[12 - 6 + 1] = std::numeric_limits<double>::infinity();  // the second matrix
  Tensor x = lt::make(v, {2, 3, 2}, DType::Float64);
  for (double s : lt::host(svdvals(x))) CHECK(std::isnan(s));
  CHECK(svdvals(zeros({0, 3})).shape() == Shape{0});
  CHECK(svdvals(zeros({2, 0, 3})).shape() == Shape{2, 0});
  CHECK(svdvals(zeros({0, 4, 3})).shape() == Shape{0, 3});
  LT_CHECK_ERROR(svdvals(zeros({3})), "svdvals", "[3]");
  LT_CHECK_ERROR(svdvals(zeros({3, 3}, DType::Int32)), "svdvals", "int32", "[3, 3]");
}
