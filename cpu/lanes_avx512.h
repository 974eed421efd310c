#pragma once
// The folds of cpu/lanes.h in AVX-512 registers: the same lanes, the same order of operations,
// the same bits. The generic loops vectorize their main loop, but keep the lane array on the
// stack, run the remainder one element at a time and the final tree in partial vectors: for a
// row of 64 floats that was most of the fold's cost, and short rows (hidden sizes, attention
// rows) fold one row per 64-256 elements. Here the 64 (or 32) lanes are four registers, the
// remainder is one masked step and the tree is register halvings; short rows go 16 (or 8) at a
// time through the tree's last levels, each level one shuffle and one op for all of them
// (rows_tree) instead of a chain of dependent steps for each.
//
// The remainder's masked-off lanes keep their values (a masked move, not an added zero).
#include <immintrin.h>

#include <cstdint>
#include <limits>

#include "tensor/widen_avx512.h"

namespace loom::cpu::avx512 {

inline __mmask16 tail16(int64_t r) {
  return r >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << r) - 1);
}
inline __mmask8 tail8(int64_t r) { return r >= 8 ? __mmask8(0xFF) : __mmask8((1u << r) - 1); }

// How two lanes combine: lo is lane k, hi lane k + w of the tree (cpu/lanes.h): a sum or
// product, or the extreme's "take hi where it is strictly better" (a tie or a NaN keeps lo's
// value), which is what the max and min instructions compute: max(a, b) is a > b ? a : b.
enum class Comb { Add, Mul, Max, Min };

template <Comb C>
inline __m512 comb(__m512 lo, __m512 hi) {
  if constexpr (C == Comb::Add) return _mm512_add_ps(lo, hi);
  if constexpr (C == Comb::Mul) return _mm512_mul_ps(lo, hi);
  if constexpr (C == Comb::Max) return _mm512_max_ps(hi, lo);  // hi > lo ? hi : lo, exactly
  return _mm512_min_ps(hi, lo);                                // hi < lo ? hi : lo
}
template <Comb C>
inline __m512d comb(__m512d lo, __m512d hi) {
  if constexpr (C == Comb::Add) return _mm512_add_pd(lo, hi);
  if constexpr (C == Comb::Mul) return _mm512_mul_pd(lo, hi);
  if constexpr (C == Comb::Max) return _mm512_max_pd(hi, lo);
  return _mm512_min_pd(hi, lo);
}

