// The fuser's behaviour, seen through counters: kernel counts, the signature cache, dead code,
// explain() and the trace-length limit.
#include "helpers.h"

using namespace loom;
using lt::check_close;
using lt::host;

namespace {

// Records f() with everything else already flushed, then flushes it; returns the counter deltas.
struct FlushStats {
  int64_t kernels, groups, materialized, misses, hits;
};
FlushStats flush_stats(const std::function<Tensor()>& f, Tensor* out = nullptr) {
  loom::sync();
  reset_counters();
  Tensor r = f();
  loom::sync();
  auto& c = counters();
  FlushStats s{c.kernels.load(), c.groups.load(), c.materialized.load(), c.cache_misses.load(),
               c.cache_hits.load()};
  if (out) *out = r;
  return s;
}

Tensor chain20(const Tensor& x) {
  Tensor y = x;
  for (int i = 0; i < 4; ++i) y = ((y * 0.9 + 0.1).sin() - y).abs();  // 5 ops a round
  return y;
}

}  // namespace

TEST_CASE("fusion: softmax of [4096, 4096] runs as one kernel") {
  Tensor x = randn({4096, 4096});
  loom::sync();
  auto groups = plan_storage(softmax(x, 1).storage());
  CHECK(groups.size() == 1);
  Tensor y;
  FlushStats s = flush_stats([&] { return softmax(x, 1); }, &y);
  CHECK(s.kernels == 1);
  CHECK(s.materialized == 1);
  // and it is a softmax: every row sums to 1, values in (0, 1)
  Tensor rows = y.sum({1});
  CHECK(rows.amin().item<float>() == doctest::Approx(1.0f).epsilon(1e-5));
  CHECK(rows.amax().item<float>() == doctest::Approx(1.0f).epsilon(1e-5));
  CHECK(y.amin().item<float>() > 0.0f);
}

TEST_CASE("fusion: a 20-op pointwise chain is one kernel; fusion off runs one per primitive") {
  Tensor x = lt::random({1000, 37}, DType::Float32, 161);
  Tensor y;
  FlushStats s = flush_stats([&] { return chain20(x); }, &y);
  CHECK(s.kernels == 1);
  CHECK(s.materialized == 1);
  Tensor want = chain20(x.to(DType::Float64));
  check_close(y, host(want), lt::Tol{1e-5, 1e-5});
  {
    lt::FusionOff off;
    Tensor z;
    FlushStats so = flush_stats([&] { return chain20(x); }, &z);
    CHECK(so.kernels == 20);  // each primitive its own kernel (constants are kernel arguments)
    CHECK(so.kernels > s.kernels);
    check_close(z, host(y), lt::Tol{1e-6, 1e-6});
  }
}

TEST_CASE("fusion: layer_norm and rms_norm are one kernel each") {
  Tensor x = lt::random({512, 768}, DType::Float32, 162);
  Tensor w = lt::random({768}, DType::Float32, 163), b = lt::random({768}, DType::Float32, 164);
  loom::sync();
  CHECK(flush_stats([&] { return layer_norm(x, {768}, w, b); }).kernels == 1);
  CHECK(flush_stats([&] { return layer_norm(x, {768}); }).kernels == 1);
  CHECK(flush_stats([&] { return rms_norm(x, {768}, w); }).kernels == 1);
  CHECK(flush_stats([&] { return log_softmax(x, -1); }).kernels == 1);
  {
    lt::FusionOff off;
    CHECK(flush_stats([&] { return layer_norm(x, {768}, w, b); }).kernels > 3);
  }
}

