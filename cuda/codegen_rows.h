#pragma once
// Internal to the reduction and normalization kernels (codegen.h: kinds rows
// and split). A row (one point of the kept dims) is handled by a group of `tpr`
// lanes; lane l takes columns l, l + tpr, ... Passes run in order inside the
// kernel: Row nodes of the pass, then the column loop (accumulating, caching,
// storing), then the lanes' partial accumulators combine (warp shuffles, then
// shared memory across warps), which makes the next pass's reduction values.
// Split variants run one launch per pass instead and combine per-segment
// partials through a scratch buffer.
//
// The generator of one module, in layers:
//   RowContext  its state, addressing and chunk vectors (codegen_access.cpp)
//   RowWalk     a pass's walk over its columns: loads, the column body, stores (codegen_walk.cpp)
//   RowLanes    row values, accumulators and their combine across a row's lanes, the kernel
//               header (codegen_lanes.cpp)
// Column reductions' vector columns and slices are in codegen_cols.cpp, what a persistent row
// keeps between passes in codegen_plan.cpp, and the kernels in codegen_rows.cpp (one kernel for
// all passes) and codegen_split.cpp (a kernel a pass).
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "cuda/codegen_emit.h"

namespace loom::cuda::gen {

// A leaf every row reads alike (a norm's weight): stride 0 along each kept dim.
inline bool row_invariant(const Emitter &e, int leaf) {
  for (int d = 0; d < e.kept; ++d)
    if (e.cls(leaf, d) != Cls::Zero) return false;
  return true;
}
// A memory access a lane walks at unit stride along the one reduced dim, as vectors.
inline bool unit_access(const Emitter &e, int a) {
  return e.rank - e.kept == 1 && e.is_memory(a) && e.cls(a, e.rank - 1) == Cls::One && e.vec_ok(a);
}

// What a persistent row keeps between passes: values cached in registers,
// leaves whose chunk vectors stay loaded, and per pass the nodes it evaluates
// (home nodes, then with `remat` the earlier-home nodes it recomputes).
struct RowPlan {
  std::vector<int> home;
  std::vector<bool> cached;
  std::set<int> retained;                // leaves whose chunk vectors a later pass reads again
  std::vector<std::vector<bool>> again;  // [pass][node]: recomputed there (no stores)
};
RowPlan row_plan(const Group &g, const Emitter &e, int remat);

// The row kernels' instruction choices, read once (codegen_access.cpp says what
// each does).
bool row_ptx();       // LOOM_CUDA_ROW_PTX
bool row_narrow();    // LOOM_CUDA_ROW_NARROW
bool row_const_on();  // LOOM_CUDA_ROW_CONST

// A Full memory leaf with one value a row (stride 0 along every reduced dim: a norm's saved
// mean or rstd broadcast over its row): whole-row kernels read it once a row into rl<leaf>, so a
// later pass recomputes what it feeds rather than holding a copy a column (LOOM_CUDA_ROW_CONST).
inline bool row_const(const Emitter &e, int leaf) {
  if (!row_const_on() || leaf >= e.leaves || !e.is_memory(leaf) || e.rank == e.kept ||
      e.g.leaves[leaf].space != Space::Full)
    return false;
  for (int d = e.kept; d < e.rank; ++d)
    if (e.cls(leaf, d) != Cls::Zero) return false;
  return true;
}

void generate_split(const Group &g, const Variant &v,
                    Generated &out);  // codegen_split.cpp

class RowContext {
 protected:
  RowContext(const Group &g, const Variant &v);
  // The module of `kernels`: its source (prelude first), parameters and scratch
  // slots.
  void finish(Generated &out, const std::string &kernels);

