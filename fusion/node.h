#pragma once
// Node: one recorded primitive of a stream's trace. It computes one Storage.
#include <memory>
#include <vector>

#include "fusion/prims.h"
#include "tensor/scalar.h"
#include "tensor/shape.h"
#include "tensor/storage.h"
#include "tensor/view.h"

namespace loom {

// An operand. Null `st`: the node's scalar operand (its value is Node::value, read as one
// value over the node's shape; `view` empty), which has no storage and no node of its own.
struct Input {
  std::shared_ptr<Storage> st;
  View view;
  DType dtype;
};

// Field order: what every node sets or destroys (and the inputs in use) first, so recording and
// freeing a node touch few cache lines; the unused inline input slots are last and never
// touched. Rare parts (the region of a region write) are held apart.
struct Node {
  Op op;
  DType dtype;  // of the result
  int dim = 0;  // Iota
  Device device;
  Scalar value;       // Const; else the scalar operand (an Input with null st), if any
  uint64_t seed = 0;  // Rand/Randn: key, and the counter offset of element 0
  uint64_t offset = 0;
  // Region write: the result is `base` with the elements of `*region` replaced by this node's
  // values (laid out per `shape` == region->shape). Null base: a fresh contiguous storage.
  std::shared_ptr<Storage> base;
  std::unique_ptr<View> region;  // set with base
  // A whole-buffer in-place update: the result may take over this storage's memory when
  // nothing else still reads it (keeps eager in-place memory use).
  std::weak_ptr<Storage> reuse;
  std::vector<int> axes;  // reductions: sorted axes of in[0]; the result keeps them as size 1
  Shape shape;            // the result is laid out contiguously in this shape (unless region write)
  SmallVec<Input, 3> in;
};

}  // namespace loom
