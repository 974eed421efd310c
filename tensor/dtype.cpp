#include "tensor/dtype.h"

#include "tensor/error.h"

namespace loom {

size_t itemsize(DType t) {
  switch (t) {
    case DType::Bool:
    case DType::UInt8:
    case DType::Int8: return 1;
    case DType::Float16:
    case DType::BFloat16: return 2;
    case DType::Int32:
    case DType::Float32: return 4;
    case DType::Int64:
    case DType::Float64: return 8;
  }
  return 0;
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::Bool: return "bool";
    case DType::UInt8: return "uint8";
    case DType::Int8: return "int8";
    case DType::Int32: return "int32";
    case DType::Int64: return "int64";
    case DType::Float16: return "float16";
    case DType::BFloat16: return "bfloat16";
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
  }
  return "?";
}

bool is_floating(DType t) {
  return t == DType::Float16 || t == DType::BFloat16 || t == DType::Float32 || t == DType::Float64;
}
bool is_integral(DType t) {
  return t == DType::UInt8 || t == DType::Int8 || t == DType::Int32 || t == DType::Int64;
}
bool is_reduced_float(DType t) { return t == DType::Float16 || t == DType::BFloat16; }

DType compute_dtype(DType t) {
  switch (t) {
    case DType::Float16:
    case DType::BFloat16: return DType::Float32;
    case DType::UInt8:
    case DType::Int8: return DType::Int32;
    default: return t;
  }
}

int dtype_category(DType t) { return is_bool(t) ? 0 : is_integral(t) ? 1 : 2; }

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
