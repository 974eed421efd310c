// Random programs (pointwise, broadcasts, reductions, views, in-place updates through views,
// composites, sync points) run fused and with fusion off must agree: the eager-semantics
// invariant tested on DAGs no hand-written test thinks of.
#include "helpers.h"

using namespace loom;

namespace {

const Shape kS{4, 5, 6};
// Shapes that broadcast to kS.
const std::vector<Shape> kShapes = {{4, 5, 6}, {5, 6},    {4, 1, 6}, {5, 1},
                                    {6},       {1, 1, 1}, {4, 5, 1}};

struct Program {
  std::mt19937 g;
  DType dt;
  std::vector<Tensor> pool;

  explicit Program(uint32_t seed, DType d) : g(seed), dt(d) {
    for (size_t i = 0; i < kShapes.size(); ++i)
      pool.push_back(lt::random(kShapes[i], dt, seed * 31 + uint32_t(i), -2, 2));
  }
  int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(g); }
  Tensor& any() { return pool[size_t(pick(int(pool.size())))]; }
  Tensor full_shape() {  // a pool tensor broadcast up and materialized as [4, 5, 6]
    Tensor t = any();
    return t.shape() == kS ? t : (t + zeros(kS, dt));
  }

  Tensor unary(const Tensor& x) {
    switch (pick(8)) {
      case 0:
        return x.tanh();
      case 1:
        return x.sin();
      case 2:
        return x.sigmoid() * 4.0 - 2.0;
      case 3:
        return -x;
      case 4:
        return x.abs().sqrt();
      case 5:
        return x.tanh().exp();
      case 6:
        return clamp(x, Scalar(-1.5), Scalar(1.5));
      default:
        return x.gelu();
    }
  }
  Tensor binary(const Tensor& a, const Tensor& b) {
    switch (pick(7)) {
      case 0:
        return a + b;
      case 1:
        return a - b * 0.5;
      case 2:
        return (a * b).tanh();
      case 3:
        return maximum(a, b);
      case 4:
        return where(a > b, a, b * 0.25);
      case 5:
        return a / (b.abs() + 1.0);
      default:
        return lerp(a, b, 0.3);
    }
  }
  Tensor reduce(const Tensor& x) {
    Dims d;
    for (int k = 0; k < x.dim(); ++k)
      if (pick(2)) d.push_back(k - (pick(2) ? x.dim() : 0));
    if (d.empty() && x.dim() > 0) d.push_back(x.dim() - 1);
    switch (pick(6)) {
      case 0:
        return x.sum(d, true) * 0.1;
      case 1:
        return x.amax(d, true);
      case 2:
        return x.mean(d, true);
      case 3:
        return x.amin(d, true);
      case 4:
        return x.logsumexp(d, true) - 2.0;
      default:
        return (x.var(d, 0, true) + 0.01).sqrt();
    }
  }
  // A view of a full-shape tensor whose shape also broadcasts to kS.
  Tensor view_of(const Tensor& x) {
    switch (pick(5)) {
      case 0:
        return x.transpose(0, 2).contiguous().transpose(0, 2);  // strided read
      case 1:
        return x.select(0, pick(4));  // [5, 6]
      case 2:
        return x.slice(2, pick(3), std::nullopt, 3);  // [4, 5, 2]
      case 3:
        return x.narrow(0, 1, 1);  // [1, 5, 6]
      default:
        return x.permute({1, 0, 2}).select(1, pick(4));  // [5, 6] strided
    }
  }

  void step() {
    switch (pick(10)) {
      case 0:
      case 1:
        pool.push_back(unary(any()));
        break;
      case 2:
      case 3:
        pool.push_back(binary(any(), any()));
        break;
      case 4:
        pool.push_back(reduce(any()));
        break;
      case 5: {  // pointwise over a view, broadcast back
        Tensor v = view_of(full_shape());
        if (v.dim() == 3 && v.shape()[2] == 2) v = v.sum({2}, true);
        pool.push_back(unary(v));
        break;
      }
      case 6: {  // in-place update of a pool tensor through a view
        Tensor& t = pool[size_t(pick(int(pool.size())))];
        if (t.shape() != kS) {
          t.mul_(0.5).add_(0.25);
          break;
        }
        Tensor v = view_of(t);
        switch (pick(4)) {
          case 0:
            v.add_(binary(v, v) * 0.5);
            break;
          case 1:
            v.mul_(-0.75);
            break;
          case 2:
            v.copy_(unary(v));
            break;
          default:
            v.fill_(0.125);
            break;
        }
        break;
      }
      case 7: {  // composites
        Tensor x = full_shape();
        int d = pick(3);
        if (pick(2))
          pool.push_back(x.softmax(d));
        else
          pool.push_back(layer_norm(x, {6}));
        break;
      }
      case 8:
        pool.push_back(cast(cast(any(), DType::Float16), dt));
        break;
      default:
        if (pick(3) == 0)
          (void)any().sum().item<double>();  // a sync point mid-program
        else
          pool.push_back(any().clone());
        break;
    }
  }
};