TEST_CASE("fusion: new scalars and sizes every iteration compile only once") {
  Tensor big = lt::random({3000}, DType::Float32, 165, 0, 1);
  loom::sync();
  int64_t misses_after_first = -1;
  size_t cache_after_first = 0;
  reset_counters();
  double total = 0;
  for (int i = 0; i < 1000; ++i) {
    Tensor x = big.narrow(0, 0, 1000 + i);
    double s = 0.5 + 0.001 * i;
    Tensor r = ((x * s).exp() + s).sum();
    total += r.item<double>();
    if (i == 0) {
      misses_after_first = counters().cache_misses.load();
      cache_after_first = kernel_cache_size();
    }
  }
  CHECK(total > 0);
  CHECK(misses_after_first >= 1);
  CHECK(counters().cache_misses.load() == misses_after_first);
  CHECK(kernel_cache_size() == cache_after_first);
  CHECK(counters().cache_hits.load() >= 999);
  // the last iteration's value is right
  Tensor x = big.narrow(0, 0, 1999);
  double s = 0.5 + 0.001 * 999, want = 0;
  for (double v : host(x)) want += std::exp(v * s) + s;
  CHECK(((x * s).exp() + s).sum().item<double>() == doctest::Approx(want).epsilon(1e-5));
}

TEST_CASE("fusion: dropped intermediates are never materialized") {
  Tensor x = lt::random({256, 64}, DType::Float32, 166);
  loom::sync();
  FlushStats s = flush_stats([&] {
    Tensor a = x * 2.0, b = a + 1.0, c = b.exp();
    return c.sum({1});  // a, b, c die with this scope
  });
  CHECK(s.materialized == 1);
  CHECK(s.kernels == 1);
  // a live intermediate is written once, alongside the result
  Tensor keep;
  FlushStats s2 = flush_stats([&] {
    Tensor a = x * 2.0;
    keep = a;
    return (a + 1.0).exp().sum({1});
  });
  CHECK(s2.materialized == 2);
  check_close(keep, lt::ref_unary(host(x), [](double v) { return 2 * v; }));
  // a dead branch costs nothing
  FlushStats s3 = flush_stats([&] {
    Tensor dead = (x * 3.0).exp();
    (void)dead;
    return x + 1.0;
  });
  CHECK(s3.materialized == 1);
  CHECK(s3.kernels == 1);
}

TEST_CASE("fusion: explain reports the plan without running it") {
  Tensor x = lt::random({64, 64}, DType::Float32, 167);
  loom::sync();
  reset_counters();
  Tensor y = softmax(x * 2.0, 1);
  std::string e = explain(y);
  CHECK(e.find("1 kernel") != std::string::npos);
  CHECK(e.find("exp") != std::string::npos);
  CHECK(counters().kernels.load() == 0);  // nothing ran
  CHECK(y.is_pending());
  {
    Tensor z = x;
    for (int i = 0; i < 3; ++i) z = matmul(z.exp(), x.t()) * 0.01;
    std::string e2 = explain(z);
    CHECK(e2.find("kernel(s)") != std::string::npos);
    CHECK(e2.find("matmul") != std::string::npos);
    CHECK(plan_storage(z.storage()).size() >= 4);  // matmuls split the groups
  }
  loom::sync();
  CHECK(explain(y).find("ready") != std::string::npos);
}

TEST_CASE("fusion: explain names the rule that placed each node") {
  Tensor x = lt::random({64, 100}, DType::Float32, 171);
  Tensor b = lt::random({100}, DType::Float32, 172);
  loom::sync();
  // The line of the node computing `op` in the plan (the first such line).
  auto line = [](const std::string& plan, const std::string& op) {
    size_t p = plan.find("= " + op + ".");
    REQUIRE(p != std::string::npos);
    return plan.substr(p, plan.find('\n', p) - p);
  };
  std::string e = explain(softmax(x * 0.5 + b, 1));
  CHECK(line(e, "mul").find("[start]") != std::string::npos);
  CHECK(line(e, "add").find("[pointwise_chain]") != std::string::npos);
  CHECK(line(e, "amax").find("[reduce_prologue]") != std::string::npos);
  CHECK(line(e, "sub").find("[broadcast_back]") != std::string::npos);
  CHECK(line(e, "reciprocal").find("[row_epilogue]") != std::string::npos);
  // Why not: the sum reads x + 1 through a transpose, so it starts a kernel of its own.
  Tensor y = x.clone() + 1;
  e = explain((y.t() * 2).sum({0}) + y.sum({1}));
  CHECK(e.find("2 kernel(s)") != std::string::npos);
  CHECK(line(e, "mul").find("[start: not after add, read through a view") != std::string::npos);
  // Two producers' groups joined by the node that reads both.
  Tensor u = x.clone() * 3, v = x.clone() * 4;
  e = explain(u + v);
  CHECK(e.find("1 kernel(s)") != std::string::npos);
  CHECK(e.find("[sibling_merge]") != std::string::npos);
  lt::FusionOff off;
  CHECK(explain(x * 2 + 1).find("[unfused]") != std::string::npos);
}

