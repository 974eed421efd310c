#pragma once
// Internal to the code generator: the pieces every kernel kind shares. Types, loads and stores,
// one expression per op (cuda/prims.cpp, with the CPU interpreter's semantics), reduction
// accumulators, the parameter block and a prelude holding only the helpers a kernel uses (no
// #include: NVRTC compiles it with --minimal).
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "cuda/codegen.h"

namespace loom::cuda::gen {

enum class Cls : uint8_t { Zero, One, Var };  // stride known 0, known 1, or an argument

// Whether a compute type (Emitter::ctype) is a floating-point one.
inline bool is_fp(const std::string& t) { return t == "float" || t == "double"; }

// Accumulator of one reduction: its C++ type and whether it tracks an index (argmax/argmin).
struct Acc {
  std::string type;
  bool index = false;
};

// The Full nodes one element evaluates, and how it reaches everything else.
struct Body {
  std::vector<int> nodes;                                // in topological order
  std::function<std::string(int leaf)> raw;              // memory element of a Full load
  std::function<std::string(int leaf)> lin;              // linear index of an index leaf
  std::function<std::string(int id)> ref;                // a node computed elsewhere
  std::function<void(int id, std::string& code)> after;  // stores, accumulation, caching
};

class Emitter {
 public:
  explicit Emitter(const Group& g);

  const Group& g;
  int rank, kept, leaves;  // space rank, kept dims, leaf count (outputs follow as accesses)
  // f32 exp as lm_fexp (ex2.approx of x log2 e: within ~2 ulp plus 2^-24 |x| relative, against
  // expf's 1 ulp; subnormal results flush to 0). Set by the row kernels' LOOM_CUDA_ROW_FASTEXP.
  bool fast_exp = false;
  // Accesses a peeled row kernel reads element by element (Variant::novec): never recomputed
  // from retained vectors.
  uint64_t novec = 0;
  bool vec_ok(int a) const { return a >= 64 || !((novec >> a) & 1); }

  // ---- accesses: leaves 0..L-1, outputs L.. ------------------------------------------------
  int accesses() const { return leaves + int(g.outputs.size()); }
  int out_access(int o) const { return leaves + o; }
  bool is_memory(int a) const { return a >= leaves || g.leaves[a].st != nullptr; }
  const Strides& strides(int a) const;
  Cls cls(int a, int d) const;
  DType storage_dtype(int a) const;
  std::string ptr(int a);  // named pointer of a memory access, declared by decls()
  // "off + i0*s0 + ..." of access `a` over dims [d0, d1) named by idx(d); "" when all are 0.
  std::string terms(int a, int d0, int d1, const std::function<std::string(int)>& idx);

  // Index variables var<d> of the dims [d0, d1) that `used` marks, from the linear index `src`
  // over those dims (row-major; the outermost needs no modulo).
  std::string decompose(const std::string& src, int d0, int d1, const std::vector<bool>& used,
                        const std::string& var, const std::string& ind);

  // ---- parameters ----------------------------------------------------------------------------
  std::string value(ValueSlot s);  // "p.v[i]"
  std::string uvalue(ValueSlot s) { return "(U)" + value(s); }
  std::string scratch(int which);  // named scratch pointer (kPartials, kFinals, kCounters)
  std::string scalar_f(int s) const { return "p.s[" + std::to_string(s) + "].f"; }
  std::string scalar_i(int s) const { return "p.s[" + std::to_string(s) + "].i"; }
  ParamSpec spec() const;
  std::string decls() const;              // declarations of the pointers the current kernel used
  void begin_kernel() { used_.clear(); }  // a module's kernels share slots, not declarations

  // ---- types ---------------------------------------------------------------------------------
  static const char* ctype(DType t);         // compute type
  static const char* storage_type(DType t);  // element type in memory
  std::string ntype(int id) const { return ctype(g.nodes[id].dtype); }
  std::string load(DType t, const std::string& raw);  // memory element -> compute type
  std::string store(DType t, const std::string& v);   // compute type -> memory element

  // ---- nodes ---------------------------------------------------------------------------------
  // Node id's value (cuda/prims.cpp): from its operands' values; an index node (Iota, Rand,
  // Randn) from its element's linear index.
  std::string op_expr(int id, const std::vector<std::string>& args);
  std::string index_expr(int id, const std::string& lin);
  // Statements defining f<id> for each node of `b`.
  std::string body(const Body& b, const std::string& ind);
  // Statement defining r<id> for a Row node (not a reduction) from Row arguments r<a>;
  // `raw`/`lin` give the row's memory element or index for a Row leaf.
  std::string row_node(int id, const std::string& raw, const std::string& lin);

  // ---- reductions ----------------------------------------------------------------------------
  Acc acc(int r) const;
  std::string acc_init(int r);
  std::string acc_add(int r, const std::string& a, const std::string& ai, const std::string& v,
                      const std::string& col);
  std::string acc_combine(int r, const std::string& a, const std::string& ai, const std::string& b,
                          const std::string& bi);
  std::string acc_final(int r, const std::string& a, const std::string& ai) const;
  std::string acc_to_word(int r, const std::string& a);  // for split kernels' scratch
  std::string acc_from_word(int r, const std::string& w);

  // ---- assembly --------------------------------------------------------------------------------
  void need(const std::string& helper) { helpers_.insert(helper); }
  std::string prelude() const;  // typedefs, helpers in use, the parameter struct

 private:
  int ptr_slot(int code);
  std::set<std::string> helpers_;
  std::vector<int> ptr_slots_;  // pointer slot -> access id (or scratch code)
  std::vector<ValueSlot> values_;
  std::set<int> used_;  // pointer slots the current kernel reads or writes
};

// Nodes reachable from `targets` through arguments; the walk does not pass a node for which
// `stop` is true (the node itself is included).
std::vector<bool> closure(const Group& g, const std::vector<int>& targets,
                          const std::function<bool(int)>& stop = nullptr);

// Staged row tiles (cuda/codegen_stage.cpp, Variant::stage). Leaves staged: memory leaves of
// the one reduced dim at a strided (argument) stride whose innermost kept dim is unit-stride;
// in order of their tiles in shared memory (widest element first).
bool stage_leaf(const Emitter& e, int a);
std::vector<int> stage_leaves(const Emitter& e);
int stage_col_bytes(const Emitter& e, int rows);  // shared bytes a reduced index, all tiles
// Kernel-top declarations: the dynamic shared memory, `stg` (the launch gave enough of it) and
// the tiles T<leaf>. Names `cols`.
std::string stage_setup(Emitter& e, const Variant& v);
// The block's copy of its tile rows: thread row `cr`, tile row bases sb<leaf> (the caller
// declares both), within `if (stg)`.
std::string stage_copy(Emitter& e, const Variant& v, const std::string& ind);

void generate_pointwise(const Group& g, const Variant& v, Generated& out);
void generate_rows(const Group& g, const Variant& v, Generated& out);

}  // namespace loom::cuda::gen