std::vector<std::vector<double>> run_program(uint32_t seed, DType dt, int steps) {
  Program p(seed, dt);
  for (int i = 0; i < steps; ++i) p.step();
  std::vector<std::vector<double>> out;
  for (auto& t : p.pool) out.push_back(lt::host(t));
  return out;
}

}  // namespace

TEST_CASE("differential: random float programs, fused vs fusion off") {
  for (DType dt : {DType::Float32, DType::Float64}) {
    // float32 atol: layer_norm of a constant row scales rounding noise by 1/sqrt(eps)
    lt::Tol tol = dt == DType::Float32 ? lt::Tol{1e-4, 1e-4} : lt::Tol{1e-10, 1e-12};
    for (uint32_t seed = 1; seed <= 60; ++seed) {
      INFO("seed " << seed << " " << std::string(dtype_name(dt)));
      auto fused = run_program(seed, dt, 30);
      std::vector<std::vector<double>> off;
      {
        lt::FusionOff guard;
        off = run_program(seed, dt, 30);
      }
      REQUIRE(fused.size() == off.size());
      for (size_t k = 0; k < fused.size(); ++k) {
        INFO("pool tensor " << k);
        REQUIRE(fused[k].size() == off[k].size());
        size_t bad = 0, first = 0;
        for (size_t i = 0; i < fused[k].size(); ++i)
          if (!lt::close(fused[k][i], off[k][i], tol) && !bad++) first = i;
        CHECK_MESSAGE(bad == 0, bad << " elements differ; first " << first << ": fused "
                                    << fused[k][first] << " vs off " << off[k][first]);
      }
    }
  }
}

TEST_CASE("differential: random integer programs are bitwise equal") {
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    INFO("seed " << seed);
    auto run = [&] {
      std::mt19937 g(seed);
      auto pick = [&](int n) { return std::uniform_int_distribution<int>(0, n - 1)(g); };
      std::vector<Tensor> pool;
      for (size_t i = 0; i < kShapes.size(); ++i)
        pool.push_back(lt::random(kShapes[i], DType::Int32, seed * 17 + uint32_t(i), -50, 50));
      for (int s = 0; s < 30; ++s) {
        Tensor a = pool[size_t(pick(int(pool.size())))], b = pool[size_t(pick(int(pool.size())))];
        switch (pick(9)) {
          case 0:
            pool.push_back((a * b + 3) & 1023);
            break;
          case 1:
            pool.push_back(floor_divide(a, b.abs() + 1));
            break;
          case 2:
            pool.push_back(remainder(a, 7) - (b ^ 5));
            break;
          case 3:
            pool.push_back(where(a > b, a, -b));
            break;
          case 4:
            pool.push_back(cast(a.sum({-1}, true) % 1000, DType::Int32));
            break;
          case 5:
            pool.push_back(maximum(a, b).amax({0}, true) | 1);
            break;
          case 6:
            pool.push_back(cast(a.argmax(-1, true), DType::Int32));
            break;
          case 7: {
            Tensor& t = pool[size_t(pick(int(pool.size())))];
            if (t.dim() > 0)
              t.select(-1, 0).add_(1);
            else
              t.add_(1);
            break;
          }
          default:
            pool.push_back(cast((a < 0) | (b > 10), DType::Int32) +
                           a.transpose(0, -1).transpose(0, -1));
            break;
        }
      }
      std::vector<std::vector<double>> out;
      for (auto& t : pool) out.push_back(lt::host(t));
      return out;
    };
    auto fused = run();
    std::vector<std::vector<double>> off;
    {
      lt::FusionOff guard;
      off = run();
    }
    CHECK(fused == off);
  }
}

TEST_CASE("differential: tiny trace and pending-memory limits flush at arbitrary points") {
  TraceLimits saved = trace_limits();
  struct Restore {
    TraceLimits v;
    ~Restore() { trace_limits() = v; }
  } restore{saved};
  for (uint32_t seed = 100; seed < 120; ++seed) {
    INFO("seed " << seed);
    trace_limits() = saved;
    auto want = run_program(seed, DType::Float64, 30);  // unlimited, fused
    for (int64_t limit : {3, 7}) {
      INFO("max_nodes " << limit);
      trace_limits().max_nodes = limit;
      auto got = run_program(seed, DType::Float64, 30);
      trace_limits() = saved;
      REQUIRE(got.size() == want.size());
      for (size_t k = 0; k < got.size(); ++k)
        for (size_t i = 0; i < got[k].size(); ++i)
          REQUIRE_MESSAGE(
              lt::close(got[k][i], want[k][i], {1e-10, 1e-12}),
              "pool " << k << " elem " << i << ": " << got[k][i] << " vs " << want[k][i]);
    }
    trace_limits().max_pending_bytes = 2000;  // a few small tensors
    auto got = run_program(seed, DType::Float64, 30);
    trace_limits() = saved;
    for (size_t k = 0; k < got.size(); ++k)
      for (size_t i = 0; i < got[k].size(); ++i)
        REQUIRE(lt::close(got[k][i], want[k][i], {1e-10, 1e-12}));
  }
}