TEST_CASE("fusion: the trace-length limit flushes a long chain by itself") {
  int64_t saved = trace_limits().max_nodes;
  struct Restore {
    int64_t v;
    ~Restore() { trace_limits().max_nodes = v; }
  } restore{saved};
  trace_limits().max_nodes = 50;
  Tensor x = lt::random({100, 10}, DType::Float64, 168);
  loom::sync();
  reset_counters();
  Tensor y = x;
  for (int i = 0; i < 200; ++i) y = y * 0.99 + 0.01;
  CHECK(counters().flushes.load() >= 3);  // flushed while recording, before any sync point
  auto v = host(x);
  for (auto& e : v)
    for (int i = 0; i < 200; ++i) e = e * 0.99 + 0.01;
  check_close(y, v, lt::Tol{1e-12, 1e-12});
}

TEST_CASE("fusion: trace-limit flushes in a loop cut at a repeating point") {
  // A loop body of 7 nodes under a 100-node limit: cutting exactly at the limit would start
  // each flushed trace at another phase of the body (100 k mod 7), a new plan and new
  // signatures each flush until all 7 phases were seen. The limit flush waits (up to 2x)
  // for the phase it cut at before, so after two flushes every trace is the same.
  int64_t saved = trace_limits().max_nodes;
  struct Restore {
    int64_t v;
    ~Restore() { trace_limits().max_nodes = v; }
  } restore{saved};
  trace_limits().max_nodes = 100;
  Tensor x = lt::random({64, 32}, DType::Float32, 169, -1, 1);
  Tensor b = lt::random({32}, DType::Float32, 170, -1, 1);
  loom::sync();
  reset_counters();
  Tensor y = x;
  std::vector<int64_t> misses_at_flush;  // cache misses seen when the i-th flush had run
  int64_t flushes = 0;
  const int iters = 300;
  for (int i = 0; i < iters; ++i) {
    y = ((y * 0.9 + b).tanh() * 1.1 + b).sin() * 0.5;  // mul add tanh mul add sin mul: 7 nodes
    if (counters().flushes.load() != flushes) {
      flushes = counters().flushes.load();
      misses_at_flush.push_back(counters().cache_misses.load());
    }
  }
  REQUIRE(misses_at_flush.size() >= 10);
  // no new kernels compiled after the second limit flush
  CHECK(misses_at_flush.back() == misses_at_flush[1]);
  // and every limit flush cut within [limit, 2 * limit) nodes
  CHECK(int64_t(misses_at_flush.size()) <= counters().nodes_recorded.load() / 100);
  auto v = host(x), vb = host(b);
  for (size_t e = 0; e < v.size(); ++e)
    for (int i = 0; i < iters; ++i)
      v[e] = std::sin(std::tanh(v[e] * 0.9 + vb[e % 32]) * 1.1 + vb[e % 32]) * 0.5;
  check_close(y, v, lt::Tol{1e-4, 1e-5});
}

