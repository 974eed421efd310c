// The CPU's lowering of each reduction (fusion/prims.h; cpu/prims.cpp holds the pointwise
// rows): fold_run() folds a run of a row into its accumulator, fold_cols_t() the columns of a
// tile into one accumulator a row. Each switch over Op names every enumerator and has no default
// (this file builds with -Werror=switch), naming the pointwise and other rows as declined; the
// identity, combine and result of a reduction are read from its row's columns (Identity,
// Combine, ReduceKind), each a switch without default.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "cpu/lanes.h"
#include "cpu/prims.h"

// The case labels of a family of rows (LOOM_UNARY_OPS(LOOM_CASE)), for a switch that declines
// the whole family: those rows are not reductions.
#define LOOM_CASE(name, ...) case Op::name:

namespace loom::cpu {
namespace {

// The integer accumulator of an extreme (Max, Min, ArgMax, ArgMin) for value v: v itself, but
// a uint64 with its top bit flipped, so that int64 order (combine()'s compares) is uint64 order
// and the identities Lowest and Highest (int64's limits) are 0 and 2^64 - 1.
template <typename T>
inline int64_t order_key(T v) {
  if constexpr (std::is_same_v<T, uint64_t>)
    return int64_t(v ^ (uint64_t(1) << 63));
  else
    return int64_t(v);
}
// The value of key k as T: a key outside T's range is an identity (int64's limits), which
// stands for T's own limits (an int32 column min started from int32(INT64_MAX), that is -1).
template <typename T>
inline T from_key(int64_t k) {
  if constexpr (std::is_same_v<T, uint64_t>)
    return uint64_t(k) ^ (uint64_t(1) << 63);
  else if constexpr (std::is_integral_v<T> && sizeof(T) < 8)
    return T(std::clamp<int64_t>(k, std::numeric_limits<T>::min(), std::numeric_limits<T>::max()));
  else
    return T(k);
}

// Is `v` a better arg{max,min} candidate than the current best (NaN beats everything)?
template <typename T>
bool better(Op op, T v, T best, bool have) {
  if (!have) return true;
  if constexpr (std::is_floating_point_v<T>) {
    if (best != best) return false;
    if (v != v) return true;
  }
  return op == Op::ArgMax ? v > best : v < best;
}

// Folds a float run's extreme m into accumulator a (NaN-propagating: a NaN stays, and wins).
inline void fold_extreme(Acc& a, double m, bool mx) {
  if (a.f != a.f) return;
  if (m != m || (mx ? m > a.f : m < a.f)) a.f = m;
}

// Folds x[0, n) (columns col0...) into a; `out`: the reduction's result type.
template <typename T>
void fold_run(Op op, CT out, const T* x, int64_t n, int64_t col0, Acc& a) {
  switch (op) {
    case Op::Sum:
      if constexpr (std::is_same_v<T, float>)
        if (out == CT::F64) {  // a float64 sum of floats (the mean's): in double lanes
          a.f += sum_wide(x, n);
          break;
        }
      if constexpr (std::is_floating_point_v<T>)
        a.f += lanes<T, false>(x, n);
      else
        for (int64_t j = 0; j < n; ++j) a.i = int64_t(uint64_t(a.i) + uint64_t(x[j]));  // wraps
      break;
    case Op::Prod:
      if constexpr (std::is_floating_point_v<T>)
        a.f *= lanes<T, true>(x, n);
      else
        for (int64_t j = 0; j < n; ++j) a.i = int64_t(uint64_t(a.i) * uint64_t(x[j]));
      break;
    case Op::Max:
    case Op::Min: {
      if (n == 0) break;
      bool mx = op == Op::Max;
      if constexpr (std::is_floating_point_v<T>) {
        fold_extreme(
            a, mx ? double(lanes_extreme<T, true>(x, n)) : double(lanes_extreme<T, false>(x, n)),
            mx);
      } else {
        int64_t m = order_key(mx ? lanes_extreme<T, true>(x, n) : lanes_extreme<T, false>(x, n));
        if (mx ? m > a.i : m < a.i) a.i = m;
      }
      break;
    }
    case Op::ArgMax:
    case Op::ArgMin: {
      bool have = a.idx >= 0;
      T best = have ? (std::is_floating_point_v<T> ? T(a.f) : from_key<T>(a.i)) : T(0);
      int64_t bi = a.idx;
      for (int64_t j = 0; j < n; ++j)
        if (better(op, x[j], best, have)) best = x[j], bi = col0 + j, have = true;
      a.idx = bi;
      if (have) {
        if constexpr (std::is_floating_point_v<T>)
          a.f = double(best);
        else
          a.i = order_key(best);
      }
      break;
    }
    case Op::Any:
      for (int64_t j = 0; j < n && !a.i; ++j) a.i |= x[j] != T(0);
      break;
    case Op::All:
      for (int64_t j = 0; j < n && a.i; ++j) a.i &= x[j] != T(0);
      break;

    // ---- not reductions: lower() above, or run where it says ----
    case Op::NumOps:
      LOOM_UNARY_OPS(LOOM_CASE)
      LOOM_BINARY_OPS(LOOM_CASE)
      LOOM_OTHER_PRIMS(LOOM_CASE)
      break;
  }
}

// The column fold of Sum, Prod, Max and Min: rows in blocks of B lanes kept in registers
// across the tile's n columns (the accumulators are read and written once a tile, not once a
// column), then the rows past the last whole block one at a time. step(acc, v) folds value v
// into accumulator acc, both of type A; get and put move an accumulator between A and the
// ColAcc's arrays.
template <int B, typename A, typename T, typename Get, typename Put, typename Step>
[[gnu::always_inline]] inline void fold_cols_block(const T* __restrict x, int64_t ld, int64_t n,
                                                   int64_t i0, Get get, Put put, Step step) {
  A acc[B];
  for (int k = 0; k < B; ++k) acc[k] = get(i0 + k);
  // A block as wide as the tile's columns are apart (few kept rows of a long reduced dim, read
  // in place) walks one stream of memory, a line or less a column: asked for 1 KiB ahead it
  // streams faster than the hardware prefetcher alone brings it (figures: bench/RESULTS.md).
  const bool one_stream = ld == B;
  for (int64_t j = 0; j < n; ++j) {
    const T* __restrict r = x + j * ld + i0;
    if (one_stream) __builtin_prefetch(r + 1024 / sizeof(T));
    for (int k = 0; k < B; ++k) acc[k] = step(acc[k], A(r[k]));
  }
  for (int k = 0; k < B; ++k) put(i0 + k, acc[k]);
}

template <typename A, typename T, typename Get, typename Put, typename Step>
[[gnu::always_inline]] inline void fold_cols_blocked(const T* __restrict x, int64_t ld,
                                                     int64_t rows, int64_t n, Get get, Put put,
                                                     Step step) {
  int64_t i0 = 0;
  for (; i0 + 32 <= rows; i0 += 32) fold_cols_block<32, A>(x, ld, n, i0, get, put, step);
  // Short blocks (a few rows: the tile has many columns) keep their lanes in registers too.
  if (i0 + 16 <= rows) fold_cols_block<16, A>(x, ld, n, i0, get, put, step), i0 += 16;
  if (i0 + 8 <= rows) fold_cols_block<8, A>(x, ld, n, i0, get, put, step), i0 += 8;
  if (i0 + 4 <= rows) fold_cols_block<4, A>(x, ld, n, i0, get, put, step), i0 += 4;
  for (; i0 < rows; ++i0) {
    A acc = get(i0);
    for (int64_t j = 0; j < n; ++j) acc = step(acc, A(x[j * ld + i0]));
    put(i0, acc);
  }
}

// The column fold of a float Max or Min, NaN-propagating as lanes_extreme() is: a
// compare-select per element (a NaN accumulator stays, since no compare with it holds) and each
// lane's NaNs flagged beside it, made NaN at the end; a select that also tested for a NaN
// element would not vectorize.
template <int B, bool Max, typename T>
[[gnu::always_inline]] inline void extreme_cols_block(const T* __restrict x, int64_t ld, int64_t n,
                                                      int64_t i0, double* __restrict f) {
  using Flag = std::conditional_t<sizeof(T) == 8, int64_t, int32_t>;
  T acc[B];
  Flag nan[B];
  for (int k = 0; k < B; ++k) acc[k] = T(f[i0 + k]), nan[k] = 0;
  for (int64_t j = 0; j < n; ++j) {
    const T* __restrict r = x + j * ld + i0;
    for (int k = 0; k < B; ++k) {
      T v = r[k];
      acc[k] = (Max ? v > acc[k] : v < acc[k]) ? v : acc[k];
      nan[k] |= Flag(v != v);
    }
  }
  for (int k = 0; k < B; ++k)
    f[i0 + k] = nan[k] ? std::numeric_limits<double>::quiet_NaN() : double(acc[k]);
}

template <bool Max, typename T>
void extreme_cols(const T* __restrict x, int64_t ld, int64_t rows, int64_t n,
                  double* __restrict f) {
  int64_t i0 = 0;
  for (; i0 + 32 <= rows; i0 += 32) extreme_cols_block<32, Max>(x, ld, n, i0, f);
  if (i0 + 16 <= rows) extreme_cols_block<16, Max>(x, ld, n, i0, f), i0 += 16;
  if (i0 + 8 <= rows) extreme_cols_block<8, Max>(x, ld, n, i0, f), i0 += 8;
  for (; i0 < rows; ++i0) extreme_cols_block<1, Max>(x, ld, n, i0, f);
}

// fold_cols() for one compute type: each row's accumulator a lane.
template <typename T>
void fold_cols_t(Op op, const T* __restrict x, int64_t ld, int64_t rows, int64_t n, int64_t col0,
                 ColAcc a) {
  double* __restrict f = a.f;
  int64_t* __restrict iv = a.i;
  int64_t* __restrict idx = a.idx;
  constexpr bool fl = std::is_floating_point_v<T>;
  // Float sums and products in float64; integer ones in int64; extremes in T (exact).
  using W = std::conditional_t<fl, double, int64_t>;
  auto getw = [&](int64_t i) {
    if constexpr (fl)
      return f[i];
    else
      return iv[i];
  };
  auto putw = [&](int64_t i, W v) {
    if constexpr (fl)
      f[i] = v;
    else
      iv[i] = v;
  };
  // extremes: as order keys (order_key above)
  auto gett = [&](int64_t i) { return fl ? T(f[i]) : from_key<T>(iv[i]); };
  auto putt = [&](int64_t i, T v) {
    if constexpr (fl)
      f[i] = double(v);
    else
      iv[i] = order_key(v);
  };
  switch (op) {
    case Op::Sum:
      fold_cols_blocked<W>(x, ld, rows, n, getw, putw, [](W c, W v) { return c + v; });
      return;
    case Op::Prod:
      fold_cols_blocked<W>(x, ld, rows, n, getw, putw, [](W c, W v) { return c * v; });
      return;
    case Op::Max:
    case Op::Min:
      if constexpr (fl) {
        if (op == Op::Max)
          extreme_cols<true>(x, ld, rows, n, f);
        else
          extreme_cols<false>(x, ld, rows, n, f);
      } else if (op == Op::Max) {
        fold_cols_blocked<T>(x, ld, rows, n, gett, putt, [](T c, T v) { return v > c ? v : c; });
      } else {
        fold_cols_blocked<T>(x, ld, rows, n, gett, putt, [](T c, T v) { return v < c ? v : c; });
      }
      return;
    case Op::ArgMax:
    case Op::ArgMin:
      for (int64_t j = 0; j < n; ++j) {
        const T* __restrict r = x + j * ld;
        for (int64_t i = 0; i < rows; ++i) {
          bool have = idx[i] >= 0;
          T best = have ? gett(i) : T(0);
          if (!better(op, r[i], best, have)) continue;
          idx[i] = col0 + j;
          putt(i, r[i]);
        }
      }
      return;
    case Op::Any:
      for (int64_t j = 0; j < n; ++j)
        for (int64_t i = 0; i < rows; ++i) iv[i] |= int64_t(x[j * ld + i] != T(0));
      return;
    case Op::All:
      for (int64_t j = 0; j < n; ++j)
        for (int64_t i = 0; i < rows; ++i) iv[i] &= int64_t(x[j * ld + i] != T(0));
      return;

    // ---- not reductions ----
    case Op::NumOps:
      LOOM_UNARY_OPS(LOOM_CASE)
      LOOM_BINARY_OPS(LOOM_CASE)
      LOOM_OTHER_PRIMS(LOOM_CASE)
      return;
  }
}

// The reduction's result from its accumulator, as its ReduceKind reads it.
template <typename T>
T acc_value(ReduceKind k, const Acc& a) {
  switch (k) {
    case ReduceKind::Index:
      return T(a.idx < 0 ? 0 : a.idx);
    case ReduceKind::Bool:
      return T(a.i != 0);
    case ReduceKind::Keep:  // an extreme: its order key
      if constexpr (std::is_floating_point_v<T>)
        return T(a.f);
      else
        return from_key<T>(a.i);
    case ReduceKind::Sum:
      break;
  }
  if constexpr (std::is_floating_point_v<T>)
    return T(a.f);
  else
    return T(a.i);
}

}  // namespace

Acc acc_init(Op op) {
  switch (prim(op).identity) {
    case Identity::One:
      return {1.0, 1, -1};
    case Identity::Lowest:
      return {-std::numeric_limits<double>::infinity(), std::numeric_limits<int64_t>::min(), -1};
    case Identity::Highest:
      return {std::numeric_limits<double>::infinity(), std::numeric_limits<int64_t>::max(), -1};
    case Identity::Zero:
    case Identity::None:
      break;
  }
  return {0.0, 0, -1};
}

namespace {

#if LOOM_LANES_AVX512
// Float sums and extremes of rows [0, k * G) of x, G rows at a time through their trees'
// last levels together (cpu/lanes_avx512.h): the values fold_run() folds, each row's own.
// Returns the rows done.
int64_t fold_runs(Op op, CT in, CT out, const void* x, int64_t rows, int64_t n, Acc* acc) {
  namespace v = avx512;
  using v::Comb;
  const bool sum = op == Op::Sum, mx = op == Op::Max;
  if (n <= 0 || (!sum && !mx && op != Op::Min) || (in != CT::F32 && in != CT::F64)) return 0;
  const bool wide = in == CT::F32 && out == CT::F64;  // the mean's float64 sum (sum_wide)
  double val[16];
  int64_t i = 0;
  auto each = [&](auto t) {
    using T = decltype(t);
    const int64_t g = wide ? 8 : v::Vec<T>::W;
    for (; i + g <= rows; i += g) {
      const T* r = static_cast<const T*>(x) + i * n;
      if constexpr (std::is_same_v<T, float>)
        if (wide) {
          v::runs8_wide(r, n, val);
          for (int k = 0; k < 8; ++k)  // sum_wide: a float partial sum overflowed
            if (!std::isfinite(val[k])) val[k] = lanes_wide<false>(r + k * n, n);
        }
      if (!wide) {
        sum  ? v::runs<Comb::Add>(r, n, val)
        : mx ? v::runs<Comb::Max>(r, n, val)
             : v::runs<Comb::Min>(r, n, val);
      }
      for (int64_t k = 0; k < g; ++k)
        sum ? void(acc[i + k].f += val[k]) : fold_extreme(acc[i + k], val[k], mx);
    }
  };
  in == CT::F32 ? each(float{}) : each(double{});
  return i;
}
#endif

}  // namespace

void fold(Op op, CT in, CT out, const void* x, int64_t rows, int64_t n, int64_t col0, Acc* acc) {
  int64_t done = 0;
#if LOOM_LANES_AVX512
  if (rows >= 8) done = fold_runs(op, in, out, x, rows, n, acc);
#endif
  dispatch_ct(in, [&](auto t) {
    using T = decltype(t);
    for (int64_t i = done; i < rows; ++i)
      fold_run<T>(op, out, static_cast<const T*>(x) + i * n, n, col0, acc[i]);
  });
}

bool narrow_foldable(Op op, CT out) {
#if LOOM_LANES_AVX512 && LOOM_WIDEN_AVX512
  return op == Op::Sum && out == CT::F32;  // fold_run's lanes<float> (not the mean's sum_wide)
#else
  (void)op, (void)out;
  return false;
#endif
}

void fold_narrow(DType src, const void* x, int64_t rows, int64_t n, Acc* acc) {
#if LOOM_LANES_AVX512 && LOOM_WIDEN_AVX512
  const bool half = src == DType::Float16;
  for (int64_t i = 0; i < rows; ++i)
    acc[i].f += avx512::sum_narrow(static_cast<const uint16_t*>(x) + i * n, half, n);
#else
  (void)src, (void)x, (void)rows, (void)n, (void)acc;
#endif
}

void fold_cols(Op op, CT in, const void* x, int64_t ld, int64_t rows, int64_t n, int64_t col0,
               ColAcc acc) {
  dispatch_ct(in, [&](auto t) {
    using T = decltype(t);
    fold_cols_t<T>(op, static_cast<const T*>(x), ld, rows, n, col0, acc);
  });
}

void combine_cols(Op op, CT in, ColAcc a, ColAcc b, int64_t n) {
  double* __restrict af = a.f;
  int64_t* __restrict ai = a.i;
  const double* __restrict bf = b.f;
  const int64_t* __restrict bi = b.i;
  switch (prim(op).combine) {  // the sums and products vectorize; the rest as combine() does
    case Combine::Add:
      for (int64_t k = 0; k < n; ++k) af[k] += bf[k], ai[k] += bi[k];
      return;
    case Combine::Mul:
      for (int64_t k = 0; k < n; ++k) af[k] *= bf[k], ai[k] *= bi[k];
      return;
    case Combine::Max:
    case Combine::Min:
    case Combine::ArgMax:
    case Combine::ArgMin:
    case Combine::Or:
    case Combine::And:
    case Combine::None:
      break;
  }
  for (int64_t k = 0; k < n; ++k) {
    Acc x{a.f[k], a.i[k], a.idx[k]};
    combine(op, in, x, Acc{b.f[k], b.i[k], b.idx[k]});
    a.f[k] = x.f, a.i[k] = x.i, a.idx[k] = x.idx;
  }
}

void combine(Op op, CT in, Acc& a, const Acc& b) {
  const bool f = is_float(in);
  const Combine c = prim(op).combine;
  switch (c) {
    case Combine::Add:
      a.f += b.f, a.i += b.i;
      return;
    case Combine::Mul:
      a.f *= b.f, a.i *= b.i;
      return;
    case Combine::Max:
    case Combine::Min: {
      bool mx = c == Combine::Max;
      if (f) {
        if (a.f != a.f) return;
        if (b.f != b.f || (mx ? b.f > a.f : b.f < a.f)) a.f = b.f;
      } else if (mx ? b.i > a.i : b.i < a.i) {
        a.i = b.i;
      }
      return;
    }
    case Combine::ArgMax:  // the earlier index on ties; NaN first
    case Combine::ArgMin: {
      if (b.idx < 0) return;
      bool take;
      if (a.idx < 0)
        take = true;
      else if (f)
        take = a.f == a.f && (b.f != b.f || (c == Combine::ArgMax ? b.f > a.f : b.f < a.f));
      else
        take = c == Combine::ArgMax ? b.i > a.i : b.i < a.i;
      if (take) a = b;
      return;
    }
    case Combine::Or:
      a.i |= b.i;
      return;
    case Combine::And:
      a.i &= b.i;
      return;
    case Combine::None:  // not a reduction
      return;
  }
}

void acc_values(Op op, CT out_ct, const Acc* acc, int64_t n, void* out) {
  const ReduceKind k = reduce_kind(op);
  dispatch_ct(out_ct, [&](auto t) {
    using T = decltype(t);
    for (int64_t i = 0; i < n; ++i) static_cast<T*>(out)[i] = acc_value<T>(k, acc[i]);
  });
}

#undef LOOM_CASE

}  // namespace loom::cpu
