// Differential tests of the CUDA backend: every op of the table, reductions, normalizations, an
// optimizer step, random numbers and matmul run on device=cuda and are compared with the CPU
// device (the reference semantics) and with fusion off. Skips itself where CUDA is unavailable.
// Ops on a pending copy fuse into one multi-output kernel per family, which keeps the number of
// NVRTC compiles (the cost of this test on a fresh machine) small.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "../tolerances.h"
#include "cuda/stream.h"
#include "fusion/segments.h"
#include "loom.h"

using namespace loom;

namespace {

bool skip() {
  if (backend_available(DeviceKind::CUDA)) return false;
  MESSAGE("CUDA unavailable, skipping GPU differential tests");
  return true;
}

const Device kGPU{DeviceKind::CUDA, 0};
const DType kDtypes[] = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16,
                         DType::Int32,   DType::Int64,   DType::Bool,    DType::Int16,
                         DType::UInt16,  DType::UInt32,  DType::UInt64};

// Host data of dtype `dt` on the CPU: floats in [-2, 2] with NaN and +-inf when `specials`;
// integers in [-5, 5] without 0; bools half true.
Tensor host_data(const Shape& s, DType dt, uint32_t seed, bool specials = false) {
  std::mt19937 g(seed);
  int64_t n = numel(s);
  std::vector<double> v(size_t(std::max<int64_t>(n, 0)));
  for (auto& x : v) {
    if (dt == DType::Bool) {
      x = double(g() & 1);
    } else if (is_integral(dt)) {
      do x = double(int(g() % 11) - 5);
      while (x == 0);
    } else {
      x = std::uniform_real_distribution<double>(-2, 2)(g);
    }
  }
  if (specials && is_floating(dt) && n > 8) {
    v[1] = NAN, v[3] = INFINITY, v[5] = -INFINITY;
  }
  return tensor<double>(v, s, Options(dt));
}

// GPU against CPU: the device column of tests/tolerances.h.
using lt::Tol;

// got (GPU) against want (CPU or fusion off): same shape and dtype, values within tolerance
// (bitwise for integers and bools).
void check_same(const Tensor& got, const Tensor& want, const std::string& what,
                std::optional<Tol> t = {}) {
  INFO(what);
  REQUIRE(got.shape() == want.shape());
  REQUIRE(got.dtype() == want.dtype());
  std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
  Tol tt = t ? *t : lt::device_tol(want.dtype());
  int64_t bad = 0, first = -1;
  for (size_t i = 0; i < g.size(); ++i) {
    bool ok = std::isnan(w[i])   ? std::isnan(g[i])
              : std::isinf(w[i]) ? g[i] == w[i]
                                 : std::fabs(g[i] - w[i]) <= tt.atol + tt.rtol * std::fabs(w[i]);
    if (!ok && bad++ == 0) first = int64_t(i);
  }
  if (bad) {
    std::ostringstream os;
    os.precision(10);
    os << what << ": " << bad << " of " << g.size() << " differ; first at " << first << ": gpu "
       << g[size_t(first)] << ", cpu " << w[size_t(first)] << " (" << dtype_name(want.dtype())
       << " " << shape_str(want.shape()) << ")";
    FAIL_CHECK(os.str());
  }
}

// Runs `f` on a CPU input and on the same data on the GPU; compares every result.
void differential(const std::vector<Tensor>& cpu_in,
                  const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& f,
                  const std::string& what, std::optional<Tol> t = {}) {
  std::vector<Tensor> gpu_in;
  for (const Tensor& x : cpu_in) gpu_in.push_back(x.to(kGPU).clone());  // pending: ops fuse
  std::vector<Tensor> g = f(gpu_in);
  std::vector<Tensor> c = f(cpu_in);
  REQUIRE(g.size() == c.size());
  for (size_t i = 0; i < g.size(); ++i) {
    CHECK(g[i].device() == kGPU);
    check_same(g[i], c[i], what + " #" + std::to_string(i), t);
  }
}

// Reductions of the table over `dim` (all dims when negative), whichever way each takes dims.
template <typename F>
Tensor reduce_by(F f, const Tensor& x, int dim) {
  if constexpr (std::is_invocable_v<F, const Tensor&, std::optional<int64_t>, bool>)
    return f(x, dim < 0 ? std::nullopt : std::optional<int64_t>(dim), false);
  else
    return f(x, dim < 0 ? Dims{} : Dims{dim}, false);
}

struct FusionOff {
  bool was = fusion_enabled();
  FusionOff() { set_fusion(false); }
  ~FusionOff() { set_fusion(was); }
};

}  // namespace

