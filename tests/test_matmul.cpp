// matmul / bmm against float64 loops: 2D, 1D cases, broadcast batch dims, strided operands.
#include <array>
#include <random>

#include "helpers.h"

using namespace loom;
using lt::check_close;
using lt::host;
using Vec = std::vector<double>;

namespace {

// C[b] = A[b] @ B[b] over row-major [batch, M, K] x [batch, K, N] (batch already broadcast).
Vec ref_bmm(const Vec& a, const Vec& b, int64_t batch, int64_t M, int64_t K, int64_t N) {
  Vec c(size_t(batch * M * N), 0);
  for (int64_t q = 0; q < batch; ++q)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k) s += a[q * M * K + i * K + k] * b[q * K * N + k * N + j];
        c[size_t(q * M * N + i * N + j)] = s;
      }
  return c;
}

lt::Tol mm_tol(DType dt) { return dt == DType::Float32 ? lt::Tol{1e-5, 1e-5} : lt::tol(dt); }

}  // namespace

TEST_CASE("matmul: 2D against float64 loops") {
  for (DType dt : {DType::Float32, DType::Float64}) {
    INFO(std::string(dtype_name(dt)));
    Tensor a = lt::random({17, 33}, dt, 141), b = lt::random({33, 9}, dt, 142);
    Tensor c = matmul(a, b);
    CHECK(c.shape() == Shape{17, 9});
    CHECK(c.dtype() == dt);
    check_close(c, ref_bmm(host(a), host(b), 1, 17, 33, 9), mm_tol(dt));
    // transposed (strided) operands and the method form
    Tensor at = lt::random({33, 17}, dt, 143).t(), bt = lt::random({9, 33}, dt, 144).t();
    check_close(at.matmul(bt), ref_bmm(host(at), host(bt), 1, 17, 33, 9), mm_tol(dt));
    check_close(matmul(a.slice(0, 0, 17, 2), b),
                ref_bmm(host(a.slice(0, 0, 17, 2)), host(b), 1, 9, 33, 9), mm_tol(dt));
  }
  // float16 / bfloat16 operands keep their dtype (accumulated wider)
  for (DType dt : {DType::Float16, DType::BFloat16}) {
    Tensor h = lt::random({8, 64}, dt, 161, 0, 1), k = lt::random({64, 4}, dt, 162, 0, 1);
    Tensor r = matmul(h, k);
    CHECK(r.dtype() == dt);
    check_close(r, ref_bmm(host(h), host(k), 1, 8, 64, 4));
  }
  // integers are exact
  Tensor ia = lt::random({5, 6}, DType::Int64, 145, -9, 9),
         ib = lt::random({6, 4}, DType::Int64, 146, -9, 9);
  lt::check_equal(matmul(ia, ib), ref_bmm(host(ia), host(ib), 1, 5, 6, 4));
  // K = 0 gives zeros
  check_close(matmul(zeros({3, 0}), zeros({0, 2})), Vec(6, 0.0));
}

TEST_CASE("matmul: one matrix split into blocks of C over threads, every transpose") {
  // Wide and tall C (split along N or along M), sides not a multiple of the block, and the
  // transposed storage of either operand (the block's offset steps differently there).
  for (auto [M, K, N] : {std::array<int64_t, 3>{37, 70, 301},
                         {301, 70, 37},
                         {130, 9, 130},
                         {16, 300, 17},
                         {1, 50, 200},
                         {200, 50, 1}}) {
    for (int tr = 0; tr < 4; ++tr) {
      INFO(M << "x" << K << "x" << N << " trans " << tr);
      Tensor a = tr & 1 ? lt::random({K, M}, DType::Float32, 171).t()
                        : lt::random({M, K}, DType::Float32, 171);
      Tensor b = tr & 2 ? lt::random({N, K}, DType::Float32, 172).t()
                        : lt::random({K, N}, DType::Float32, 172);
      check_close(matmul(a, b), ref_bmm(host(a), host(b), 1, M, K, N), lt::Tol{1e-4, 1e-5});
    }
  }
}

