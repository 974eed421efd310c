#pragma once
// What the CUDA backend knows of each primitive of fusion/prims.h: cuda/prims.cpp has one case a
// row and no default (compiled with -Werror=switch), so a new row fails the build until it is
// lowered there or declined.
#include <cstdint>
#include <string>
#include <vector>

#include "fusion/prims.h"

namespace loom::cuda::gen {

class Emitter;
struct Expr;  // one element's operands, as cuda/prims.cpp lowers them

// How a float (f16, bf16, f32) input of a reduction accumulates: in float, in double, or in
// double only where the result is float64 (a mean's sum). As the CPU interpreter does.
enum class WideAcc : uint8_t { No, Always, IntoF64 };

struct CudaPrim {
  // NVRTC cost of one element, in units of a simple op (the pointwise launcher rolls a vector
  // kernel's lane loop past a budget of it).
  int weight;
  // Persistent rows recompute the value from retained leaf vectors instead of caching it, at a
  // remat level of at least this (Variant::remat); 0: never.
  int remat;
  // One element's value from its operands' (an index primitive: from the element's linear
  // index); null where the primitive has none here: reductions fold (acc_identity, acc_step),
  // opaque primitives run in the backend, Empty only allocates.
  std::string (*expr)(const Expr&);
  WideAcc wide = WideAcc::No;  // reductions
};

const CudaPrim& cuda_prim(Op op);

// The value of node `id` of e's group from its operands' values `args` (an index primitive:
// args[0] is the element's linear index). Throws for a primitive with no expression.
std::string element_expr(Emitter& e, int id, const std::vector<std::string>& args);

// A reduction's starting value in its accumulator type `acc` (fusion/prims.h, Identity).
std::string acc_identity(Identity id, const std::string& acc);
// The statement folding value b (index bi) into accumulator a (index ai) by `c`; b is of the
// accumulator's type, or a truth value for Or / And.
std::string acc_step(Emitter& e, Combine c, const std::string& a, const std::string& ai,
                     const std::string& b, const std::string& bi);

}  // namespace loom::cuda::gen
