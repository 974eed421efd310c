#pragma once
// Element types, their sizes and names, and PyTorch's type-promotion rules.
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

// The dtypes, in DType's order: X(Name, "name", Storage, itemsize, Category, Compute, Host)
//   Storage   the C++ type an element is stored as (Half, BFloat16: tensor/half.h)
//   Category  Bool < Integral < Floating: the order scalars and tensors promote in
//   Compute   the dtype kernels compute values of this type in
//   Host      1 where the C++ API takes and gives elements as Storage (tensor<T>(), item<T>(),
//             to_vector<T>()); float16 and bfloat16 go through float there
//   The later integer types are appended, not placed by size: a dtype's number is in kernel
//   signatures, so the old dtypes keep theirs.
#define LOOM_DTYPES(X)                                       \
  X(Bool, "bool", bool, 1, Bool, Bool, 1)                    \
  X(UInt8, "uint8", uint8_t, 1, Integral, Int32, 1)          \
  X(Int8, "int8", int8_t, 1, Integral, Int32, 1)             \
  X(Int32, "int32", int32_t, 4, Integral, Int32, 1)          \
  X(Int64, "int64", int64_t, 8, Integral, Int64, 1)          \
  X(Float16, "float16", Half, 2, Floating, Float32, 0)       \
  X(BFloat16, "bfloat16", BFloat16, 2, Floating, Float32, 0) \
  X(Float32, "float32", float, 4, Floating, Float32, 1)      \
  X(Float64, "float64", double, 8, Floating, Float64, 1)     \
  X(Int16, "int16", int16_t, 2, Integral, Int32, 1)          \
  X(UInt16, "uint16", uint16_t, 2, Integral, Int32, 1)       \
  X(UInt32, "uint32", uint32_t, 4, Integral, Int64, 1)       \
  X(UInt64, "uint64", uint64_t, 8, Integral, UInt64, 1)

// LOOM_DTYPE_IF(host, text): `text` where the Host column is 1 (for lists of host types).
#define LOOM_DTYPE_IF(flag, ...) LOOM_DTYPE_IF_##flag(__VA_ARGS__)
#define LOOM_DTYPE_IF_0(...)
#define LOOM_DTYPE_IF_1(...) __VA_ARGS__

namespace loom {

enum class DType : uint8_t {
#define LOOM_X(name, ...) name,
  LOOM_DTYPES(LOOM_X)
#undef LOOM_X
};

// Bool < Integral < Floating: scalars only promote a tensor of a lower category (torch:
// `int_tensor * 2.5` is float, `f16_tensor * 2.5` stays f16).
enum class DTypeCategory : uint8_t { Bool, Integral, Floating };

struct Half;      // tensor/half.h: the storage of float16 and bfloat16
struct BFloat16;  // (named here only by the table's is_unsigned column)

struct DTypeInfo {
  const char* name;  // "float32"
  uint8_t itemsize;
  DTypeCategory category;
  DType compute;
  bool is_unsigned;  // an unsigned integer type (bool is not)
};
inline constexpr DTypeInfo kDTypes[] = {
#define LOOM_X(name, text, storage, size, category, compute, host) \
  {text, size, DTypeCategory::category, DType::compute,            \
   DTypeCategory::category == DTypeCategory::Integral && std::is_unsigned_v<storage>},
    LOOM_DTYPES(LOOM_X)
#undef LOOM_X
};
inline constexpr int kNumDTypes = int(sizeof kDTypes / sizeof kDTypes[0]);

constexpr size_t itemsize(DType t) { return kDTypes[int(t)].itemsize; }
constexpr const char* dtype_name(DType t) { return kDTypes[int(t)].name; }  // "float32", ...
constexpr bool is_floating(DType t) { return kDTypes[int(t)].category == DTypeCategory::Floating; }
// Integers (not bool).
constexpr bool is_integral(DType t) { return kDTypes[int(t)].category == DTypeCategory::Integral; }
constexpr bool is_bool(DType t) { return t == DType::Bool; }
// uint8, uint16, uint32, uint64.
constexpr bool is_unsigned(DType t) { return kDTypes[int(t)].is_unsigned; }

// The compute types: every dtype's values are computed in one of these six (its compute_dtype).
// X(short name, C++ type, the compute dtype it holds). The narrower integers compute in a wider
// type that holds every value (int16, uint16 in I32; uint32 in I64) and wrap to their own type
// after each op; uint64 needs its own, since its comparisons, division, right shift and
// conversion to float differ from int64's.
#define LOOM_COMPUTE_TYPES(X) \
  X(F32, float, Float32)      \
  X(F64, double, Float64)     \
  X(I32, int32_t, Int32)      \
  X(I64, int64_t, Int64)      \
  X(B8, uint8_t, Bool)        \
  X(U64, uint64_t, UInt64)

// The dtype of host type T (the Host rows: T is a dtype's Storage); float32 for any other T.
template <typename T>
constexpr DType dtype_of() {
#define LOOM_X(name, text, storage, size, category, compute, host) \
  LOOM_DTYPE_IF(host, if constexpr (std::is_same_v<T, storage>) return DType::name;)
  LOOM_DTYPES(LOOM_X)
#undef LOOM_X
  return DType::Float32;
}

// The dtype that values of `t` are computed in inside kernels.
constexpr DType compute_dtype(DType t) { return kDTypes[int(t)].compute; }

// float16, bfloat16: stored narrow, computed in float32.
constexpr bool is_reduced_float(DType t) { return is_floating(t) && compute_dtype(t) != t; }

// Category of a value as a number: bool 0 < integer 1 < floating 2.
constexpr int dtype_category(DType t) { return int(kDTypes[int(t)].category); }

// An integer type narrower than its compute type: its values wrap to it after each op.
constexpr bool is_narrow_int(DType t) { return is_integral(t) && compute_dtype(t) != t; }

// torch.promote_types for two tensors of the same category rank; integers of mixed
// signedness as the array API's lattice (the smallest signed type holding both). uint64 with
// a signed integer has no such type: a TypeError naming both.
DType promote_types(DType a, DType b);

inline constexpr DType kDefaultFloat = DType::Float32;

}  // namespace loom
