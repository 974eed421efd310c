// A matmul's pointwise consumers run as its epilogue (fusion/planner.cpp matmul_epilogue,
// cpu/matmul_epilogue.cpp): fused == fusion-off == float64 for bias, activations, a residual,
// casts, a consumer that also needs C, batches, transposed and strided operands and in-place
// updates, under both ways of running it (blocks of rows, or the GEMM and then the epilogue);
// and the kernel counts that say it is one kernel.
#include <cstdlib>

#include "helpers.h"

using namespace loom;
using lt::check_close;
using lt::host;
using Vec = std::vector<double>;

namespace {

// Sets LOOM_CPU_EPILOGUE_SPLIT (read at each use) for a scope.
struct SplitEnv {
  explicit SplitEnv(const char* v) { setenv("LOOM_CPU_EPILOGUE_SPLIT", v, 1); }
  ~SplitEnv() { unsetenv("LOOM_CPU_EPILOGUE_SPLIT"); }
};
constexpr const char* kSplits[] = {"rows", "after", "auto"};

// C[q] = A[q] @ B[q], row-major [batch, M, K] x [batch, K, N].
Vec ref_bmm(const Vec& a, const Vec& b, int64_t batch, int64_t M, int64_t K, int64_t N,
            bool b_shared = false) {
  Vec c(size_t(batch * M * N), 0);
  for (int64_t q = 0; q < batch; ++q)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k)
          s += a[q * M * K + i * K + k] * b[(b_shared ? 0 : q) * K * N + k * N + j];
        c[size_t(q * M * N + i * N + j)] = s;
      }
  return c;
}

// A linear layer's operands, random in [-1, 1) from seeds seed, seed + 1, seed + 2: x [M, K],
// w [K, N], b [N]; and x @ w and b in float64.
struct Linear {
  Tensor x, w, b;
  Vec c, hb;
  Linear(int64_t M, int64_t K, int64_t N, uint32_t seed)
      : x(lt::random({M, K}, DType::Float32, seed, -1, 1)),
        w(lt::random({K, N}, DType::Float32, seed + 1, -1, 1)),
        b(lt::random({N}, DType::Float32, seed + 2, -1, 1)),
        c(ref_bmm(host(x), host(w), 1, M, K, N)),
        hb(host(b)) {}
};

double gelu_ref(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double gelu_tanh_ref(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
}
double silu_ref(double x) { return x / (1 + std::exp(-x)); }

const lt::Tol kRef{2e-5, 2e-5};  // float32 against float64: K-long sums of values in [-1, 1)

struct Counts {
  int64_t kernels, groups, materialized;
};
Counts count(const std::function<Tensor()>& f, Tensor* out = nullptr) {
  loom::sync();
  reset_counters();
  Tensor r = f();
  loom::sync();
  if (out) *out = r;
  return {counters().kernels.load(), counters().groups.load(), counters().materialized.load()};
}

// Shapes whose M, N, K are multiples of nothing, single rows and columns, and one tall enough
// for several blocks a thread.
struct MKN {
  int64_t M, K, N;
};
constexpr MKN kShapes[] = {{37, 19, 23}, {1, 17, 29}, {45, 13, 1}, {1, 1, 1}, {301, 67, 70}};

}  // namespace

TEST_CASE("matmul epilogue: bias, activations and residual, fused == fusion-off == float64") {
  for (const char* sp : kSplits) {
    SplitEnv split(sp);
    for (auto [M, K, N] : kShapes) {
      INFO(sp << " " << M << "x" << K << "x" << N);
      Linear L(M, K, N, 11);
      Tensor &x = L.x, &w = L.w, &b = L.b;
      const Vec &c = L.c, &hb = L.hb;
      Tensor r = lt::random({M, N}, DType::Float32, 14, -1, 1);
      Vec hr = host(r);
      auto ref = [&](auto f) {
        Vec out(c.size());
        for (size_t i = 0; i < c.size(); ++i) out[i] = f(c[i], hb[i % size_t(N)], hr[i]);
        return out;
      };
      auto both = [&](const std::function<Tensor()>& f, const Vec& want) {
        check_close(f(), want, kRef);
        lt::check_fused_matches_unfused(f);
      };
      both([&] { return matmul(x, w) + b; },
           ref([](double v, double bb, double) { return v + bb; }));
      both([&] { return gelu(matmul(x, w) + b, "none"); },
           ref([](double v, double bb, double) { return gelu_ref(v + bb); }));
      both([&] { return gelu(matmul(x, w) + b, "tanh"); },
           ref([](double v, double bb, double) { return gelu_tanh_ref(v + bb); }));
      both([&] { return relu(matmul(x, w) + b); },
           ref([](double v, double bb, double) { return std::max(v + bb, 0.0); }));
      both([&] { return silu(matmul(x, w)); },
           ref([](double v, double, double) { return silu_ref(v); }));
      both([&] { return matmul(x, w) + b + r; },
           ref([](double v, double bb, double rr) { return v + bb + rr; }));
      // the residual first, C second: the epilogue's load of C is its second operand
      both([&] { return r * 0.5 + matmul(x, w); },
           ref([](double v, double, double rr) { return rr * 0.5 + v; }));
    }
  }
}

