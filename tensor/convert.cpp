#include "tensor/convert.h"

#include <immintrin.h>

#include <cstring>

#include "tensor/half.h"
#include "tensor/widen_avx512.h"

namespace loom {
namespace {

template <typename S, typename T>
inline T from_storage(S v) {
  if constexpr (std::is_same_v<S, Half>) {
    return T(f16_to_f32(v.bits));
  } else if constexpr (std::is_same_v<S, BFloat16>) {
    return T(bf16_to_f32(v.bits));
  } else if constexpr (std::is_same_v<S, bool>) {
    return T(v ? 1 : 0);
  } else {
    return T(v);
  }
}

template <typename S, typename T>
inline S to_storage(T v) {
  if constexpr (std::is_same_v<S, Half>) {
    return Half{f32_to_f16(float(v))};
  } else if constexpr (std::is_same_v<S, BFloat16>) {
    return BFloat16{f32_to_bf16(float(v))};
  } else if constexpr (std::is_same_v<S, bool>) {
    return v != T(0);
  } else {
    return S(v);
  }
}

template <typename F>
void dispatch_storage(DType dt, F&& f) {
  switch (dt) {
#define LOOM_X(name, text, storage, size, ...) \
  case DType::name:                            \
    static_assert(sizeof(storage) == size);    \
    return f(storage{});
    LOOM_DTYPES(LOOM_X)
#undef LOOM_X
  }
}

#if defined(__AVX512F__) && defined(__AVX512BW__)
// float16 / bfloat16 runs to and from float32 in AVX-512 registers, bit for bit what the
// scalar conversions of tensor/half.h give (NaNs included): 16 elements a step, the last step
// masked. The scalar loops ran at a few GB/s and were most of a reduced-precision kernel.
inline __mmask16 tail_mask(int64_t r) {
  return r >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << r) - 1);
}

// f32_to_bf16 of 16 floats, each result in the low half of its 32-bit lane.
inline __m512i bf16_bits(__m512 v) {
  const __m512i u = _mm512_castps_si512(v);
  __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)),
                                          _mm512_set1_epi32(0x7f800000));
  __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i r =
      _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), odd)), 16);
  return _mm512_mask_mov_epi32(r, nan,
                               _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40)));
}

// f32_to_f16 of 16 floats.
inline __m256i f16_narrow(__m512 v) {
  __m256i h = _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  // Every NaN becomes the one quiet NaN of its sign (the instruction keeps the payload).
  __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  if (nan) {
    __m256i sign =
        _mm256_and_si256(_mm512_cvtepi32_epi16(_mm512_srli_epi32(_mm512_castps_si512(v), 16)),
                         _mm256_set1_epi16(short(0x8000)));
    h = _mm256_mask_mov_epi16(h, nan, _mm256_or_si256(sign, _mm256_set1_epi16(0x7e00)));
  }
  return h;
}

// j over [0, n) a vector of 16 at a time: whole vectors by `whole(j)`, unmasked (a masked
// load or store a vector made the bfloat16 sum of 16M 1.5x slower on Zen 4), two an iteration
// so that their latencies overlap; the last part vector by `part(j, mask)`.
template <class Whole, class Part>
inline void by_vectors(int64_t n, Whole whole, Part part) {
  int64_t j = 0;
  for (; j + 32 <= n; j += 32) whole(j), whole(j + 16);
  if (j + 16 <= n) whole(j), j += 16;
  if (j < n) part(j, tail_mask(n - j));
}

inline __m256i load16(const uint16_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

inline void store16(uint16_t* p, __m256i h) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), h);
}

void bf16_to_f32_run(const uint16_t* p, float* d, int64_t n) {
  by_vectors(
      n, [&](int64_t j) { _mm512_storeu_ps(d + j, bf16_widen(load16(p + j))); },
      [&](int64_t j, __mmask16 m) {
        _mm512_mask_storeu_ps(d + j, m, bf16_widen(_mm256_maskz_loadu_epi16(m, p + j)));
      });
}

void f32_to_bf16_run(const float* s, uint16_t* p, int64_t n) {
  by_vectors(
      n,
      [&](int64_t j) { store16(p + j, _mm512_cvtepi32_epi16(bf16_bits(_mm512_loadu_ps(s + j)))); },
      [&](int64_t j, __mmask16 m) {
        _mm256_mask_storeu_epi16(p + j, m,
                                 _mm512_cvtepi32_epi16(bf16_bits(_mm512_maskz_loadu_ps(m, s + j))));
      });
}

void f16_to_f32_run(const uint16_t* p, float* d, int64_t n) {
  by_vectors(
      n, [&](int64_t j) { _mm512_storeu_ps(d + j, f16_widen(load16(p + j))); },
      [&](int64_t j, __mmask16 m) {
        _mm512_mask_storeu_ps(d + j, m, f16_widen(_mm256_maskz_loadu_epi16(m, p + j)));
      });
}

