// The CPU's own float exp, tanh and sigmoid (cpu/vmath.h): ulp error against float64 over a
// strided sweep of every float and dense sweeps of the busy ranges, special values, the vector
// code against its scalar form (what builds without AVX-512 run), tails, and fused programs
// against fusion-off (both run these kernels, so single ops agree bit for bit).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "../helpers.h"
#include "cpu/vmath.h"
#include "cpu/vmath_table.h"

using namespace loom;

namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

using cpu::vmath_table::kFns;
using cpu::vmath_table::ref_sigmoid;
using cpu::vmath_table::ulp_error;
using Fn = cpu::vmath_table::Fn;

// Every float whose bit pattern is a multiple of `stride`, the special values, and a dense
// uniform sweep of [-30, 30].
std::vector<float> sweep(uint32_t stride) {
  std::vector<float> xs;
  for (uint64_t u = 0; u < (uint64_t(1) << 32); u += stride)
    xs.push_back(std::bit_cast<float>(uint32_t(u)));
  const float specials[] = {0.f,
                            -0.f,
                            kInf,
                            -kInf,
                            std::numeric_limits<float>::quiet_NaN(),
                            0x1p-149f,
                            -0x1p-149f,
                            0x1.fffffcp-127f,
                            -0x1.fffffcp-127f,
                            0x1p-126f,
                            -0x1p-126f,
                            3.4028235e38f,
                            -3.4028235e38f,
                            1e-8f,
                            -1e-8f,
                            9.1f,
                            -9.1f,
                            9.01f,
                            -9.01f,
                            17.f,
                            80.f,
                            81.f,
                            -87.3f,
                            -88.72f,
                            88.72f,
                            88.7229f,
                            89.f,
                            100.f,
                            -103.28f,
                            -103.97f,
                            -104.f,
                            -105.f,
                            0.5f,
                            -0.5f};
  for (float f : specials) xs.push_back(f);
  std::mt19937 g(42);
  std::uniform_real_distribution<float> u(-30.f, 30.f);
  for (int i = 0; i < 1 << 20; ++i) xs.push_back(u(g));
  return xs;
}

}  // namespace

TEST_CASE("cpu vmath: exp, tanh, sigmoid within a few ulp of float64 over the float range") {
  std::vector<float> xs = sweep(251);
  std::vector<float> out(xs.size());
  for (const Fn& f : kFns) {
    INFO(f.name);
    f.vec(xs.data(), out.data(), int64_t(xs.size()));
    double worst = 0;
    float at = 0;
    int64_t scalar_mismatch = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
      double e = ulp_error(out[i], f.ref(double(xs[i])));
      if (e > worst) worst = e, at = xs[i];
      if (!cpu::vmath_table::same(f.scalar(xs[i]), out[i])) ++scalar_mismatch;
    }
    INFO("worst " << worst << " ulp at x = " << at);
    CHECK(worst <= f.max_ulp);
    CHECK(scalar_mismatch == 0);  // the scalar form gives the same bits
  }
}