TEST_CASE("gpu: unary and binary ops x dtypes match the CPU") {
  if (skip()) return;
  for (DType dt : kDtypes) {
    std::string name = dtype_name(dt);
    Tensor x = host_data({37, 129}, dt, 1, true), y = host_data({37, 129}, dt, 2);
    // Integer division by a zero element raises (gpu: deferred checks): bools divide by true
    Tensor divisor = dt == DType::Bool ? full({37, 129}, 1, Options(dt)) : y;
    differential(
        {x},
        [&](const std::vector<Tensor>& in) {
          std::vector<Tensor> r;
#define LOOM_X(op, api, kind) \
  try {                       \
    r.push_back(api(in[0]));  \
  } catch (const Error&) {    \
  }
          LOOM_UNARY_OPS(LOOM_X)
#undef LOOM_X
          return r;
        },
        "unary " + name);
    differential(
        {x, y, divisor},
        [&](const std::vector<Tensor>& in) {
          std::vector<Tensor> r;
#define LOOM_X(op, api, kind) /* loom::lt, not the tests' namespace lt */              \
  try {                                                                                \
    bool by = Op::op == Op::FloorDiv || Op::op == Op::Remainder || Op::op == Op::Fmod; \
    r.push_back(loom::api(in[0], in[by ? 2 : 1]));                                     \
    r.push_back(loom::api(in[0], 3));                                                  \
    r.push_back(loom::api(2.5, in[1]));                                                \
  } catch (const Error&) {                                                             \
  }
          LOOM_BINARY_OPS(LOOM_X)
#undef LOOM_X
          r.push_back(where(gt(cast(in[0], DType::Float32), 0.0), in[0], in[1]));
          return r;
        },
        "binary " + name);
  }
}

TEST_CASE("gpu: casts between dtypes match the CPU (saturation wrap rounding)") {
  if (skip()) return;
  std::vector<double> v = {0.5,   -0.5,     1.5,       2.5,    -2.5,  127.4, 128.6, -129.5,
                           255.5, 300.7,    -300.7,    1e10,   -1e10, 65504, 65520, 1e-8,
                           NAN,   INFINITY, -INFINITY, 3.3e38, 0.1,   -0.0};
  for (int f = 0; f < kNumDTypes; ++f) {  // from every dtype
    const DType from = DType(f);
    Tensor x = is_floating(from) ? tensor<double>(v, {int64_t(v.size())}, Options(from))
                                 : host_data({500}, from, 3) * (from == DType::Bool ? 1 : 37);
    if (!is_floating(from) && from != DType::Bool) x = cast(x, from);
    differential(
        {x},
        [&](const std::vector<Tensor>& in) {
          std::vector<Tensor> r;
          for (int to = 0; to < kNumDTypes; ++to) r.push_back(cast(in[0], DType(to)));
          return r;
        },
        std::string("casts from ") + dtype_name(from), Tol{0, 0});
  }
}

TEST_CASE("gpu: reductions match the CPU (row column full split loop)") {
  if (skip()) return;
  struct Case {
    Shape shape;
    int dim;
  };
  // Row persistent, column, full (split), few long rows (split), long rows (loop), column split,
  // column persistent.
  std::vector<Case> cases = {{{64, 1000}, 1},   {{64, 1000}, 0},  {{64, 1000}, -1}, {{8, 32768}, 1},
                             {{200, 20000}, 1}, {{4096, 512}, 0}, {{8, 20000}, 0}};
  for (DType dt : kDtypes) {
    for (auto& c : cases) {
      bool small = c.shape[0] == 64;
      if (!small && dt != DType::Float32 && dt != DType::Int64 && dt != DType::BFloat16) continue;
      Tensor x = host_data(c.shape, dt, 4, is_floating(dt) && small);
      Tol t = lt::device_tol(dt);
      if (dt == DType::Float32) t = {1e-4, 1e-3};  // sums of 64k elements in different orders
      if (dt == DType::Float64) t = {1e-9, 1e-9};
      std::string what = std::string("reduce ") + dtype_name(dt) + " " + shape_str(c.shape) +
                         " dim " + std::to_string(c.dim);
      differential(
          {x},
          [&](const std::vector<Tensor>& in) {
            std::vector<Tensor> r;
#define LOOM_X(op, api, ...)                                                                      \
  try {                                                                                           \
    r.push_back(reduce_by(                                                                        \
        [](auto&&... a) -> decltype(loom::api(a...)) { return loom::api(a...); }, in[0], c.dim)); \
  } catch (const Error&) {                                                                        \
  }
            LOOM_REDUCE_OPS(LOOM_X)
#undef LOOM_X
            if (is_floating(dt))
              r.push_back(sqrt(sum(in[0] * in[0], {c.dim < 0 ? 0 : c.dim})) + 1.0);
            return r;
          },
          what, t);
    }
  }
}