TEST_CASE("matmul epilogue: a cast to bfloat16, and float64, float16 and integer matmuls") {
  for (const char* sp : kSplits) {
    SplitEnv split(sp);
    INFO(sp);
    Linear L(53, 31, 41, 21);
    Tensor &x = L.x, &w = L.w, &b = L.b;
    const Vec &c = L.c, &hb = L.hb;
    Vec want(c.size());
    for (size_t i = 0; i < c.size(); ++i) want[i] = gelu_ref(c[i] + hb[i % 41]);
    auto bf = [&] { return gelu(matmul(x, w) + b, "none").to(DType::BFloat16); };
    Tensor y = bf();
    CHECK(y.dtype() == DType::BFloat16);
    check_close(y, want, lt::tol(DType::BFloat16));
    lt::check_fused_matches_unfused(bf);

    Tensor xd = x.to(DType::Float64), wd = w.to(DType::Float64), bd = b.to(DType::Float64);
    auto f64 = [&] { return gelu(matmul(xd, wd) + bd, "none"); };
    check_close(f64(), want, lt::Tol{1e-12, 1e-12});
    lt::check_fused_matches_unfused(f64);

    Tensor xh = x.to(DType::Float16), wh = w.to(DType::Float16), bh = b.to(DType::Float16);
    lt::check_fused_matches_unfused([&] { return relu(matmul(xh, wh) + bh); });

    Tensor xi = lt::random({9, 7}, DType::Int32, 24, -9, 9);
    Tensor wi = lt::random({7, 5}, DType::Int32, 25, -9, 9);
    Vec ci = ref_bmm(host(xi), host(wi), 1, 9, 7, 5);
    for (auto& v : ci) v = v * 3 - 1;
    auto ints = [&] { return matmul(xi, wi) * 3 - 1; };
    lt::check_equal(ints(), ci);
    lt::check_fused_matches_unfused(ints);
  }
}

TEST_CASE("matmul epilogue: a consumer that also needs C, and C read by another kernel") {
  for (const char* sp : kSplits) {
    SplitEnv split(sp);
    INFO(sp);
    Linear L(70, 40, 50, 31);
    Tensor &x = L.x, &w = L.w, &b = L.b;
    const Vec &c = L.c, &hb = L.hb;
    // C is live: the kernel writes it as well as the epilogue's result
    Tensor cc, y;
    Counts n = count([&] {
      cc = matmul(x, w);
      y = gelu(cc + b, "none");
      return y;
    });
    CHECK(n.kernels == 1);
    CHECK(n.materialized == 2);
    check_close(cc, c, kRef);
    Vec want(c.size());
    for (size_t i = 0; i < c.size(); ++i) want[i] = gelu_ref(c[i] + hb[i % 50]);
    check_close(y, want, kRef);
    // C is read again outside the epilogue (a reduction, a transposed read): written too
    Tensor s, t;
    count([&] {
      Tensor m = matmul(x, w);
      s = (m + b).sum({1});
      t = m.t() * 2 + (m + b).t();
      return t;
    });
    Vec ws(70, 0), wt(c.size());
    for (int64_t i = 0; i < 70; ++i)
      for (int64_t j = 0; j < 50; ++j) {
        ws[size_t(i)] += c[size_t(i * 50 + j)] + hb[size_t(j)];
        wt[size_t(j * 70 + i)] = c[size_t(i * 50 + j)] * 3 + hb[size_t(j)];
      }
    check_close(s, ws, lt::Tol{1e-4, 1e-4});
    check_close(t, wt, kRef);
    lt::check_fused_matches_unfused([&] {
      Tensor m = matmul(x, w);
      return m.t() * 2 + (m + b).t();
    });
    // a consumer of C that also reads a reduction of C: the matmul's group would close a cycle,
    // so it joins the reduction's kernel (broadcast_back), which reads C from memory
    auto cyc = [&] {
      Tensor m = matmul(x, w);
      return m - m.sum({1}, true) * 0.02;
    };
    Vec wc(c.size());
    for (int64_t i = 0; i < 70; ++i) {
      double rs = 0;
      for (int64_t j = 0; j < 50; ++j) rs += c[size_t(i * 50 + j)];
      for (int64_t j = 0; j < 50; ++j) wc[size_t(i * 50 + j)] = c[size_t(i * 50 + j)] - rs * 0.02;
    }
    check_close(cyc(), wc, kRef);
    lt::check_fused_matches_unfused(cyc);
    std::string e = explain(cyc());
    CHECK(e.find("2 kernel(s)") != std::string::npos);
    CHECK(e.find("broadcast_back") != std::string::npos);
  }
}