void f32_to_f16_run(const float* s, uint16_t* p, int64_t n) {
  by_vectors(
      n, [&](int64_t j) { store16(p + j, f16_narrow(_mm512_loadu_ps(s + j))); },
      [&](int64_t j, __mmask16 m) {
        _mm256_mask_storeu_epi16(p + j, m, f16_narrow(_mm512_maskz_loadu_ps(m, s + j)));
      });
}

// Float32 values rounded to float16 (half) or bfloat16 and back.
void round_f32_run(bool half, const float* s, float* d, int64_t n) {
  auto round = [&](__m512 v) {
    return half ? f16_widen(f16_narrow(v))
                : _mm512_castsi512_ps(_mm512_slli_epi32(bf16_bits(v), 16));
  };
  by_vectors(
      n, [&](int64_t j) { _mm512_storeu_ps(d + j, round(_mm512_loadu_ps(s + j))); },
      [&](int64_t j, __mmask16 m) {
        _mm512_mask_storeu_ps(d + j, m, round(_mm512_maskz_loadu_ps(m, s + j)));
      });
}
#define LOOM_CONVERT_AVX512 1
#else
#define LOOM_CONVERT_AVX512 0
#endif

}  // namespace

template <typename T>
void load_run(const void* src, DType dt, int64_t stride, T* dst, int64_t n) {
  if (n <= 0) return;  // empty runs (K = 0 matmul) may come with null pointers
  dispatch_storage(dt, [&](auto s) {
    using S = decltype(s);
    const S* p = static_cast<const S*>(src);
    if constexpr (std::is_same_v<S, T>) {
      if (stride == 1) {
        std::memcpy(dst, p, size_t(n) * sizeof(T));
        return;
      }
    }
#if LOOM_CONVERT_AVX512
    if constexpr (std::is_same_v<T, float> && std::is_same_v<S, BFloat16>)
      if (stride == 1) return bf16_to_f32_run(reinterpret_cast<const uint16_t*>(p), dst, n);
    if constexpr (std::is_same_v<T, float> && std::is_same_v<S, Half>)
      if (stride == 1) return f16_to_f32_run(reinterpret_cast<const uint16_t*>(p), dst, n);
#endif
    if (stride == 0) {
      T v = from_storage<S, T>(p[0]);
      for (int64_t j = 0; j < n; ++j) dst[j] = v;
    } else if (stride == 1) {
      for (int64_t j = 0; j < n; ++j) dst[j] = from_storage<S, T>(p[j]);
    } else {
      for (int64_t j = 0; j < n; ++j) dst[j] = from_storage<S, T>(p[j * stride]);
    }
  });
}

template <typename T>
void store_run(void* dst, DType dt, int64_t stride, const T* src, int64_t n) {
  if (n <= 0) return;
  dispatch_storage(dt, [&](auto s) {
    using S = decltype(s);
    S* p = static_cast<S*>(dst);
    if constexpr (std::is_same_v<S, T>) {
      if (stride == 1) {
        std::memcpy(p, src, size_t(n) * sizeof(T));
        return;
      }
    }
#if LOOM_CONVERT_AVX512
    if constexpr (std::is_same_v<T, float> && std::is_same_v<S, BFloat16>)
      if (stride == 1) return f32_to_bf16_run(src, reinterpret_cast<uint16_t*>(p), n);
    if constexpr (std::is_same_v<T, float> && std::is_same_v<S, Half>)
      if (stride == 1) return f32_to_f16_run(src, reinterpret_cast<uint16_t*>(p), n);
#endif
    if (stride == 1) {
      for (int64_t j = 0; j < n; ++j) p[j] = to_storage<S, T>(src[j]);
    } else {
      for (int64_t j = 0; j < n; ++j) p[j * stride] = to_storage<S, T>(src[j]);
    }
  });
}

void round_to(DType dt, const float* src, float* dst, int64_t n) {
#if LOOM_CONVERT_AVX512
  return round_f32_run(dt == DType::Float16, src, dst, n);
#else
  for (int64_t j = 0; j < n; ++j)
    dst[j] =
        dt == DType::Float16 ? f16_to_f32(f32_to_f16(src[j])) : bf16_to_f32(f32_to_bf16(src[j]));
#endif
}

#define LOOM_INST(ct, T, dtype)                                        \
  template void load_run<T>(const void*, DType, int64_t, T*, int64_t); \
  template void store_run<T>(void*, DType, int64_t, const T*, int64_t);
LOOM_COMPUTE_TYPES(LOOM_INST)
#undef LOOM_INST

}  // namespace loom