TEST_CASE("gpu: softmax layer_norm rms_norm match the CPU and fusion off") {
  if (skip()) return;
  for (Shape s : {Shape{64, 1000}, Shape{256, 4096}, Shape{8, 32768}}) {
    for (DType dt : {DType::Float32, DType::BFloat16, DType::Float16}) {
      if (dt == DType::Float16 && s[0] != 64) continue;
      Tensor x = host_data(s, dt, 5), w = host_data({s[1]}, dt, 6), b = host_data({s[1]}, dt, 7);
      std::string what = std::string(dtype_name(dt)) + " " + shape_str(s);
      auto f = [&](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{softmax(in[0], 1), log_softmax(in[0], 1),
                                   layer_norm(in[0], {s[1]}, in[1], in[2]),
                                   rms_norm(in[0], {s[1]}, in[1])};
      };
      Tol t = dt == DType::Float32 ? Tol{1e-4, 1e-5} : lt::device_tol(dt);
      differential({x, w, b}, f, "normalizations " + what, t);
      if (dt == DType::Float32) {  // fusion off on the GPU: one kernel per primitive
        std::vector<Tensor> gin = {x.to(kGPU), w.to(kGPU), b.to(kGPU)};
        std::vector<Tensor> fused = f(gin), unfused;
        {
          FusionOff off;
          unfused = f(gin);
          for (auto& u : unfused) u.to_vector<double>();
        }
        for (size_t i = 0; i < fused.size(); ++i)
          check_same(fused[i], unfused[i], "fused vs unfused " + what, t);
      }
    }
  }
  // A softmax row that fits on chip runs as one kernel.
  Tensor x = host_data({64, 1000}, DType::Float32, 8).to(kGPU);
  loom::sync();
  reset_counters();
  Tensor y = softmax(x, 1);
  y.to_vector<float>();
  CHECK(counters().kernels == 1);
}

TEST_CASE("gpu: normalizations over row lengths and views (vector chunks, odd rows, strides)") {
  if (skip()) return;
  // Row lengths around every geometry: a few lanes a row (128), 2 warps (1000), odd (1001:
  // single columns), long persistent rows (8192, 32768 bf16) and the loop over 32768 f32; views:
  // an aligned column slice (vectors), offsets of 1 and 2 columns (single and 2-wide chunks), a
  // transposed input (strided reads, vector stores).
  for (DType dt : {DType::Float32, DType::BFloat16}) {
    Tol t = dt == DType::Float32 ? Tol{1e-4, 1e-5} : lt::device_tol(dt);
    for (int64_t cols : {128, 1000, 1001, 8192, 32768}) {
      int64_t rows = cols >= 8192 ? 300 : 515;
      Tensor base = host_data({rows, cols + 8}, dt, uint32_t(20 + cols));
      Tensor w = host_data({cols}, dt, 21), b = host_data({cols}, dt, 22);
      Tensor dense = base.slice(1, 0, cols).contiguous();
      using In = std::vector<Tensor>;
      std::vector<std::pair<std::string, std::function<Tensor(const In&)>>> views = {
          {"contiguous", [&](const In& in) { return in[3]; }},
          {"column slice", [&](const In& in) { return in[0].slice(1, 0, cols); }},
          {"offset 1", [&](const In& in) { return in[0].slice(1, 1, cols + 1); }},
          {"offset 2", [&](const In& in) { return in[0].slice(1, 2, cols + 2); }}};
      if (cols <= 1001) views.push_back({"transposed", [&](const In& in) { return in[4].t(); }});
      In cin = {base, w, b, dense, dense.t().contiguous()}, gin;
      for (const Tensor& x : cin) gin.push_back(x.to(kGPU));
      loom::sync();
      for (auto& [name, view] : views) {
        std::string what = std::string(dtype_name(dt)) + " " + std::to_string(rows) + "x" +
                           std::to_string(cols) + " " + name;
        auto f = [&](const In& in) {
          Tensor x = view(in);
          return In{softmax(x, 1), layer_norm(x, {cols}, in[1], in[2]),
                    rms_norm(x, {cols}, std::nullopt, 1e-6)};
        };
        In g = f(gin), c = f(cin), u;
        {
          FusionOff off;
          u = f(gin);
          for (auto& x : u) x.to_vector<double>();
        }
        for (size_t i = 0; i < g.size(); ++i) {
          check_same(g[i], c[i], "norm vs cpu " + what + " #" + std::to_string(i), t);
          check_same(g[i], u[i], "norm vs unfused " + what + " #" + std::to_string(i), t);
        }
      }
    }
  }
}