TEST_CASE("cpu vmath: special values, signs and NaN") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float in[] = {0.f, -0.f, kInf, -kInf, nan, -nan, 1e-30f, -1e-30f, 0x1p-149f, -0x1p-149f};
  constexpr int n = int(sizeof(in) / sizeof(float));
  float t[n], s[n], e[n];
  cpu::tanh_f32(in, t, n);
  cpu::sigmoid_f32(in, s, n);
  cpu::exp_f32(in, e, n);
  // tanh keeps the sign of zero and is exact for tiny x; +-inf give +-1
  CHECK(std::bit_cast<uint32_t>(t[0]) == std::bit_cast<uint32_t>(0.f));
  CHECK(std::bit_cast<uint32_t>(t[1]) == std::bit_cast<uint32_t>(-0.f));
  CHECK(t[2] == 1.f);
  CHECK(t[3] == -1.f);
  CHECK(t[6] == 1e-30f);
  CHECK(t[7] == -1e-30f);
  CHECK(t[8] == 0x1p-149f);
  CHECK(t[9] == -0x1p-149f);
  CHECK(s[0] == 0.5f);
  CHECK(s[1] == 0.5f);
  CHECK(s[2] == 1.f);
  CHECK(s[3] == 0.f);
  CHECK(e[0] == 1.f);
  CHECK(e[1] == 1.f);
  CHECK(e[2] == kInf);
  CHECK(e[3] == 0.f);
  for (int i : {4, 5}) {
    CHECK(std::isnan(t[i]));
    CHECK(std::isnan(s[i]));
    CHECK(std::isnan(e[i]));
  }
  // deep negative sigmoid is e^x in the subnormal range, not flushed to 0
  float x = -100.f, y;
  cpu::sigmoid_f32(&x, &y, 1);
  CHECK(y > 0.f);
  CHECK(ulp_error(y, ref_sigmoid(-100.0)) <= 1);
}

TEST_CASE("cpu vmath: the same value at every position (masked tails) and exp_sub") {
  std::mt19937 g(3);
  std::normal_distribution<float> nd(0.f, 4.f);
  std::vector<float> a(80), b(80), whole(80), part(80);
  for (auto& v : a) v = nd(g);
  for (auto& v : b) v = nd(g);
  for (const Fn& f : kFns) {
    INFO(f.name);
    f.vec(a.data(), whole.data(), 80);
    for (int off : {0, 1, 7, 15, 16, 17}) {
      for (int n : {0, 1, 5, 15, 16, 17, 31, 33, 63}) {
        if (off + n > 80) continue;
        std::fill(part.begin(), part.end(), -7.f);
        f.vec(a.data() + off, part.data(), n);
        for (int i = 0; i < n; ++i) CHECK(part[size_t(i)] == whole[size_t(off + i)]);
        if (n < 80) CHECK(part[size_t(n)] == -7.f);  // nothing written past n
      }
    }
  }
  // exp(a - b): the rounded difference, then exp, for every operand layout
  std::vector<float> d(80), want(80), got(80);
  for (int i = 0; i < 80; ++i) d[size_t(i)] = a[size_t(i)] - b[size_t(i)];
  cpu::exp_f32(d.data(), want.data(), 80);
  cpu::exp_sub_f32(a.data(), 1, b.data(), 1, got.data(), 77);
  for (int i = 0; i < 77; ++i) CHECK(got[size_t(i)] == want[size_t(i)]);
  for (int i = 0; i < 80; ++i) d[size_t(i)] = a[size_t(i)] - b[0];
  cpu::exp_f32(d.data(), want.data(), 80);
  cpu::exp_sub_f32(a.data(), 1, b.data(), 0, got.data(), 79);
  for (int i = 0; i < 79; ++i) CHECK(got[size_t(i)] == want[size_t(i)]);
  for (int i = 0; i < 80; ++i) d[size_t(i)] = a[0] - b[size_t(i)];
  cpu::exp_f32(d.data(), want.data(), 80);
  cpu::exp_sub_f32(a.data(), 0, b.data(), 1, got.data(), 80);
  for (int i = 0; i < 80; ++i) CHECK(got[size_t(i)] == want[size_t(i)]);
}

