#pragma once
// Moving runs of elements between memory (any dtype, any stride) and interpreter
// registers (compute types), converting on the way.
#include <cstdint>

#include "tensor/dtype.h"

namespace loom::cpu {

// dst[j] = value of src[j * stride] (storage dtype `dt`) as T, for j < n.
template <typename T>
void load_run(const void* src, DType dt, int64_t stride, T* dst, int64_t n);
// dst[j * stride] (storage dtype `dt`) = src[j], for j < n.
template <typename T>
void store_run(void* dst, DType dt, int64_t stride, const T* src, int64_t n);

}  // namespace loom::cpu