TEST_CASE("gpu: row-broadcast pointwise and vector sums over sizes and views") {
  if (skip()) return;
  for (int64_t cols : {128, 1000, 1001, 4096}) {
    Tensor a = host_data({67, cols + 4}, DType::Float32, 30),
           b = host_data({cols}, DType::Float32, 31);
    Tensor hb = host_data({cols}, DType::BFloat16, 32);
    Tensor ga = a.to(kGPU), gb = b.to(kGPU), ghb = hb.to(kGPU);
    std::string c = " " + std::to_string(cols);
    auto gelu_bias = [](const Tensor& x, const Tensor& y) { return gelu(x + y, "tanh"); };
    Tol t{1e-5, 1e-6};
    check_same(gelu_bias(ga.slice(1, 0, cols).contiguous(), gb),
               gelu_bias(a.slice(1, 0, cols).contiguous(), b), "gelu+bias" + c, t);
    check_same(gelu_bias(ga.slice(1, 0, cols), gb), gelu_bias(a.slice(1, 0, cols), b),
               "gelu+bias column slice" + c, t);
    check_same(gelu_bias(ga.slice(1, 2, cols + 2), gb), gelu_bias(a.slice(1, 2, cols + 2), b),
               "gelu+bias offset 2" + c, t);
    check_same(gelu_bias(ga.slice(1, 0, cols), ghb), gelu_bias(a.slice(1, 0, cols), hb),
               "gelu+bias bf16 bias" + c, t);
    check_same(cast(ga.slice(1, 0, cols) * gb, DType::BFloat16),
               cast(a.slice(1, 0, cols) * b, DType::BFloat16), "bf16 out" + c);
    check_same(ga.slice(1, 0, cols) + ga.slice(1, 0, 1), a.slice(1, 0, cols) + a.slice(1, 0, 1),
               "column broadcast" + c, t);
  }
  for (int64_t n : {int64_t(1) << 22, (int64_t(1) << 22) + 1, int64_t(3) << 20}) {
    Tensor x = host_data({n}, DType::Float32, 33);
    Tensor gx = x.to(kGPU);
    std::string what = "sum " + std::to_string(n);
    check_same(sum(gx), sum(x), what, Tol{1e-4, 1e-3});
    check_same(sum(gx.slice(0, 4, n)), sum(x.slice(0, 4, n)), what + " offset 4", Tol{1e-4, 1e-3});
    check_same(amax(abs(gx) * 2.0), amax(abs(x) * 2.0), what + " amax", Tol{0, 0});
  }
}

TEST_CASE("gpu: AdamW over parameters of many sizes is one launch and matches the CPU") {
  if (skip()) return;
  // Horizontal fusion (fusion/segments.h): the per-parameter updates of one dtype are one
  // launch of the kernel of segments; the same bits as a launch a group (set_segments(false)),
  // the CPU's within float32 rounding.
  const std::vector<Shape> shapes{{7}, {128}, {33, 5}, {1000}, {3, 3, 3}, {5000}, {64, 64}};
  auto run = [&](Device d, int64_t* kernels) {
    std::vector<Tensor> ps;
    uint64_t seed = 70;
    for (const Shape& s : shapes)
      ps.push_back(host_data(s, DType::Float32, seed++).to(d).requires_grad_());
    optim::AdamOptions o = optim::adamw_defaults();
    o.lr = 0.05;
    optim::AdamW opt(ps, o);
    for (int step = 0; step < 3; ++step) {
      for (Tensor& p : ps) p.set_grad(host_data(p.shape(), DType::Float32, seed++).to(d));
      loom::sync();
      reset_counters();
      opt.step();
      loom::sync();
      *kernels = counters().kernels.load();
    }
    return ps;
  };
  int64_t k_cpu = 0, k_gpu = 0, k_apart = 0;
  std::vector<Tensor> c = run(kCPU, &k_cpu), g = run(kGPU, &k_gpu);
  set_segments(false);
  std::vector<Tensor> a = run(kGPU, &k_apart);
  set_segments(true);
  CHECK(k_cpu == 1);
  CHECK(k_gpu == 1);
  CHECK(k_apart == int64_t(shapes.size()));
  for (size_t i = 0; i < shapes.size(); ++i) {
    check_same(g[i], a[i], "segments against a launch each, parameter " + std::to_string(i),
               Tol{0, 0});
    check_same(g[i], c[i], "segments against the CPU, parameter " + std::to_string(i),
               Tol{1e-5, 1e-6});
  }
}

TEST_CASE("gpu: an Adam step is one kernel and matches the CPU and fusion off") {
  if (skip()) return;
  Shape s{100003};
  auto step = [](Tensor& p, Tensor& m, Tensor& v, const Tensor& g) {
    m.mul_(0.9).add_(g * 0.1);
    v.mul_(0.999).addcmul_(g, g, 0.001);
    p.sub_(m / (v.sqrt() + 1e-8) * 1e-3);
  };
  Tensor p = host_data(s, DType::Float32, 9), g = host_data(s, DType::Float32, 10);
  Tensor m = host_data(s, DType::Float32, 11) * 0.1, v = abs(host_data(s, DType::Float32, 12));
  m = m.clone(), v = v.clone();
  loom::sync();
  Tensor gp = p.to(kGPU), gg = g.to(kGPU), gm = m.to(kGPU), gv = v.to(kGPU);
  Tensor up = p.to(kGPU), ug = g.to(kGPU), um = m.to(kGPU), uv = v.to(kGPU);
  loom::sync();
  reset_counters();
  step(gp, gm, gv, gg);
  loom::sync();
  CHECK(counters().kernels == 1);
  step(p, m, v, g);
  {
    FusionOff off;
    step(up, um, uv, ug);
    loom::sync();
  }
  Tol t{1e-5, 1e-7};
  check_same(gp, p, "adam p", t), check_same(gm, m, "adam m", t), check_same(gv, v, "adam v", t);
  check_same(gp, up, "adam p unfused", t), check_same(gm, um, "adam m unfused", t);
  check_same(gv, uv, "adam v unfused", t);
}

