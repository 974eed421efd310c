#pragma once
// Compute types of the CPU interpreter: every dtype is computed in one of six, its
// compute_dtype (tensor/dtype.h).
#include <cstddef>
#include <cstdint>

#include "tensor/dtype.h"

// X(CT, C++ type, the compute dtype it holds): tensor/dtype.h's compute types.
#define LOOM_CPU_CTYPES(X) LOOM_COMPUTE_TYPES(X)

namespace loom::cpu {

enum class CT : uint8_t {
#define LOOM_X(ct, type, dtype) ct,
  LOOM_CPU_CTYPES(LOOM_X)
#undef LOOM_X
};

inline CT ct_of(DType t) {
  switch (compute_dtype(t)) {
#define LOOM_X(ct, type, dtype) \
  case DType::dtype:            \
    return CT::ct;
    LOOM_CPU_CTYPES(LOOM_X)
#undef LOOM_X
    default:
      return CT::I32;  // not reached: the compute dtypes are the six above
  }
}

inline bool is_float(CT c) { return c == CT::F32 || c == CT::F64; }
// Bytes of one value.
inline size_t ct_width(CT c) {
  switch (c) {
#define LOOM_X(ct, type, dtype) \
  case CT::ct:                  \
    return sizeof(type);
    LOOM_CPU_CTYPES(LOOM_X)
#undef LOOM_X
  }
  return 4;
}

// Calls f(T{}) with the C++ type of compute type `ct`.
template <typename F>
decltype(auto) dispatch_ct(CT ct, F&& f) {
  switch (ct) {
#define LOOM_X(ct, type, dtype) \
  case CT::ct:                  \
    return f(type{});
    LOOM_CPU_CTYPES(LOOM_X)
#undef LOOM_X
  }
  __builtin_unreachable();
}

}  // namespace loom::cpu
