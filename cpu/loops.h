#pragma once
// The loops the CPU's pointwise instructions share (cpu/prims.cpp, cpu/math.cpp): an op's case
// hands its scalar function to map1 / map2, or its Eigen expression to eigen1, and these give
// the loop, written so the compiler vectorizes it.
#include <Eigen/Core>
#include <cstdint>

namespace loom::cpu {

template <typename T>
using Arr = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
template <typename T>
using CArr = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;

// o[i] = f(a[i]).
template <typename T, typename U, typename F>
inline void map1(const T* a, U* o, int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) o[i] = f(a[i]);
}

// o[i] = f(a[i], b[i]); sa, sb: 1 a run, 0 one value broadcast (read once, not per element).
template <typename T, typename U, typename F>
inline void map2(const T* a, int sa, const T* b, int sb, U* o, int64_t n, F f) {
  if (sa && sb) {
    for (int64_t i = 0; i < n; ++i) o[i] = f(a[i], b[i]);
  } else if (sa) {
    const T bv = b[0];
    for (int64_t i = 0; i < n; ++i) o[i] = f(a[i], bv);
  } else if (sb) {
    const T av = a[0];
    for (int64_t i = 0; i < n; ++i) o[i] = f(av, b[i]);
  } else {
    const U v = f(a[0], b[0]);
    for (int64_t i = 0; i < n; ++i) o[i] = v;
  }
}

// out = f(x), x the run a[0, n) as an Eigen array: one Eigen expression over the run.
template <typename T, typename F>
inline void eigen1(const T* a, T* out, int64_t n, F f) {
  CArr<T> x(a, n);
  Arr<T> o(out, n);
  o = f(x);
}

// Does any x[i] satisfy pred? Lane flags OR-ed without an early exit, so the compiler
// vectorizes it: Eigen's any() is a scalar early-exit loop about as costly as the exp it
// guards (measured: see bench/RESULTS.md).
template <typename T, typename P>
bool any_lane(const T* x, int64_t n, P pred) {
  constexpr int L = 64;
  int f[L] = {};
  int64_t i = 0;
  for (; i + L <= n; i += L)
    for (int k = 0; k < L; ++k) f[k] |= int(pred(x[i + k]));
  int r = 0;
  for (; i < n; ++i) r |= int(pred(x[i]));
  for (int k = 0; k < L; ++k) r |= f[k];
  return r != 0;
}

}  // namespace loom::cpu
