// Deferred checks on the GPU (fusion/checks.h): the flag is computed on the device with the
// work, read by the host at the next sync point, and nothing is flushed at the call. Skips
// itself where CUDA is unavailable.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "loom.h"

using namespace loom;

namespace {

const Device kGPU{DeviceKind::CUDA, 0};

Tensor on_gpu(const std::vector<double>& v, const Shape& s, DType dt) {
  return tensor<double>(v, s, Options(dt)).to(kGPU);
}

}  // namespace

TEST_CASE("gpu: deferred checks: integer division by zero and cross_entropy's target range") {
  if (!backend_available(DeviceKind::CUDA)) {
    MESSAGE("CUDA unavailable, skipping");
    return;
  }
  for (bool fused : {true, false}) {
    set_fusion(fused);
    INFO("fusion " << fused);
    Tensor a = on_gpu({7, -7, 9, 5, 6, -8}, {2, 3}, DType::Int64);
    Tensor b = on_gpu({2, 0, 4}, {3}, DType::Int64);
    loom::sync();
    int64_t flushes = counters().flushes.load();
    Tensor q = floor_divide(a, b) + 1;
    CHECK(counters().flushes.load() == flushes);
    CHECK(pending_checks() == 1);
    CHECK_THROWS_WITH_AS((void)q.to_vector<int64_t>(),
                         doctest::Contains("floor_divide: integer division by zero"), Error);
    CHECK(pending_checks() == 0);
    CHECK(q.to_vector<int64_t>() == std::vector<int64_t>{4, 1, 3, 3, 1, -1});
    // no zero: nothing raised
    Tensor ok = remainder(a, b + 10);
    CHECK(ok.to_vector<int64_t>() == std::vector<int64_t>{7, 3, 9, 5, 6, 6});

    Tensor logits = rand({4, 10}, Options(DType::Float32, kGPU));
    Tensor t = on_gpu({0, 2, 10, 1}, {4}, DType::Int64);
    loom::sync();
    flushes = counters().flushes.load();
    Tensor loss = cross_entropy(logits, t);
    CHECK(counters().flushes.load() == flushes);
    CHECK_THROWS_WITH_AS((void)loss.item<float>(), doctest::Contains("cross_entropy"), Error);
    CHECK(std::isfinite(loss.item<float>()));
    Tensor good = cross_entropy(logits, on_gpu({0, 9, 3, 1}, {4}, DType::Int64));
    Tensor ref =
        cross_entropy(logits.to(kCPU), tensor<double>({0, 9, 3, 1}, {4}, Options(DType::Int64)));
    CHECK(good.item<float>() == doctest::Approx(ref.item<float>()).epsilon(1e-5));
  }
  set_fusion(true);
}