TEST_CASE("matmul: 1D operands") {
  Tensor v = lt::random({7}, DType::Float64, 147), w = lt::random({7}, DType::Float64, 148);
  Tensor m = lt::random({4, 7}, DType::Float64, 149), n = lt::random({7, 3}, DType::Float64, 150);
  Tensor dot = matmul(v, w);
  CHECK(dot.dim() == 0);
  CHECK(dot.item<double>() == doctest::Approx(ref_bmm(host(v), host(w), 1, 1, 7, 1)[0]));
  Tensor mv = matmul(m, v);
  CHECK(mv.shape() == Shape{4});
  check_close(mv, ref_bmm(host(m), host(v), 1, 4, 7, 1));
  Tensor vm = matmul(v, n);
  CHECK(vm.shape() == Shape{3});
  check_close(vm, ref_bmm(host(v), host(n), 1, 1, 7, 3));
  // 1D with batched: [7] @ [2, 7, 3] -> [2, 3]; [2, 4, 7] @ [7] -> [2, 4]
  Tensor bn = lt::random({2, 7, 3}, DType::Float64, 151);
  Tensor r = matmul(v, bn);
  CHECK(r.shape() == Shape{2, 3});
  Vec vv = host(v), vrep = vv;
  vrep.insert(vrep.end(), vv.begin(), vv.end());
  check_close(r, ref_bmm(vrep, host(bn), 2, 1, 7, 3));
  Tensor bm = lt::random({2, 4, 7}, DType::Float64, 152);
  Tensor r2 = matmul(bm, v);
  CHECK(r2.shape() == Shape{2, 4});
  Vec wrep = vv;
  wrep.insert(wrep.end(), vv.begin(), vv.end());
  check_close(r2, ref_bmm(host(bm), wrep, 2, 4, 7, 1));
}

TEST_CASE("matmul: batched with broadcast batch dims, and bmm") {
  Tensor a = lt::random({2, 1, 5, 6}, DType::Float32, 153);
  Tensor b = lt::random({3, 6, 4}, DType::Float32, 154);
  Tensor c = matmul(a, b);
  CHECK(c.shape() == Shape{2, 3, 5, 4});
  Vec ab = lt::broadcast(host(a), {2, 1, 5, 6}, {2, 3, 5, 6});
  Vec bb = lt::broadcast(host(b), {3, 6, 4}, {2, 3, 6, 4});
  check_close(c, ref_bmm(ab, bb, 6, 5, 6, 4), mm_tol(DType::Float32));
  // a 2D operand broadcasts over the other's batch
  Tensor w = lt::random({6, 2}, DType::Float32, 155);
  Tensor x = lt::random({3, 5, 6}, DType::Float32, 156);
  Vec wb = lt::broadcast(host(w), {6, 2}, {3, 6, 2});
  check_close(matmul(x, w), ref_bmm(host(x), wb, 3, 5, 6, 2), mm_tol(DType::Float32));
  // bmm, with a permuted operand
  Tensor p = lt::random({3, 6, 5}, DType::Float64, 157).transpose(1, 2);  // [3, 5, 6]
  Tensor q = lt::random({3, 6, 2}, DType::Float64, 158);
  Tensor r = bmm(p, q);
  CHECK(r.shape() == Shape{3, 5, 2});
  check_close(r, ref_bmm(host(p), host(q), 3, 5, 6, 2));
}

TEST_CASE("matmul: fuses around the opaque op; fused equals fusion off") {
  Tensor a = lt::random({32, 48}, DType::Float32, 159),
         b = lt::random({48, 16}, DType::Float32, 160);
  lt::check_fused_matches_unfused(
      [&] { return (matmul((a * 2.0).exp(), b.t().t()) + 1.0).relu(); });
  lt::check_fused_matches_unfused([&] { return softmax(matmul(a, b), 1).sum({0}); });
}

TEST_CASE("matmul: dtype and shape errors") {
  Tensor f = zeros({2, 3}), d = zeros({3, 2}, DType::Float64);
  LT_CHECK_ERROR(matmul(f, d), "matmul", "float32", "float64");
  LT_CHECK_ERROR(matmul(f, zeros({2, 3})), "matmul", "[2, 3]", "(3 vs 2)");
  LT_CHECK_ERROR(matmul(zeros({2, 3, 4}), zeros({3, 4, 5})), "matmul", "[2]", "[3]");
  LT_CHECK_ERROR(matmul(full({}, 1.0), f), "matmul", "[]");
  LT_CHECK_ERROR(bmm(zeros({2, 3}), zeros({3, 2})), "bmm", "[2, 3]");
  LT_CHECK_ERROR(bmm(zeros({2, 3, 4}), zeros({3, 4, 2})), "bmm", "[2, 3, 4]", "[3, 4, 2]");
}

// ---- the BLAS path: layouts, shapes, dtypes -------------------------------------------------