  const Group &g_;
  const Variant &v_;
  Emitter e_;
  int R_, K_, last_;
  std::vector<int> reduces_;
  std::string lane_, lane0_;
  bool full_out_ = false, row_out_ = false;
  bool peel_ = false;        // Variant::shift: chunks on the memory grid, partial end chunks
  std::set<int> staged_;     // Variant::stage: leaves read from the block's shared tile
  bool scalar_out_ = false;  // col_body of a partial chunk: unit outputs stored element-wise
  std::vector<bool> rb_used_, j_used_;
  std::set<std::string> shared_;  // shared-memory declarations of the current kernel
  bool cols_used_ = false;
  std::set<int> retained_,
      loaded_;               // persistent rows: leaves kept as vectors lr<leaf>[k]
  std::vector<bool> again_;  // nodes the current pass recomputes: no stores
  bool par_ = false;         // block-wide combines use parity-buffered slots s<r>[it &
                             // 1] (sync1)
  int pf_ = 0;               // persistent rows: prefetch level of the next row's retained vectors
  std::map<int, int> last_read_;  // retained leaf -> the last pass that reads its vectors
  // Vector columns (Variant::vec): a thread's cv_ rows (kept columns) are
  // elements e of unrolled loops; row values and accumulators live in arrays
  // rx<id>[e], ax<r>[e] (axi: indices) that wrap() binds to the scalar names
  // the one-row code uses.
  int cv_ = 0;
  std::set<int> rx_, ax_;
  // Column sums (GOutput::colsum; codegen_colsum.cpp): outputs of Full nodes (a sum a column)
  // and of Row nodes (one sum). A persistent row adds each lane's columns into registers
  // cs<o>[k * vw + e] over the block's rows, its Row values into csr<o>; after the row loop the
  // block's row groups add theirs into the block's partial row in group order. A looping row
  // adds each element into its row group's partial row in memory. loom_colsum then adds the
  // partials of each column in block order: the bits depend on the launch shape alone.
  std::vector<int> csf_, csr_;
  // Leaves read as row values rl<leaf> (row_const) by the current kernel's walks; whole-row
  // kernels only (not split, staged or vector columns).
  std::set<int> rconst_;
  bool rconst_ok() const { return !v_.split && v_.stage == 0 && !cv_; }
  bool colsums() const { return !csf_.empty() || !csr_.empty(); }
  std::string cs_type() const;   // the partials' element type: double where a sum is
  std::string part_row() const;  // the index of this thread's partial row (codegen_colsum.cpp)
  std::string colsum_decls(const std::string &ind);
  std::string colsum_add(int o, const std::string &f, const std::string &ind);
  std::string colsum_parts(const std::string &ind);
  std::string colsum_kernel();

  static std::string S(int i) { return std::to_string(i); }
  // Lanes that walk a row together: tpr adjacent threads, or a column's cs
  // slices.
  int nl() const { return v_.tpr * v_.cs; }
  int ord(int r) const {
    return int(std::find(reduces_.begin(), reduces_.end(), r) - reduces_.begin());
  }
  std::string off(int a) { return e_.value({ValueSlot::Offset, a}); }

  // ---- addressing (codegen_access.cpp)
  // ------------------------------------------------------
  std::string rb(int a);
  std::string addr(int a);
  void reset_kernel();
  std::string row_setup(const std::string &ind, const std::string &src = "row",
                        const std::string &pre = "", const std::string *uses = nullptr);
  static bool mentions(const std::string &code, const std::string &id);
  // Whether a column body reads `col` (strided or index leaves, argmax).
  static bool names_col(const std::string &body) { return mentions(body, "col"); }

  // ---- node sets
  // -----------------------------------------------------------------------------
  std::vector<int> full_in(const std::vector<bool> &need, int pass = -1) const;
  std::vector<int> reduces_of_pass(int q, const std::vector<bool> &need) const;
  bool read_by_node(int id) const {
    for (const GNode &y : g_.nodes)
      if (y.a == id || y.b == id || y.c == id) return true;
    return false;
  }