TEST_CASE("fusion: the pending-memory limit counts pinned inputs, not intermediates") {
  TraceLimits saved = trace_limits();
  struct Restore {
    TraceLimits v;
    ~Restore() { trace_limits() = v; }
  } restore{saved};
  trace_limits().max_pending_bytes = 3 << 20;  // 3 MiB
  // A chain whose intermediates (1 MiB each) add up to far more than the limit stays one
  // kernel: only its input (1 MiB) is pinned.
  Tensor x = lt::random({512, 512}, DType::Float32, 171);
  Tensor y;
  auto s = flush_stats([&] { return chain20(x); }, &y);
  CHECK(s.kernels == 1);
  Tensor want;
  set_fusion(false);
  want = chain20(x);
  loom::sync();
  set_fusion(true);
  check_close(y, host(want), lt::Tol{1e-6, 1e-6});
  // Fresh inputs each iteration, dropped by the caller but read by pending nodes: the trace
  // flushes by itself before holding much more than the limit.
  loom::sync();
  Tensor acc = zeros({512, 512}, Options(DType::Float64));
  std::vector<double> ref(512 * 512, 0.0);
  for (int i = 0; i < 12; ++i) {
    auto v = lt::uniform(512 * 512, -2, 2, 200 + i);
    Tensor in = lt::make(v, {512, 512}, DType::Float64);  // ready memory, from the host
    for (size_t k = 0; k < v.size(); ++k) ref[k] += v[k];
    acc = acc + in;
    if (i >= 3) CHECK(pending_nodes(Device{}) <= 4);
  }
  check_close(acc, ref, lt::Tol{1e-12, 1e-12});
}

TEST_CASE("fusion: counters and flushes") {
  Tensor x = lt::random({10}, DType::Float32, 169);
  loom::sync();
  reset_counters();
  Tensor y = x + 1.0;
  CHECK(counters().kernels.load() == 0);  // recorded, not run
  CHECK(counters().nodes_recorded.load() >= 1);
  CHECK(y.is_pending());
  check_close(y, lt::ref_unary(host(x), [](double v) { return v + 1; }));  // a sync point
  CHECK_FALSE(y.is_pending());
  CHECK(counters().kernels.load() == 1);
  CHECK(counters().flushes.load() >= 1);
  CHECK(counters().bytes_moved.load() >= 2 * 10 * 4);
  CHECK(counters_str().find("kernels=1") != std::string::npos);
}

TEST_CASE("fusion: reductions whose reduced dims all have size 1") {
  // The keepdim shape equals the iteration space here, so row and full values look alike.
  Tensor x = lt::make({0.7}, {1, 1, 1}, DType::Float64);
  Tensor y = lt::make({0.3, -0.4}, {2, 1}, DType::Float64);
  check_close(lerp(x.logsumexp({0, 2}, true) - 2.0, -x, 0.3), {0.3 * -0.7 + 0.7 * -1.3});
  check_close(x.sum({1}, true) + x, {1.4});
  check_close(x * x.amax({0, 1, 2}, true) + x, {0.49 + 0.7});
  check_close((x.amax({1}, true) - x) * 2.0 + x.exp(), {std::exp(0.7)});
  check_close(y.sum({1}, true) * y + y, {0.39, -0.24});
  check_close(y - y.mean({1}, true) + y.var({1}, 0, true) + y, {0.3, -0.4});
  for (auto& f :
       std::vector<std::function<Tensor()>>{[&] {
                                              return lerp(x.logsumexp({0, 2}, true) - 2.0, -x, 0.3);
                                            },
                                            [&] { return (y.amin({1}, true) + 1.0) * (y - 2.0); }})
    lt::check_fused_matches_unfused(f);
}