TEST_CASE("gpu: rand randn dropout iota equal the CPU") {
  if (skip()) return;
  manual_seed(1234);
  Tensor rc = rand({333, 97}), nc = randn({333, 97}), dc = dropout(ones({1000}), 0.3);
  Tensor ic = arange(0, 1000, 3), ec = eye(37), lc = linspace(-1, 1, 999);
  manual_seed(1234);
  Options o(DType::Float32, kGPU);
  Tensor rg = rand({333, 97}, o), ng = randn({333, 97}, o), dg = dropout(ones({1000}, o), 0.3);
  Tensor ig = arange(0, 1000, 3, std::nullopt, kGPU), eg = eye(37, {}, o);
  Tensor lg = linspace(-1, 1, 999, o);
  check_same(rg, rc, "rand", Tol{0, 0});
  check_same(ng, nc, "randn", Tol{1e-6, 1e-6});
  check_same(dg, dc, "dropout", Tol{0, 0});
  check_same(ig, ic, "arange", Tol{0, 0});
  check_same(eg, ec, "eye", Tol{0, 0});
  check_same(lg, lc, "linspace", Tol{1e-7, 1e-7});
}

TEST_CASE("gpu: strided broadcast unaligned region-write kernels match the CPU") {
  if (skip()) return;
  Tensor a = host_data({64, 1000}, DType::Float32, 13), b = host_data({1000}, DType::Float32, 14);
  Tensor h = host_data({4099}, DType::Float16, 15);
  Tensor ga = a.to(kGPU), gb = b.to(kGPU), gh = h.to(kGPU);
  check_same(ga.t() * 2.0 + 1.0, a.t() * 2.0 + 1.0, "transposed");
  check_same(ga + gb, a + b, "broadcast row");
  check_same(ga + ga.slice(1, 0, 1), a + a.slice(1, 0, 1), "broadcast column");
  check_same(ga.slice(1, 1, 999, 3).exp(), a.slice(1, 1, 999, 3).exp(), "strided slice");
  check_same(gh.slice(0, 1, 4099) * 0.5, h.slice(0, 1, 4099) * 0.5, "unaligned f16");
  check_same(cast(gh, DType::Float32) + 1.0, cast(h, DType::Float32) + 1.0, "vector f16 -> f32");
  Tensor t = a.clone(), gt_ = ga.clone();
  t.index_put({Slice::range(0, 10), Slice::range(5, 50)}, 1.5);
  gt_.index_put({Slice::range(0, 10), Slice::range(5, 50)}, 1.5);
  check_same(gt_, t, "index_put");
  check_same(cat({ga, ga * 2.0}, 1), cat({a, a * 2.0}, 1), "cat");
  check_same(cumsum(ga.slice(1, 0, 50), 1), cumsum(a.slice(1, 0, 50), 1), "cumsum",
             Tol{1e-5, 1e-5});
  Tensor tgt = cast(arange(64) % 10, DType::Int64);
  check_same(cross_entropy(ga, tgt.to(kGPU)), cross_entropy(a, tgt), "cross_entropy",
             Tol{1e-5, 1e-5});
  check_same(ga.var({1}), a.var({1}), "var", Tol{1e-5, 1e-6});
}

TEST_CASE("gpu: a row gather picks each row's element exactly, in its reduction's kernel") {
  if (skip()) return;
  // lse(x) - x.gather(1, t) in one flush: y must be lse minus the picked element in float32
  // (one rounding), the pick x[i, t[i]] exactly; where the backend reads the gather inside the
  // log-sum-exp's row kernel (caps.row_gather; LOOM_CUDA_ROW_GATHER=0 on CUDA: its own kernel)
  // the plan says so.
  const bool fused = backend(kGPU).caps().row_gather;
  for (DType dt : {DType::Float32, DType::BFloat16}) {
    // The bases in memory on both devices (a pending cast would be a value of the lse's kernel).
    Tensor rows = cast(host_data({70, 1011}, DType::Float32, 70), dt).contiguous();
    Tensor cols = cast(host_data({1000, 64}, DType::Float32, 71), dt).contiguous();
    Tensor rows_g = rows.to(kGPU), cols_g = cols.to(kGPU);
    loom::sync();
    for (int view = 0; view < 3; ++view) {
      auto pick = [&](const Tensor& r, const Tensor& c) {
        Tensor x = r.slice(0, 3, 67).slice(1, 5, 1005);  // [64, 1000], offset rows
        if (view == 1) x = x.slice(1, 0, 1000, 2);       // strided columns
        if (view == 2) x = c.t();                        // transposed
        return x;
      };
      Tensor xc = pick(rows, cols), x = pick(rows_g, cols_g);
      const int64_t C = xc.shape()[1];
      std::vector<int64_t> tv(64);
      for (int64_t i = 0; i < 64; ++i) tv[size_t(i)] = (i * 7919 + 13) % C;
      tv[0] = 0, tv[63] = C - 1;
      Tensor t = cast(tensor<int64_t>(tv, {64, 1}), view == 1 ? DType::Int32 : DType::Int64);
      Tensor tg = t.to(kGPU);
      loom::sync();
      Tensor lse = logsumexp(cast(x, DType::Float32), {1}, true);
      Tensor y = lse - cast(x.gather(1, tg), DType::Float32);
      const std::string plan = explain(y);
      const std::string what = std::string(dtype_name(dt)) + " view " + std::to_string(view);
      INFO(what);
      CHECK((plan.find("row_gather") != std::string::npos) == fused);
      std::vector<float> l = lse.to_vector<float>(), got = y.to_vector<float>();
      std::vector<float> xv = cast(xc, DType::Float32).contiguous().to_vector<float>();
      for (int64_t i = 0; i < 64; ++i)
        CHECK(got[size_t(i)] == l[size_t(i)] - xv[size_t(i * C + tv[size_t(i)])]);
      check_same(lse, logsumexp(cast(xc, DType::Float32), {1}, true), what + " lse",
                 Tol{1e-5, 1e-5});
    }
  }
}