TEST_CASE("matmul epilogue: batched [B, T, C] @ [C, N], bmm, transposed and strided operands") {
  for (const char* sp : kSplits) {
    SplitEnv split(sp);
    INFO(sp);
    // [B, T, C] @ [C, N] + b: one GEMM of B * T rows
    Tensor x = lt::random({3, 37, 24}, DType::Float32, 41, -1, 1);
    Tensor w = lt::random({24, 19}, DType::Float32, 42, -1, 1);
    Tensor b = lt::random({19}, DType::Float32, 43, -1, 1);
    Vec c = ref_bmm(host(x), host(w), 3, 37, 24, 19, true), hb = host(b);
    Vec want(c.size());
    for (size_t i = 0; i < c.size(); ++i) want[i] = silu_ref(c[i] + hb[i % 19]);
    auto lin = [&] { return silu(matmul(x, w) + b); };
    check_close(lin(), want, kRef);
    lt::check_fused_matches_unfused(lin);
    // bmm with a residual read through a permuted view: the epilogue's space keeps the batch
    // dim, so a block of rows is a box inside one batch entry
    Tensor a = lt::random({4, 29, 16}, DType::Float32, 44, -1, 1);
    Tensor bb = lt::random({4, 16, 21}, DType::Float32, 45, -1, 1);
    Tensor rp = lt::random({29, 4, 21}, DType::Float32, 46, -1, 1).permute({1, 0, 2});
    Vec cb = ref_bmm(host(a), host(bb), 4, 29, 16, 21), hr = host(rp);
    for (size_t i = 0; i < cb.size(); ++i) cb[i] = std::tanh(cb[i]) - hr[i];
    auto bmm = [&] { return tanh(matmul(a, bb)) - rp; };
    check_close(bmm(), cb, kRef);
    lt::check_fused_matches_unfused(bmm);
    // many small entries: several whole matrices a block, read through one epilogue call
    Tensor a16 = lt::random({16, 5, 7}, DType::Float32, 51, -1, 1);
    Tensor b16 = lt::random({16, 7, 3}, DType::Float32, 52, -1, 1);
    Tensor r16 = lt::random({5, 16, 3}, DType::Float32, 53, -1, 1).permute({1, 0, 2});
    Vec c16 = ref_bmm(host(a16), host(b16), 16, 5, 7, 3), h16 = host(r16);
    for (size_t i = 0; i < c16.size(); ++i) c16[i] = c16[i] * 0.125 + h16[i];
    auto small = [&] { return matmul(a16, b16) * 0.125 + r16; };
    check_close(small(), c16, kRef);
    lt::check_fused_matches_unfused(small);
    // transposed A and B, a row slice of A (strided), a broadcast batch of B
    Tensor at = lt::random({24, 61}, DType::Float32, 47, -1, 1).t();
    Tensor wt = lt::random({19, 24}, DType::Float32, 48, -1, 1).t();
    Tensor xs = lt::random({122, 24}, DType::Float32, 49, -1, 1).slice(0, 0, 122, 2);
    for (Tensor lhs : {at, xs}) {
      for (Tensor rhs : {w, wt}) {
        Vec cr = ref_bmm(host(lhs), host(rhs), 1, 61, 24, 19);
        for (size_t i = 0; i < cr.size(); ++i) cr[i] = std::max(cr[i] + hb[i % 19], 0.0);
        auto f = [&] { return relu(matmul(lhs, rhs) + b); };
        check_close(f(), cr, kRef);
        lt::check_fused_matches_unfused(f);
      }
    }
    Tensor a3 = lt::random({2, 33, 24}, DType::Float32, 50, -1, 1);
    Tensor wb = w.reshape({1, 24, 19}).expand({2, 24, 19});
    auto bc = [&] { return matmul(a3, wb) * 2 + b; };
    Vec c3 = ref_bmm(host(a3), host(w), 2, 33, 24, 19, true);
    for (size_t i = 0; i < c3.size(); ++i) c3[i] = c3[i] * 2 + hb[i % 19];
    check_close(bc(), c3, kRef);
    lt::check_fused_matches_unfused(bc);
  }
}