// pair_unary_f32 (the fused loop) by position: runs of 16 to 31 floats take the plain loop,
// longer ones the software-pipelined one (cpu/vmath.cpp), the rest a masked tail; every
// element must come out the same whichever took it, and as exp_f32 & co. and plain ops give it.
TEST_CASE("cpu vmath: the fused loop gives the same value at every position and length") {
  std::mt19937 g(5);
  std::normal_distribution<float> nd(0.f, 3.f);
  constexpr int kLen = 100;
  std::vector<float> a(kLen), b(kLen), w(kLen), whole(kLen), part(kLen), fb(kLen);
  for (auto& v : a) v = nd(g);
  for (auto& v : b) v = nd(g);
  for (auto& v : w) v = nd(g);
  cpu::PreOps pre;
  pre.n = 2, pre.op[0] = Op::Mul, pre.k[0] = 1.5f, pre.op[1] = Op::Add, pre.k[1] = 0.5f;
  for (const Fn& f : kFns)
    for (bool relu : {false, true}) {
      if (!f.folds) continue;
      INFO(std::string(f.name) << " relu " << relu);
      auto run = [&](int off, int n, float* out) {
        cpu::pair_unary_f32(Op::Mul, a.data() + off, 1, a.data() + off, 1, Op::Add, true, f.op,
                            b.data() + off, relu, out, n, Op::Sub, true, w.data() + off, 1, false,
                            pre);
      };
      run(0, kLen, whole.data());
      // the reference: b * 1.5 + 0.5, f, a * a + that, - w, relu, each rounded on its own
      for (int i = 0; i < kLen; ++i) fb[size_t(i)] = b[size_t(i)] * 1.5f + 0.5f;
      f.vec(fb.data(), fb.data(), kLen);
      for (int i = 0; i < kLen; ++i) {
        volatile float sq = a[size_t(i)] * a[size_t(i)];
        volatile float sum = sq + fb[size_t(i)];
        float v = sum - w[size_t(i)];
        float want = relu ? (v > 0 ? v : (v != v ? v : 0.f)) : v;
        CHECK(cpu::vmath_table::same(whole[size_t(i)], want));
      }
      for (int off : {0, 3, 16})
        for (int n : {0, 1, 15, 16, 17, 31, 32, 33, 47, 48, 63, 64, 65, 80}) {
          if (off + n > kLen) continue;
          std::fill(part.begin(), part.end(), -7.f);
          run(off, n, part.data());
          for (int i = 0; i < n; ++i)
            CHECK_MESSAGE(cpu::vmath_table::same(part[size_t(i)], whole[size_t(off + i)]),
                          "off " << off << " n " << n << " i " << i << ": " << part[size_t(i)]
                                 << " vs " << whole[size_t(off + i)]);
          CHECK(part[size_t(n)] == -7.f);  // nothing written past n
        }
    }
}

TEST_CASE("cpu vmath: fused programs with tanh, sigmoid, exp match fusion-off and float64") {
  // Bit for bit with the own kernels (same loop either way); Eigen's (LOOM_CPU_VMATH=0) take
  // a different path for a run's unaligned ends, so there only within tolerance.
  const bool exact = cpu::vmath_on();
  for (int64_t n : {int64_t(1000), int64_t(70001)}) {
    INFO(n << " elements");
    Tensor x = lt::random({n}, DType::Float32, uint32_t(11 + n), -6, 6);
    std::vector<double> hx = lt::host(x);
    // single ops: the same kernel either way, so the same bits
    lt::check_fused_matches_unfused([&] { return tanh(x); }, {}, exact);
    lt::check_fused_matches_unfused([&] { return sigmoid(x); }, {}, exact);
    lt::check_fused_matches_unfused([&] { return exp(x); }, {}, exact);
    // chain8, the bench's program, against a float64 reference
    auto chain8 = [&] { return relu(sigmoid(tanh(x * 1.5 + 0.5) * x) + x * x - 0.25); };
    std::vector<double> want(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      double v = hx[size_t(i)];
      double s = 1.0 / (1.0 + std::exp(-(std::tanh(v * 1.5 + 0.5) * v)));
      want[size_t(i)] = std::max(s + v * v - 0.25, 0.0);
    }
    // bit for bit too: each op of the fused loops rounds as its own kernel does
    std::vector<double> got = lt::check_fused_matches_unfused(chain8, {}, exact);
    lt::check_close(lt::make(got, {n}, DType::Float64), want, lt::tol(DType::Float32));
    // exp of a difference (the exp_sub fold), tanh and sigmoid feeding other ops
    Tensor y = lt::random({n}, DType::Float32, uint32_t(12 + n), -6, 6);
    lt::check_fused_matches_unfused([&] { return exp(x - y); }, {}, exact);
    lt::check_fused_matches_unfused([&] { return exp(y - 0.5) + tanh(x) * sigmoid(y); }, {}, exact);
  }
  // rows: softmax's exp(x - rowmax) (exp_sub with a per-row operand)
  Tensor m = lt::random({64, 300}, DType::Float32, 99, -40, 40);
  lt::check_fused_matches_unfused([&] { return exp(m - m.amax({1}, true)); }, {}, exact);
}

