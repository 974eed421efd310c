#include "cpu/vmath.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <type_traits>
#include <vector>

#include "cpu/arith.h"
#include "tensor/knobs.h"

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace loom::cpu {
namespace {

// e^y = 2^k e^r with k = round(y / ln 2) and |r| <= ln(2) / 2; e^r = 1 + r + r^2 q(r), q a
// degree-4 minimax fit (relative error 1.7e-8, a third of a float ulp, with these float
// coefficients). Adding kShift rounds to an integer (|v| < 2^22) held in the low bits.
// Every function but exp divides once (vdivps, ~8-10 cycles a vector beside the vector ports),
// so the rest is kept to ~15 instructions: signs folded into constants, scalings by vscalefps.
// An exact vrcp14ps + Newton + Markstein division (same bits over all 2^32 inputs) was tried and
// dropped: the loops are bound by the vector ports, which its 5-8 extra uops a vector load, more
// than by the divider it frees (chain8 slower: bench/RESULTS.md).
constexpr float kLog2e = 0x1.715476p+0f;
constexpr float kShift = 0x1.8p23f;
constexpr float kLn2Hi = 0x1.62e430p-1f;    // float(ln 2)
constexpr float kLn2Lo = -0x1.05c610p-29f;  // ln 2 - kLn2Hi
constexpr float kC2 = 0x1.fffffep-2f, kC3 = 0x1.5554b0p-3f, kC4 = 0x1.555674p-5f,
                kC5 = 0x1.1227b0p-7f, kC6 = 0x1.6bebfep-10f;
// Clamps: exp(-104) is below half the smallest subnormal and exp(89) overflows; sigmoid is 1
// within half an ulp above 17 (80 keeps 2^-k normal); tanh is 1 above 9.1.
constexpr float kExpLo = -104.f, kExpHi = 89.f, kSigHi = 80.f, kTanhLo = -20.f;

// ---- scalar form (builds without AVX-512): the same operations, the same bits ----------------
inline float pow2(int32_t k) { return std::bit_cast<float>((k + 127) << 23); }  // k in [-126, 127]

// v * 2^n (n an integer-valued float in [-150, 150]) as vscalefps gives it: two normal factors,
// so the first product is exact and the second rounds once.
inline float scalef(float v, float n) {
  int32_t k = int32_t(n), k1 = k >> 1;
  return v * pow2(k1) * pow2(k - k1);
}

// kf = round(y / ln 2) (as a float) and r = y - kf ln 2; y finite, |y| < 2^21.
inline float reduce(float y, float& r) {
  float kf = std::fma(y, kLog2e, kShift) - kShift;
  r = std::fma(kf, -kLn2Hi, y);
  r = std::fma(kf, -kLn2Lo, r);
  return kf;
}

// e^r, |r| <= ln(2) / 2
inline float exp_poly(float r) {
  float q = std::fma(kC6, r, kC5);
  q = std::fma(q, r, kC4);
  q = std::fma(q, r, kC3);
  q = std::fma(q, r, kC2);
  q = std::fma(q, r, 1.f);
  return std::fma(q, r, 1.f);
}

// e^-r, |r| <= ln(2) / 2: exp_poly's polynomial with the odd terms negated.
inline float exp_neg_poly(float r) {
  float q = std::fma(kC6, r, -kC5);
  q = std::fma(q, r, kC4);
  q = std::fma(q, r, -kC3);
  q = std::fma(q, r, kC2);
  q = std::fma(q, r, -1.f);
  return std::fma(q, r, 1.f);
}

// Comparisons written so a NaN x is kept (false compares), as the vector max/min keep it.
inline float s_exp(float x) {
  float y = x < kExpLo ? kExpLo : x;
  y = y > kExpHi ? kExpHi : y;
  float r;
  float kf = reduce(y, r);
  return scalef(exp_poly(r), kf);
}

// sigmoid(x) = 1 / (1 + 2^k E) = 2^-k / (2^-k + E), with e^-x = 2^k E: no overflow for any
// x >= -104, and the final scaling rounds a subnormal result once.
inline float s_sigmoid(float x) {
  float y = x < kExpLo ? kExpLo : x;
  y = y > kSigHi ? kSigHi : y;
  float nk = kShift - std::fma(y, -kLog2e, kShift);
  float r = std::fma(nk, -kLn2Hi, y);
  r = std::fma(nk, -kLn2Lo, r);
  float q = exp_neg_poly(r);
  return scalef(1.f / (scalef(1.f, nk) + q), nk);
}

// gelu(x), tanh form, = x sigmoid(t), t = 2 sqrt(2/pi) (x + 0.044715 x^3), as s_sigmoid
// computes it with x folded into the division: scalef(x / (2^nk + E), nk). t and its
// reduction (nk, r) in float64: t reaches -150 where x is about -11, and t's float32 rounding
// (3 ulp of 150) would move e^t by 250 ulp. Clamps: below -150 the result is 0 (of x's sign),
// above 80 it is x.
constexpr double kGeluC = 1.5957691216057307117597842397375;  // 2 sqrt(2 / pi)
constexpr double kGeluLo = -150.0, kGeluHi = 80.0;
constexpr double kLog2eD = 1.4426950408889634074, kLn2D = 0.69314718055994530942;

inline float s_gelu_tanh(float x) {
  double xd = x;
  double t = kGeluC * (xd + 0.044715 * (xd * xd * xd));
  if (t < kGeluLo) return x * 0.f;  // 0 of x's sign (x e^t underflows even for x = -FLT_MAX)
  t = t < kGeluLo ? kGeluLo : t;
  t = t > kGeluHi ? kGeluHi : t;
  double nkd = std::nearbyint(t * kLog2eD);
  float r = float(std::fma(nkd, -kLn2D, t));
  float nk = float(nkd);
  float q = exp_neg_poly(r);
  float v = scalef(x / (scalef(1.f, nk) + q), nk);
  return x == -std::numeric_limits<float>::infinity() ? std::numeric_limits<float>::quiet_NaN() : v;
}

// tanh |x| = -m / (2 + m) with m = expm1(-2|x|) = 2^k (1 + p) - 1 (no cancellation near 0);
// p = expm1(r) = r + r^2 q(r) kept apart from the 1.
inline float s_tanh(float x) {
  float u = -std::fabs(x);
  u = u < kTanhLo ? kTanhLo : u;
  float kf = std::fma(u, 2.f * kLog2e, kShift) - kShift;
  float h = std::fma(kf, -0.5f * kLn2Hi, u);
  float q = std::fma(32.f * kC6, h, 16.f * kC5);
  q = std::fma(q, h, 8.f * kC4);
  q = std::fma(q, h, 4.f * kC3);
  q = std::fma(q, h, 2.f * kC2);
  float ph = std::fma(q, h * h, h);
  float s2 = scalef(2.f, kf);
  float m = std::fma(s2, ph, std::fma(s2, 0.5f, -1.f));
  return std::copysign(m / (-2.f - m), x);
}

#if defined(__AVX512F__)
inline __m512 set(float v) { return _mm512_set1_ps(v); }

inline __m512 v_reduce(__m512 y, __m512& r) {
  __m512 kf = _mm512_sub_ps(_mm512_fmadd_ps(y, set(kLog2e), set(kShift)), set(kShift));
  r = _mm512_fmadd_ps(kf, set(-kLn2Hi), y);
  r = _mm512_fmadd_ps(kf, set(-kLn2Lo), r);
  return kf;
}

inline __m512 v_exp_poly(__m512 r) {
  __m512 q = _mm512_fmadd_ps(set(kC6), r, set(kC5));
  q = _mm512_fmadd_ps(q, r, set(kC4));
  q = _mm512_fmadd_ps(q, r, set(kC3));
  q = _mm512_fmadd_ps(q, r, set(kC2));
  q = _mm512_fmadd_ps(q, r, set(1.f));
  return _mm512_fmadd_ps(q, r, set(1.f));
}

// exp_neg_poly of 16 floats.
inline __m512 v_exp_neg_poly(__m512 r) {
  __m512 q = _mm512_fmadd_ps(set(kC6), r, set(-kC5));
  q = _mm512_fmadd_ps(q, r, set(kC4));
  q = _mm512_fmadd_ps(q, r, set(-kC3));
  q = _mm512_fmadd_ps(q, r, set(kC2));
  q = _mm512_fmadd_ps(q, r, set(-1.f));
  return _mm512_fmadd_ps(q, r, set(1.f));
}

// Each function in two stages, the reduction and polynomial (first) and what follows (second),
// so pair_unary_loop can run the first stage of one vector beside the second of the one
// before (see there); f(x) = second(first(x)), the same operations either way.
// max(lo, y) and min(hi, y) return y itself when y is NaN (the second operand).
// Lanes below kExpLo (-inf: a masked attention score) are 0 without computing them: the clamped
// value's 2^-150 scaling underflowed, and an underflowing result costs a microcode assist of
// ~100 cycles a vector (half of a causal mask's scores: 7x the time of the softmax).
struct ExpF {
  struct S {
    __m512 p, kf;
    __mmask16 live;
  };
  static S first(__m512 x) {
    __mmask16 live = _mm512_cmp_ps_mask(x, set(kExpLo), _CMP_NLT_UQ);  // NaN stays live
    __m512 y = _mm512_maskz_mov_ps(live, _mm512_min_ps(set(kExpHi), x));
    __m512 r;
    __m512 kf = v_reduce(y, r);
    return {v_exp_poly(r), kf, live};
  }
  static __m512 second(const S& s) { return _mm512_maskz_scalef_ps(s.live, s.p, s.kf); }
};

// e^-y = 2^k e^r: nk = -k and r' = -r straight from y (no negations), e^r = E(-r').
struct SigmoidF {
  struct S {
    __m512 q, nk;
  };
  static S first(__m512 x) {
    __m512 y = _mm512_min_ps(set(kSigHi), _mm512_max_ps(set(kExpLo), x));
    __m512 nk = _mm512_sub_ps(set(kShift), _mm512_fmadd_ps(y, set(-kLog2e), set(kShift)));
    __m512 r = _mm512_fmadd_ps(nk, set(-kLn2Hi), y);
    r = _mm512_fmadd_ps(nk, set(-kLn2Lo), r);
    __m512 q = v_exp_neg_poly(r);
    return {q, nk};
  }
  static __m512 second(const S& s) {
    __m512 d = _mm512_add_ps(_mm512_scalef_ps(set(1.f), s.nk), s.q);
    return _mm512_scalef_ps(_mm512_div_ps(set(1.f), d), s.nk);
  }
};

// Works on h = r / 2 straight from u = -|x| (no doubling): 2 log2(e) and ln(2) / 2 are exact
// scalings, and p / 2 = h + h^2 Q(h) with Q_j = 2^(j+1) c_(j+2), also exact. ln 2's low part is
// left out: it moves e^(2u) by k 2e-9 relatively, under 0.1 ulp of tanh for every k.
struct TanhF {
  struct S {
    __m512 q, h, kf, x;
  };
  static S first(__m512 x) {
    __m512 u = _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(x), sign()));  // -|x|
    u = _mm512_max_ps(set(kTanhLo), u);
    __m512 kf = _mm512_sub_ps(_mm512_fmadd_ps(u, set(2.f * kLog2e), set(kShift)), set(kShift));
    __m512 h = _mm512_fmadd_ps(kf, set(-0.5f * kLn2Hi), u);
    __m512 q = _mm512_fmadd_ps(set(32.f * kC6), h, set(16.f * kC5));
    q = _mm512_fmadd_ps(q, h, set(8.f * kC4));
    q = _mm512_fmadd_ps(q, h, set(4.f * kC3));
    q = _mm512_fmadd_ps(q, h, set(2.f * kC2));
    return {q, h, kf, x};
  }
  static __m512 second(const S& s) {
    __m512 ph = _mm512_fmadd_ps(s.q, _mm512_mul_ps(s.h, s.h), s.h);
    __m512 s2 = _mm512_scalef_ps(set(2.f), s.kf);                                   // 2^(k+1)
    __m512 m = _mm512_fmadd_ps(s2, ph, _mm512_fmadd_ps(s2, set(0.5f), set(-1.f)));  // 2^k(1+p)-1
    __m512 dn = _mm512_sub_ps(set(-2.f), m);
    __m512 th = _mm512_div_ps(m, dn);
    // copysign: sign bit from x, the rest from th (bitwise select, 0xCA = a ? b : c)
    return _mm512_castsi512_ps(
        _mm512_ternarylogic_epi32(sign(), _mm512_castps_si512(s.x), _mm512_castps_si512(th), 0xCA));
  }
  static __m512i sign() { return _mm512_set1_epi32(INT32_MIN); }
};