TEST_CASE("matmul epilogue: empty operands (K = 0 gives the epilogue of zeros, M = 0 nothing)") {
  for (const char* sp : kSplits) {
    SplitEnv split(sp);
    INFO(sp);
    Tensor b = lt::random({4}, DType::Float32, 81, -1, 1);
    Vec hb = host(b), want(12);
    for (size_t i = 0; i < want.size(); ++i) want[i] = std::max(hb[i % 4], 0.0) + 1;
    Tensor y = relu(matmul(zeros({3, 0}), zeros({0, 4})) + b) + 1;
    check_close(y, want, kRef);
    Tensor e = gelu(matmul(zeros({0, 5}), zeros({5, 4})) + b, "none");
    CHECK(e.shape() == Shape{0, 4});
    CHECK(host(e).empty());
  }
}

TEST_CASE("matmul epilogue: in-place updates keep eager order") {
  for (const char* sp : kSplits) {
    SplitEnv split(sp);
    INFO(sp);
    Linear L(48, 48, 48, 61);
    Tensor &x = L.x, &w = L.w, &b = L.b;
    const Vec &c = L.c, &hb = L.hb, hx = host(x);
    // c.add_(b) on the matmul's result
    auto p1 = [&] {
      Tensor m = matmul(x, w);
      m.add_(b);
      return m;
    };
    Vec want(c.size());
    for (size_t i = 0; i < c.size(); ++i) want[i] = c[i] + hb[i % 48];
    check_close(p1(), want, kRef);
    lt::check_fused_matches_unfused(p1);
    // x.add_(x @ w): the matmul reads the x it overwrites (square, so the shapes agree)
    auto p2 = [&] {
      Tensor y = x * 1;
      y.add_(matmul(y, w));
      return y;
    };
    for (size_t i = 0; i < c.size(); ++i) want[i] = hx[i] + c[i];
    check_close(p2(), want, kRef);
    lt::check_fused_matches_unfused(p2);
    // w.mul_(x @ w): every block's GEMM reads all of w
    auto p3 = [&] {
      Tensor v = w * 1;
      v.mul_(matmul(x, v) + 1);
      return v;
    };
    Vec hw = host(w);
    for (size_t i = 0; i < c.size(); ++i) want[i] = hw[i] * (c[i] + 1);
    check_close(p3(), want, kRef);
    lt::check_fused_matches_unfused(p3);
  }
}

TEST_CASE("matmul epilogue: linear over [B, T, C] adds its bias in the GEMM's epilogue") {
  Tensor x = lt::random({3, 37, 24}, DType::Float32, 81, -1, 1);
  Tensor w = lt::random({19, 24}, DType::Float32, 82, -1, 1);  // [out_features, in_features]
  Tensor b = lt::random({19}, DType::Float32, 83, -1, 1);
  Vec c = ref_bmm(host(x), host(w.t().contiguous()), 3, 37, 24, 19, true), hb = host(b);
  for (size_t i = 0; i < c.size(); ++i) c[i] += hb[i % 19];
  auto f = [&] { return linear(x, w, b); };
  Tensor y;
  Counts n = count(f, &y);
  CHECK(y.shape() == Shape{3, 37, 19});
  check_close(y, c, kRef);
  lt::check_fused_matches_unfused(f);
  CHECK(n.kernels == 1);
  CHECK(n.materialized == 1);
  // a leading dim that does not collapse (a strided batch) keeps the batched path
  Tensor xs = lt::random({6, 37, 24}, DType::Float32, 84, -1, 1).slice(0, 0, 6, 2);
  Vec cs = ref_bmm(host(xs), host(w.t().contiguous()), 3, 37, 24, 19, true);
  for (size_t i = 0; i < cs.size(); ++i) cs[i] += hb[i % 19];
  check_close(linear(xs, w, b), cs, kRef);
}

