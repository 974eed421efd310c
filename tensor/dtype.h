#pragma once
// Element types, their sizes and names, and PyTorch's type-promotion rules.
#include <cstddef>
#include <cstdint>
#include <string>

namespace loom {

enum class DType : uint8_t { Bool, UInt8, Int8, Int32, Int64, Float16, BFloat16, Float32, Float64 };
inline constexpr int kNumDTypes = 9;

size_t itemsize(DType t);
const char* dtype_name(DType t);  // "float32", ...
bool is_floating(DType t);
bool is_integral(DType t);  // integers, not bool
inline bool is_bool(DType t) { return t == DType::Bool; }
bool is_reduced_float(DType t);  // float16, bfloat16: stored narrow, computed in float32

// The dtype that values of `t` are computed in inside kernels.
DType compute_dtype(DType t);

// torch.promote_types for two tensors of the same category rank.
DType promote_types(DType a, DType b);

// Category of a value: bool < integer < floating. Scalars only promote a tensor of a
// lower category (torch: `int_tensor * 2.5` is float, `f16_tensor * 2.5` stays f16).
int dtype_category(DType t);

inline constexpr DType kDefaultFloat = DType::Float32;

}  // namespace loom