// The register operations the folds use, by element type: W lanes a register.
template <typename T>
struct Vec;
template <>
struct Vec<float> {
  using V = __m512;
  using M = __mmask16;
  static constexpr int W = 16;
  static V set1(float v) { return _mm512_set1_ps(v); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static V loadz(M m, const float* p) { return _mm512_maskz_loadu_ps(m, p); }
  static M tail(int64_t r) { return tail16(r); }
  static V mask_mov(V a, M m, V b) { return _mm512_mask_mov_ps(a, m, b); }
  static V mask_max(V a, M m, V v) { return _mm512_mask_max_ps(a, m, v, a); }
  static V mask_min(V a, M m, V v) { return _mm512_mask_min_ps(a, m, v, a); }
  static __m512i mag(__m512i acc, V v) {  // the largest magnitude bits seen
    return _mm512_max_epu32(
        acc, _mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(0x7FFFFFFF)));
  }
  static bool nan_in(__m512i mag) {
    return _mm512_cmpgt_epu32_mask(mag, _mm512_set1_epi32(0x7F800000)) != 0;
  }
  static void store_wide(double* out, V v) {  // the 16 lanes as doubles
    _mm512_storeu_pd(out, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
    _mm512_storeu_pd(out + 8, _mm512_cvtps_pd(_mm512_extractf32x8_ps(v, 1)));
  }
};
template <>
struct Vec<double> {
  using V = __m512d;
  using M = __mmask8;
  static constexpr int W = 8;
  static V set1(double v) { return _mm512_set1_pd(v); }
  static V load(const double* p) { return _mm512_loadu_pd(p); }
  static V loadz(M m, const double* p) { return _mm512_maskz_loadu_pd(m, p); }
  static M tail(int64_t r) { return tail8(r); }
  static V mask_mov(V a, M m, V b) { return _mm512_mask_mov_pd(a, m, b); }
  static V mask_max(V a, M m, V v) { return _mm512_mask_max_pd(a, m, v, a); }
  static V mask_min(V a, M m, V v) { return _mm512_mask_min_pd(a, m, v, a); }
  static __m512i mag(__m512i acc, V v) {
    return _mm512_max_epu64(
        acc, _mm512_and_si512(_mm512_castpd_si512(v), _mm512_set1_epi64(0x7FFFFFFFFFFFFFFF)));
  }
  static bool nan_in(__m512i mag) {
    return _mm512_cmpgt_epu64_mask(mag, _mm512_set1_epi64(0x7FF0000000000000)) != 0;
  }
  static void store_wide(double* out, V v) { _mm512_storeu_pd(out, v); }
};

// A fold's lanes after the first two levels of its tree (w = 32, 16 for 64 float lanes; w =
// 16, 8 for 32 double lanes): one register whose lane k holds lanes k, k + W, k + 2W, k + 3W
// combined. `nan`: whether an element was a NaN (extremes only).
// The values come from `src`: src.load(i) the register of elements [i, i + W), src.loadz(m, i)
// those of mask m (the others zero), src.first() element 0.
template <Comb C, typename T, typename Src>
inline typename Vec<T>::V partial_of(const Src& src, int64_t n, bool& nan) {
  using F = Vec<T>;
  using V = typename F::V;
  using M = typename F::M;
  constexpr int W = F::W;
  constexpr bool ext = C == Comb::Max || C == Comb::Min;
  const V id = ext ? F::set1(n > 0 ? src.first() : T(0)) : F::set1(C == Comb::Mul ? T(1) : T(0));
  V a0 = id, a1 = id, a2 = id, a3 = id;
  // An extreme's NaNs: the largest magnitude bits seen (a NaN's are above infinity's), an
  // integer max beside each select rather than a compare into a mask register and out of it.
  __m512i mag = _mm512_setzero_si512();
  // An element v into lane register a (masked-off lanes, m, unchanged): acc OP v for a sum or
  // product, the compare-select of lanes_extreme for an extreme (v first: v replaces a where
  // it is strictly better; a NaN never does).
  auto step = [&](V& a, V v, M m) {
    if constexpr (ext) {
      mag = F::mag(mag, v);
      a = C == Comb::Max ? F::mask_max(a, m, v) : F::mask_min(a, m, v);
    } else {
      a = F::mask_mov(a, m, comb<C>(a, v));
    }
  };
  const M all = M(~M(0));
  int64_t i = 0;
  for (; i + 4 * W <= n; i += 4 * W) {
    step(a0, src.load(i), all), step(a1, src.load(i + W), all);
    step(a2, src.load(i + 2 * W), all), step(a3, src.load(i + 3 * W), all);
  }
  if (int64_t r = n - i) {
    V* a[4] = {&a0, &a1, &a2, &a3};
    for (int v = 0; v < 4 && r > W * v; ++v) {
      M m = F::tail(r - W * v);
      step(*a[v], src.loadz(m, i + W * v), m);
    }
  }
  nan = ext && F::nan_in(mag);
  a0 = comb<C>(a0, a2), a1 = comb<C>(a1, a3);  // w = 2W
  return comb<C>(a0, a1);                      // w = W
}

// A run of T in memory.
template <typename T>
struct Run {
  const T* x;
  typename Vec<T>::V load(int64_t i) const { return Vec<T>::load(x + i); }
  typename Vec<T>::V loadz(typename Vec<T>::M m, int64_t i) const {
    return Vec<T>::loadz(m, x + i);
  }
  T first() const { return x[0]; }
};

template <Comb C, typename T>
inline typename Vec<T>::V partial(const T* x, int64_t n, bool& nan) {
  return partial_of<C, T>(Run<T>{x}, n, nan);
}

#if LOOM_WIDEN_AVX512
// A run of float16 (Half) or bfloat16 bits read as the floats they widen to.
template <bool Half>
struct NarrowRun {
  const uint16_t* x;
  static __m512 widen(__m256i h) { return Half ? f16_widen(h) : bf16_widen(h); }
  __m512 load(int64_t i) const {
    return widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i)));
  }
  __m512 loadz(__mmask16 m, int64_t i) const { return widen(_mm256_maskz_loadu_epi16(m, x + i)); }
  float first() const { return _mm512_cvtss_f32(widen(_mm256_set1_epi16(short(x[0])))); }
};

#endif