  // ---- chunk vectors
  // -------------------------------------------------------------------------
  // An access a lane walks at unit stride along the one reduced dim: read or
  // written as one vector a chunk. A staged leaf (Variant::stage) counts as
  // one: its chunks are vectors of the block's tile.
  bool unit(int a) const { return staged_.count(a) || gen::unit_access(e_, a); }
  bool row_invariant(int leaf) const { return gen::row_invariant(e_, leaf); }
  std::string vec_t(int a) const {
    return "lm_vec<" + std::string(Emitter::storage_type(e_.storage_dtype(a))) + ", " + S(v_.vw) +
           ">";
  }
  // A unit-stride bf16 leaf of an even chunk width held as 32-bit words
  // (LOOM_CUDA_ROW_NARROW).
  bool words(int leaf) const {
    return row_narrow() && v_.vw >= 2 && v_.vw % 2 == 0 && unit(leaf) &&
           e_.storage_dtype(leaf) == DType::BFloat16;
  }
  std::string leaf_vec_t(int leaf) const {
    return words(leaf) ? "lm_vec<unsigned, " + S(v_.vw / 2) + ">" : vec_t(leaf);
  }
  // A unit-stride bf16 or f16 output of float values in vectors of an even
  // width: its columns are collected as floats (of<o>) and converted two at a
  // time into 32-bit words.
  bool packed(int a) const {
    DType t = e_.storage_dtype(a);
    int node = g_.outputs[a - e_.leaves].node;
    return row_ptx() && !scalar_out_ && v_.vw >= 2 && v_.vw % 2 == 0 && e_.ntype(node) == "float" &&
           (t == DType::BFloat16 || t == DType::Float16);
  }
  bool shifted(int leaf) const { return peel_ && leaf < 64 && ((v_.shifted >> leaf) & 1); }
  std::string vload(const std::string &type, const std::string &addr);
  std::string vstore(const std::string &type, const std::string &addr, const std::string &val);
  std::string chunk_addr(int a, const std::string &pre = "");

  // ---- vector columns (codegen_cols.cpp)
  // ----------------------------------------------------- A leaf a
  // vector-column thread loads as one cv_-wide vector a walked row: a Full leaf
  // at unit stride along the innermost kept dim (the launcher checks its
  // alignment).
  bool cvec(int leaf) const {
    return cv_ && leaf < e_.leaves && e_.is_memory(leaf) && g_.leaves[leaf].space == Space::Full &&
           e_.cls(leaf, K_ - 1) == Cls::One;
  }
  // bf16 vector columns held as 32-bit words (LOOM_CUDA_ROW_NARROW), as words()
  // for rows.
  bool cv_words(int leaf) const {
    return row_narrow() && cv_ % 2 == 0 && e_.storage_dtype(leaf) == DType::BFloat16;
  }
  std::string cv_vec_t(int leaf) const;
  std::string wrap(const std::string &code, const std::string &ind, const std::vector<int> &defs);
  std::string prune_rows(std::string k) const;
};

class RowWalk : public RowContext {
 protected:
  using RowContext::RowContext;

  std::string retained_loads(const std::string &dst, const std::string &pre,
                             const std::string &valid, const std::string &ind);
  std::string col_body(int q, const std::vector<int> &nodes, bool store,
                       const std::vector<bool> *cached, const std::string &ind,
                       std::set<int> &vleaves, std::set<int> &vouts);
  std::string accumulate(int r, const std::string &f, const std::string &ind);
  std::string packed_store(int o, const std::string &ind);
  std::string walk(int q, const std::vector<int> &nodes, bool store,
                   const std::vector<bool> *cached, int uf, const std::string &cond,
                   const std::string &ind);
  std::string cv_walk(int q, const std::vector<int> &nodes, bool store, int uf,
                      const std::string &cond,
                      const std::string &ind);  // codegen_cols.cpp
  std::string staged_load(int leaf, const std::string &name, const std::string &ind);
  std::string realigned_load(int leaf, const std::string &name, const std::string &ind);
  std::string partial_load(int leaf, const std::string &name, const std::string &ind);
  int loop_chunks() const;
  std::string steps(int q, const std::vector<int> &nodes, bool store, int uf,
                    const std::string &start, const std::string &end, const std::string &ind);
};

class RowLanes : public RowWalk {
 protected:
  using RowWalk::RowWalk;

  std::string row_nodes(const std::vector<int> &ids, const std::string &ind);
  std::string acc_decls(const std::vector<int> &rs, const std::string &ind, bool declare = true);
  std::string lanes(const std::vector<int> &rs, const std::string &ind);
  std::string slices(const std::vector<int> &rs,
                     const std::string &ind);  // codegen_cols.cpp
  std::string combine(int r, const std::string &b, const std::string &bi, const std::string &ind);
  std::string row_outputs(const std::string &cond, const std::string &ind);
  std::string header(const std::string &name);
};

}  // namespace loom::cuda::gen
