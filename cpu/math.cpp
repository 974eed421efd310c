#include "cpu/math.h"

#include <Eigen/Core>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "cpu/arith.h"
#include "cpu/loops.h"
#include "cpu/prims.h"
#include "cpu/vmath.h"
#include "fusion/philox.h"
#include "tensor/convert.h"
#include "tensor/half.h"

namespace loom::cpu {
namespace {

// One loop for the two ops of binary_pair; the common stride patterns get a loop each so
// the compiler vectorizes them (a row scalar is read once, not per element).
template <typename T, typename FI, typename FO>
void pair_loop(const T* a, int sa, const T* c, int sc, const T* b, int sb, T* o, int64_t n, FI fi,
               FO fo) {
  if (sa && !sc && !sb) {
    const T cv = c[0], bv = b[0];
    for (int64_t i = 0; i < n; ++i) o[i] = fo(fi(a[i], cv), bv);
  } else if (sa && sc && !sb) {
    const T bv = b[0];
    for (int64_t i = 0; i < n; ++i) o[i] = fo(fi(a[i], c[i]), bv);
  } else if (sa && sc && sb) {
    for (int64_t i = 0; i < n; ++i) o[i] = fo(fi(a[i], c[i]), b[i]);
  } else if (sa && !sc && sb) {
    const T cv = c[0];
    for (int64_t i = 0; i < n; ++i) o[i] = fo(fi(a[i], cv), b[i]);
  } else if (!sa && sc && sb) {  // k * m / d: the scalar first
    const T av = a[0];
    for (int64_t i = 0; i < n; ++i) o[i] = fo(fi(av, c[i]), b[i]);
  } else if (!sa && sc && !sb) {
    const T av = a[0], bv = b[0];
    for (int64_t i = 0; i < n; ++i) o[i] = fo(fi(av, c[i]), bv);
  } else {
    for (int64_t i = 0; i < n; ++i) o[i] = fo(fi(a[i * sa], c[i * sc]), b[i * sb]);
  }
}

}  // namespace

template <typename T>
void binary_pair(Op inner, const T* a, int sa, const T* c, int sc, Op outer, bool first, const T* b,
                 int sb, bool relu, T* out, int64_t n) {
  if (inner == Op::Copy) sc = sa, c = a;  // not read; keeps to the vectorized loops
  with_op<true>(inner, false, [&](auto I, auto) {
    with_op<true>(outer, !first, [&](auto O, auto swap) {
      auto fi = [](T x, T y) { return arith<decltype(I)::value, false>(x, y); };
      auto fo = [](T x, T y) { return arith<decltype(O)::value, decltype(swap)::value>(x, y); };
      if (!relu) return pair_loop(a, sa, c, sc, b, sb, out, n, fi, fo);
      // relu as Op::Relu's loop computes it (cpu/prims.cpp): NaN stays NaN
      auto fr = [fo](T x, T y) {
        T v = fo(x, y);
        return v > 0 ? v : (v != v ? v : T(0));
      };
      pair_loop(a, sa, c, sc, b, sb, out, n, fi, fr);
    });
  });
}
template void binary_pair<float>(Op, const float*, int, const float*, int, Op, bool, const float*,
                                 int, bool, float*, int64_t);
template void binary_pair<double>(Op, const double*, int, const double*, int, Op, bool,
                                  const double*, int, bool, double*, int64_t);

template <typename T>
void exp_sub(const T* a, int sa, const T* b, int sb, T* out, int64_t n) {
  if constexpr (std::is_same_v<T, float>)
    if (vmath_on()) return exp_sub_f32(a, sa, b, sb, out, n);
  // Else the two ops' own loops: the bits of sub, then exp, as unfused (Op::Exp's float64 loop
  // is glibc's exp, not Eigen's).
  binary<T>(Op::Sub, a, sa, b, sb, out, n);
  unary<T>(Op::Exp, out, out, n);
}
template void exp_sub<float>(const float*, int, const float*, int, float*, int64_t);
template void exp_sub<double>(const double*, int, const double*, int, double*, int64_t);

template <typename T>
void select(const uint8_t* c, int sc, const T* a, int sa, const T* b, int sb, T* out, int64_t n) {
  // A run of conditions: a loop per operand form, with the strides as constants, so the compiler
  // vectorizes it (the general loop's i * stride indexing kept it scalar: a causal mask's
  // where() took 4x its softmax).
  auto run = [&](auto ka, auto kb) {
    constexpr bool A = decltype(ka)::value, B = decltype(kb)::value;
    const T av = a[0], bv = b[0];
    for (int64_t i = 0; i < n; ++i) out[i] = c[i] ? (A ? a[i] : av) : (B ? b[i] : bv);
  };
  using T1 = std::true_type;
  using F0 = std::false_type;
  if (sc == 1) {
    if (sa && sb) return run(T1{}, T1{});
    if (sa) return run(T1{}, F0{});
    if (sb) return run(F0{}, T1{});
    return run(F0{}, F0{});
  }
  for (int64_t i = 0; i < n; ++i) out[i] = c[i * sc] ? a[i * sa] : b[i * sb];
}

namespace {

// A float as integer dtype `to` (compute type To). C++ leaves out-of-range conversions
// undefined; loom's: NaN is 0; signed types saturate at their compute type's range, then wrap
// (int8, int16 inside int32's); unsigned ones wrap like torch's uint8 cast (through int64,
// clamped to +-9.2e18: -1.0 is the type's max), and uint64 saturates from 2^64.
template <typename To, typename From>
inline To float_to_int(From v, DType to) {
  if (!(v == v)) return 0;
  if (is_unsigned(to)) {
    if constexpr (std::is_unsigned_v<To>)
      if (v >= From(9223372036854775808.0))
        return v >= From(18446744073709551616.0) ? std::numeric_limits<To>::max() : To(v);
    return wrap_int(To(int64_t(std::fmax(std::fmin(v, From(9.2e18)), From(-9.2e18)))), to);
  }
  if (v >= From(std::numeric_limits<To>::max()))
    return wrap_int(std::numeric_limits<To>::max(), to);
  if (v <= From(std::numeric_limits<To>::min()))
    return wrap_int(std::numeric_limits<To>::min(), to);
  return wrap_int(To(v), to);
}

template <typename To, typename From>
inline To convert(From v, DType to) {
  if constexpr (std::is_same_v<To, uint8_t>) {
    return uint8_t(v != From(0));
  } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>) {
    return float_to_int<To>(v, to);
  } else {
    To r = To(v);
    if constexpr (std::is_same_v<To, float>) {
      if (to == DType::Float16) r = f16_to_f32(f32_to_f16(r));
      if (to == DType::BFloat16) r = bf16_to_f32(f32_to_bf16(r));
    }
    if constexpr (std::is_integral_v<To>) r = wrap_int(r, to);
    return r;
  }
}

}  // namespace

