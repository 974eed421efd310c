#pragma once
// What the generator knows about a value beyond its shape and dtype.
#include <cstdint>
#include <vector>

#include "loom.h"

namespace loom::fuzz {

struct Meta {
  double bound = 0;         // an estimate of max |value|
  double hist = 0;          // the largest bound among the values it was computed from
  std::vector<char> cmask;  // per dim: it may be constant along it (size-1 dims always)
  // It may hold exactly equal elements (saturation, few levels, broadcasts): argmax would
  // then depend on the last ulp, which the CPU backend rounds differently by position.
  bool ties = false;
  // It may sit exactly on a special value up to rounding (a softmax row sums to 1, a
  // saturated probability is 1, centred data sums to 0): floor or a comparison could flip.
  bool pinned = false;
  // It holds few, integer-like levels (floor, comparisons, casts to int and exact arithmetic
  // on them): an inexact op can map a level onto a spot a discontinuous op flips at, e.g.
  // square(sqrt(|k| + 0.5)) = k + 0.5 +- 1 ulp under round, asin(sin(1)) = 1 -+ 1 ulp under floor.
  bool levels = false;
  // A sum or mean of a normalized value: it may be zero up to rounding (centred rows), so
  // normalizing it again (or its var/std) amplifies that noise to O(1).
  bool noise = false;
  uint64_t deps = 0;  // the inputs it was computed from (bit id % 64)
  static Meta fresh(const Shape& s, double bound);
  // Normalizing over `dims` of a row that is constant there amplifies rounding noise.
  bool constant_over(const std::vector<int>& dims, const Shape& s) const;
};

// Right-aligned AND of two masks broadcast to `out` (missing dims count as constant).
std::vector<char> cm_broadcast(const std::vector<char>& a, const std::vector<char>& b,
                               const Shape& out);
// A dim of the result is constant when every source dim it was merged from is.
std::vector<char> cm_reshape(const std::vector<char>& a, const Shape& from, const Shape& to);
std::vector<char> cm_index(const std::vector<char>& a, const std::vector<Slice>& idx);
void cm_fix(std::vector<char>& m, const Shape& s);  // size-1 dims are constant

}  // namespace loom::fuzz
