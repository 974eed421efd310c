// Out of memory at a sync point, with an allocation limit (fault::fail_allocs_above): the flush
// raises for the op and shape that could not get memory, leaves that work pending and runs the
// rest; sync points of unrelated tensors work while it is pending, loom::sync() raises, and
// after the failing tensors are dropped or the limit is lifted everything equals the fusion-off
// and float64 references.
#include <doctest/doctest.h>

#include <cmath>
#include <sstream>
#include <string>

#include "helpers.h"
#include "loom.h"

using namespace loom;

namespace {

constexpr size_t kLimit = size_t(1) << 20;  // allocations above 1 MiB fail
constexpr int64_t kBig = int64_t(1) << 20;  // 4 MiB of float32: over the limit

// The allocation limit for a scope (lifted on the way out, also when a check throws).
struct AllocLimit {
  explicit AllocLimit(size_t bytes) { fault::fail_allocs_above(bytes); }
  ~AllocLimit() { lift(); }
  void lift() { fault::fail_allocs_above(0); }
};

// Fusion on or off for a scope (restored on the way out; set_fusion syncs, so nothing may be
// left failing when it runs).
struct FusionMode {
  bool before = fusion_enabled();
  explicit FusionMode(bool on) { set_fusion(on); }
  ~FusionMode() { set_fusion(before); }
};

// The message of the loom::Error of kind Memory that `f` raises ("<none>" if it raises none).
template <class F>
std::string oom_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::Memory) return e.what();
    return std::string("<not a memory error> ") + e.what();
  }
  return "<none>";
}

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

double sum_of(const std::vector<double>& v, double scale = 1) {
  double s = 0;
  for (double x : v) s += scale * x;
  return s;
}

}  // namespace

TEST_CASE("oom flush: the reported case (a failing randn does not block unrelated work)") {
  for (bool fuse : {true, false}) {
    CAPTURE(fuse);
    FusionMode mode(fuse);
    auto av = lt::uniform(1000, -2, 2, 11);
    Tensor a = lt::make(av, {1000});
    Tensor done = (a + 1).sum();
    float before = done.item<float>();
    manual_seed(1234);
    AllocLimit limit(kLimit);
    Tensor x = randn({kBig});
    Tensor y = x * 2;
    reset_counters();
    int64_t live0 = counters().bytes_live.load();

    std::string msg = oom_of([] { loom::sync(); });
    INFO("message: " << msg);
    CHECK(has(msg, "cpu: out of memory"));
    CHECK(has(msg, std::to_string(kBig * 4) + " bytes for "));
    CHECK(has(msg, "of shape [1048576] float32"));
    CHECK((has(msg, "for randn of") || has(msg, "for mul of")));
    CHECK(x.is_pending());
    CHECK(y.is_pending());
    CHECK(counters().bytes_live.load() == live0);  // nothing of the failed group kept

    // Sync points of unrelated tensors: item, sum, host copies, printing.
    double want3 = sum_of(av, 3);
    CHECK(double((a * 3).sum().item<float>()) == doctest::Approx(want3).epsilon(1e-5));
    CHECK(lt::host(a) == lt::host(lt::make(av, {1000})));
    std::ostringstream os;
    os << (a - a);  // printing syncs
    CHECK(has(os.str(), "0"));
    CHECK(done.item<float>() == before);  // computed before: kept
    CHECK(x.is_pending());                // still waiting for memory

    // What needs the failed work, and loom::sync(), still raise (and name the op).
    std::string again = oom_of([&] { y.to_vector<float>(); });
    CHECK_MESSAGE(has(again, "of shape [1048576] float32"), again);
    CHECK(has(oom_of([] { loom::sync(); }), "out of memory"));
    CHECK(has(oom_of([&] { (y + 1).sum().item<float>(); }), "out of memory"));

    limit.lift();
    auto xs = lt::host(x), ys = lt::host(y);
    CHECK_FALSE(y.is_pending());
    loom::sync();  // nothing left
    CHECK(pending_nodes(kCPU) == 0);
    // The fusion-off oracle with the same seed: the same random numbers, bit for bit.
    set_fusion(false);
    manual_seed(1234);
    Tensor xr = randn({kBig});
    auto xrs = lt::host(xr);
    set_fusion(fuse);
    int64_t bad = 0;
    for (int64_t i = 0; i < kBig; ++i)
      bad += std::fabs(xs[i] - xrs[i]) > 1e-6 * (1 + std::fabs(xrs[i])) || ys[i] != 2 * xs[i];
    CHECK(bad == 0);
  }
}

