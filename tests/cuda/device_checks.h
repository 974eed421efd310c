#pragma once
// Checks shared by the stream and device tests: the message of a loom::Error, seeded values,
// and the count of elements outside a tolerance between tensors on any devices.
#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "loom.h"

namespace loom::test {

inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no loom::Error>";
}

#define CHECK_ERROR_HAS(expr, part)                                 \
  do {                                                              \
    std::string msg_ = loom::test::error_of([&] { (void)(expr); }); \
    INFO("message: " << msg_);                                      \
    CHECK(msg_.find(part) != std::string::npos);                    \
  } while (0)

inline std::vector<double> values(int64_t n, uint32_t seed, double lo = -1, double hi = 1) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<double> v(static_cast<size_t>(n));
  for (auto& x : v) x = d(g);
  return v;
}

// Elements of `got` (any device) farther than rtol/atol from `want` (any device). The default
// tolerances allow float32 rounding differences; a race or a missing wait is off by far more.
inline int64_t mismatches(const Tensor& got, const Tensor& want, double rtol = 1e-4,
                          double atol = 1e-5) {
  REQUIRE(got.shape() == want.shape());
  std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
  int64_t bad = 0;
  for (size_t i = 0; i < g.size(); ++i)
    if (!(std::fabs(g[i] - w[i]) <= atol + rtol * std::fabs(w[i]))) ++bad;
  return bad;
}

}  // namespace loom::test
