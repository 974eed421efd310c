#include "tensor/convert.h"

#include <cstring>

#include "tensor/half.h"

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
    if (stride == 1) {
      for (int64_t j = 0; j < n; ++j) p[j] = to_storage<S, T>(src[j]);
    } else {
      for (int64_t j = 0; j < n; ++j) p[j * stride] = to_storage<S, T>(src[j]);
    }
  });
}

#define LOOM_INST(ct, T, dtype)                                        \
  template void load_run<T>(const void*, DType, int64_t, T*, int64_t); \
  template void store_run<T>(void*, DType, int64_t, const T*, int64_t);
LOOM_COMPUTE_TYPES(LOOM_INST)
#undef LOOM_INST

}  // namespace loom
