#pragma once
// Gather and ScatterAdd on the GPU: generated kernels (one module an element and index type)
// that the backend runs as opaque groups, instead of the op layer's masked reductions (a one-hot
// sum over the indexed dim: an embedding's gradient read every token once per vocabulary row and
// feature).
//
// Gather: one thread an output element. ScatterAdd: the output starts as self's copy and src is
// added in increasing j, each output element by one thread, so the bits do not depend on the
// schedule (the CPU's order, fusion/prims.h). Where the index is one value across the dims after
// the scattered one (index_add, an embedding's gradient), a block owns one output row and a tile
// of its columns and walks the index in order, picking the positions that hit its row; otherwise
// a thread owns a column of the output (all its positions along the dim) and walks j itself.
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "cuda/cublaslt.h"  // CompileFn
#include "fusion/group.h"

namespace loom::cuda {

// The most dims a Gather or ScatterAdd takes here (BackendCaps::gather_rank).
inline constexpr int kIndexMaxRank = 8;

class IndexKernels {
 public:
  IndexKernels(int dev, CompileFn compile) : dev_(dev), compile_(std::move(compile)) {}
  // Run an opaque Gather / ScatterAdd group on `stream`.
  void gather(const Group& g, const Stream& stream);
  void scatter_add(const Group& g, const Stream& stream);
  // The module an opaque group of the loom's Gather or ScatterAdd will load, with its entries
  // and tag, where it is not loaded yet (Backend::prelower); false for other groups.
  bool needs(const Group& g, std::string* source, std::vector<std::string>* entries,
             std::string* tag) const;
  // Forgets the modules (clear_kernel_cache): the next launch loads them again.
  void drop() { modules_.clear(); }

 private:
  const std::vector<Function>& module(const std::string& source,
                                      const std::vector<std::string>& entries,
                                      const std::string& tag);
  int dev_;
  CompileFn compile_;
  std::map<std::string, Functions> modules_;  // by tag
};

// Sources: entry "loom_gather" for elements of `t` and indices of `index`; entries
// "loom_scatter_rows" and "loom_scatter_cols" for ScatterAdd.
std::string gather_source(DType t, DType index);
std::string scatter_add_source(DType t, DType index);

}  // namespace loom::cuda