TEST_CASE("gpu: a read waits for its own value's kernel, not the flush's later work") {
  if (skip()) return;
  // A training step's loss is read while its backward and update still run: here a sum read
  // while the 60 products of [2048, 2048] recorded after it (~1 TFLOP) are still on the stream.
  const int64_t n = 2048;
  Tensor xc = host_data({n, n}, DType::Float32, 71) * (1.0 / std::sqrt(double(n)));
  Tensor x = xc.to(kGPU);
  loom::sync();
  Tensor s = x.sum(), w = x;
  for (int i = 0; i < 60; ++i) w = matmul(w, x);
  const float got = s.item<float>();
  CHECK_FALSE(loom::cuda::current_stream(0).query());  // the products still run
  CHECK(got == doctest::Approx(xc.sum().item<float>()).epsilon(1e-4));
  // A later read of what the flush wrote after the event waits for it.
  Tensor w1 = matmul(x, x);
  loom::sync();
  check_same(w1, matmul(xc, xc), "a product after the read", Tol{1e-3, 1e-3});
  CHECK(loom::cuda::current_stream(0).query());
}

TEST_CASE("gpu: causal attention (the mask compared inside the softmax kernel) matches the CPU") {
  if (skip()) return;
  // CUDA compares indices over the scores' shape (BackendCaps::cheap_index), the CPU reads an
  // [L, S] mask: both keep column j <= row i, with L < S, L > S and L = S, forward and backward.
  for (auto [L, S] : {std::pair<int64_t, int64_t>{5, 9}, {9, 5}, {64, 64}}) {
    Tensor q = host_data({2, 3, L, 8}, DType::Float32, 60),
           k = host_data({2, 3, S, 8}, DType::Float32, 61);
    Tensor v = host_data({2, 3, S, 8}, DType::Float32, 62),
           w = host_data({2, 3, L, 8}, DType::Float32, 63);
    std::vector<Tensor> c{q.clone().requires_grad_(), k.clone().requires_grad_(),
                          v.clone().requires_grad_()};
    std::vector<Tensor> g{q.to(kGPU).requires_grad_(), k.to(kGPU).requires_grad_(),
                          v.to(kGPU).requires_grad_()};
    Tensor yc = scaled_dot_product_attention(c[0], c[1], c[2], {}, 0.0, true);
    Tensor yg = scaled_dot_product_attention(g[0], g[1], g[2], {}, 0.0, true);
    std::string name = "causal attention " + std::to_string(L) + "x" + std::to_string(S);
    check_same(yg, yc, name, Tol{1e-5, 1e-6});
    (yc * w).sum().backward();
    (yg * w.to(kGPU)).sum().backward();
    for (int i = 0; i < 3; ++i)
      check_same(g[i].grad(), c[i].grad(), name + " grad " + std::to_string(i), Tol{1e-4, 1e-5});
  }
}