TEST_CASE("fusion: reductions loading the same memory the same way are one kernel") {
  // A norm's dgamma and dbeta: column sums of dy and of dy times a recomputed value.
  Tensor x = lt::random({300, 70}, DType::Float32, 171),
         y = lt::random({300, 70}, DType::Float32, 172);
  Tensor r = lt::random({300, 1}, DType::Float32, 173);
  loom::sync();
  auto three = [&] { return x.sum({0}) + (x * (y - r)).sum({0}) * 2.0 - x.amax({0}); };
  Tensor got;
  CHECK(flush_stats(three, &got).kernels == 1);
  std::vector<double> xv = host(x), yv = host(y), rv = host(r), want(70);
  for (int j = 0; j < 70; ++j) {
    double a = 0, b = 0, c = -1e300;
    for (int i = 0; i < 300; ++i) {
      double v = xv[size_t(i * 70 + j)];
      a += v, b += v * (yv[size_t(i * 70 + j)] - rv[size_t(i)]), c = std::max(c, v);
    }
    want[size_t(j)] = a + 2 * b - c;
  }
  check_close(got, want, lt::Tol{1e-4, 1e-4});
  lt::check_fused_matches_unfused(three);
  // Two results no op combines (a root each): merged only where they load the same memory
  // through the same view.
  auto pair_kernels = [](const std::function<Tensor()>& f, const std::function<Tensor()>& g) {
    loom::sync();
    reset_counters();
    Tensor a = f(), b = g();
    loom::sync();
    return counters().kernels.load();
  };
  CHECK(pair_kernels([&] { return x.sum({0}); }, [&] { return (x * y).sum({0}); }) == 1);
  CHECK(pair_kernels([&] { return x.sum({0}); }, [&] { return y.sum({0}); }) == 2);
  CHECK(pair_kernels([&] { return x.sum({0}); }, [&] { return x.sum({1}); }) == 2);
  CHECK(pair_kernels([&] { return x.slice(0, 0, 299).sum({0}); },
                     [&] { return x.slice(0, 1, 300).sum({0}); }) == 2);
}

TEST_CASE("fusion: an in-group value read again through another view") {
  Tensor x = lt::random({5, 5}, DType::Float64, 170);
  auto v = host(x);
  auto at = [&](int i, int j) { return v[size_t(i * 5 + j)]; };
  std::vector<double> w1, w2, w3;
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 5; ++j) {
      w1.push_back(2 * at(i, j) + 2 * at(j, i));
      w2.push_back(std::exp(at(i, j)) * std::exp(at(0, j)));
      w3.push_back(at(i, j) + at(j, i) + 2);
    }
  Tensor y = x * 2.0;
  check_close(y + y.t(), w1);
  Tensor e = x.exp();
  check_close(e * e[0], w2);
  Tensor p = x + 1.0;
  check_close(p + p.transpose(0, 1), w3);
  lt::check_fused_matches_unfused([&] {
    Tensor q = x.sin();
    return q * q.t() + q.slice(0, 0, 1) - q.sum({0}, true).t();
  });
}

TEST_CASE("fusion: scalar values and row lengths are kernel arguments") {
  Tensor a = lt::random({1000}, DType::Float32, 171);
  loom::sync();
  reset_counters();
  float s5 = (a * 0.5).sum().item<float>();
  int64_t misses = counters().cache_misses.load();
  float s7 = (a * 0.7).sum().item<float>();
  CHECK(counters().cache_misses.load() == misses);  // same kernel, new argument
  CHECK(s7 == doctest::Approx(s5 * 1.4).epsilon(1e-5));
  // softmax over 200 different row lengths and row counts: a few size classes at most
  Tensor big = lt::random({64, 5000}, DType::Float32, 172);
  loom::sync();
  size_t c0 = kernel_cache_size();
  for (int i = 0; i < 200; ++i) {
    Tensor x = big.narrow(1, 0, 100 + 20 * i).narrow(0, 0, 1 + i % 64);
    Tensor y = softmax(x * (1.0 + i), 1);
    CHECK(y.sum().item<float>() == doctest::Approx(double(1 + i % 64)).epsilon(1e-4));
  }
  CHECK(kernel_cache_size() - c0 <= 6);
}

