// Fault injection: a failed allocation or a failed kernel lowering at a sync point raises a
// clear error or falls back, and afterwards no tensor is lost or silently wrong.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "loom.h"

using namespace loom;

namespace {
std::vector<float> host(int n, float scale) {
  std::vector<float> v(n);
  for (int i = 0; i < n; ++i) v[i] = scale * std::sin(0.37f * float(i) + 1.0f);
  return v;
}
}  // namespace

TEST_CASE("fault: out of memory at a sync point leaves pending work retryable") {
  auto xv = host(1000, 2.0f);
  Tensor x = tensor<float>(xv, {10, 100});
  Tensor done = (x + 1).sum();
  float before = done.item<float>();
  Tensor y = softmax(x * 3.0, -1);  // pending
  fault::fail_next_alloc();
  bool threw = false;
  try {
    loom::sync();
  } catch (const Error& e) {
    threw = true;
    CHECK(e.kind() == ErrorKind::Memory);
    CHECK(std::string(e.what()).find("out of memory") != std::string::npos);
  }
  CHECK(threw);
  CHECK(y.is_pending());                  // nothing half-written
  CHECK(done.item<float>() == before);    // what was computed is kept
  auto got = y.to_vector<float>();        // the retry succeeds
  for (int r = 0; r < 10; ++r) {
    double mx = -1e30, s = 0;
    for (int c = 0; c < 100; ++c) mx = std::max(mx, 3.0 * xv[r * 100 + c]);
    for (int c = 0; c < 100; ++c) s += std::exp(3.0 * xv[r * 100 + c] - mx);
    for (int c = 0; c < 100; ++c)
      CHECK(got[r * 100 + c] == doctest::Approx(std::exp(3.0 * xv[r * 100 + c] - mx) / s).epsilon(1e-5));
  }
}

TEST_CASE("fault: a failed fused lowering falls back to unfused kernels with the same result") {
  clear_kernel_cache();
  auto xv = host(4096, 1.5f);
  Tensor x = tensor<float>(xv, {4096});
  Tensor expect = relu(sigmoid(tanh(x * 1.5 + 0.5) * x) + x * x - 0.25);
  auto ref = expect.to_vector<float>();
  clear_kernel_cache();
  reset_counters();
  Tensor y = relu(sigmoid(tanh(x * 1.5 + 0.5) * x) + x * x - 0.25);
  fault::fail_next_lower();
  auto got = y.to_vector<float>();
  CHECK(counters().kernels.load() > 1);  // ran primitive by primitive
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(ref[i]).epsilon(1e-6));
  reset_counters();
  Tensor z = relu(sigmoid(tanh(x * 1.5 + 0.5) * x) + x * x - 0.25);
  z.to_vector<float>();
  CHECK(counters().kernels.load() == 1);  // fused again once lowering works
}