TEST_CASE(
    "gpu: a training step (embedding, attention, layer_norm, losses, AdamW) matches the CPU") {
  if (skip()) return;
  // The same small transformer-ish step on both devices from the same weights: token
  // embedding, causal attention, layer_norm, a GELU layer, cross_entropy with options, the
  // backward and two AdamW steps; parameters compared after each step.
  auto make = [](Device d) {
    std::vector<Tensor> ps;
    uint64_t seed = 40;
    for (Shape s : {Shape{50, 32}, Shape{96, 32}, Shape{32}, Shape{32}, Shape{64, 32}, Shape{64},
                    Shape{50, 64}}) {
      Tensor t = host_data(s, DType::Float32, seed++) * 0.2;
      ps.push_back(t.to(d).detach().requires_grad_());
    }
    return ps;
  };
  Tensor idx = randint(0, 50, {4, 16}), target = randint(0, 50, {4 * 16});
  auto loss_of = [&](const std::vector<Tensor>& p, Device d) {
    Tensor x = embedding(idx.to(d), p[0]);                        // [4, 16, 32]
    Tensor qkv = matmul(x, p[1].t()).reshape({4, 16, 3, 2, 16});  // 2 heads of 16
    Tensor q = qkv.select(2, 0).transpose(1, 2), k = qkv.select(2, 1).transpose(1, 2);
    Tensor v = qkv.select(2, 2).transpose(1, 2);
    Tensor a =
        scaled_dot_product_attention(q, k, v, {}, 0.0, true).transpose(1, 2).reshape({4, 16, 32});
    Tensor h = layer_norm(x + a, {32}, p[2], p[3]);
    Tensor z = gelu(matmul(h, p[4].t()) + p[5]);
    Tensor logits = matmul(z, p[6].t()).reshape({64, 50});
    CrossEntropyOptions o;
    o.ignore_index = 7;
    o.label_smoothing = 0.1;
    return cross_entropy(logits, target.to(d), o);
  };
  std::vector<Tensor> pc = make(kCPU), pg = make(kGPU);
  optim::AdamOptions ao = optim::adamw_defaults();
  ao.lr = 1e-2;
  optim::AdamW oc(pc, ao), og(pg, ao);
  for (int step = 0; step < 2; ++step) {
    Tensor lc = loss_of(pc, kCPU), lg = loss_of(pg, kGPU);
    oc.zero_grad(), og.zero_grad();
    lc.backward(), lg.backward();
    oc.step(), og.step();
    CHECK(std::fabs(lc.item<float>() - lg.item<float>()) < 1e-4);
    for (size_t i = 0; i < pc.size(); ++i)
      check_same(pg[i], pc[i], ("training step parameter " + std::to_string(i)).c_str(),
                 Tol{2e-4, 1e-4});
  }
}

TEST_CASE("gpu: gather scatter_add index_select index_add embedding match the CPU") {
  if (skip()) return;
  // The device's gather and scatter-add kernels (cuda/index_kernels.cpp) add duplicates in the
  // CPU's order with the CPU's roundings: every result bit for bit.
  for (DType dt : {DType::Float32, DType::BFloat16, DType::Int32, DType::Float64}) {
    std::string name = dtype_name(dt);
    Tensor a = host_data({16, 300}, dt, 40), s = host_data({16, 70}, dt, 41);
    manual_seed(42);
    Tensor idx = randint(0, 300, {16, 70}), i1 = randint(0, 16, {40});
    Tensor src40 = host_data({40, 300}, dt, 43);
    Tensor ga = a.to(kGPU), gs = s.to(kGPU), gi = idx.to(kGPU),
           gi1 = cast(i1, DType::Int32).to(kGPU);
    Tol t{0, 0};
    check_same(gather(ga, 1, gi), gather(a, 1, idx), "gather " + name);
    check_same(gather(ga.t(), 0, gi.t()) * 2, gather(a.t(), 0, idx.t()) * 2, "gather^T " + name);
    check_same(scatter_add(ga, 1, gi, gs), scatter_add(a, 1, idx, s), "scatter_add " + name, t);
    check_same(index_select(ga, 0, gi1), index_select(a, 0, i1), "index_select " + name);
    check_same(index_add(ga, 0, gi1, src40.to(kGPU)), index_add(a, 0, i1, src40),
               "index_add " + name, t);
    check_same(embedding(gi1.reshape({5, 8}), ga), embedding(i1.reshape({5, 8}), a),
               "embedding " + name);
    // the rows kernel over outer indices, several column tiles and a partial one, many hits a
    // row (2000 positions into 7 rows); and an index that is not one value across the columns
    Tensor b3 = host_data({3, 7, 290}, dt, 46), s3 = host_data({3, 2000, 290}, dt, 47);
    Tensor i3 = randint(0, 7, {2000});
    check_same(index_add(b3.to(kGPU), 1, i3.to(kGPU), s3.to(kGPU)), index_add(b3, 1, i3, s3),
               "index_add 3-d " + name, t);
    Tensor j3 = randint(0, 7, {3, 2000, 290});
    check_same(scatter_add(b3.to(kGPU), 1, j3.to(kGPU), s3.to(kGPU)), scatter_add(b3, 1, j3, s3),
               "scatter_add 3-d " + name, t);
  }
  // the gradient of gather (a scatter_add) on the device, and the deferred range check
  Tensor x = host_data({8, 50}, DType::Float32, 44);
  Tensor gx = x.to(kGPU).requires_grad_(), cx = x.clone().requires_grad_();
  manual_seed(45);
  Tensor idx = randint(0, 50, {8, 90});
  (gather(gx, 1, idx.to(kGPU)) * 3.0).sum().backward();
  (gather(cx, 1, idx) * 3.0).sum().backward();
  check_same(gx.grad(), cx.grad(), "gather backward", Tol{1e-6, 1e-6});
  // an embedding's gradient at a character model's size: 96 rows, 4096 tokens, 384 wide
  Tensor w = host_data({96, 384}, DType::Float32, 48);
  Tensor gw = w.to(kGPU).requires_grad_(), cw = w.clone().requires_grad_();
  Tensor tok = randint(0, 96, {64, 64}), up = host_data({64, 64, 384}, DType::Float32, 49);
  (embedding(tok.to(kGPU), gw) * up.to(kGPU)).sum().backward();
  (embedding(tok, cw) * up).sum().backward();
  check_same(gw.grad(), cw.grad(), "embedding backward", Tol{0, 0});
  Tensor bad = gather(x.to(kGPU), 1, (idx + 10).to(kGPU));
  CHECK_THROWS_AS(loom::sync(), Error);
  CHECK(bad.to(kCPU).shape() == Shape{8, 90});
}