TEST_CASE("fusion: set_fusion flushes work recorded under the previous mode") {
  Tensor x = lt::random({100, 10}, DType::Float32, 173);
  loom::sync();
  Tensor y = chain20(x);
  CHECK(y.is_pending());
  reset_counters();
  Tensor z;
  {
    lt::FusionOff off;  // set_fusion(false) is a sync point: y runs fused, as recorded
    CHECK_FALSE(y.is_pending());
    CHECK(counters().kernels.load() == 1);
    z = chain20(x);
    CHECK(z.is_pending());
  }  // set_fusion(true) flushes z unfused
  CHECK_FALSE(z.is_pending());
  CHECK(counters().kernels.load() == 1 + 20);
  check_close(z, host(y), lt::Tol{1e-6, 1e-6});
}

TEST_CASE("fusion: large outputs (streamed stores) equal float64 references") {
  // Outputs of 8 MiB and more are written with non-temporal stores on the CPU: check values,
  // an unaligned region write into a large buffer, an in-place update and a multi-pass group.
  const int64_t n = 3 << 20;  // 12 MiB of float32
  Tensor x = lt::random({n}, DType::Float32, 175, -2, 2);
  auto v = host(x);
  check_close((x * 1.5 + 0.5).tanh(),
              lt::ref_unary(v, [](double a) { return std::tanh(a * 1.5 + 0.5); }));
  Tensor big = zeros({n});
  big.narrow(0, 3, n - 7).copy_(x.narrow(0, 1, n - 7) * 2);  // starts 12 bytes into the buffer
  auto b = host(big);
  for (int64_t i = 0; i < n; ++i) {
    double want = (i >= 3 && i < n - 4) ? 2 * v[size_t(i - 2)] : 0;
    if (b[size_t(i)] != want) {
      CHECK(b[size_t(i)] == want);
      break;
    }
  }
  Tensor y = x.clone();
  y.mul_(3).add_(1);
  check_close(y, lt::ref_unary(v, [](double a) { return a * 3 + 1; }));
  Tensor m = x.reshape({768, 4096});
  Tensor s = softmax(m, 1);
  auto sv = host(s);
  for (int64_t r : {int64_t(0), int64_t(383), int64_t(767)}) {
    double mx = -1e300, sum = 0;
    for (int64_t c = 0; c < 4096; ++c) mx = std::max(mx, v[size_t(r * 4096 + c)]);
    for (int64_t c = 0; c < 4096; ++c) sum += std::exp(v[size_t(r * 4096 + c)] - mx);
    for (int64_t c = 0; c < 4096; c += 511)
      CHECK(sv[size_t(r * 4096 + c)] ==
            doctest::Approx(std::exp(v[size_t(r * 4096 + c)] - mx) / sum).epsilon(1e-5));
  }
  lt::check_fused_matches_unfused([&] { return layer_norm(m, {4096}) * 2; });
}

TEST_CASE("flush() runs every stream's pending ops without a read") {
  std::vector<double> v = lt::uniform(1000, -2, 2, 41);
  Tensor x = lt::make(v, {1000});
  int64_t k0 = counters().kernels.load();
  Tensor y = exp(x) * 0.5 + x;
  CHECK(pending_nodes(kCPU) > 0);
  loom::flush();
  CHECK(pending_nodes(kCPU) == 0);
  CHECK(counters().kernels.load() == k0 + 1);  // one fused kernel, run by the flush
  check_close(y, lt::ref_unary(v, [](double a) { return std::exp(a) * 0.5 + a; }));
  CHECK(counters().kernels.load() == k0 + 1);  // reading it ran nothing more
}

// An intermediate that no tensor holds gives its memory back once the last kernel reading it
// has run, within the flush: a chain of matmuls (each result written, as the next one reads it
// from memory) holds two or three of them at a time, not all of them until the flush ends.
TEST_CASE("fusion: a flush frees intermediates after their last reader") {
  Tensor x = lt::random({256, 256}, DType::Float32, 91, -1, 1);
  Tensor w = lt::random({256, 256}, DType::Float32, 92, -0.1, 0.1);
  const int64_t one = 256 * 256 * 4;
  auto chain = [&] {
    Tensor h = x;
    for (int k = 0; k < 10; ++k) h = matmul(h, w) + 0.5;
    return h;
  };
  loom::sync();
  reset_counters();
  int64_t live0 = counters().bytes_live.load();
  Tensor r = chain();
  loom::sync();
  int64_t added = counters().bytes_peak.load() - live0;
  CHECK(added <= 4 * one);  // 10 intermediates of `one` bytes were all held before
  CHECK(counters().bytes_live.load() - live0 <= one);  // the result alone stays
  lt::check_fused_matches_unfused(chain);
}