namespace {

// Unit roundoff of the dtype a result is computed and stored in.
double unit_roundoff(DType dt) {
  switch (dt) {
    case DType::Float64:
      return 0x1p-53;
    case DType::Float32:
      return 0x1p-24;
    case DType::Float16:
      return 0x1p-11;
    case DType::BFloat16:
      return 0x1p-8;
    default:
      return 0;  // integers are exact
  }
}

// Checks c = a @ b (both 2D or both batched to c's shape) element by element against a float64
// triple loop over the logical values of a and b, within the classic bound for a dot product
// of length K accumulated in float32 / float64 (K+2 roundings of sum |a_ik b_kj|), plus one
// rounding of the result for the float16 / bfloat16 store. Any layout mistake (a trans flag or a
// leading dimension wrong) is an O(1) error, far outside it.
void check_mm(const Tensor& a, const Tensor& b, const Tensor& c) {
  int r = int(c.dim());
  REQUIRE(a.dim() == r);
  REQUIRE(b.dim() == r);
  int64_t M = c.shape()[size_t(r - 2)], N = c.shape()[size_t(r - 1)], K = a.shape()[size_t(r - 1)];
  int64_t batch = numel(c.shape()) / std::max<int64_t>(M * N, 1);
  Shape sa(c.shape().begin(), c.shape().end() - 2), sb = sa;
  sa.insert(sa.end(), {M, K});
  sb.insert(sb.end(), {K, N});
  Vec va = lt::broadcast(host(a), a.shape(), sa), vb = lt::broadcast(host(b), b.shape(), sb);
  Vec got = host(c);
  DType dt = c.dtype();
  double u = dt == DType::Float64 ? unit_roundoff(dt) : is_floating(dt) ? 0x1p-24 : 0;
  double store = dt == DType::Float16 || dt == DType::BFloat16 ? unit_roundoff(dt) : 0;
  int64_t bad = 0, first = -1;
  double first_got = 0, first_want = 0;
  for (int64_t q = 0; q < batch; ++q)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double s = 0, mag = 0;
        for (int64_t k = 0; k < K; ++k) {
          double p = va[size_t((q * M + i) * K + k)] * vb[size_t((q * K + k) * N + j)];
          s += p;
          mag += std::fabs(p);
        }
        size_t at = size_t((q * M + i) * N + j);
        double acc = double(K + 2) * u * mag;
        double bound = acc + store * (std::fabs(s) + acc);
        if (!(std::fabs(got[at] - s) <= bound)) {
          if (first < 0) first = int64_t(at), first_got = got[at], first_want = s;
          ++bad;
        }
      }
  if (bad)
    FAIL_CHECK(bad << " of " << got.size() << " differ; first at " << first << ": got " << first_got
                   << ", want " << first_want << " (" << std::string(dtype_name(c.dtype())) << ", "
                   << shape_str(a.shape()) << " @ " << shape_str(b.shape()) << ")");
}

// A [R, C] operand of dtype dt in one of the layouts a view can have: row-major, a transposed
// buffer (t()), rows of a wider buffer (row stride > C), every other row, and every other column
// (neither stride 1: gathered), one row expanded over all rows (row stride 0) and one column
// over all columns (column stride 0).
enum class Layout { Rows, Transposed, WideRows, RowStep, ColStep, Expanded, ExpandedCol };
Tensor operand(int64_t R, int64_t C, DType dt, Layout l, uint32_t seed) {
  double lo = is_floating(dt) ? -2 : -5, hi = is_floating(dt) ? 2 : 5;
  switch (l) {
    case Layout::Rows:
      return lt::random({R, C}, dt, seed, lo, hi);
    case Layout::Transposed:
      return lt::random({C, R}, dt, seed, lo, hi).t();
    case Layout::WideRows:
      return lt::random({R, C + 3}, dt, seed, lo, hi).slice(1, 1, C + 1);
    case Layout::RowStep:
      return lt::random({2 * R, C}, dt, seed, lo, hi).slice(0, 0, 2 * R, 2);
    case Layout::ColStep:
      return lt::random({R, 2 * C}, dt, seed, lo, hi).slice(1, 0, 2 * C, 2);
    case Layout::Expanded:
      return lt::random({1, C}, dt, seed, lo, hi).expand({R, C});
    case Layout::ExpandedCol:
      return lt::random({R, 1}, dt, seed, lo, hi).expand({R, C});
  }
  return {};
}

const char* layout_name(Layout l) {
  const char* names[] = {"rows",     "transposed", "wide rows",   "row step",
                         "col step", "expanded",   "expanded col"};
  return names[int(l)];
}

}  // namespace

