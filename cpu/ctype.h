#pragma once
// Compute types of the CPU interpreter: every dtype is computed in one of five.
#include <cstdint>

#include "tensor/dtype.h"

namespace loom::cpu {

enum class CT : uint8_t { F32, F64, I32, I64, B8 };

inline CT ct_of(DType t) {
  switch (t) {
    case DType::Float16:
    case DType::BFloat16:
    case DType::Float32: return CT::F32;
    case DType::Float64: return CT::F64;
    case DType::Int64: return CT::I64;
    case DType::Bool: return CT::B8;
    default: return CT::I32;
  }
}

// Calls f(T{}) with the C++ type of compute type `ct`.
template <typename F>
decltype(auto) dispatch_ct(CT ct, F&& f) {
  switch (ct) {
    case CT::F32: return f(float{});
    case CT::F64: return f(double{});
    case CT::I32: return f(int32_t{});
    case CT::I64: return f(int64_t{});
    default: return f(uint8_t{});
  }
}

}  // namespace loom::cpu