TEST_CASE("oom flush: dropping the tensors that cannot be computed lets sync() succeed") {
  auto av = lt::uniform(4096, -1, 1, 12);
  Tensor a = lt::make(av, {64, 64});
  AllocLimit limit(kLimit);
  Tensor x = randn({kBig});
  Tensor y = x.exp();
  Tensor z = a.sum(std::vector<int64_t>{1});
  CHECK(has(oom_of([] { loom::sync(); }), "out of memory"));
  CHECK_FALSE(z.is_pending());  // ran around the failure
  CHECK(pending_nodes(kCPU) > 0);
  x = Tensor(), y = Tensor();  // the only holders of the work that cannot run
  loom::sync();
  CHECK(pending_nodes(kCPU) == 0);
  auto zs = lt::host(z);
  for (int r = 0; r < 64; ++r) {
    double s = 0;
    for (int c = 0; c < 64; ++c) s += av[r * 64 + c];
    CHECK(zs[r] == doctest::Approx(s).epsilon(1e-5));
  }
}

TEST_CASE("oom flush: work left pending still reads the version it was recorded against") {
  // z reads a's values before the in-place update; z cannot get memory. The flush for a's sum
  // runs only what the sum needs, and must not let a.mul_ take over the memory z will read.
  for (bool fuse : {true, false}) {
    CAPTURE(fuse);
    FusionMode mode(fuse);
    auto av = lt::uniform(1000, -2, 2, 13), bv = lt::uniform(512 * 1000, -1, 1, 14);
    Tensor a = lt::make(av, {1000});
    Tensor big = lt::make(bv, {512, 1000});  // 2 MB
    loom::sync();                            // a and big are ready (casts of float64 data)
    AllocLimit limit(kLimit);
    Tensor z = big + a;  // pending, 2 MB: cannot get memory
    a.mul_(2.0);
    // A host copy of a alone: a pointwise in-place group, which may take over a's memory when
    // nothing else reads the old values.
    auto as = lt::host(a);
    CHECK(z.is_pending());
    for (size_t i = 0; i < av.size(); ++i) CHECK(as[i] == float(2 * float(av[i])));
    CHECK(double(a.sum().item<float>()) == doctest::Approx(sum_of(av, 2)).epsilon(1e-5));
    limit.lift();
    auto zs = lt::host(z);
    int64_t bad = 0;
    for (int64_t i = 0; i < 512 * 1000; ++i)
      bad += zs[i] != float(float(bv[i]) + float(av[i % 1000]));
    CHECK(bad == 0);
  }
}

TEST_CASE("oom flush: an intermediate the left-pending work reads is not recomputed later") {
  // One fused group computes t = a * 3 in registers and from it z (float64: cannot get memory),
  // w and a's in-place update a += t, written over a's memory (every element read before it is
  // written). The flush without z must materialize t for z, not leave t to be recomputed later
  // from a's memory, which the update takes over.
  for (bool fuse : {true, false}) {
    CAPTURE(fuse);
    FusionMode mode(fuse);
    auto av = lt::uniform(1000, -2, 2, 15);
    Tensor a = lt::make(av, {1000});
    loom::sync();
    AllocLimit limit(6000);  // 1000 float32 (4000 bytes) fit, 1000 float64 do not
    Tensor z, w;
    {
      Tensor t = a * 3;  // dropped: only z and w read it
      z = t.to(DType::Float64) * 2;
      w = t + 1;
      a.add_(t);
    }
    std::string msg = oom_of([] { loom::sync(); });
    CHECK_MESSAGE(has(msg, "of shape [1000] float64"), msg);
    CHECK(z.is_pending());
    auto ws = lt::host(w), as = lt::host(a);
    for (size_t i = 0; i < av.size(); ++i) {
      CHECK(ws[i] == float(float(av[i]) * 3.0f + 1.0f));
      CHECK(as[i] == float(float(av[i]) + float(av[i]) * 3.0f));
    }
    limit.lift();
    auto zs = lt::host(z);
    for (size_t i = 0; i < av.size(); ++i) CHECK(zs[i] == double(float(av[i]) * 3.0f) * 2);
  }
}