template <typename F>
inline __m512 v_f(__m512 x) {
  return F::second(F::first(x));
}
inline __m512 v_exp(__m512 x) { return v_f<ExpF>(x); }
inline __m512 v_sigmoid(__m512 x) { return v_f<SigmoidF>(x); }
inline __m512 v_tanh(__m512 x) { return v_f<TanhF>(x); }

// s_gelu_tanh for 16 floats: t, nk and r in two halves of float64 lanes.
inline __m512 v_gelu_tanh(__m512 x) {
  auto half = [](__m256 h, __m256& r, __m256& nk, __mmask8& low) {
    __m512d xd = _mm512_cvtps_pd(h);
    __m512d c3 = _mm512_mul_pd(_mm512_mul_pd(_mm512_mul_pd(xd, xd), xd), _mm512_set1_pd(0.044715));
    __m512d t = _mm512_mul_pd(_mm512_set1_pd(kGeluC), _mm512_add_pd(xd, c3));
    low = _mm512_cmp_pd_mask(t, _mm512_set1_pd(kGeluLo), _CMP_LT_OQ);
    t = _mm512_min_pd(_mm512_set1_pd(kGeluHi), _mm512_max_pd(_mm512_set1_pd(kGeluLo), t));
    __m512d nkd = _mm512_roundscale_pd(_mm512_mul_pd(t, _mm512_set1_pd(kLog2eD)),
                                       _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    r = _mm512_cvtpd_ps(_mm512_fmadd_pd(nkd, _mm512_set1_pd(-kLn2D), t));
    nk = _mm512_cvtpd_ps(nkd);
  };
  __m256 r0, r1, n0, n1;
  __mmask8 l0, l1;
  half(_mm512_castps512_ps256(x), r0, n0, l0);
  half(_mm512_extractf32x8_ps(x, 1), r1, n1, l1);
  __m512 r = _mm512_insertf32x8(_mm512_castps256_ps512(r0), r1, 1);
  __m512 nk = _mm512_insertf32x8(_mm512_castps256_ps512(n0), n1, 1);
  __m512 q = v_exp_neg_poly(r);
  __m512 d = _mm512_add_ps(_mm512_scalef_ps(set(1.f), nk), q);
  __m512 v = _mm512_scalef_ps(_mm512_div_ps(x, d), nk);
  v = _mm512_mask_mul_ps(v, __mmask16(l0 | (unsigned(l1) << 8)), x, _mm512_setzero_ps());
  __mmask16 ninf = _mm512_cmp_ps_mask(x, set(-INFINITY), _CMP_EQ_OQ);
  return _mm512_mask_mov_ps(v, ninf, set(std::numeric_limits<float>::quiet_NaN()));
}

// Applies f to n floats, 16 at a time; the tail through masked loads and stores, so every
// element is computed by the same instructions whatever its position.
template <typename F>
inline void v_map(const float* a, float* o, int64_t n, F f) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(o + i, f(_mm512_loadu_ps(a + i)));
  if (i < n) {
    __mmask16 m = __mmask16((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(o + i, m, f(_mm512_maskz_loadu_ps(m, a + i)));
  }
}
#endif

}  // namespace

// Off by default without AVX-512 (the knob's "avx512" default): the scalar form vectorizes to
// AVX2 at ~1.5x Eigen's cost.
bool vmath_on() {
  static const bool on = knob_flag(Knob::CpuVmath);
  return on;
}

// One map over n floats: the AVX-512 kernel where built with it, else the scalar form.
#if defined(__AVX512F__)
#define LOOM_VMATH_MAP(vec, scalar) v_map(a, out, n, [](__m512 v) { return vec(v); })
#else
#define LOOM_VMATH_MAP(vec, scalar) \
  for (int64_t i = 0; i < n; ++i) out[i] = scalar(a[i])
#endif
void exp_f32(const float* a, float* out, int64_t n) { LOOM_VMATH_MAP(v_exp, s_exp); }
void tanh_f32(const float* a, float* out, int64_t n) { LOOM_VMATH_MAP(v_tanh, s_tanh); }
void sigmoid_f32(const float* a, float* out, int64_t n) { LOOM_VMATH_MAP(v_sigmoid, s_sigmoid); }
void gelu_tanh_f32(const float* a, float* out, int64_t n) {
  LOOM_VMATH_MAP(v_gelu_tanh, s_gelu_tanh);
}
#undef LOOM_VMATH_MAP

float exp_scalar(float x) { return s_exp(x); }
float tanh_scalar(float x) { return s_tanh(x); }
float sigmoid_scalar(float x) { return s_sigmoid(x); }
float gelu_tanh_scalar(float x) { return s_gelu_tanh(x); }

void exp_sub_f32(const float* a, int sa, const float* b, int sb, float* out, int64_t n) {
#if defined(__AVX512F__)
  if (sa && !sb) {
    const __m512 bv = set(b[0]);
    return v_map(a, out, n, [bv](__m512 x) { return v_exp(_mm512_sub_ps(x, bv)); });
  }
  if (sa && sb) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
      _mm512_storeu_ps(out + i,
                       v_exp(_mm512_sub_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i))));
    if (i < n) {
      __mmask16 m = __mmask16((1u << (n - i)) - 1);
      __m512 d = _mm512_sub_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i));
      _mm512_mask_storeu_ps(out + i, m, v_exp(d));
    }
    return;
  }