// lanes_wide<Pre>'s 32 double lanes (cpu/lanes.h says in which order each adds its float
// trees of 8, 4 or 2 elements) after the levels w = 16, 8.
template <bool Pre>
inline __m512d partial_wide(const float* x, int64_t n) {
  constexpr int L = 32;
  __m512d a0 = _mm512_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
  // Adds the 32 floats of lanes 0-15 (lo) and 16-31 (hi), widened, into the lanes.
  auto add = [&](__m512 lo, __m512 hi) {
    a0 = _mm512_add_pd(a0, _mm512_cvtps_pd(_mm512_castps512_ps256(lo)));
    a1 = _mm512_add_pd(a1, _mm512_cvtps_pd(_mm512_extractf32x8_ps(lo, 1)));
    a2 = _mm512_add_pd(a2, _mm512_cvtps_pd(_mm512_castps512_ps256(hi)));
    a3 = _mm512_add_pd(a3, _mm512_cvtps_pd(_mm512_extractf32x8_ps(hi, 1)));
  };
  auto ld = [&](int64_t j) { return _mm512_loadu_ps(x + j); };
  // q(j) of cpu/lanes.h for the 16 lanes from j: (x[j] + x[j+L]) + (x[j+2L] + x[j+3L]).
  auto q = [&](int64_t j) {
    return _mm512_add_ps(_mm512_add_ps(ld(j), ld(j + L)),
                         _mm512_add_ps(ld(j + 2 * L), ld(j + 3 * L)));
  };
  int64_t i = 0;
  if constexpr (Pre) {
    for (; i + 8 * L <= n; i += 8 * L)
      add(_mm512_add_ps(q(i), q(i + 4 * L)), _mm512_add_ps(q(i + 16), q(i + 4 * L + 16)));
    for (; i + 4 * L <= n; i += 4 * L) add(q(i), q(i + 16));
    for (; i + 2 * L <= n; i += 2 * L)
      add(_mm512_add_ps(ld(i), ld(i + L)), _mm512_add_ps(ld(i + 16), ld(i + L + 16)));
  }
  for (; i + L <= n; i += L) add(ld(i), ld(i + 16));
  if (int64_t r = n - i) {
    const __m512 z = _mm512_setzero_ps();
    add(_mm512_mask_loadu_ps(z, tail16(r), x + i),
        r > 16 ? _mm512_mask_loadu_ps(z, tail16(r - 16), x + i + 16) : z);
  }
  a0 = _mm512_add_pd(a0, a2), a1 = _mm512_add_pd(a1, a3);  // w = 16
  return _mm512_add_pd(a0, a1);                            // w = 8
}

// The rest of one run's tree: lanes 0-15 (0-7) of a through w = 8, 4, 2, 1 (4, 2, 1).
template <Comb C>
inline float tree(__m512 a) {
  a = comb<C>(a, _mm512_shuffle_f32x4(a, a, 0x4E));  // lanes 8-15 onto 0-7
  a = comb<C>(a, _mm512_shuffle_f32x4(a, a, 0xB1));  // lanes 4-7 onto 0-3
  a = comb<C>(a, _mm512_permute_ps(a, 0x4E));        // lanes 2-3 onto 0-1
  a = comb<C>(a, _mm512_permute_ps(a, 0xB1));        // lane 1 onto 0
  return _mm512_cvtss_f32(a);
}
template <Comb C>
inline double tree(__m512d a) {
  a = comb<C>(a, _mm512_shuffle_f64x2(a, a, 0x4E));  // lanes 4-7 onto 0-3
  a = comb<C>(a, _mm512_shuffle_f64x2(a, a, 0xB1));  // lanes 2-3 onto 0-1
  a = comb<C>(a, _mm512_permute_pd(a, 0x55));        // lane 1 onto 0
  return _mm512_cvtsd_f64(a);
}

