// erf, erfc and gelu (erf form) of float32 in float64 vectors: the same method as
// cpu/erfc_wide.h (e^(-z^2) erfcx(z), erfcx a degree-12 polynomial in (z - 3)/(z + 3)), written
// with AVX-512 intrinsics: through Eigen's arrays every step went through memory, several times
// slower (bench/RESULTS.md).
#include <cmath>

#include "cpu/erfc_wide.h"
#include "cpu/vmath.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace loom::cpu {
namespace {

#if defined(__AVX512F__)
inline __m512d set(double v) { return _mm512_set1_pd(v); }

// erfc of 8 doubles. e^(-c^2) as 2^k e^r, |r| <= ln(2) / 2, e^r by its Taylor series to r^10
// (2^-37 relative: far below what a float32 result keeps).
inline __m512d v_erfc_pd(__m512d z) {
  // min(10.5, az): a NaN az passes through (vminpd returns its second operand)
  const __m512d az = _mm512_abs_pd(z), c = _mm512_min_pd(set(10.5), az);
  const __m512d t = _mm512_div_pd(_mm512_sub_pd(c, set(3)), _mm512_add_pd(c, set(3)));
  __m512d p = set(sm::kErfcxPoly[12]);
  for (int i = 11; i >= 0; --i) p = _mm512_fmadd_pd(p, t, set(sm::kErfcxPoly[i]));
  const __m512d y = _mm512_mul_pd(_mm512_sub_pd(_mm512_setzero_pd(), c), c);
  const __m512d k = _mm512_roundscale_pd(_mm512_mul_pd(y, set(1.4426950408889634)),
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512d r = _mm512_fnmadd_pd(k, set(0.6931471803691238), y);  // ln 2 in two parts
  r = _mm512_fnmadd_pd(k, set(1.9082149292705877e-10), r);
  __m512d q = set(1.0 / 3628800);
  for (double f : {1.0 / 362880, 1.0 / 40320, 1.0 / 5040, 1.0 / 720, 1.0 / 120, 1.0 / 24, 1.0 / 6,
                   0.5, 1.0, 1.0})
    q = _mm512_fmadd_pd(q, r, set(f));
  __m512d e = _mm512_mul_pd(_mm512_scalef_pd(q, k), p);
  // past 10.5 (and at infinity) erfc is below every float: exactly 0, so x * 0 keeps signs
  e = _mm512_mask_mov_pd(e, _mm512_cmp_pd_mask(az, set(10.5), _CMP_GT_OQ), _mm512_setzero_pd());
  __mmask8 pos = _mm512_cmp_pd_mask(z, _mm512_setzero_pd(), _CMP_GE_OQ);
  return _mm512_mask_blend_pd(pos, _mm512_sub_pd(set(2), e), e);  // NaN: 2 - NaN
}

// f(x) of 16 floats computed as two halves of 8 doubles and rounded once.
template <typename F>
inline __m512 v_halves(__m512 x, F f) {
  __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(x));
  __m512d hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1)));
  __m256 a = _mm512_cvtpd_ps(f(lo)), b = _mm512_cvtpd_ps(f(hi));
  return _mm512_insertf32x8(_mm512_castps256_ps512(a), b, 1);
}

template <typename F>
inline void v_map16(const float* a, float* o, int64_t n, F f) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(o + i, v_halves(_mm512_loadu_ps(a + i), f));
  if (i < n) {
    __mmask16 m = __mmask16((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(o + i, m, v_halves(_mm512_maskz_loadu_ps(m, a + i), f));
  }
}

// erf of 8 doubles: its Taylor series below |x| = 0.5 (12 terms: 1e-16 relative there, where
// 1 - erfc would cancel), 1 - erfc(|x|) with x's sign above.
inline __m512d v_erf_pd(__m512d x) {
  const __m512d ax = _mm512_abs_pd(x), x2 = _mm512_mul_pd(x, x);
  __m512d s = set(sm::kErfTaylor[11]);
  for (int i = 10; i >= 0; --i) s = _mm512_fmadd_pd(s, x2, set(sm::kErfTaylor[i]));
  const __m512d small = _mm512_mul_pd(s, x);
  const __m512d big = _mm512_sub_pd(set(1), v_erfc_pd(ax));
  const __m512d sbig = _mm512_or_pd(big, _mm512_and_pd(x, set(-0.0)));  // x's sign
  return _mm512_mask_blend_pd(_mm512_cmp_pd_mask(ax, set(0.5), _CMP_LT_OQ), sbig, small);
}

inline __m512d v_gelu_pd(__m512d x) {
  __m512d e = v_erfc_pd(_mm512_mul_pd(x, set(-0.70710678118654752)));
  return _mm512_mul_pd(_mm512_mul_pd(x, set(0.5)), e);
}
#endif

}  // namespace

#if defined(__AVX512F__)
void erfc_f32(const float* a, float* out, int64_t n) { v_map16(a, out, n, v_erfc_pd); }
void gelu_f32(const float* a, float* out, int64_t n) { v_map16(a, out, n, v_gelu_pd); }
void erf_f32(const float* a, float* out, int64_t n) { v_map16(a, out, n, v_erf_pd); }
#else  // without AVX-512 (vmath_on() is off by default there): libm in double, rounded once
void erfc_f32(const float* a, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = float(std::erfc(double(a[i])));
}
void erf_f32(const float* a, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = float(std::erf(double(a[i])));
}
void gelu_f32(const float* a, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    double x = a[i];
    out[i] = float(x * 0.5 * std::erfc(x * -0.70710678118654752));
  }
}
#endif

}  // namespace loom::cpu
