// float32 sqrt and rsqrt (cpu/vmath_sqrt.cpp): sqrt correctly rounded and rsqrt 1 / sqrt in
// float64 rounded once, for every element wherever its run starts (the Eigen form these replace
// took a vector path for whole vectors and libm's for the rest, so a value's last bit depended
// on its buffer's alignment), over special values, subnormals and a strided sweep of all
// floats; and through the op API, the same bits at every offset into a buffer.
#include <bit>
#include <cmath>
#include <limits>
#include <vector>

#include "../helpers.h"
#include "cpu/vmath.h"

using namespace loom;

namespace {

std::vector<float> inputs() {
  std::vector<float> xs = {0.f,
                           -0.f,
                           std::numeric_limits<float>::infinity(),
                           -std::numeric_limits<float>::infinity(),
                           std::numeric_limits<float>::quiet_NaN(),
                           0x1p-149f,
                           -0x1p-149f,
                           0x1.fffffcp-127f,
                           0x1p-126f,
                           1.f,
                           2.f,
                           -1.f,
                           std::numeric_limits<float>::max()};
  for (uint64_t u = 0; u < (uint64_t(1) << 32); u += 65521)
    xs.push_back(std::bit_cast<float>(uint32_t(u)));
  return xs;
}

bool same(float a, float b) {
  return std::isnan(a) ? std::isnan(b) : std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b);
}

}  // namespace

TEST_CASE("sqrt / rsqrt f32: correctly rounded, the same at every start of a run") {
  const std::vector<float> xs = inputs();
  for (size_t start = 0; start < 17; ++start) {  // every position within a vector, and a tail
    std::vector<float> a(xs.begin() + start, xs.end()), s(a.size()), r(a.size());
    cpu::sqrt_f32(a.data(), s.data(), int64_t(a.size()));
    cpu::rsqrt_f32(a.data(), r.data(), int64_t(a.size()));
    int64_t bad_s = 0, bad_r = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      // sqrt of a float in double, rounded to float, is the correctly rounded float sqrt
      bad_s += !same(s[i], float(std::sqrt(double(a[i]))));
      bad_r += !same(r[i], float(1.0 / std::sqrt(double(a[i]))));
    }
    INFO("start " << start);
    CHECK(bad_s == 0);
    CHECK(bad_r == 0);
  }
}

TEST_CASE("sqrt / rsqrt f32 through the ops: the same bits at every offset into a buffer") {
  auto base = lt::random({4096 + 32}, DType::Float32, 5, 0, 3);
  std::vector<double> want_s, want_r;
  for (int off = 0; off < 32; ++off) {
    Tensor x = base.slice(0, off, off + 4096).clone();  // a fresh buffer: its own alignment
    Tensor y = base.slice(0, off, off + 4096);          // a view at an offset
    for (const Tensor& t : {x, y}) {
      std::vector<double> s = lt::host(loom::sqrt(t) * 1.0), r = lt::host(loom::rsqrt(t));
      std::vector<double> in = lt::host(t);
      for (size_t i = 0; i < s.size(); ++i) {
        REQUIRE(float(s[i]) == float(std::sqrt(double(float(in[i])))));
        REQUIRE(float(r[i]) == float(1.0 / std::sqrt(double(float(in[i])))));
      }
    }
  }
}
