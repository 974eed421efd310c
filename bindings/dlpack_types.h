#pragma once
// loom dtypes <-> DLPack dtypes (used by loom.tensor, numpy() and the DLPack protocol).
#include <nanobind/ndarray.h>

#include <optional>
#include <string>

#include "tensor/dtype.h"

namespace loom::py {

inline nb::dlpack::dtype to_dlpack(DType t) {
  using C = nb::dlpack::dtype_code;
  auto mk = [](C c, int bits) { return nb::dlpack::dtype{uint8_t(c), uint8_t(bits), 1}; };
  switch (t) {
    case DType::Bool:
      return mk(C::Bool, 8);
    case DType::UInt8:
      return mk(C::UInt, 8);
    case DType::Int8:
      return mk(C::Int, 8);
    case DType::Int32:
      return mk(C::Int, 32);
    case DType::Int64:
      return mk(C::Int, 64);
    case DType::Int16:
      return mk(C::Int, 16);
    case DType::UInt16:
      return mk(C::UInt, 16);
    case DType::UInt32:
      return mk(C::UInt, 32);
    case DType::UInt64:
      return mk(C::UInt, 64);
    case DType::Float16:
      return mk(C::Float, 16);
    case DType::BFloat16:
      return mk(C::Bfloat, 16);
    case DType::Float32:
      return mk(C::Float, 32);
    case DType::Float64:
      return mk(C::Float, 64);
  }
  return mk(C::Float, 32);
}

inline bool dtype_from_dlpack(nb::dlpack::dtype d, DType* out) {
  if (d.lanes != 1) return false;
  for (int i = 0; i < kNumDTypes; ++i) {
    nb::dlpack::dtype e = to_dlpack(DType(i));
    if (e.code == d.code && e.bits == d.bits) return *out = DType(i), true;
  }
  return false;
}

inline std::string dlpack_dtype_str(nb::dlpack::dtype d) {
  static const char* codes[] = {"int", "uint", "float", "opaque", "bfloat", "complex", "bool"};
  std::string c = d.code < 7 ? codes[d.code] : "code" + std::to_string(d.code);
  return c + std::to_string(d.bits) + (d.lanes != 1 ? "x" + std::to_string(d.lanes) : "");
}

}  // namespace loom::py