// The tile program folds an exp/tanh/sigmoid nothing else reads into the Add/Sub/Mul (plain,
// pair or relu'd) that reads it (cpu/program.cpp fold_unary_operands): every op, both operand
// orders, scalar / tensor / per-row other operands, short and long rows.
TEST_CASE("cpu vmath: exp/tanh/sigmoid folded into the op that reads them") {
  auto arith = [](char op, auto x, auto y) {
    return op == '+' ? x + y : op == '-' ? x - y : x * y;
  };
  auto f64 = [](char f, double v) {
    return f == 't' ? std::tanh(v) : f == 's' ? 1.0 / (1.0 + std::exp(-v)) : std::exp(v);
  };
  auto ft = [](char f, const Tensor& v) {
    return f == 't' ? tanh(v) : f == 's' ? sigmoid(v) : exp(v);
  };
  uint32_t seed = 9100;
  for (Shape s : {Shape{3, 37}, Shape{2, 20000}})
    for (char f : {'t', 's', 'e'})
      for (char op : {'+', '-', '*'})
        for (int form = 0; form < 4; ++form)         // f first, f second, in a pair, pair + relu
          for (int other = 0; other < 3; ++other) {  // scalar, tensor, row max
            INFO("f " << f << " op " << op << " form " << form << " other " << other << " cols "
                      << s.back());
            Tensor x = lt::random(s, DType::Float32, ++seed),
                   y = lt::random(s, DType::Float32, ++seed),
                   z = lt::random(s, DType::Float32, ++seed);
            auto prog = [&] {
              Tensor w = other == 2 ? z.amax({1}, true) : z;
              Tensor fx = ft(f, x);
              if (form == 0) return other == 0 ? arith(op, fx, 0.75) : arith(op, fx, w);
              if (form == 1) return other == 0 ? arith(op, 0.75, fx) : arith(op, w, fx);
              Tensor r = arith(op, y * w, fx);
              return form == 3 ? relu(r) : r;
            };
            std::vector<double> hx = lt::host(x), hy = lt::host(y), hz = lt::host(z);
            int64_t cols = s.back(), n = numel(s);
            std::vector<double> want(static_cast<size_t>(n)),
                row_max(static_cast<size_t>(n / cols));
            for (int64_t r0 = 0; r0 < n; r0 += cols)
              row_max[size_t(r0 / cols)] =
                  *std::max_element(hz.begin() + r0, hz.begin() + r0 + cols);
            for (int64_t i = 0; i < n; ++i) {
              double w = other == 2 ? row_max[size_t(i / cols)] : hz[size_t(i)];
              double fx = f64(f, hx[size_t(i)]), r;
              if (form == 0)
                r = arith(op, fx, other == 0 ? 0.75 : w);
              else if (form == 1)
                r = arith(op, other == 0 ? 0.75 : w, fx);
              else
                r = arith(op, hy[size_t(i)] * w, fx);
              want[size_t(i)] = form == 3 ? std::max(r, 0.0) : r;
            }
            std::vector<double> got = lt::check_fused_matches_unfused(prog);
            lt::check_close(lt::make(got, s, DType::Float64), want, lt::tol(DType::Float32));
          }
}