void cast(CT from, const void* a, int sa, DType to, void* out, int64_t n) {
  if (from == CT::F32 && sa == 1 && (to == DType::Float16 || to == DType::BFloat16))
    return round_to(to, static_cast<const float*>(a), static_cast<float*>(out), n);
  if (sa == 1 && from == ct_of(to) && compute_dtype(to) == to && to != DType::Bool) {
    std::memcpy(out, a, size_t(n) * ct_width(from));  // already of the type: a copy
    return;
  }
  dispatch_ct(from, [&](auto f) {
    using F = decltype(f);
    const F* src = static_cast<const F*>(a);
    dispatch_ct(ct_of(to), [&](auto t) {
      using T = decltype(t);
      T* dst = static_cast<T*>(out);
      for (int64_t i = 0; i < n; ++i) dst[i] = convert<T, F>(src[i * sa], to);
    });
  });
}

void wrap_run(CT ct, DType dt, void* out, int64_t n) {
  dispatch_ct(ct, [&](auto t) {
    using T = decltype(t);
    if constexpr (std::is_integral_v<T>) {
      T* o = static_cast<T*>(out);
      switch (dt) {  // the dtype chosen once, so each loop vectorizes
#define LOOM_X(name, text, storage, ...)                                         \
  case DType::name:                                                              \
    if constexpr (std::is_integral_v<storage> && !std::is_same_v<storage, bool>) \
      for (int64_t i = 0; i < n; ++i) o[i] = T(storage(o[i]));                   \
    return;
        LOOM_DTYPES(LOOM_X)
#undef LOOM_X
      }
    }
  });
}

void philox_uniform(const int64_t* idx, uint64_t seed, uint64_t offset, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = philox_uniform_at(seed, offset + uint64_t(idx[i]));
}
void philox_normal(const int64_t* idx, uint64_t seed, uint64_t offset, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = philox_normal_at(seed, offset + uint64_t(idx[i]));
}

#define LOOM_INST(ct, T, dtype) \
  template void select<T>(const uint8_t*, int, const T*, int, const T*, int, T*, int64_t);
LOOM_CPU_CTYPES(LOOM_INST)
#undef LOOM_INST

}  // namespace loom::cpu
