// The row folds loom runs (cpu/lanes_avx512.h where the library is built for AVX-512) give the
// bits of the portable folds that define their order (cpu/lanes.h, compiled here without
// AVX-512): sum, prod, amax, amin and the float32 mean's float64 sum, float32 and float64, every
// row length up to past four lane blocks and longer ones, NaN, infinities and signed zeros
// included.
#include <cstring>

#include "../helpers.h"
#include "cpu/lanes.h"

using namespace loom;

namespace {

template <typename T>
bool same_bits(T a, T b) {
  if (a != a && b != b) return true;  // any NaN is the NaN a reduction gives
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

// kRows rows of n: random values (near 1 for products, so they stay finite); row 1 with signed
// zeros and an infinity, rows 9 and 18 with a NaN at a position that depends on n. Rows go
// through the folds 16 (or 8) at a time and the rest one by one: these rows are in both.
constexpr int64_t kRows = 20;

std::vector<double> rows_of(int64_t n, bool prod, uint32_t seed) {
  std::vector<double> v = lt::uniform(kRows * n, prod ? 0.9 : -3, prod ? 1.1 : 3, seed);
  for (int64_t i = 0; i < n; i += 3) v[size_t(n + i)] = (i / 3) % 2 ? 0.0 : -0.0;
  if (n > 2) v[size_t(n + n / 2)] = prod ? 1.0 : INFINITY;
  v[size_t(9 * n + (7 * n) / 11)] = std::nan("");
  v[size_t(18 * n + n / 2)] = std::nan("");
  return v;
}

template <typename T>
void check_rows(int64_t n, uint32_t seed) {
  const DType dt = std::is_same_v<T, float> ? DType::Float32 : DType::Float64;
  INFO(dtype_name(dt) << " rows of " << n);
  for (bool mul : {false, true}) {
    Tensor x = lt::make(rows_of(n, mul, seed), {kRows, n}, dt);
    std::vector<T> h = x.to_vector<T>();
    std::vector<Tensor> got;
    if (mul)
      got = {prod(x, {1})};
    else
      got = {sum(x, {1}), amax(x, {1}), amin(x, {1}), mean(x, {1})};
    for (int64_t r = 0; r < kRows; ++r) {
      const T* row = h.data() + r * n;
      std::vector<T> want;
      if (mul) {
        want = {T(cpu::portable::lanes<T, true>(row, n))};
      } else {
        T m = std::is_same_v<T, float>
                  ? T(cpu::portable::lanes_wide<true>(reinterpret_cast<const float*>(row), n))
                  : T(0);
        want = {T(cpu::portable::lanes<T, false>(row, n)),
                cpu::portable::lanes_extreme<T, true>(row, n),
                cpu::portable::lanes_extreme<T, false>(row, n), m};
      }
      for (size_t k = 0; k < want.size(); ++k) {
        if (k == 3 && !std::is_same_v<T, float>) continue;  // float64's mean: no lanes_wide
        std::vector<T> g = got[k].to_vector<T>();
        T w = want[k];
        if (k == 3) {
          // The float64 sum of a float32 row, valid where finite (sum_wide sums again otherwise).
          double s = cpu::portable::lanes_wide<true>(reinterpret_cast<const float*>(row), n);
          if (!std::isfinite(s)) continue;
          w = T(s * (1.0 / double(n)));
        }
        INFO("row " << r << ", reduction " << k);
        CHECK(same_bits(g[size_t(r)], w));
      }
    }
  }
}

}  // namespace

TEST_CASE("cpu lanes: the row folds match the portable folds bit for bit") {
  std::vector<int64_t> ns;
  for (int64_t n = 1; n <= 300; ++n) ns.push_back(n);
  for (int64_t n : {511, 512, 513, 1000, 1023, 4097, 16383}) ns.push_back(n);
  uint32_t seed = 9100;
  for (int64_t n : ns) {
    check_rows<float>(n, seed++);
    check_rows<double>(n, seed++);
  }
}
