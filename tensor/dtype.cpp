#include "tensor/dtype.h"

namespace loom {

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  int ca = dtype_category(a), cb = dtype_category(b);
  if (ca != cb) return ca > cb ? a : b;
  if (ca == 2) {
    // float16 with bfloat16 promotes to float32, as in torch.
    if (is_reduced_float(a) && is_reduced_float(b)) return DType::Float32;
    return itemsize(a) >= itemsize(b) ? a : b;
  }
  // integers: uint8 with int8 -> int16 in torch; loom has no int16, so int32.
  if ((a == DType::UInt8 && b == DType::Int8) || (a == DType::Int8 && b == DType::UInt8))
    return DType::Int32;
  return itemsize(a) >= itemsize(b) ? a : b;
}

}  // namespace loom
