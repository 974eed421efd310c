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
    {"digamma", "",  // as cpu/scalar_math.h: reflection below 0, recurrence, asymptotic series
     "template <class T>\n__device__ T lm_digamma(T x) {\n"
     "  if (x != x) return x;\n  if (x == 0) return "
     "copysign((T)__longlong_as_double(0x7ff0000000000000ll), -x);\n"
     "  if (isinf(x)) return x > 0 ? x : x - x;\n  T acc = 0;\n"
     "  if (x < 0) {\n    if (x == floor(x)) return x - x + "
     "(T)__longlong_as_double(0x7ff8000000000000ll);\n"
     "    acc = -(T)3.141592653589793238 * cospi(x) / sinpi(x);\n    x = 1 - x;\n  }\n"
     "  while (x < 10) {\n    acc -= 1 / x;\n    x += 1;\n  }\n  T r = 1 / (x * x);\n"
     "  T s = r * ((T)(1.0 / 12) - r * ((T)(1.0 / 120) - r * ((T)(1.0 / 252) -\n"
     "      r * ((T)(1.0 / 240) - r * (T)(1.0 / 132)))));\n"
     "  return acc + log(x) - (T)0.5 / x - s;\n}\n"},
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
