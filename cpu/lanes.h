#pragma once
// The fixed-order folds of a run that the reductions' CPU cases use (cpu/prims_reduce.cpp): sums,
// products and extremes in lanes, then a fixed tree, so that a result depends neither on the
// alignment of the data nor on which thread runs it.
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#if defined(__AVX512F__) && defined(__AVX512DQ__)
#include "cpu/lanes_avx512.h"
#define LOOM_LANES_AVX512 1
#else
#define LOOM_LANES_AVX512 0
#endif

namespace loom::cpu {

// Four vectors' worth of lanes (AVX-512), so the adds or compares run as four independent
// chains instead of waiting on one.
template <typename T>
constexpr int kLanes = sizeof(T) >= 8 ? 32 : 64;

// The portable folds: the definition of each fold's order (cpu/lanes_avx512.h computes the
// same bits; tests/cpu/test_lanes.cpp checks that it does).
namespace portable {

// Sum (or product, Mul) of x[0, n) in kLanes lanes, then a fixed tree.
template <typename T, bool Mul>
double lanes(const T* x, int64_t n) {
  constexpr int L = kLanes<T>;
  T acc[L];
  for (int k = 0; k < L; ++k) acc[k] = Mul ? T(1) : T(0);
  int64_t i = 0;
  for (; i + L <= n; i += L)
    for (int k = 0; k < L; ++k) acc[k] = Mul ? acc[k] * x[i + k] : acc[k] + x[i + k];
  for (int k = 0; i < n; ++i, ++k) acc[k] = Mul ? acc[k] * x[i] : acc[k] + x[i];
  for (int w = L / 2; w > 0; w /= 2)
    for (int k = 0; k < w; ++k) acc[k] = Mul ? acc[k] * acc[k + w] : acc[k] + acc[k + w];
  return double(acc[0]);
}

// Sum of floats into a float64 result (the mean's sum, ops/reduce.cpp), in double lanes. With
// `pre`, each lane adds float sums of 8 elements (a tree: (x0 + x1) + (x2 + x3), ...; the
// remainder in sums of 4, 2, 1) converted once, which costs about what the float lanes do; when
// the elements are equal, c, the trees' partial sums are 2c, 4c and 8c, exact, so a row of equal
// values still sums to exactly n * c.
template <bool Pre>
double lanes_wide(const float* x, int64_t n) {
  constexpr int L = kLanes<double>;
  double acc[L];
  for (int k = 0; k < L; ++k) acc[k] = 0;
  int64_t i = 0;
  auto q = [&](int64_t j) { return (x[j] + x[j + L]) + (x[j + 2 * L] + x[j + 3 * L]); };
  if constexpr (Pre) {
    for (; i + 8 * L <= n; i += 8 * L)
      for (int k = 0; k < L; ++k) acc[k] += double(q(i + k) + q(i + 4 * L + k));
    for (; i + 4 * L <= n; i += 4 * L)
      for (int k = 0; k < L; ++k) acc[k] += double(q(i + k));
    for (; i + 2 * L <= n; i += 2 * L)
      for (int k = 0; k < L; ++k) acc[k] += double(x[i + k] + x[i + L + k]);
  }
  for (; i + L <= n; i += L)
    for (int k = 0; k < L; ++k) acc[k] += double(x[i + k]);
  for (int k = 0; i < n; ++i, ++k) acc[k] += double(x[i]);
  for (int w = L / 2; w > 0; w /= 2)
    for (int k = 0; k < w; ++k) acc[k] += acc[k + w];
  return acc[0];
}

}  // namespace portable

template <typename T, bool Mul>
double lanes(const T* x, int64_t n) {
#if LOOM_LANES_AVX512
  if constexpr (std::is_floating_point_v<T>) return avx512::lanes<Mul>(x, n);
#endif
  return portable::lanes<T, Mul>(x, n);
}

template <bool Pre>
double lanes_wide(const float* x, int64_t n) {
#if LOOM_LANES_AVX512
  return avx512::lanes_wide<Pre>(x, n);
#else
  return portable::lanes_wide<Pre>(x, n);
#endif
}

// The float partial sums overflow where the double sum need not (|x| above 2^125): such a run
// is summed again element by element (an inf or NaN in the data gives the same result either way).
inline double sum_wide(const float* x, int64_t n) {
  double s = lanes_wide<true>(x, n);
  return std::isfinite(s) ? s : lanes_wide<false>(x, n);
}

// Max (or min) of x[0, n), n >= 1, NaN-propagating, in lanes like lanes(). Each lane keeps its
// extreme with one compare-select (the ordered compare keeps a NaN out of it) and a flag of
// the NaNs it saw beside it: a lane's select does not wait on a NaN test, and the result is a
// NaN when any element is.
namespace portable {
template <typename T, bool Max>
T lanes_extreme(const T* x, int64_t n) {
  constexpr int L = kLanes<T>;
  using Flag = std::conditional_t<sizeof(T) == 8, int64_t, int32_t>;
  auto better = [](T v, T a) { return Max ? v > a : v < a; };
  T acc[L];
  Flag nan[L];
  for (int k = 0; k < L; ++k) acc[k] = x[0], nan[k] = 0;
  int64_t i = 0;
  for (; i + L <= n; i += L)
    for (int k = 0; k < L; ++k) {
      T v = x[i + k];
      acc[k] = better(v, acc[k]) ? v : acc[k];
      if constexpr (std::is_floating_point_v<T>) nan[k] |= Flag(v != v);
    }
  for (int k = 0; i < n; ++i, ++k) {
    T v = x[i];
    acc[k] = better(v, acc[k]) ? v : acc[k];
    if constexpr (std::is_floating_point_v<T>) nan[k] |= Flag(v != v);
  }
  if constexpr (std::is_floating_point_v<T>) {
    Flag any = 0;
    for (int k = 0; k < L; ++k) any |= nan[k];
    if (any) return std::numeric_limits<T>::quiet_NaN();
  }
  for (int w = L / 2; w > 0; w /= 2)
    for (int k = 0; k < w; ++k) acc[k] = better(acc[k + w], acc[k]) ? acc[k + w] : acc[k];
  return acc[0];
}
}  // namespace portable

template <typename T, bool Max>
T lanes_extreme(const T* x, int64_t n) {
#if LOOM_LANES_AVX512
  if constexpr (std::is_floating_point_v<T>) return avx512::extreme<Max>(x, n);
#endif
  return portable::lanes_extreme<T, Max>(x, n);
}

}  // namespace loom::cpu
