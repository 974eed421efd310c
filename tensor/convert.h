#pragma once
// Moving runs of elements between memory (any dtype, any stride) and arrays of a compute type
// (tensor/dtype.h), converting on the way: the CPU interpreter's loads and stores, and the host
// reads of values (item, to_vector).
#include <cstdint>
#include <type_traits>

#include "tensor/dtype.h"

namespace loom {

// dst[j] = value of src[j * stride] (storage dtype `dt`) as T, for j < n.
template <typename T>
void load_run(const void* src, DType dt, int64_t stride, T* dst, int64_t n);
// dst[j * stride] (storage dtype `dt`) = src[j], for j < n.
template <typename T>
void store_run(void* dst, DType dt, int64_t stride, const T* src, int64_t n);

// v, a value of integer compute type T, wrapped to integer dtype dt's own type, as storing it
// would: the narrow integers (int8, uint8, int16, uint16 computed in int32, uint32 in int64)
// wrap after each op, so a fused value never holds what its dtype cannot. Others: v itself.
template <typename T>
inline T wrap_int(T v, DType dt) {
  switch (dt) {
#define LOOM_X(name, text, storage, ...)                                         \
  case DType::name:                                                              \
    if constexpr (std::is_integral_v<storage> && !std::is_same_v<storage, bool>) \
      return T(storage(v));                                                      \
    return v;
    LOOM_DTYPES(LOOM_X)
#undef LOOM_X
  }
  return v;
}

// dst[j] = src[j] rounded to float16 or bfloat16 (dt) and back to float32, for j < n.
void round_to(DType dt, const float* src, float* dst, int64_t n);

}  // namespace loom