// The rest of the trees of 16 runs at once (r[i]: run i's partial): each level pairs lanes k
// and k + w of every run, the runs packed two (then four, eight, sixteen) to a register.
// Lane i of the result is run i's value.
template <Comb C>
inline __m512 rows_tree(const __m512* r) {
  __m512 c[8], e[4], f[2];
  for (int p = 0; p < 8; ++p)  // w = 8: lanes 0-7 run 2p, 8-15 run 2p + 1
    c[p] = comb<C>(_mm512_shuffle_f32x4(r[2 * p], r[2 * p + 1], 0x44),
                   _mm512_shuffle_f32x4(r[2 * p], r[2 * p + 1], 0xEE));
  for (int q = 0; q < 4; ++q)  // w = 4: 128-bit block j holds run 4q + j
    e[q] = comb<C>(_mm512_shuffle_f32x4(c[2 * q], c[2 * q + 1], 0x88),
                   _mm512_shuffle_f32x4(c[2 * q], c[2 * q + 1], 0xDD));
  for (int s = 0; s < 2; ++s)  // w = 2: block j holds runs 8s + j (lanes 0-1), 8s + 4 + j
    f[s] = comb<C>(_mm512_shuffle_ps(e[2 * s], e[2 * s + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                   _mm512_shuffle_ps(e[2 * s], e[2 * s + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  // w = 1: lane 4j + m holds run 4m + j
  __m512 g = comb<C>(_mm512_shuffle_ps(f[0], f[1], _MM_SHUFFLE(2, 0, 2, 0)),
                     _mm512_shuffle_ps(f[0], f[1], _MM_SHUFFLE(3, 1, 3, 1)));
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  return _mm512_permutexvar_ps(order, g);
}

// Of 8 double runs: lane i of the result is run i's value.
template <Comb C>
inline __m512d rows_tree(const __m512d* r) {
  __m512d c[4], e[2];
  for (int p = 0; p < 4; ++p)  // w = 4: lanes 0-3 run 2p, 4-7 run 2p + 1
    c[p] = comb<C>(_mm512_shuffle_f64x2(r[2 * p], r[2 * p + 1], 0x44),
                   _mm512_shuffle_f64x2(r[2 * p], r[2 * p + 1], 0xEE));
  for (int q = 0; q < 2; ++q)  // w = 2: 128-bit block j holds run 4q + j
    e[q] = comb<C>(_mm512_shuffle_f64x2(c[2 * q], c[2 * q + 1], 0x88),
                   _mm512_shuffle_f64x2(c[2 * q], c[2 * q + 1], 0xDD));
  // w = 1: lane 2j + m holds run 4m + j
  __m512d g = comb<C>(_mm512_unpacklo_pd(e[0], e[1]), _mm512_unpackhi_pd(e[0], e[1]));
  const __m512i order = _mm512_setr_epi64(0, 2, 4, 6, 1, 3, 5, 7);
  return _mm512_permutexvar_pd(order, g);
}

// ---- one run (cpu/lanes.h's lanes, lanes_wide and lanes_extreme), T float or double ----

template <bool Mul, typename T>
double lanes(const T* x, int64_t n) {
  bool nan;
  constexpr Comb C = Mul ? Comb::Mul : Comb::Add;
  return double(tree<C>(partial<C>(x, n, nan)));
}
template <bool Pre>
double lanes_wide(const float* x, int64_t n) {
  return tree<Comb::Add>(partial_wide<Pre>(x, n));
}
#if LOOM_WIDEN_AVX512
// lanes<false>() of the floats that n float16 (half) or bfloat16 values widen to, read where
// they lie: the same lanes and order as over the widened run, so the same bits.
inline double sum_narrow(const uint16_t* x, bool half, int64_t n) {
  bool nan;
  return half ? double(tree<Comb::Add>(partial_of<Comb::Add, float>(NarrowRun<true>{x}, n, nan)))
              : double(tree<Comb::Add>(partial_of<Comb::Add, float>(NarrowRun<false>{x}, n, nan)));
}
#endif
template <bool Max, typename T>
T extreme(const T* x, int64_t n) {
  bool nan;
  constexpr Comb C = Max ? Comb::Max : Comb::Min;
  T v = tree<C>(partial<C>(x, n, nan));
  return nan ? std::numeric_limits<T>::quiet_NaN() : v;
}

// ---- runs of n at a stride of n, each as its one-run fold gives it ----

// Vec<T>::W runs from x (16 floats or 8 doubles): out[i] = lanes (or extreme) of run i.
template <Comb C, typename T>
void runs(const T* x, int64_t n, double* out) {
  using F = Vec<T>;
  typename F::V r[F::W];
  uint32_t nans = 0;
  for (int i = 0; i < F::W; ++i) {
    bool nan;
    r[i] = partial<C>(x + i * n, n, nan);
    nans |= uint32_t(nan) << i;
  }
  typename F::V v = rows_tree<C>(r);
  if (nans) v = F::mask_mov(v, typename F::M(nans), F::set1(std::numeric_limits<T>::quiet_NaN()));
  F::store_wide(out, v);
}

// 8 float runs' lanes_wide<true>.
inline void runs8_wide(const float* x, int64_t n, double* out) {
  __m512d r[8];
  for (int i = 0; i < 8; ++i) r[i] = partial_wide<true>(x + i * n, n);
  _mm512_storeu_pd(out, rows_tree<Comb::Add>(r));
}

}  // namespace loom::cpu::avx512