TEST_CASE("matmul epilogue: gelu(x @ w + b) is one kernel, C never written; off: two kernels") {
  Tensor x = lt::random({256, 128}, DType::Float32, 71, -1, 1);
  Tensor w = lt::random({128, 384}, DType::Float32, 72, -1, 1);
  Tensor b = lt::random({384}, DType::Float32, 73, -1, 1);
  auto f = [&] { return gelu(matmul(x, w) + b, "none"); };
  for (const char* sp : kSplits) {
    SplitEnv split(sp);
    Counts n = count(f);
    CHECK(n.kernels == 1);
    CHECK(n.groups == 1);
    CHECK(n.materialized == 1);
  }
  std::string e = explain(f());
  CHECK(e.find("matmul_epilogue") != std::string::npos);
  CHECK(e.find("1 kernel(s)") != std::string::npos);
  CHECK(e.find("not written") != std::string::npos);
  // a reduction of the epilogue's values starts a kernel of its own, and says why
  std::string r = explain(f().sum({1}));
  CHECK(r.find("a matmul's epilogue takes pointwise ops only") != std::string::npos);
  {
    setenv("LOOM_CPU_MATMUL_EPILOGUE", "0", 1);
    Counts off = count(f);
    unsetenv("LOOM_CPU_MATMUL_EPILOGUE");
    CHECK(off.kernels == 2);
    CHECK(off.materialized == 2);
  }
  {
    lt::FusionOff off;
    CHECK(count(f).kernels == 3);  // matmul, add, gelu
  }
}

TEST_CASE(
    "matmul epilogue: without one, linear over [B, T, C] adds its bias in its consumers' kernel") {
  // A backend that runs no epilogue (the CUDA one; the CPU with LOOM_CPU_MATMUL_EPILOGUE=0):
  // the bias is added over [B, T, N], the shape its consumers have, so a GELU after it (or a
  // residual add and the norm after that) takes it into its own kernel. Added over the GEMM's
  // [B * T, N], it ran as a kernel of its own that wrote the sum for the next one to read.
  Tensor x = lt::random({3, 37, 24}, DType::Float32, 91, -1, 1);
  Tensor w = lt::random({19, 24}, DType::Float32, 92, -1, 1);
  Tensor b = lt::random({19}, DType::Float32, 93, -1, 1);
  Tensor r = lt::random({3, 37, 19}, DType::Float32, 94, -1, 1);
  Vec c = ref_bmm(host(x), host(w.t().contiguous()), 3, 37, 24, 19, true), hb = host(b);
  Vec hr = host(r), want_gelu(c.size()), want_norm_in(c.size());
  for (size_t i = 0; i < c.size(); ++i) {
    const double v = c[i] + hb[i % 19];
    want_gelu[i] = v / 2 * std::erfc(-v / std::sqrt(2.0));
    want_norm_in[i] = v + hr[i];
  }
  auto g = [&] { return gelu(linear(x, w, b), "none"); };
  auto res = [&] { return layer_norm(r + linear(x, w, b), {19}); };
  setenv("LOOM_CPU_MATMUL_EPILOGUE", "0", 1);
  Tensor y;
  Counts n = count(g, &y);
  check_close(y, want_gelu, kRef);
  CHECK(n.kernels == 2);  // the GEMM; the bias add with the GELU
  CHECK(n.materialized == 2);
  lt::check_fused_matches_unfused(g);
  Counts m = count(res, &y);
  CHECK(m.kernels == 2);  // the GEMM; the bias add, the residual add and the norm's row kernel
  lt::check_fused_matches_unfused(res);
  unsetenv("LOOM_CPU_MATMUL_EPILOGUE");
  // The norm of want_norm_in's rows, against the kernel's.
  Vec want_y(c.size());
  for (size_t row = 0; row < c.size() / 19; ++row) {
    double mu = 0, var = 0;
    for (int j = 0; j < 19; ++j) mu += want_norm_in[row * 19 + j] / 19;
    for (int j = 0; j < 19; ++j) var += std::pow(want_norm_in[row * 19 + j] - mu, 2) / 19;
    for (int j = 0; j < 19; ++j)
      want_y[row * 19 + j] = (want_norm_in[row * 19 + j] - mu) / std::sqrt(var + 1e-5);
  }
  check_close(y, want_y, kRef);
}