TEST_CASE("gpu: matmul (cuBLASLt and fallback) matches the CPU") {
  if (skip()) return;
  for (DType dt : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16, DType::Int32,
                   DType::Int64}) {
    Tensor a = host_data({3, 65, 130}, dt, 16), b = host_data({3, 130, 47}, dt, 17);
    Tensor w = host_data({130, 47}, dt, 18);
    Tol t = dt == DType::Float32 ? Tol{1e-5, 1e-4} : lt::device_tol(dt);
    if (dt == DType::Float16 || dt == DType::BFloat16) t = {3e-2, 5e-2};
    std::string name = dtype_name(dt);
    Tensor ga = a.to(kGPU), gb = b.to(kGPU), gw = w.to(kGPU);
    check_same(matmul(ga, gb), matmul(a, b), "bmm " + name, t);
    check_same(matmul(ga, gw), matmul(a, w), "broadcast weight " + name, t);
    check_same(matmul(gb.transpose(1, 2), ga.transpose(1, 2)),
               matmul(b.transpose(1, 2), a.transpose(1, 2)), "transposed " + name, t);
    check_same(matmul(ga[0], gw), matmul(a[0], w), "2-D " + name, t);
  }
  // Batch dims that collapse to one stride only in part: heads split from one projection
  // ([B, T, 3, H, d] -> [B, H, T, d]), a broadcast head dim, three batch dims of which no two
  // collapse. One call covers a run of them and the rest loop; C's offsets follow its layout.
  Tensor qkv = host_data({4, 9, 3 * 5 * 6}, DType::Float32, 20).reshape({4, 9, 3, 5, 6});
  Tensor q = qkv.select(2, 0).permute({0, 2, 1, 3}), k = qkv.select(2, 1).permute({0, 2, 1, 3});
  Tensor v = qkv.select(2, 2).permute({0, 2, 1, 3});
  Tensor gqkv = qkv.to(kGPU);
  Tensor gq = gqkv.select(2, 0).permute({0, 2, 1, 3}), gk = gqkv.select(2, 1).permute({0, 2, 1, 3});
  Tensor gv = gqkv.select(2, 2).permute({0, 2, 1, 3});
  Tol t{1e-5, 1e-4};
  check_same(matmul(gq, gk.transpose(-2, -1)), matmul(q, k.transpose(-2, -1)), "heads q k^T", t);
  check_same(matmul(matmul(gq, gk.transpose(-2, -1)), gv),
             matmul(matmul(q, k.transpose(-2, -1)), v), "heads p v", t);
  Tensor e = host_data({4, 1, 9, 6}, DType::Float32, 21);
  check_same(matmul(e.to(kGPU).expand({4, 5, 9, 6}), gk.transpose(-2, -1)),
             matmul(e.expand({4, 5, 9, 6}), k.transpose(-2, -1)), "broadcast head dim", t);
  // batch dims [2, 5, 3] with strides [840, 8, 280] (no two collapse) times a contiguous operand
  Tensor m3 = host_data({2, 3, 7, 5, 8}, DType::Float32, 22);
  Tensor w3 = host_data({2, 5, 3, 8, 4}, DType::Float32, 23);
  check_same(matmul(m3.to(kGPU).permute({0, 3, 1, 2, 4}), w3.to(kGPU)),
             matmul(m3.permute({0, 3, 1, 2, 4}), w3), "three batch dims", t);
}

TEST_CASE("gpu: svdvals (on the host, back on the device) matches the CPU") {
  if (skip()) return;
  Tensor a = host_data({3, 9, 6}, DType::Float32, 19);
  Tensor g = svdvals(a.to(kGPU) * 2.0) + 1.0;
  CHECK(g.device() == kGPU);
  check_same(g, svdvals(a * 2.0) + 1.0, "svdvals", Tol{1e-6, 1e-6});
}

TEST_CASE("gpu: more than 2^31 elements use 64-bit indexing") {
  if (skip()) return;
  int64_t n = (int64_t(1) << 31) + 100;
  Tensor x = ones({n}, Options(DType::UInt8, kGPU));
  Tensor s = sum(x + 1);
  CHECK(s.item<int64_t>() == 2 * n);
  CHECK(x.slice(0, n - 3, n).sum().item<int64_t>() == 3);
}
