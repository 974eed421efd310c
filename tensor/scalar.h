#pragma once
// A Python-like scalar operand: bool, integer or floating. Its category takes part in
// type promotion; its value becomes a kernel argument, never part of a signature.
#include <cstdint>
#include <type_traits>

#include "tensor/dtype.h"

namespace loom {

struct Scalar {
  enum class Kind : uint8_t { Bool, Int, Float } kind = Kind::Float;
  double f = 0;
  int64_t i = 0;
  bool u64 = false;  // an integer past int64's range: i holds its uint64 bits

  Scalar() = default;
  template <typename T, typename = std::enable_if_t<std::is_arithmetic_v<T>>>
  Scalar(T v) {  // NOLINT: implicit on purpose, so `x * 2` and `x + 0.5` read naturally
    if constexpr (std::is_same_v<T, bool>) {
      kind = Kind::Bool, i = v, f = v;
    } else if constexpr (std::is_integral_v<T>) {
      kind = Kind::Int, i = int64_t(v), f = double(v);
      if constexpr (std::is_unsigned_v<T>) u64 = v > T(INT64_MAX);
    } else {
      kind = Kind::Float, f = double(v), i = int64_t(v);
    }
  }
  // The dtype a lone scalar gets as a tensor (torch.tensor(2.5) is float32).
  DType default_dtype() const {
    if (kind == Kind::Int) return u64 ? DType::UInt64 : DType::Int64;
    return kind == Kind::Bool ? DType::Bool : DType::Float32;
  }
  int category() const { return int(kind); }
};

}  // namespace loom