#endif
  for (int64_t i = 0; i < n; ++i) out[i] = s_exp(a[i * sa] - b[i * sb]);
}

}  // namespace loom::cpu

namespace loom::cpu {
namespace {

// The optional last op of pair_unary_f32 as one fma, v * m + d, exact but for the one
// rounding the op itself has: none v * 1 + -0 (-0 keeps a -0 v), Add v * 1 + w, Sub
// v * 1 + -w or v * -1 + w (IEEE's x - y is x + -y), Mul v * w + -0. Chosen per element
// with branches on loop constants, so the loop is the same code with or without a tail.
struct Tail {
  bool mul = false, sub = false, none = true;
  float m = 1.f;  // multiplier unless mul
  const float* w = nullptr;
  int sw = 0;
  Tail(Op op, bool first, const float* w_, int sw_) : w(w_), sw(sw_) {
    none = op == Op::Const || !w_;
    mul = !none && op == Op::Mul;
    sub = !none && op == Op::Sub && first;           // v - w
    if (!none && op == Op::Sub && !first) m = -1.f;  // w - v
  }
#if defined(__AVX512F__)
  // The op (where there is one); mv: m in every lane.
  __m512 apply_op(__m512 v, __m512 wv, __m512 mv) const {
    const __m512 nz = _mm512_set1_ps(-0.f);
    // v as computed: without this the compiler sees fma(v, 1, w) as v + w and contracts a
    // product v into one fma with it, one rounding fewer than the ops run one at a time
    __asm__("" : "+v"(v));
    if (mul) return _mm512_fmadd_ps(v, wv, nz);
    // v - w as v * 1 - w: IEEE's v + -w, without a negation of w every vector
    if (sub) return _mm512_fmsub_ps(v, mv, wv);
    return _mm512_fmadd_ps(v, mv, wv);
  }
#endif
  float apply(float v, int64_t i) const {
    if (none) return v;
    __asm__("" : "+x"(v));  // no contraction of v's last op with the tail (see above)
    float wv = w[i * sw];
    return mul ? v * wv : sub ? v - wv : m < 0 ? wv - v : v + wv;
  }
};

// The ops before f (PreOps) as fmas v * m + d, each exact but for the op's own rounding (as
// Tail's): Add v * 1 + k, Sub v * 1 + -k or v * -1 + k, Mul v * k + -0 (-0 keeps a -0 product).
struct Pre {
  int n = 0;
  float m[PreOps::kMax] = {1.f, 1.f, 1.f}, d[PreOps::kMax] = {-0.f, -0.f, -0.f};
  explicit Pre(const PreOps& p) : n(p.n) {
    for (int s = 0; s < p.n; ++s) {
      if (p.op[s] == Op::Mul)
        m[s] = p.k[s];
      else if (p.op[s] == Op::Sub && p.k_first[s])
        m[s] = -1.f, d[s] = p.k[s];
      else
        d[s] = p.op[s] == Op::Sub ? -p.k[s] : p.k[s];
    }
  }
  float apply(float v) const {
    for (int s = 0; s < n; ++s) v = std::fma(v, m[s], d[s]);
    return v;
  }
};

#if defined(__AVX512F__)
// Whether pair_unary_loop runs software-pipelined (below): LOOM_CPU_PIPE.
bool pair_pipe() {
  static const bool on = knob_flag(Knob::CpuPipe);
  return on;
}

// How far ahead (floats) the pipelined loop prefetches its operands into L1, a line each an
// iteration: LOOM_CPU_PF_AHEAD; 0 turns it off. A tile of a 16M-float chain8 reads
// x from memory, and those reads did not overlap the compute: on one thread they added ~13
// TSC ticks per 16 floats to the ~25 of the loops on an L1 tile, whether or not the
// interpreter prefetched the next tile in bursts (LOOM_CPU_PREFETCH). One prefetch a line,
// 2048 floats (two tiles) ahead: streamed 37-51 -> 26-32 ticks, loom's chain8 on one thread
// 19-26 -> 17-19 ms CPU (bench/tile_loops.cpp, load 4-5; 1024 and 4096 ahead less steady).
// An operand already in cache costs a load-port uop an iteration (the loops are bound by the
// vector ports); prefetches never fault, so reading past an operand's end is harmless.
int64_t pair_pf_ahead() {
  static const int64_t d = std::max<int64_t>(0, knob_int(Knob::CpuPfAhead));
  return d;
}

template <Op I, Op O, bool Swap, bool Relu, typename F>
void pair_unary_loop(const float* a, int sa, const float* c, int sc, F, const float* b, float* out,
                     int64_t n, const Tail& tail, bool stream, const Pre& pre) {
  const Tail t = tail;  // a local copy: stores to `out` cannot alias it, so it stays in registers
  const int np = pre.n;
  const __m512 m0 = _mm512_set1_ps(pre.m[0]), d0 = _mm512_set1_ps(pre.d[0]);
  const __m512 m1 = _mm512_set1_ps(pre.m[1]), d1 = _mm512_set1_ps(pre.d[1]);
  const __m512 m2 = _mm512_set1_ps(pre.m[2]), d2 = _mm512_set1_ps(pre.d[2]);
  const __m512 mv = _mm512_set1_ps(t.m);
  // vfixupimmps's response a class (4 bits each, from the low end): QNaN v, SNaN QNaN(v),
  // zero +0, one v, -inf +0, +inf v, negative +0, positive v
  const __m512i relu_tbl = _mm512_set1_epi32(0x18181821);
  // A one-value operand is read from 16 copies of it at index i * 0: every operand load is
  // then the same instruction, with no branch a vector (those branch uops took issue slots
  // from the vector ports: ~7% of the loop in llvm-mca's model).
  alignas(64) float splat[3][16];
  auto one = [&](const float* p, int st, float* buf) {
    if (st) return p;
    std::fill_n(buf, 16, p ? p[0] : 0.f);
    return static_cast<const float*>(buf);
  };
  const float *pa = one(a, sa, splat[0]), *pc = one(c, sc, splat[1]),
              *pw = one(t.w, t.sw, splat[2]);
  const int64_t ka = sa ? 1 : 0, kc = sc ? 1 : 0, kw = t.sw ? 1 : 0;
  // tl: whether there is a tail op (else w is not read). One vector in two stages: front
  // (loads, a inner c, the ops before f, f's first stage) and back (f's second stage, the
  // outer op, tail, relu); St carries what back needs.
  struct St {
    __m512 xy, wv;
    typename F::S fs;
  };
  auto front = [&](__m512 x, __m512 y, __m512 z, __m512 wv) {
    if (np > 0) z = _mm512_fmadd_ps(z, m0, d0);
    if (np > 1) z = _mm512_fmadd_ps(z, m1, d1);
    if (np > 2) z = _mm512_fmadd_ps(z, m2, d2);
    __m512 xy = arith<I, false>(x, y);
    // xy as computed: without this the compiler may contract a product xy into an fma with
    // the outer op (main's loop did for chain8's x * x + sigmoid(v)), one rounding fewer
    // than the ops run one at a time
    __asm__("" : "+v"(xy));
    return St{xy, wv, F::first(z)};
  };
  auto back = [&](const St& st, auto tl) {
    __m512 v = arith<O, Swap>(st.xy, F::second(st.fs));
    if constexpr (decltype(tl)::value) v = t.apply_op(v, st.wv, mv);
    // relu as unary() has it, max(0, v) + 0 (a NaN v kept, -0 to +0), in one vfixupimmps
    // rather than two ops: by v's class, +0 for zeros, negatives and -inf, v itself
    // otherwise (an SNaN quieted); the same bits as max + add for all 2^32 floats (checked).
    if constexpr (Relu) v = _mm512_fixupimm_ps(v, v, relu_tbl, 0);
    return v;
  };
  // Streaming, the tail's presence and the pipelining as constants of each loop (their
  // branches, per vector, cost issue slots as the operand ones did).
  auto loop = [&](auto nt, auto tl, auto pipe) {
    auto load = [&](int64_t j) {
      __m512 x = _mm512_loadu_ps(pa + j * ka), y = _mm512_loadu_ps(pc + j * kc);
      __m512 wv = decltype(tl)::value ? _mm512_loadu_ps(pw + j * kw) : _mm512_setzero_ps();
      return front(x, y, _mm512_loadu_ps(b + j), wv);
    };
    auto put = [&](int64_t j, __m512 r) {
      if constexpr (decltype(nt)::value)
        _mm512_stream_ps(out + j, r);
      else
        _mm512_storeu_ps(out + j, r);
    };
    int64_t i = 0;
    // Pipelined: each iteration computes vector i's front and vector i - 16's back, whose
    // front finished an iteration earlier. A vector's whole chain (~80 cycles of dependent
    // ops, the division's ~18 among them) otherwise sits in the scheduler while the next
    // vectors queue behind it: the loops ran at ~2x their port bound (bench/tile_loops.cpp:
    // chain8's two loops on an L1 tile 29-39 -> 23-25 TSC ticks per 16 floats). Two vectors
    // an iteration (unrolled, not pipelined) did not help: both chains still queue whole.
    if constexpr (decltype(pipe)::value) {
      if (n >= 32) {
        St prev = load(0);
        const int64_t pf = pair_pf_ahead();
        const char* pfa = reinterpret_cast<const char*>(pa + pf * ka);
        const char* pfc = reinterpret_cast<const char*>(pc + pf * kc);
        const char* pfb = reinterpret_cast<const char*>(b + pf);
        for (i = 16; i + 16 <= n; i += 16) {
          if (pf) {  // (a one-value operand: its 16 copies again, in L1)
            _mm_prefetch(pfb + i * 4, _MM_HINT_T0);
            _mm_prefetch(pfa + i * 4 * ka, _MM_HINT_T0);
            if (pfc != pfa) _mm_prefetch(pfc + i * 4 * kc, _MM_HINT_T0);
          }
          St cur = load(i);
          put(i - 16, back(prev, tl));
          prev = cur;
        }
        put(i - 16, back(prev, tl));
      }
    }
    for (; i + 16 <= n; i += 16) put(i, back(load(i), tl));
    if (i < n) {
      __mmask16 m = __mmask16((1u << (n - i)) - 1);
      __m512 x = _mm512_maskz_loadu_ps(m, pa + i * ka);
      __m512 y = _mm512_maskz_loadu_ps(m, pc + i * kc);
      __m512 wv = _mm512_maskz_loadu_ps(m, pw + i * kw);
      St st = front(x, y, _mm512_maskz_loadu_ps(m, b + i), wv);
      _mm512_mask_storeu_ps(out + i, m, back(st, tl));
    }
  };
  const std::true_type yes;
  const std::false_type no;
  auto piped = [&](auto nt, auto tl) {
    if (pair_pipe()) return loop(nt, tl, yes);
    loop(nt, tl, no);
  };
  if (stream)
    t.none ? piped(yes, no) : piped(yes, yes);
  else
    t.none ? piped(no, no) : piped(no, yes);
}
#endif

}  // namespace

void pair_unary_f32(Op inner, const float* a, int sa, const float* c, int sc, Op outer, bool first,
                    Op f, const float* b, bool relu, float* out, int64_t n, Op tail,
                    bool tail_first, const float* w, int sw, bool stream, const PreOps& pre_ops) {
  const Tail t(tail, tail_first, w, sw);
  const Pre pre(pre_ops);
#if defined(__AVX512F__)
  auto run = [&](auto fn) {
    with_op(inner, false, [&](auto I, auto) {
      with_op(outer, !first, [&](auto O, auto swap) {
        if (relu)
          pair_unary_loop<I.value, O.value, swap.value, true>(a, sa, c, sc, fn, b, out, n, t,
                                                              stream, pre);
        else
          pair_unary_loop<I.value, O.value, swap.value, false>(a, sa, c, sc, fn, b, out, n, t,
                                                               stream, pre);
      });
    });
  };
  // f as a type: each loop gets both its stages inlined
  if (f == Op::Exp) return run(ExpF{});
  if (f == Op::Tanh) return run(TanhF{});
  return run(SigmoidF{});
#else
  (void)stream;  // plain stores
  // f(b) through memory first (no contraction into the ops after it), then the pair.
  std::vector<float> fb(static_cast<size_t>(n));
  if (pre.n > 0) {  // the ops before f, through fb
    for (int64_t i = 0; i < n; ++i) fb[size_t(i)] = pre.apply(b[i]);
    b = fb.data();
  }
  (f == Op::Exp ? exp_f32 : f == Op::Tanh ? tanh_f32 : sigmoid_f32)(b, fb.data(), n);
  with_op(inner, false, [&](auto I, auto) {
    with_op(outer, !first, [&](auto O, auto swap) {
      for (int64_t i = 0; i < n; ++i) {
        float v = t.apply(
            arith<O.value, swap.value>(arith<I.value, false>(a[i * sa], c[i * sc]), fb[size_t(i)]),
            i);
        out[i] = relu ? (v > 0 ? v : (v != v ? v : 0.f)) : v;
      }
    });
  });
#endif
}

}  // namespace loom::cpu