TEST_CASE("fusion: a value read in its own order through a reshape joins its producer's kernel") {
  // A head's gradient: a transposed copy [4, 8, 6, 5], reshaped to [4, 8, 30] by its readers
  // (a scale and bias over the reshape; the regions of a cat). Each reader runs over the
  // copy's space with its views re-expressed there, so the reshaped value is never written.
  Tensor x = lt::random({4, 6, 8, 5}, DType::Float32, 181, -1, 1);
  Tensor b = lt::random({30}, DType::Float32, 182, -1, 1);
  auto heads = [&](const Tensor& t) { return t.transpose(1, 2).reshape({4, 8, 30}); };
  auto scaled = [&] { return heads(x) * 2.0 + b; };
  Tensor y;
  FlushStats s = flush_stats(scaled, &y);
  CHECK(s.kernels == 1);
  CHECK(s.materialized == 1);
  std::vector<double> hx = host(x), hb = host(b), want(4 * 8 * 30);
  for (int i = 0; i < 4; ++i)
    for (int t = 0; t < 8; ++t)
      for (int h = 0; h < 6; ++h)
        for (int d = 0; d < 5; ++d)
          want[size_t((i * 8 + t) * 30 + h * 5 + d)] =
              2 * hx[size_t(((i * 6 + h) * 8 + t) * 5 + d)] + hb[size_t(h * 5 + d)];
  check_close(y, want);
  lt::check_fused_matches_unfused(scaled);
  // The three thirds of a cat, each a transposed copy: one group each (the copies' writes go
  // straight to their regions, no copy of its own is written first).
  Tensor x2 = x * 3.0, x3 = x.sin();
  loom::sync();
  auto joined = [&] { return cat({heads(x), heads(x2), heads(x3)}, 2); };
  FlushStats c = flush_stats(joined, &y);
  CHECK(c.groups == 3);
  CHECK(c.materialized == 3);
  std::vector<double> got = host(y), h2 = host(x2), h3 = host(x3);
  for (int i = 0; i < 4; ++i)
    for (int t = 0; t < 8; ++t)
      for (int h = 0; h < 6; ++h)
        for (int d = 0; d < 5; ++d) {
          const size_t src = size_t(((i * 6 + h) * 8 + t) * 5 + d);
          const size_t dst = size_t((i * 8 + t) * 90 + h * 5 + d);
          CHECK(got[dst] == hx[src]);
          CHECK(got[dst + 30] == h2[src]);
          CHECK(got[dst + 60] == h3[src]);
        }
  lt::check_fused_matches_unfused(joined, std::nullopt, true);
  // A reader whose other operand cannot be viewed over the producer's space (a transposed
  // pair of dims the space keeps as one) starts a kernel of its own, and still computes right.
  Tensor p = lt::random({4, 8, 30}, DType::Float32, 183, -1, 1);
  Tensor w = lt::random({4, 8, 5, 6}, DType::Float32, 184, -1, 1);
  auto apart = [&] { return (p * 2.0).reshape({4, 8, 6, 5}) + w.transpose(2, 3); };
  FlushStats a = flush_stats(apart, &y);
  CHECK(a.kernels == 2);
  std::vector<double> hp = host(p), hw = host(w);
  want.assign(hp.size(), 0);
  for (int r = 0; r < 32; ++r)
    for (int h = 0; h < 6; ++h)
      for (int d = 0; d < 5; ++d)
        want[size_t(r * 30 + h * 5 + d)] =
            2 * hp[size_t(r * 30 + h * 5 + d)] + hw[size_t(r * 30 + d * 6 + h)];
  check_close(y, want);
  lt::check_fused_matches_unfused(apart);
}