TEST_CASE("oom flush: a limit flush at record time that runs out of memory does not throw") {
  TraceLimits saved = trace_limits();
  trace_limits().max_nodes = 16;
  auto av = lt::uniform(256, -1, 1, 17);
  Tensor a = lt::make(av, {256});
  {
    AllocLimit limit(kLimit);
    Tensor x = randn({kBig});
    Tensor y = x;
    for (int i = 0; i < 20; ++i) y = y + 1;  // 21 nodes that cannot run: more than the limit
    Tensor acc = a;
    int64_t flushes0 = counters().flushes.load();
    for (int i = 0; i < 100; ++i) acc = acc * 0.5 + a;  // crosses the length limit: no throw
    int64_t flushes = counters().flushes.load() - flushes0;
    CHECK(flushes > 0);
    // A failed limit flush is retried once a limit's worth of work is recorded, not every op.
    CHECK(flushes <= 200 / 16 + 2);
    CHECK(y.is_pending());
    // What is pending: the 21 nodes that cannot run and at most a limit's worth more.
    CHECK(pending_nodes(kCPU) >= 21);
    CHECK(pending_nodes(kCPU) <= 21 + 2 * 16);
    std::vector<double> want = av;
    for (int i = 0; i < 100; ++i)
      for (size_t k = 0; k < want.size(); ++k)
        want[k] = float(float(want[k]) * 0.5f + float(av[k]));
    auto got = lt::host(acc);
    for (size_t k = 0; k < want.size(); ++k)
      CHECK(got[k] == doctest::Approx(want[k]).epsilon(1e-5));
    CHECK(has(oom_of([] { loom::sync(); }), "of shape [1048576] float32"));
    limit.lift();
    loom::sync();
    CHECK_FALSE(y.is_pending());
    CHECK(pending_nodes(kCPU) == 0);
    auto xs = lt::host(x), ys = lt::host(y);
    int64_t bad = 0;
    for (int64_t i = 0; i < kBig; ++i)
      bad += std::fabs(ys[i] - (xs[i] + 20)) > 1e-5 * (20 + std::fabs(xs[i]));
    CHECK(bad == 0);
  }
  trace_limits() = saved;
}

TEST_CASE(
    "oom flush: a pending-memory limit flush that runs out of memory is not retried every op") {
  TraceLimits saved = trace_limits();
  auto av = lt::uniform(256, -1, 1, 19), bv = lt::uniform(512 * 1000, -1, 1, 20);
  Tensor a = lt::make(av, {256});
  Tensor big = lt::make(bv, {512, 1000});  // 2 MB
  loom::sync();
  trace_limits().max_pending_bytes = int64_t(1) << 20;
  {
    AllocLimit limit(kLimit);
    Tensor z = big * 3;  // pins big (over the pending-memory limit); cannot get memory
    Tensor acc = a;
    int64_t flushes0 = counters().flushes.load();
    for (int i = 0; i < 100; ++i) acc = acc * 0.5 + a;  // no throw
    // One limit flush (it fails for z); the next would need another limit's worth pinned.
    CHECK(counters().flushes.load() - flushes0 == 1);
    CHECK(z.is_pending());
    std::vector<double> want = av;
    for (int i = 0; i < 100; ++i)
      for (size_t k = 0; k < want.size(); ++k)
        want[k] = float(float(want[k]) * 0.5f + float(av[k]));
    auto got = lt::host(acc);
    for (size_t k = 0; k < want.size(); ++k)
      CHECK(got[k] == doctest::Approx(want[k]).epsilon(1e-5));
    limit.lift();
    auto zs = lt::host(z);
    int64_t bad = 0;
    for (int64_t i = 0; i < 512 * 1000; ++i) bad += zs[i] != float(float(bv[i]) * 3.0f);
    CHECK(bad == 0);
  }
  trace_limits() = saved;
}

TEST_CASE("oom flush: groups run before the failure keep their results (fail the k-th alloc)") {
  FusionMode mode(false);  // one kernel (and allocation) an op, in record order
  auto av = lt::uniform(500, -1, 1, 18);
  Tensor a = lt::make(av, {500});
  loom::sync();  // a (a cast from the float64 data) is ready: the next allocations are b1..b4
  Tensor b1 = a * 2, b2 = b1 + 1, b3 = b2.exp(), b4 = b3 - a;
  reset_counters();
  fault::fail_alloc_after(2);  // b1 and b2 get memory, b3 does not
  std::string msg = oom_of([&] { b4.to_vector<float>(); });
  CHECK(has(msg, "injected fault"));
  CHECK(has(msg, "for exp of shape [500] float32"));
  CHECK_FALSE(b1.is_pending());
  CHECK_FALSE(b2.is_pending());
  CHECK(b3.is_pending());
  CHECK(b4.is_pending());
  CHECK(counters().kernels.load() == 2);
  CHECK(counters().materialized.load() == 2);
  auto b2v = lt::host(b2);  // computed before the failure
  for (int i = 0; i < 500; ++i) CHECK(b2v[i] == float(float(av[i]) * 2.0f + 1.0f));
  auto b4v = lt::host(b4);  // the retry runs what was left
  for (int i = 0; i < 500; ++i)
    CHECK(b4v[i] == doctest::Approx(std::exp(2.0 * av[i] + 1.0) - av[i]).epsilon(1e-5));
  CHECK(counters().kernels.load() == 4);
}

TEST_CASE("oom flush: an allocation (empty) that cannot get memory names itself") {
  AllocLimit limit(kLimit);
  Tensor e = empty({kBig}, Options(DType::Int32));
  Tensor s = lt::make({1, 2, 3}, {3}).sum();
  std::string msg = oom_of([] { loom::sync(); });
  CHECK_MESSAGE(has(msg, "for empty of shape [1048576] int32"), msg);
  CHECK(s.item<float>() == 6.0f);
  limit.lift();
  loom::sync();
  CHECK_FALSE(e.is_pending());
}