TEST_CASE("matmul: every dtype, edge shapes and operand layouts against float64 loops") {
  struct MKN {
    int64_t M, K, N;
  };
  // 1xKxN, Mx1, K = 1, odd sizes, and large ones (OpenBLAS's threaded path).
  const MKN shapes[] = {{1, 7, 5},    {6, 7, 1},       {5, 1, 4},      {1, 1, 1},
                        {17, 33, 65}, {300, 500, 200}, {100, 300, 600}};
  const Layout layouts[] = {Layout::Rows,       Layout::Transposed, Layout::WideRows,
                            Layout::RowStep,    Layout::ColStep,    Layout::Expanded,
                            Layout::ExpandedCol};
  uint32_t seed = 300;
  for (DType dt : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16, DType::Int32,
                   DType::Int64}) {
    for (const MKN& s : shapes) {
      bool large = s.M * s.K * s.N > 100000;
      for (Layout la : layouts)
        for (Layout lb : layouts) {
          // the large shapes: every layout of each operand against a row-major other one
          if (large && la != Layout::Rows && lb != Layout::Rows) continue;
          if (large && !(dt == DType::Float32 || dt == DType::Float64) && la != lb) continue;
          INFO(dtype_name(dt), " ", s.M, "x", s.K, "x", s.N, " A ", layout_name(la), ", B ",
               layout_name(lb));
          Tensor a = operand(s.M, s.K, dt, la, ++seed), b = operand(s.K, s.N, dt, lb, ++seed);
          Tensor c = matmul(a, b);
          REQUIRE(c.shape() == Shape{s.M, s.N});
          CHECK(c.dtype() == dt);
          check_mm(a, b, c);
        }
    }
  }
}

TEST_CASE("matmul: broadcast batch dims with strided operands") {
  for (DType dt : {DType::Float32, DType::Float64, DType::BFloat16, DType::Int64}) {
    INFO(dtype_name(dt));
    // [3, 1, 5, 7] @ [1, 4, 7, 6] -> [3, 4, 5, 6]
    Tensor a = lt::random({3, 1, 5, 7}, dt, 401), b = lt::random({1, 4, 7, 6}, dt, 402);
    Tensor c = matmul(a, b);
    REQUIRE(c.shape() == Shape{3, 4, 5, 6});
    check_mm(a.expand({3, 4, 5, 7}), b.expand({3, 4, 7, 6}), c);
    // the same with B a transposed view per batch entry, and A's batch a permuted buffer
    Tensor bt = lt::random({1, 4, 6, 7}, dt, 403).transpose(-1, -2);
    Tensor ap = lt::random({5, 3, 1, 7}, dt, 404).permute({1, 2, 0, 3});  // [3, 1, 5, 7]
    Tensor c2 = matmul(ap, bt);
    REQUIRE(c2.shape() == Shape{3, 4, 5, 6});
    check_mm(ap.expand({3, 4, 5, 7}), bt.expand({3, 4, 7, 6}), c2);
  }
  // attention-shaped: [128, 64, 32] @ [128, 32, 64] with K^T as a view, and a 2D weight over a
  // batch
  Tensor q = lt::random({128, 64, 32}, DType::Float32, 405);
  Tensor k = lt::random({128, 64, 32}, DType::Float32, 406).transpose(1, 2);
  check_mm(q, k, matmul(q, k));
  Tensor x = lt::random({4, 70, 96}, DType::Float32, 407),
         w = lt::random({96, 80}, DType::Float32, 408);
  check_mm(x, w.expand({4, 96, 80}), matmul(x, w));
  // a weight every batch entry shares: one GEMM of batch * M rows where A's entries follow each
  // other (here a slice of wider rows, ld 200 > K, and B a transposed view), one per entry
  // where they do not (A's batch dim permuted)
  Tensor xs = lt::random({3, 50, 200}, DType::Float32, 412).slice(2, 10, 106);  // [3, 50, 96]
  Tensor wt = lt::random({80, 96}, DType::Float32, 413).t();                    // [96, 80]
  check_mm(xs, wt.expand({3, 96, 80}), matmul(xs, wt));
  Tensor xp = lt::random({50, 3, 96}, DType::Float64, 414).permute({1, 0, 2});  // [3, 50, 96]
  Tensor w64 = lt::random({96, 80}, DType::Float64, 415);
  check_mm(xp, w64.expand({3, 96, 80}), matmul(xp, w64));
}

