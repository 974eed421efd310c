// matmul / bmm against float64 loops: 2D, 1D cases, broadcast batch dims, strided operands.
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
