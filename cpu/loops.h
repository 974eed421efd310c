#pragma once
// The loops the CPU's pointwise instructions share (cpu/prims.cpp, cpu/math.cpp), written so the
// compiler vectorizes them, and the sinks that an op's case in cpu/prims.cpp hands its loop to.
#include <Eigen/Core>
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "cpu/vmath.h"

namespace loom::cpu {

template <typename T>
using Arr = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
template <typename T>
using CArr = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;

// o[i] = f(a[i]).
template <typename T, typename U, typename F>
[[gnu::always_inline]] inline void map1(const T* a, U* o, int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) o[i] = f(a[i]);
}

// o[i] = f(a[i], b[i]); sa, sb: 1 a run, 0 one value broadcast (read once, not per element).
template <typename T, typename U, typename F>
[[gnu::always_inline]] inline void map2(const T* a, int sa, const T* b, int sb, U* o, int64_t n,
                                        F f) {
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

// ---- sinks ----
// lower<T>(op, sink) (cpu/prims.cpp) hands the op's loop to the sink in one of the forms of
// Sink, one call per case. Each sink compiles the forms of one group of ops and dtypes and
// ignores the rest, so a group's loops sit in one function (unary, unary_float, unary_bool,
// binary, binary_bool), compiled as if they were alone: how the compiler schedules and inlines a
// loop must not depend on how many other ops the list holds.

struct NoFix {  // eigen()'s fixup after the expression: none
  template <typename T>
  void operator()(const T*, T*, int64_t) const {}
};
using VmathFn = void (*)(const float*, float*, int64_t);

// The forms a case hands its loop in, each ignored here (a sink compiles its own forms):
//   same(f)      f: T -> T, the Same ops
//   identity()   an integer input of a float op (a rounding op: the identity)
//   none()       no loop for this dtype: the op layer never sends it
//   scalar(f)    float math, f: T -> T per element
//   eigen(f, fix, vm)  float math as an Eigen expression f(x) of the run, then fix(a, out, n);
//                vm: the op's own float32 kernel (cpu/vmath.h), used where vmath_on()
//   exact(vm)    float32 math by the op's own kernel vm (cpu/vmath.h), whether or not
//                vmath_on(): an exact function (sqrt) whose every element takes the same path
//   wide(f)      float32 math as an Eigen expression f(x) of the run widened to float64 (its
//                vector exp and log), rounded once at the end: float32 inputs only
//   pred(f)      f: T -> bool
//   arith(f)     f: (T, T) -> T
//   power(f)     float pow, f: (T, T) -> T: arith(f), but a broadcast exponent of 2, 1 or -1
//                is x * x, x or 1 / x in a vector loop (the same values: IEEE pow is exact
//                there but for its rounding, and these are rounded once)
//   test(f)      f: (T, T) -> bool
// The sinks' own forms are always inlined: the loops are compiled inside the group's function,
// each loop where its case is.
struct Sink {
  template <typename F>
  void same(F) {}
  void identity() {}
  void none() {}
  template <typename F>
  void scalar(F) {}
  template <typename F, typename Fix = NoFix>
  void eigen(F, Fix = {}, VmathFn = nullptr) {}
  void exact(VmathFn) {}
  template <typename F>
  void wide(F) {}
  template <typename F>
  void pred(F) {}
  template <typename F>
  void arith(F) {}
  template <typename F>
  void power(F) {}
  template <typename F>
  void test(F) {}
};

// unary(): the Same ops. `done`: the op was one of them.
template <typename T>
struct SameSink : Sink {
  const T* a;
  T* out;
  int64_t n;
  bool done = false;
  SameSink(const T* a_, T* out_, int64_t n_) : a(a_), out(out_), n(n_) {}
  template <typename F>
  [[gnu::always_inline]] void same(F f) {
    map1(a, out, n, f);
    done = true;
  }
  // identity(): left to unary(), which copies the input where no form was its own (one loop
  // for every op that is the identity on integers).
  [[gnu::always_inline]] void none() { done = true; }
};

// unary_float(): float math of float inputs.
template <typename T>
struct FloatSink : Sink {
  const T* a;
  T* out;
  int64_t n;
  FloatSink(const T* a_, T* out_, int64_t n_) : a(a_), out(out_), n(n_) {}
  template <typename F>
  [[gnu::always_inline]] void scalar(F f) {
    map1(a, out, n, f);
  }
  template <typename F, typename Fix = NoFix>
  [[gnu::always_inline]] void eigen(F f, Fix fix = {}, VmathFn vm = nullptr) {
    if constexpr (std::is_same_v<T, float>)
      if (vm && vmath_on()) return vm(a, out, n);  // own kernels: a few ulp
    // Runs through an aligned buffer, so that every element takes Eigen's packet path: over
    // a plain map the elements before out's alignment and after the last whole packet take its
    // scalar path, another function for most of these ops (std::log vs its own polynomial: 7%
    // of float logs differ by an ulp), and an element's bits would depend on where its run
    // starts and ends. A value recomputed inside another kernel must equal the one saved (an
    // amax's gradient finds its maximum by equality).
    constexpr int64_t kRun = 256;
    Eigen::Array<T, kRun, 1> w, r;  // fixed-size: aligned, a whole number of packets
    for (int64_t i = 0; i < n; i += kRun) {
      const int64_t m = std::min(kRun, n - i);
      std::copy_n(a + i, m, w.data());
      std::fill(w.data() + m, w.data() + kRun, T(1));  // a value every op here takes
      r = f(w);
      fix(w.data(), r.data(), m);  // from the run's copy of the input: out may be a
      std::copy_n(r.data(), m, out + i);
    }
  }
  [[gnu::always_inline]] void exact(VmathFn vm) {
    if constexpr (std::is_same_v<T, float>) vm(a, out, n);
  }
  template <typename F>
  [[gnu::always_inline]] void wide(F f) {
    if constexpr (std::is_same_v<T, float>) {
      // Widened a run at a time, in L1. The conversions are loops of their own: Eigen has no
      // packet cast between the widths, and one inside the expression made all of it scalar.
      constexpr int64_t kRun = 256;
      Eigen::Array<double, kRun, 1> w, r;
      for (int64_t i = 0; i < n; i += kRun) {
        const int64_t m = std::min(kRun, n - i);
        for (int64_t k = 0; k < m; ++k) w[k] = double(a[i + k]);
        for (int64_t k = m; k < kRun; ++k) w[k] = 0;
        r = f(w);
        for (int64_t k = 0; k < m; ++k) out[i + k] = float(r[k]);
      }
    }
  }
};

// unary_bool(): a bool result of one operand.
template <typename T>
struct PredSink : Sink {
  const T* a;
  uint8_t* out;
  int64_t n;
  PredSink(const T* a_, uint8_t* out_, int64_t n_) : a(a_), out(out_), n(n_) {}
  template <typename F>
  [[gnu::always_inline]] void pred(F f) {
    map1(a, out, n, f);
  }
};

// binary() (arith: a result of type T) and binary_bool() (test: a bool result); sa, sb: map2's.
template <typename T, typename U>
struct PairSink : Sink {
  const T* a;
  int sa;
  const T* b;
  int sb;
  U* out;
  int64_t n;
  PairSink(const T* a_, int sa_, const T* b_, int sb_, U* out_, int64_t n_)
      : a(a_), sa(sa_), b(b_), sb(sb_), out(out_), n(n_) {}
};
template <typename T>
struct ArithSink : PairSink<T, T> {
  using PairSink<T, T>::PairSink;
  template <typename F>
  [[gnu::always_inline]] void arith(F f) {
    map2(this->a, this->sa, this->b, this->sb, this->out, this->n, f);
  }
  // glibc's pow is a scalar call of tens of cycles an element, where these are one vector op
  // (x ** 2 against torch: bench/RESULTS.md, "Training steps: MKL, ...").
  template <typename F>
  [[gnu::always_inline]] void power(F f) {
    if (this->sa && !this->sb) {
      const T y = this->b[0];
      const T* a = this->a;
      if (y == T(2)) return map1(a, this->out, this->n, [](T x) { return x * x; });
      if (y == T(1)) return map1(a, this->out, this->n, [](T x) { return x; });
      if (y == T(-1)) return map1(a, this->out, this->n, [](T x) { return T(1) / x; });
    }
    arith(f);
  }
};
template <typename T>
struct TestSink : PairSink<T, uint8_t> {
  using PairSink<T, uint8_t>::PairSink;
  template <typename F>
  [[gnu::always_inline]] void test(F f) {
    map2(this->a, this->sa, this->b, this->sb, this->out, this->n, f);
  }
};

}  // namespace loom::cpu