TEST_CASE("matmul: x @ w + b then relu, fused, equals fusion off and the float64 loops") {
  Tensor x = lt::random({64, 96}, DType::Float32, 409),
         w = lt::random({96, 48}, DType::Float32, 410),
         bias = lt::random({48}, DType::Float32, 411);
  Vec fused = lt::check_fused_matches_unfused([&] { return (matmul(x, w) + bias).relu(); });
  Vec ref = ref_bmm(host(x), host(w), 1, 64, 96, 48), vb = host(bias);
  for (size_t i = 0; i < ref.size(); ++i) ref[i] = std::max(0.0, ref[i] + vb[i % 48]);
  CHECK(fused.size() == ref.size());
  check_close(lt::make(fused, {64, 48}), ref, lt::Tol{1e-4, 1e-4});
}

TEST_CASE("linear: input @ weight^T + bias with leading batch dims, and its errors") {
  Tensor x = lt::random({2, 3, 5}, DType::Float32, 181, -1, 1);
  Tensor w = lt::random({4, 5}, DType::Float32, 182, -1, 1);
  Tensor b = lt::random({4}, DType::Float32, 183, -1, 1);
  Vec hx = host(x), hw = host(w), hb = host(b), want(24);
  for (int r = 0; r < 6; ++r)
    for (int o = 0; o < 4; ++o) {
      double s = hb[size_t(o)];
      for (int i = 0; i < 5; ++i) s += hx[size_t(r * 5 + i)] * hw[size_t(o * 5 + i)];
      want[size_t(r * 4 + o)] = s;
    }
  Tensor y = linear(x, w, b);
  CHECK(y.shape() == Shape{2, 3, 4});
  check_close(y, want, lt::Tol{1e-5, 1e-5});
  Vec nob = want;
  for (int r = 0; r < 6; ++r)
    for (int o = 0; o < 4; ++o) nob[size_t(r * 4 + o)] -= hb[size_t(o)];
  check_close(linear(x, w), nob, lt::Tol{1e-5, 1e-5});
  LT_CHECK_ERROR(linear(x, w.t()), "linear: input shape [2, 3, 5]", "[5, 4]", "(4)");
  LT_CHECK_ERROR(linear(x, x), "linear", "weight must be 2-D", "[2, 3, 5]");
  LT_CHECK_ERROR(linear(x, w, b.slice(0, 0, 3)), "linear", "bias shape [3]", "(4)");
}

#ifdef LOOM_HAVE_OPENBLAS_TESTS
#include "cpu/blas_lib.h"

TEST_CASE("matmul: each BLAS library's GEMMs against float64 loops (MKL where it loads)") {
  std::vector<cpu::BlasLib> libs{cpu::openblas_lib()};
  if (auto mkl = cpu::mkl_lib())
    libs.push_back(*mkl);
  else
    MESSAGE("no MKL loads here (pip install mkl; LOOM_MKL): OpenBLAS alone");
  std::mt19937 g(7);
  std::uniform_real_distribution<double> d(-1, 1);
  for (auto [m, k, n] : {std::array<int, 3>{37, 129, 65}, {128, 2048, 96}, {1, 7, 1}}) {
    for (bool ta : {false, true}) {
      std::vector<double> a(size_t(m) * k), b(size_t(k) * n), want(size_t(m) * n, 0.0);
      for (auto& v : a) v = d(g);
      for (auto& v : b) v = d(g);
      // a is [m, k] row-major, or [k, m] read transposed
      auto at = [&](int i, int p) { return ta ? a[size_t(p) * m + i] : a[size_t(i) * k + p]; };
      for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j)
          for (int p = 0; p < k; ++p) want[size_t(i) * n + j] += at(i, p) * b[size_t(p) * n + j];
      std::vector<float> af(a.begin(), a.end()), bf(b.begin(), b.end());
      for (const auto& lib : libs) {
        CAPTURE(lib.name);
        std::vector<float> cf(size_t(m) * n, -1.f);
        std::vector<double> cd(size_t(m) * n, -1.0);
        lib.sgemm(101, ta ? 112 : 111, 111, m, n, k, 1.f, af.data(), ta ? m : k, bf.data(), n, 0.f,
                  cf.data(), n);
        lib.dgemm(101, ta ? 112 : 111, 111, m, n, k, 1.0, a.data(), ta ? m : k, b.data(), n, 0.0,
                  cd.data(), n);
        for (size_t i = 0; i < want.size(); ++i) {
          CHECK(cf[i] == doctest::Approx(want[i]).epsilon(1e-4).scale(std::sqrt(double(k))));
          CHECK(cd[i] == doctest::Approx(want[i]).epsilon(1e-12).scale(double(k)));
        }
      }
    }
  }
}
#endif
