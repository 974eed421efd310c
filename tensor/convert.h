#pragma once
// Moving runs of elements between memory (any dtype, any stride) and arrays of a compute type
// (tensor/dtype.h), converting on the way: the CPU interpreter's loads and stores, and the host
// reads of values (item, to_vector).
#include <cstdint>

#include "tensor/dtype.h"

namespace loom {

// dst[j] = value of src[j * stride] (storage dtype `dt`) as T, for j < n.
template <typename T>
void load_run(const void* src, DType dt, int64_t stride, T* dst, int64_t n);
// dst[j * stride] (storage dtype `dt`) = src[j], for j < n.
template <typename T>
void store_run(void* dst, DType dt, int64_t stride, const T* src, int64_t n);

// dst[j] = src[j] rounded to float16 or bfloat16 (dt) and back to float32, for j < n.
void round_to(DType dt, const float* src, float* dst, int64_t n);

}  // namespace loom
