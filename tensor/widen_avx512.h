#pragma once
// Sixteen float16 or bfloat16 values widened to float32 in an AVX-512 register, bit for bit
// what the scalar conversions of tensor/half.h give (NaNs included): shared by the conversion
// runs (tensor/convert.cpp) and the folds that read 16-bit values where they lie
// (cpu/lanes_avx512.h), so both see the same floats.
#if defined(__AVX512F__) && defined(__AVX512BW__)
#include <immintrin.h>

namespace loom {

inline __m512 bf16_widen(__m256i h) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

inline __m512 f16_widen(__m256i h) {
  __m512 v = _mm512_cvtph_ps(h);
  // A NaN keeps its payload as is (the instruction would set the quiet bit).
  __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  if (nan) {
    __m512i w = _mm512_cvtepu16_epi32(h);
    __m512i bits = _mm512_or_si512(
        _mm512_or_si512(_mm512_slli_epi32(_mm512_and_si512(w, _mm512_set1_epi32(0x8000)), 16),
                        _mm512_set1_epi32(0x7f800000)),
        _mm512_slli_epi32(_mm512_and_si512(w, _mm512_set1_epi32(0x3ff)), 13));
    v = _mm512_mask_mov_ps(v, nan, _mm512_castsi512_ps(bits));
  }
  return v;
}

}  // namespace loom
#define LOOM_WIDEN_AVX512 1
#else
#define LOOM_WIDEN_AVX512 0
#endif
