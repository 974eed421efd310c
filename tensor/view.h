#pragma once
// View: how a tensor reads its buffer (shape, strides and offset, in elements).
#include <cstdint>

#include "tensor/shape.h"

namespace loom {

struct View {
  Shape shape;
  Strides strides;
  int64_t offset = 0;  // in elements
};

}  // namespace loom
