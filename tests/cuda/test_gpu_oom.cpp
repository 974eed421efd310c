// Out of memory at a sync point on cuda:0, with an allocation limit in the CUDA driver layer
// (cuda::fault::fail_allocs_above: the real out-of-memory error path) or in loom's allocate
// (fault::fail_allocs_above): the failing tensor raises naming the op and shape, unrelated sync
// points (item, sums, host copies, cross-stream use) work while it is pending, loom::sync()
// raises, and once the limit is lifted everything equals the CPU device. Skips without a GPU
// (tests/cuda/mock/oom_check.cpp runs the same flushes on the stand-in driver, without values).
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "cuda/stream.h"
#include "device_checks.h"
#include "loom.h"

using namespace loom;
namespace lc = loom::cuda;

namespace {

const Device kGPU{DeviceKind::CUDA, 0};
constexpr size_t kLimit = size_t(1) << 20;
// Element counts no other test allocates, so the backend's freed-block cache holds no block of
// that size (which would satisfy the allocation without the driver).
constexpr int64_t kBig = (int64_t(1) << 20) + 333;

bool skip() {
  if (backend_available(DeviceKind::CUDA)) return false;
  MESSAGE("CUDA unavailable, skipping GPU out-of-memory tests");
  return true;
}

struct DriverLimit {
  explicit DriverLimit(size_t b) { lc::fault::fail_allocs_above(b); }
  ~DriverLimit() { lift(); }
  void lift() { lc::fault::fail_allocs_above(0); }
};

std::string oom_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.kind() == ErrorKind::Memory ? e.what() : std::string("<not memory> ") + e.what();
  }
  return "<none>";
}

bool has(const std::string& s, const std::string& p) { return s.find(p) != std::string::npos; }

}  // namespace

TEST_CASE("gpu: oom: a failing randn does not block unrelated work on the stream") {
  if (skip()) return;
  for (bool fuse : {true, false}) {
    CAPTURE(fuse);
    set_fusion(fuse);
    auto av = test::values(1000, 21);
    Tensor a = tensor<double>(av, {1000}, Options(DType::Float32)).to(kGPU);
    Tensor done = (a + 1).sum();
    float before = done.item<float>();
    manual_seed(99);
    DriverLimit limit(kLimit);
    Tensor x = randn({kBig}, Options(kGPU));
    Tensor y = x * 2;
    std::string msg = oom_of([] { loom::sync(); });
    INFO("message: " << msg);
    CHECK(has(msg, "CUDA out of memory"));
    CHECK(has(msg, std::to_string(kBig * 4) + " bytes"));
    CHECK(has(msg, detail::cat("of shape [", kBig, "] float32")));
    CHECK(x.is_pending());
    double want = 0;
    for (double v : av) want += 3 * double(float(v));
    CHECK(double((a * 3).sum().item<float>()) == doctest::Approx(want).epsilon(1e-5));
    CHECK(a.to(kCPU).to_vector<double>() ==
          tensor<double>(av, {1000}, Options(DType::Float32)).to_vector<double>());
    CHECK(done.item<float>() == before);
    CHECK(has(oom_of([&] { y.to(kCPU); }), "out of memory"));
    CHECK(has(oom_of([] { loom::sync(); }), "out of memory"));
    limit.lift();
    Tensor xc = x.to(kCPU), yc = y.to(kCPU);
    manual_seed(99);
    Tensor ref = randn({kBig});  // the same Philox numbers on the CPU
    CHECK(test::mismatches(xc, ref, 1e-5, 1e-5) == 0);
    CHECK(test::mismatches(yc, ref * 2, 1e-5, 1e-5) == 0);
    loom::sync();
  }
  set_fusion(true);
}

TEST_CASE("gpu: oom: an in-place update does not overwrite what left-pending work reads") {
  if (skip()) return;
  for (bool fuse : {true, false}) {
    CAPTURE(fuse);
    set_fusion(fuse);
    auto av = test::values(1000, 22), bv = test::values(513 * 1000, 23);
    Tensor ah = tensor<double>(av, {1000}, Options(DType::Float32));
    Tensor bh = tensor<double>(bv, {513, 1000}, Options(DType::Float32));
    Tensor a = ah.to(kGPU), big = bh.to(kGPU);
    loom::sync();
    fault::fail_allocs_above(kLimit);  // loom's hook: no cached block can satisfy it
    Tensor z = big + a;                // cannot get memory
    a.mul_(2.0);
    Tensor ac = a.to(kCPU);  // a alone: an in-place pointwise group that may reuse a's memory
    CHECK(z.is_pending());
    float s = a.sum().item<float>();
    fault::fail_allocs_above(0);
    double want = 0;
    for (double v : av) want += 2 * double(float(v));
    CHECK(double(s) == doctest::Approx(want).epsilon(1e-5));
    CHECK(test::mismatches(ac, ah * 2, 0, 0) == 0);
    CHECK(test::mismatches(z, bh + ah, 0, 0) == 0);
  }
  set_fusion(true);
}

TEST_CASE("gpu: oom: cross-stream use of a tensor the failing stream can compute") {
  if (skip()) return;
  auto av = test::values(4096, 24);
  Tensor ah = tensor<double>(av, {4096}, Options(DType::Float32));
  Tensor a = ah.to(kGPU);
  lc::Stream s1 = lc::Stream::create(0);
  Tensor x, b;
  DriverLimit limit(kLimit);
  {
    lc::StreamGuard g(s1);
    x = randn({kBig + 1}, Options(kGPU));  // cannot get memory on s1
    b = (a * 5).exp();
  }
  Tensor c = b + 1;  // on the default stream: s1 is flushed; b runs, x stays pending
  CHECK(test::mismatches(c, (ah * 5).exp() + 1) == 0);
  CHECK(x.is_pending());
  // Using x on the default stream needs it computed on s1 now: that op raises.
  CHECK(has(oom_of([&] { (void)(x + 1); }), "for randn of shape"));
  CHECK(has(oom_of([&] { s1.synchronize(); }), "out of memory"));
  limit.lift();
  Tensor d = x + 1;
  CHECK(test::mismatches(d.to(kCPU) - 1, x.to(kCPU), 1e-5, 1e-5) == 0);
  loom::sync();
}
