// sqrt and rsqrt of float32, correctly rounded (sqrt) and rounded once from float64 (rsqrt),
// with the same instructions for every element. Eigen's float sqrt (under its default fast
// math) is an rsqrt estimate and a Newton step for whole vectors and libm's for the elements
// before and after them, and where a run's vectors start depends on its buffer's alignment:
// one value could differ in its last bit from one run to the next (bench/RESULTS.md,
// "Horizontal fusion ...").
#include <cmath>

#include "cpu/vmath.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace loom::cpu {

void sqrt_f32(const float* a, float* out, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__)
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(out + i, _mm512_sqrt_ps(_mm512_loadu_ps(a + i)));
  if (i < n) {
    const __mmask16 m = __mmask16((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(out + i, m, _mm512_sqrt_ps(_mm512_maskz_loadu_ps(m, a + i)));
  }
#else
  for (; i < n; ++i) out[i] = std::sqrt(a[i]);
#endif
}

void rsqrt_f32(const float* a, float* out, int64_t n) {
  int64_t i = 0;
#if defined(__AVX512F__)
  const __m512d one = _mm512_set1_pd(1.0);
  auto f = [&](__m256 x) {
    return _mm512_cvtpd_ps(_mm512_div_pd(one, _mm512_sqrt_pd(_mm512_cvtps_pd(x))));
  };
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, f(_mm256_loadu_ps(a + i)));
  if (i < n) {
    const __mmask8 m = __mmask8((1u << (n - i)) - 1);
    _mm256_mask_storeu_ps(out + i, m, f(_mm256_maskz_loadu_ps(m, a + i)));
  }
#else
  for (; i < n; ++i) out[i] = float(1.0 / std::sqrt(double(a[i])));
#endif
}

}  // namespace loom::cpu
