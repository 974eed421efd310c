#include "tensor/dtype.h"

#include <algorithm>

#include "tensor/error.h"

namespace loom {
namespace {

// The signed integer type of `bits` bits (8 to 64).
DType signed_of(size_t bits) {
  return bits <= 8    ? DType::Int8
         : bits <= 16 ? DType::Int16
         : bits <= 32 ? DType::Int32
                      : DType::Int64;
}

}  // namespace

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  int ca = dtype_category(a), cb = dtype_category(b);
  if (ca != cb) return ca > cb ? a : b;
  if (ca == 2) {
    // float16 with bfloat16 promotes to float32, as in torch.
    if (is_reduced_float(a) && is_reduced_float(b)) return DType::Float32;
    return itemsize(a) >= itemsize(b) ? a : b;
  }
  // Integers of one signedness: the wider. Mixed: the smallest signed type that holds both
  // (uint8 with int8 is int16, as torch; uint32 with int32 is int64, as the array API).
  if (is_unsigned(a) == is_unsigned(b)) return itemsize(a) >= itemsize(b) ? a : b;
  DType u = is_unsigned(a) ? a : b, s = is_unsigned(a) ? b : a;
  LOOM_CHECK(u != DType::UInt64, Type, "promote_types: ", dtype_name(a), " and ", dtype_name(b),
             " have no common integer type (no signed integer holds every uint64); cast one "
             "of them first");
  return signed_of(std::max(itemsize(s), 2 * itemsize(u)) * 8);
}

}  // namespace loom