TEST_CASE("fusion: a float cast of memory read through broadcasts is cast where it is read") {
  // A 16-bit weight's float32 upcast, read a row at a time: no kernel of its own writes the
  // float32 copy; each reader's kernel loads the bf16 memory through its broadcast and casts
  // it. Against float64 references (the cast and the products are exact in float32 up to its
  // own rounding) and fusion-off.
  const int64_t R = 37, C = 300;
  Tensor x = lt::random({R, C}, DType::Float32, 191, -1, 1);
  Tensor w16 = lt::random({C}, DType::BFloat16, 192, -2, 2);
  Tensor c16 = lt::random({R, 1}, DType::BFloat16, 193, -2, 2);
  Tensor h64 = lt::random({C}, DType::Float32, 194, -2, 2);
  std::vector<double> hx = host(x), hw = host(w16), hc = host(c16), hh = host(h64);
  struct Case {
    const char* name;
    std::function<Tensor()> f;
    std::function<double(int64_t, int64_t)> ref;  // the value at (row, column)
    int64_t kernels;
  };
  const std::vector<Case> cases = {
      {"a row of weights over every row", [&] { return x * w16.to(DType::Float32); },
       [&](int64_t r, int64_t c) { return hx[size_t(r * C + c)] * hw[size_t(c)]; }, 1},
      {"a column over every column", [&] { return x + c16.to(DType::Float32); },
       [&](int64_t r, int64_t c) { return hx[size_t(r * C + c)] + hc[size_t(r)]; }, 1},
      {"a new leading dim, then a row sum of the products",
       [&] {
         Tensor w = w16.to(DType::Float32);
         return (x.reshape({1, R, C}) * w).sum({-1}) + w.sum();
       },
       [&](int64_t r, int64_t) {
         double s = 0, t = 0;
         for (int64_t c = 0; c < C; ++c) s += hx[size_t(r * C + c)] * hw[size_t(c)];
         for (int64_t c = 0; c < C; ++c) t += hw[size_t(c)];
         return s + t;
       },
       -1},
      {"float32 up to float64", [&] { return x.to(DType::Float64) - h64.to(DType::Float64); },
       [&](int64_t r, int64_t c) { return hx[size_t(r * C + c)] - hh[size_t(c)]; }, 1},
  };
  for (const Case& k : cases) {
    CAPTURE(k.name);
    Tensor y;
    FlushStats s = flush_stats(k.f, &y);
    if (k.kernels > 0) CHECK(s.kernels == k.kernels);
    std::vector<double> want(size_t(y.numel()));
    const int64_t cols = y.numel() / R;
    for (int64_t r = 0; r < R; ++r)
      for (int64_t c = 0; c < cols; ++c) want[size_t(r * cols + c)] = k.ref(r, c);
    check_close(y, want, lt::Tol{1e-5, 1e-4});
    lt::check_fused_matches_unfused(k.f, std::nullopt, true);
  }
  // Read elsewhere in its own shape too, or through a transpose: still right, in any plan.
  Tensor sq = lt::random({C, C}, DType::BFloat16, 195, -1, 1);
  auto mixed = [&] {
    Tensor w = w16.to(DType::Float32), m = sq.to(DType::Float32);
    return (x * w).sum({0}) + w + (m + m.t()).sum({0});
  };
  Tensor y = mixed();
  std::vector<double> hs = host(sq), want(static_cast<size_t>(C));
  for (int64_t c = 0; c < C; ++c) {
    double a = 0, b = 0;
    for (int64_t r = 0; r < R; ++r) a += hx[size_t(r * C + c)] * hw[size_t(c)];
    for (int64_t r = 0; r < C; ++r) b += hs[size_t(r * C + c)] + hs[size_t(c * C + r)];
    want[size_t(c)] = a + hw[size_t(c)] + b;
  }
  check_close(y, want, lt::Tol{1e-4, 1e-3});
  lt::check_fused_matches_unfused(mixed);
}
