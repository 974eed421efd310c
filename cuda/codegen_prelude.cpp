// The prelude of a generated module: index typedefs, the device helpers its kernels use (each
// defined once, after its dependencies) and the parameter struct.
#include <iterator>
#include <set>
#include <sstream>
#include <string>

#include "cuda/codegen_emit.h"

namespace loom::cuda::gen {
namespace {

// Helpers a kernel may use, in dependency order (a helper's dependencies come first).
struct Snippet {
  const char* name;
  const char* deps;
  const char* code;
};

const Snippet kSnippets[] = {
    {"h2f", "",
     "__device__ __forceinline__ float lm_h2f(unsigned short h) {\n"
     "  float f;\n  asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"(h));\n  return f;\n}\n"},
    {"f2h", "",
     "__device__ __forceinline__ unsigned short lm_f2h(float f) {\n"
     "  unsigned short h;\n  asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(f));\n"
     "  return h;\n}\n"},
    {"b2f", "",
     "__device__ __forceinline__ float lm_b2f(unsigned short b) {\n"
     "  return __uint_as_float((unsigned)b << 16);\n}\n"},
    {"f2b", "",
     // Round to nearest even; NaN stays a quiet NaN (tensor/half.h). sm_80 and later convert
     // in one instruction (the integer rounding takes several a value, and a bf16 row kernel's
     // store side is bound by its instructions).
     "__device__ __forceinline__ unsigned short lm_f2b(float f) {\n"
     "#if __CUDA_ARCH__ >= 800\n"
     "  unsigned short b;\n  asm(\"cvt.rn.bf16.f32 %0, %1;\" : \"=h\"(b) : \"f\"(f));\n"
     "  return b;\n"
     "#else\n"
     "  unsigned u = __float_as_uint(f);\n"
     "  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);\n"
     "  u += 0x7fffu + ((u >> 16) & 1u);\n  return (unsigned short)(u >> 16);\n"
     "#endif\n}\n"},
    {"rh", "h2f f2h",
     "__device__ __forceinline__ float lm_rh(float f) { return lm_h2f(lm_f2h(f)); }\n"},
    {"rb", "b2f f2b",
     "__device__ __forceinline__ float lm_rb(float f) { return lm_b2f(lm_f2b(f)); }\n"},
    {"fexp", "",  // exp as 2^(x log2 e): FMUL + MUFU.EX2 (expf: ~9 SASS instructions)
     "__device__ __forceinline__ float lm_fexp(float x) {\n  float y;\n"
     "  asm(\"ex2.approx.ftz.f32 %0, %1;\" : \"=f\"(y) : \"f\"(x * 1.44269504088896341f));\n"
     "  return y;\n}\n"},
    {"max", "",
     "template <class T>\n__device__ __forceinline__ T lm_max(T a, T b) {\n"
     "  if (a != a) return a;\n  if (b != b) return b;\n  return a > b ? a : b;\n}\n"},
    {"min", "",
     "template <class T>\n__device__ __forceinline__ T lm_min(T a, T b) {\n"
     "  if (a != a) return a;\n  if (b != b) return b;\n  return a < b ? a : b;\n}\n"},
    // v < 0, false for uint64 without a compare (NVRTC warns of a pointless one, #186-D).
    {"lt0", "",
     "template <class T>\n__device__ __forceinline__ bool lm_lt0(T v) { return v < (T)0; }\n"
     "__device__ __forceinline__ bool lm_lt0(unsigned long long) { return false; }\n"},
    {"ifdiv", "lt0",  // python floor division; integer division by zero gives 0
     "template <class T>\n__device__ __forceinline__ T lm_fdiv(T a, T b) {\n"
     "  if (b == 0) return 0;\n  T q = a / b;\n"
     "  if ((a % b != 0) && (lm_lt0(a) != lm_lt0(b))) --q;\n  return q;\n}\n"},
    {"ffdiv", "",  // as cpu/scalar_math.h floor_divide: the floor of the exact quotient
     R"(__device__ __forceinline__ double lm_ffdiv_d(double a, double b) {
  double mod = fmod(a, b), div = (a - mod) / b;
  if (mod != 0 && (b < 0) != (mod < 0)) div -= 1;
  if (div == 0) return copysign(0.0, a / b);
  double fl = floor(div);
  return div - fl > 0.5 ? fl + 1 : fl;
}
__device__ __forceinline__ double lm_ffdiv(double a, double b) {
  return b == 0 ? a / b : lm_ffdiv_d(a, b);
}
__device__ __forceinline__ float lm_ffdiv(float a, float b) {  // in double, rounded once
  return b == 0 ? a / b : (float)lm_ffdiv_d(a, b);
}
)"},
    {"imod", "lt0",
     "template <class T>\n__device__ __forceinline__ T lm_imod(T a, T b) {\n"
     "  if (b == 0) return 0;\n  T r = a % b;\n"
     "  if (r != 0 && (lm_lt0(r) != lm_lt0(b))) r += b;\n  return r;\n}\n"},
    {"fmodf", "",
     "__device__ __forceinline__ float lm_fmodf(float a, float b) {\n"
     "  float r = fmodf(a, b);\n  if (r != 0 && ((r < 0) != (b < 0))) r += b;\n  return r;\n}\n"},
    {"fmodd", "",
     "__device__ __forceinline__ double lm_fmodd(double a, double b) {\n"
     "  double r = fmod(a, b);\n  if (r != 0 && ((r < 0) != (b < 0))) r += b;\n  return r;\n}\n"},
    {"ifmod", "lt0",  // C's integer %: the dividend's sign; a zero divisor gives 0 (as the CPU)
     "template <class T>\n__device__ __forceinline__ T lm_ifmod(T a, T b) {\n"
     "  if (b == 0 || (lm_lt0((T)-1) && b == (T)-1)) return 0;\n  return a % b;\n}\n"},
    {"shl", "lt0",  // torch: a count < 0 or >= the width gives 0
     "template <class T>\n__device__ __forceinline__ T lm_shl(T a, T b) {\n"
     "  if (lm_lt0(b) || b >= (T)(sizeof(T) * 8)) return 0;\n"
     "  return (T)((unsigned long long)a << b);\n}\n"},
    {"shr", "lt0",  // torch: such a count fills with the sign bit (0 for uint64: logical shifts)
     "template <class T>\n__device__ __forceinline__ T lm_shr(T a, T b) {\n"
     "  if (lm_lt0(b) || b >= (T)(sizeof(T) * 8 - (lm_lt0((T)-1) ? 1 : 0)))\n"
     "    return lm_lt0(a) ? (T)-1 : (T)0;\n"
     "  return a >> b;\n}\n"},
    {"logaddexp", "",
     "template <class T>\n__device__ __forceinline__ T lm_logaddexp(T a, T b) {\n"
     "  if (a == b && isinf(a)) return a;\n  T m = a > b ? a : b;\n"
     "  T d = a > b ? b - a : a - b;\n  if (a != a || b != b) return a + b;\n"
     "  return m + log1p(exp(d));\n}\n"},
    {"logaddexp2", "",
     "template <class T>\n__device__ __forceinline__ T lm_logaddexp2(T a, T b) {\n"
     "  if (a == b && isinf(a)) return a;\n  T m = a > b ? a : b;\n"
     "  T d = a > b ? b - a : a - b;\n  if (a != a || b != b) return a + b;\n"
     "  return m + log1p(exp2(d)) * (T)1.4426950408889634;\n}\n"},
    {"xlogy", "",  // torch: 0 where x == 0 unless y is NaN
     "template <class T>\n__device__ __forceinline__ T lm_xlogy(T x, T y) {\n"
     "  if (y != y) return y;\n  if (x == 0) return 0;\n  return x * log(y);\n}\n"},
    {"sinc", "",  // sin(pi x) / (pi x), 1 at 0; sinpi reduces the argument exactly
     "template <class T>\n__device__ __forceinline__ T lm_sinc(T x) {\n"
     "  if (x == 0) return 1;\n  if (isinf(x)) return x - x;\n"
     "  return sinpi(x) / ((T)3.141592653589793238 * x);\n}\n"},
    // The activations: forms that hold the library's bounds over the whole range. Where a
    // rounded argument's error is scaled by the result's slope (the tails of gelu, gelu_tanh)
    // it is carried as a second word or the argument is formed in double; where a result is
    // subnormal, the last step is the only rounding (a product with a subnormal factor would
    // scale that factor's rounding by the other). At -inf torch's formulas give NaN.
    {"tsum", "",  // s + e == a + b exactly (_rn: never contracted into an fma with a's product)
     R"(__device__ __forceinline__ double lm_two_sum(double a, double b, double* e) {
  double s = __dadd_rn(a, b), bb = __dsub_rn(s, a);
  *e = __dadd_rn(__dsub_rn(a, __dsub_rn(s, bb)), __dsub_rn(b, bb));
  return s;
}
)"},
    {"exptail", "tsum",  // m e^(h + l) for |l| << ulp(h); below e^-700 scaled by 2^64 first
     R"(__device__ __forceinline__ double lm_exp_tail(double h, double l, double m) {
  if (h > -700.0) return m * (exp(h) * (1.0 + l));
  if (h < -1500.0) return m * 0.0;  // below the smallest subnormal (and e below is not small)
  double e, s = lm_two_sum(h, 44.361419555836498, &e);  // + 64 ln 2 as a pair
  e += l + 1.4841899608616317e-15;
  return (m * (exp(s) * (1.0 + e))) * 0x1p-64;
}
)"},
    {"sigmoid", "",  // e^-|x| cannot overflow; below 0, e^x / (1 + e^x)
     R"(template <class T>
__device__ __forceinline__ T lm_sigmoid(T x) {
  T t = exp(-fabs(x));
  return (x >= 0 ? (T)1 : t) / ((T)1 + t);
}
)"},
    {"silu", "exptail",
     R"(__device__ __forceinline__ double lm_silu(double x) {
  if (!(x == x) || (isinf(x) && x < 0)) return x - x;
  if (x <= -700.0) return lm_exp_tail(x, 0.0, x);
  double t = exp(-fabs(x));  // one exp and one division for both signs (no divergent warps)
  return (x >= 0 ? x : x * t) / (1.0 + t);
}
__device__ __forceinline__ float lm_silu(float x) {
  if (!(x == x) || (isinf(x) && x < 0)) return x - x;
  if (x <= -80.0f) return (float)((double)x * exp((double)x));  // e^x subnormal in float
  float t = expf(-fabsf(x));  // as in double
  return (x >= 0 ? x : x * t) / (1.0f + t);
}
)"},
    {"gelu", "exptail",  // x/2 erfc(-x/sqrt 2), the argument's rounding as its own word
     R"(__device__ __forceinline__ double lm_gelu(double x) {
  if (isinf(x)) return x > 0 ? x : x - x;
  if (x < -40.0) return x * 0.0;  // below the smallest subnormal
  double zh = -x * 0.70710678118654757;
  double zl = fma(-x, 0.70710678118654757, -zh) + x * 4.8336466567264567e-17;
  if (zh < 26.0)  // erfc(zh + zl) = erfc(zh) - 2/sqrt(pi) e^-zh^2 zl
    return 0.5 * x * (erfc(zh) - 1.1283791670955126 * exp(-zh * zh) * zl);
  // erfc(z) subnormal: erfcx(z) e^-z^2, with z^2 as a pair
  double s = zh * zh, sl = fma(zh, zh, -s) + 2.0 * zh * zl;
  return lm_exp_tail(-s, -sl, 0.5 * x * erfcx(zh));
}
__device__ __forceinline__ float lm_gelu(float x) {
  if (isinf(x)) return x > 0 ? x : x - x;
  float zh = -x * 0.707106769f;
  float zl = fmaf(-x, 0.707106769f, -zh) - x * 1.21016171e-08f;
  if (zh < 9.0f) return 0.5f * x * (erfcf(zh) - 1.12837923f * expf(-zh * zh) * zl);
  double xd = x;  // near float's underflow (and NaN): in double, rounded once
  return (float)(0.5 * xd * erfc(-xd * 0.70710678118654757));
}
)"},
    // For a bf16 or f16 result: the argument's rounding moves erfc by at most 2 z^2 2^-24 of
    // itself (1e-5 at z = 9, where the result leaves f16's range), far below the result's half
    // ulp, so the pair and its exp are left out.
    {"gelunarrow", "",
     R"(__device__ __forceinline__ float lm_gelu_narrow(float x) {
  return 0.5f * x * erfcf(-x * 0.707106769f);
}
)"},
    {"gelutanh", "tsum exptail",  // x sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3)
     R"(__device__ __forceinline__ double lm_gelu_tanh(double x) {
  if (!(x == x)) return x;
  if (x > 10.0) return x;        // 1 - sigmoid(2u) < 2^-120
  if (x < -30.0) return x * 0.0; // below the smallest subnormal
  // 2u as a pair (a, al): its rounding, scaled by up to |2u| in the tail, would cost
  // hundreds of ulps
  double x2 = x * x, x2l = fma(x, x, -x2);
  double x3 = x2 * x, x3l = fma(x2, x, -x3) + x2l * x;
  double t = 0.044714999999999998 * x3;
  double tl = fma(0.044714999999999998, x3, -t) +
              (0.044714999999999998 * x3l + 2.1955093992831465e-18 * x3);
  double wl, w = lm_two_sum(x, t, &wl);
  wl += tl;
  double a = 1.5957691216057308 * w;
  double al = fma(1.5957691216057308, w, -a) + (1.5957691216057308 * wl - 9.9693088091109202e-17 * w);
  if (a < -700.0) return lm_exp_tail(a, al, x);
  // Both signs through one exp and one division: a warp of mixed signs would run both
  bool pos = x >= 0;
  double e = exp(pos ? -a : a) * (1.0 + (pos ? -al : al));
  return (pos ? x : x * e) / (1.0 + e);
}
__device__ __forceinline__ float lm_two_sumf(float a, float b, float* e) {
  float s = __fadd_rn(a, b), bb = __fsub_rn(s, a);
  *e = __fadd_rn(__fsub_rn(a, __fsub_rn(s, bb)), __fsub_rn(b, bb));
  return s;
}
// The same pair arithmetic in float (a double form made the kernel compute-bound).
__device__ __forceinline__ float lm_gelu_tanh(float x) {
  if (!(x == x)) return x;
  if (x > 6.0f) return x;          // 1 - sigmoid(2u) < 2^-35
  if (x < -14.0f) return x * 0.0f;  // below the smallest subnormal (and -inf: NaN)
  float x2 = x * x, x2l = fmaf(x, x, -x2);
  float x3 = x2 * x, x3l = fmaf(x2, x, -x3) + x2l * x;
  float t = 0.0447149985f * x3;
  float tl = fmaf(0.0447149985f, x3, -t) + (0.0447149985f * x3l + 1.54614443e-09f * x3);
  float wl, w = lm_two_sumf(x, t, &wl);
  wl += tl;
  float a = 1.59576917f * w;
  float al = fmaf(1.59576917f, w, -a) + (1.59576917f * wl - 4.53406805e-08f * w);
  if (a < -85.0f) {
    float el, s = lm_two_sumf(a, 44.3614197f, &el);  // subnormal: scaled by 2^64, rounded once
    el += al - 1.2189787e-07f;
    return (x * (expf(s) * (1.0f + el))) * 0x1p-64f;
  }
  bool pos = x >= 0;  // one exp and one division for both signs, as in double
  float e = expf(pos ? -a : a) * (1.0f + (pos ? -al : al));
  return (pos ? x : x * e) / (1.0f + e);
}
)"},
    {"softplus", "",  // torch's threshold: x itself above 20
     R"(template <class T>
__device__ __forceinline__ T lm_softplus(T x) {
  return x > (T)20 ? x : log1p(exp(x));
}
)"},
    {"digamma", "",  // float64 (float goes through it); as cpu/scalar_math.h
     R"(// zeta(s, a) = sum_k (a + k)^-s for a >= 60, by Euler-Maclaurin
__device__ double lm_hurwitz_tail(int s, double a) {
  double r = 1.0 / a, as = r;
  for (int i = 1; i < s; ++i) as *= r;
  return as * (a / (s - 1) + 0.5 + s * r / 12 - (double)s * (s + 1) * (s + 2) * r * r * r / 720 +
               (double)s * (s + 1) * (s + 2) * (s + 3) * (s + 4) * r * r * r * r * r / 30240);
}
// x in [1, 2): digamma(x) - digamma(x0) = (x - x0) sum_k 1 / ((x + k)(x0 + k)) about the
// positive root x0, which keeps its relative precision where the result is small; the sum past
// k = 60 as zetas in m = (x + x0)/2, h = (x - x0)/2.
__device__ double lm_digamma_12(double x) {
  const double x0 = 1.4616321449683622, x0lo = 9.5499954299656974e-17;
  double d = (x - x0) - x0lo;
  double m = x - d / 2, h = d / 2, h2 = h * h, sum = 0;
  for (int k = 59; k >= 0; --k) sum += 1.0 / ((x + k) * (x0 + k));
  sum += lm_hurwitz_tail(2, m + 60) + h2 * lm_hurwitz_tail(4, m + 60) +
         h2 * h2 * lm_hurwitz_tail(6, m + 60);
  return d * sum;
}
__device__ double lm_digamma(double x) {
  if (x != x) return x;
  if (x == 0) return copysign(__longlong_as_double(0x7ff0000000000000ll), -x);
  if (isinf(x)) return x > 0 ? x : x - x;
  double acc = 0;
  if (x < 0) {  // reflection: digamma(1 - x) - pi cot(pi x)
    if (x == floor(x)) return x - x + __longlong_as_double(0x7ff8000000000000ll);
    acc = -3.141592653589793238 * cospi(x) / sinpi(x);
    x = 1 - x;
  }
  if (x < 1) {
    acc -= 1 / x;
    x += 1;
  }
  if (x >= 20) {  // ln x - 1/(2x) - sum B_2k / (2k x^2k), k = 1..8
    double r = 1 / (x * x);
    double s = r * (1.0 / 12 - r * (1.0 / 120 - r * (1.0 / 252 - r * (1.0 / 240 - r * (1.0 / 132 -
               r * (691.0 / 32760 - r * (1.0 / 12 - r * 3617.0 / 8160)))))));
    return acc + (log(x) - 0.5 / x - s);
  }
  // x in [1, 20): digamma(xf) + sum_j 1 / (xf + j), xf = x - floor(x) + 1 exact; the small
  // terms first
  double n = floor(x) - 1, xf = x - n, up = 0;
  for (double j = n - 1; j >= 0; --j) up += 1 / (xf + j);
  return acc + (up + lm_digamma_12(xf));
}
)"},
    {"ipow", "lt0",
     "template <class T>\n__device__ __forceinline__ T lm_ipow(T a, T e) {\n"
     "  if (lm_lt0(e)) return a == (T)1 ? (T)1 : a == (T)-1 ? (T)((e & 1) ? -1 : 1) : (T)0;\n"
     "  T r = 1;\n  while (e) {\n    if (e & 1) r = (T)(r * a);\n    a = (T)(a * a);\n"
     "    e >>= 1;\n  }\n  return r;\n}\n"},
    {"f2i", "",  // float -> int saturates, NaN -> 0 (int8, int16 then wrap inside int32's range)
     "template <class To, class F>\n"
     "__device__ __forceinline__ To lm_f2i(F v, To lo, To hi) {\n"
     "  if (!(v == v)) return 0;\n  if (v >= (F)hi) return hi;\n  if (v <= (F)lo) return lo;\n"
     "  return (To)v;\n}\n"},
    {"f2u", "",  // float -> uint8, uint16, uint32: through int64 (clamped), then wrapped
     "template <class F>\n__device__ __forceinline__ long long lm_f2u(F v) {\n"
     "  if (!(v == v)) return 0;\n  F c = v < (F)9.2e18 ? v : (F)9.2e18;\n"
     "  c = c > (F)-9.2e18 ? c : (F)-9.2e18;\n  return (long long)c;\n}\n"},
    {"f2u64", "f2u",  // float -> uint64: saturates from 2^64; below 2^63 as lm_f2u
     "template <class F>\n__device__ __forceinline__ unsigned long long lm_f2u64(F v) {\n"
     "  if (v >= (F)9223372036854775808.0)\n"
     "    return v >= (F)18446744073709551616.0 ? 18446744073709551615ull : "
     "(unsigned long long)v;\n"
     "  return (unsigned long long)lm_f2u(v);\n}\n"},
    {"philox", "",  // Philox-4x32-10, as fusion/philox.h
     "__device__ __forceinline__ void lm_philox(unsigned long long ctr, unsigned long long key,\n"
     "                                          unsigned& r0, unsigned& r1) {\n"
     "  unsigned c0 = (unsigned)ctr, c1 = (unsigned)(ctr >> 32), c2 = 0, c3 = 0;\n"
     "  unsigned k0 = (unsigned)key, k1 = (unsigned)(key >> 32);\n"
     "#pragma unroll\n  for (int r = 0; r < 10; ++r) {\n"
     "    unsigned long long p0 = 0xD2511F53ull * c0, p1 = 0xCD9E8D57ull * c2;\n"
     "    unsigned n0 = (unsigned)(p1 >> 32) ^ c1 ^ k0, n1 = (unsigned)p1;\n"
     "    unsigned n2 = (unsigned)(p0 >> 32) ^ c3 ^ k1, n3 = (unsigned)p0;\n"
     "    c0 = n0; c1 = n1; c2 = n2; c3 = n3;\n    k0 += 0x9E3779B9u; k1 += 0xBB67AE85u;\n  }\n"
     "  r0 = c0; r1 = c1;\n}\n"},
    {"rand", "philox",
     "__device__ __forceinline__ float lm_rand(unsigned long long key, unsigned long long ctr) {\n"
     "  unsigned a, b;\n  lm_philox(ctr, key, a, b);\n"
     "  return (float)(a >> 8) * (1.0f / 16777216.0f);\n}\n"},
    {"randn", "philox",  // Box-Muller in double, as the CPU
     "__device__ __forceinline__ float lm_randn(unsigned long long key, unsigned long long ctr) {\n"
     "  unsigned a, b;\n  lm_philox(ctr, key, a, b);\n"
     "  double u1 = ((double)(a >> 8) + 1.0) * (1.0 / 16777216.0);\n"
     "  double u2 = (double)(b >> 8) * (1.0 / 16777216.0);\n"
     "  return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));\n}\n"},
    {"argcomb", "",
     // (a, ai) takes (b, bi) when b is the better extreme; NaN is the extreme; ties keep the
     // lower index, so any combining order gives the first index.
     "template <bool MX, class T>\n"
     "__device__ __forceinline__ void lm_arg(T& a, long long& ai, T b, long long bi) {\n"
     "  if (bi < 0) return;\n  bool take;\n  if (ai < 0) take = true;\n"
     "  else if (a != a) take = (b != b) && bi < ai;\n  else if (b != b) take = true;\n"
     "  else if (b == a) take = bi < ai;\n  else take = MX ? b > a : b < a;\n"
     "  if (take) {\n    a = b;\n    ai = bi;\n  }\n}\n"},
    {"vec", "",
     "template <class T, int V>\n"
     "struct alignas(sizeof(T) * V > 16 ? 16 : sizeof(T) * V) lm_vec {\n  T v[V];\n};\n"},
};

}  // namespace

std::string Emitter::prelude() const {
  std::string s = "// loom generated kernel\n";
  s += g.index64 ? "typedef long long I;\ntypedef unsigned long long U;\n"
                 : "typedef int I;\ntypedef unsigned U;\n";
  std::set<std::string> want = helpers_;
  // Pull in dependencies (the table lists them before their users, so one reverse walk does).
  for (int i = int(std::size(kSnippets)) - 1; i >= 0; --i) {
    if (!want.count(kSnippets[i].name)) continue;
    std::istringstream deps(kSnippets[i].deps);
    for (std::string d; deps >> d;) want.insert(d);
  }
  for (const Snippet& sn : kSnippets)
    if (want.count(sn.name)) s += sn.code;
  s += "struct P {\n";
  if (!ptr_slots_.empty()) s += "  const void* p[" + std::to_string(ptr_slots_.size()) + "];\n";
  if (!g.scalars.empty())
    s += "  union {\n    double f;\n    long long i;\n  } s[" + std::to_string(g.scalars.size()) +
         "];\n";
  if (!values_.empty()) s += "  I v[" + std::to_string(values_.size()) + "];\n";
  s += "};\n";
  return s;
}

}  // namespace loom::cuda::gen
