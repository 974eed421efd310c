// Reduction and normalization kernels. A row (one point of the kept dims) is handled by a group
// of `tpr` lanes; lane l takes columns l, l + tpr, ... Passes run in order inside the kernel:
// Row nodes of the pass, then the column loop (accumulating, caching, storing), then the lanes'
// partial accumulators combine (warp shuffles, then shared memory across warps), which makes
// the next pass's reduction values. Split variants run one launch per pass instead and combine
// per-segment partials through a scratch buffer (see codegen.h).
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <functional>
#include <map>
#include <set>
#include <tuple>

#include "cuda/codegen_emit.h"
#include "cuda/prims.h"
#include "tensor/error.h"
#include "tensor/knobs.h"

namespace loom::cuda::gen {

// Persistent rows compute each Full node once, in its home pass: the first pass that uses it
// (its own pass when a reduction takes it in, or when nothing else reads it). A node read in a
// later pass than its home is cached in registers; one first read later (a weight) is loaded
// there rather than carried.
std::vector<int> home_passes(const Group& g) {
  int n = int(g.nodes.size());
  std::vector<int> home(n, -1);
  for (int id = n - 1; id >= 0; --id) {
    const GNode& x = g.nodes[id];
    if (x.space != Space::Full) continue;
    int h = -1;
    for (int c = id + 1; c < n; ++c) {
      const GNode& y = g.nodes[c];
      if (y.a != id && y.b != id && y.c != id) continue;
      int hc = y.space == Space::Full ? home[c] : x.pass;  // Row consumers are reductions
      h = h < 0 ? hc : std::min(h, hc);
    }
    home[id] = h < 0 ? x.pass : h;
  }
  return home;
}

// Full nodes a later home pass reads from registers.
std::vector<bool> cached_nodes(const Group& g, const std::vector<int>& home) {
  std::vector<bool> cached(g.nodes.size(), false);
  for (int m = 0; m < int(g.nodes.size()); ++m) {
    if (g.nodes[m].space != Space::Full) continue;
    for (int a : {g.nodes[m].a, g.nodes[m].b, g.nodes[m].c})
      if (a >= 0 && g.nodes[a].space == Space::Full && home[a] < home[m]) cached[a] = true;
  }
  return cached;
}

struct RowPlan {
  std::vector<int> home;
  std::vector<bool> cached;
  std::set<int> retained;                // leaves whose chunk vectors a later pass reads again
  std::vector<std::vector<bool>> again;  // [pass][node]: recomputed there (no stores)
};

// Cheap Full nodes a later pass can recompute from retained chunk vectors instead of caching
// their values: loads of a leaf walked at unit stride along the one reduced dim, and casts,
// copies, +, - and * of those and Row values. A bf16 row then stays in registers as bf16 (half
// the registers of its f32 values) and a layer_norm's x - mean costs no registers at all. Level 2
// also recomputes exp (a softmax's e: about 10 instructions an element for 4 bytes of registers).
std::vector<bool> remat_nodes(const Group& g, const Emitter& e, int level) {
  int n = int(g.nodes.size()), R = e.rank;
  std::vector<bool> m(n, false);
  if (R - e.kept != 1) return m;
  for (int id = 0; id < n; ++id) {
    const GNode& x = g.nodes[id];
    if (x.space != Space::Full) continue;
    if (is_load(x)) {
      m[id] = e.is_memory(x.leaf) && e.cls(x.leaf, R - 1) == Cls::One && e.vec_ok(x.leaf);
      continue;
    }
    const int r = cuda_prim(x.op).remat;  // (cuda/prims.cpp: casts, +, -, *, neg; exp at 2)
    if (r == 0 || r > level) continue;
    bool ok = true, full = false;
    for (int a : {x.a, x.b, x.c}) {
      if (a < 0 || g.nodes[a].space == Space::Row) continue;
      ok = ok && m[a], full = true;
    }
    m[id] = ok && full;
  }
  return m;
}

// What a persistent row keeps between passes: values cached in registers, leaves whose chunk
// vectors stay loaded, and per pass the nodes it evaluates (home nodes, then with `remat` the
// earlier-home nodes it recomputes).
RowPlan row_plan(const Group& g, const Emitter& e, int remat) {
  RowPlan p;
  p.home = home_passes(g);
  p.cached = cached_nodes(g, p.home);
  int n = int(g.nodes.size());
  std::vector<bool> m = remat ? remat_nodes(g, e, remat) : std::vector<bool>(n, false);
  for (int id = 0; id < n; ++id)
    if (m[id]) p.cached[id] = false;
  p.again.assign(g.passes, std::vector<bool>(n, false));
  for (int q = 0; q < g.passes; ++q) {
    std::vector<bool>& ag = p.again[q];
    std::function<void(int)> add = [&](int a) {
      if (ag[a]) return;
      ag[a] = true;
      if (is_load(g.nodes[a])) p.retained.insert(g.nodes[a].leaf);
      for (int b : {g.nodes[a].a, g.nodes[a].b, g.nodes[a].c})
        if (b >= 0 && g.nodes[b].space == Space::Full) add(b);
    };
    for (int id = 0; id < n; ++id) {
      if (g.nodes[id].space != Space::Full || p.home[id] != q) continue;
      for (int a : {g.nodes[id].a, g.nodes[id].b, g.nodes[id].c})
        if (a >= 0 && m[a] && p.home[a] < q) add(a);
    }
  }
  return p;
}

namespace {

// LOOM_CUDA_ROW_PTX=0 turns off, for GPU A/B runs, the sm_80+ instructions the row kernels use
// where the portable helpers cost several: a NaN-propagating max/min accumulate and lane
// combine (max.NaN.f32, one instruction for lm_max's compares) and packed f32 -> bf16/f16 stores
// (cvt.rn.bf16x2.f32: two columns an instruction for lm_f2b's eight). A bf16 softmax spent about 55
// PTX instructions an element (nvcc -ptx, 2026-11-29): near the issue limit at the copy's
// bandwidth, not just short of bytes in flight. Read once; older GPUs compile the portable helpers
// (#if).
bool row_ptx() {
  static const bool on = knob_flag(Knob::CudaRowPtx);
  return on;
}

// LOOM_CUDA_ROW_NARROW (default on; =0 for the u16 vectors of before): bf16 row elements cost fewer
// instructions. Unit-stride bf16 leaves are held as 32-bit words, a column converted with one
// shift or mask (the u16 vectors took mov.b32 unpack, cvt.u32.u16 and shl: nvcc -ptx, a 4096
// bf16 layer_norm, 3 times an element as each pass recomputes x); a bf16 cast only stored skips
// lm_rb (its store rounds once). A bf16 element has ~34 issue slots at the copy's bandwidth;
// the layer_norm spent ~25 PTX instructions an element. H200 A/B, 2026-11-29, [65536, 4096] bf16:
// softmax 90 -> 92%, layer_norm 89 -> 90% of copy, rms_norm 93 -> 92% (noise). Read once.
bool row_narrow() {
  static const bool on = knob_flag(Knob::CudaRowNarrow);
  return on;
}

class RowGen {
 public:
  RowGen(const Group& g, const Variant& v) : g_(g), v_(v), e_(g) {
    e_.fast_exp = v.fexp;
    R_ = e_.rank, K_ = e_.kept, last_ = g.passes - 1;
    for (int i = 0; i < int(g.nodes.size()); ++i)
      if (is_reduce(g.nodes[i].op)) reduces_.push_back(i);
    LOOM_CHECK(v.cs == 1 || (v.tpr == 1 && v.k == 0 && v.vw == 1), Value,
               "cuda codegen: column slices (cs ", int(v.cs),
               ") need a loop or split column kernel, got ", v.key());
    lane_ = nl() > 1 ? "lane" : "0";
    lane0_ = nl() > 1 ? "lane == 0" : "true";
    e_.novec = v.novec;
    peel_ = v.shift >= 0 && !v.split && v.vw > 1;
    if (v.vec > 1) {
      LOOM_CHECK(v.tpr == 1 && v.k == 0 && v.vw == 1 && K_ >= 1 && (v.vec & (v.vec - 1)) == 0,
                 Value, "cuda codegen: vector columns (vec ", v.vec,
                 ") need a loop or split column reduction, got ", v.key());
      cv_ = v.vec;
    }
    for (auto& o : g.outputs) (g.nodes[o.node].space == Space::Full ? full_out_ : row_out_) = true;
    if (v.stage > 0 && !v.split)
      for (int a : stage_leaves(e_)) staged_.insert(a);
  }

  void run(Generated& out) {
    std::string kernels;
    if (!v_.split) {
      kernels = single();
      out.entries = {"loom_kernel"};
    } else {
      int n = full_out_ ? last_ + 1 : last_;  // no Full outputs: the last pass has nothing to walk
      for (int q = 0; q < n; ++q) {
        kernels += split(q, !full_out_ && q == last_ - 1);
        out.entries.push_back("loom_kernel_p" + std::to_string(q));
      }
      out.final_rows = !full_out_;
    }
    out.source = e_.prelude() + kernels;
    out.params = e_.spec();
    out.reduces = int(reduces_.size());
  }

 private:
  const Group& g_;
  const Variant& v_;
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
  std::set<int> retained_, loaded_;  // persistent rows: leaves kept as vectors lr<leaf>[k]
  std::vector<bool> again_;          // nodes the current pass recomputes: no stores
  bool par_ = false;  // block-wide combines use parity-buffered slots s<r>[it & 1] (sync1)
  int pf_ = 0;        // persistent rows: prefetch level of the next row's retained vectors
  std::map<int, int> last_read_;  // retained leaf -> the last pass that reads its vectors
  // Vector columns (Variant::vec): a thread's cv_ rows (kept columns) are elements e of unrolled
  // loops; row values and accumulators live in arrays rx<id>[e], ax<r>[e] (axi: indices) that
  // wrap() binds to the scalar names the one-row code uses.
  int cv_ = 0;
  std::set<int> rx_, ax_;

  static std::string S(int i) { return std::to_string(i); }
  // Lanes that walk a row together: tpr adjacent threads, or a column's cs slices.
  int nl() const { return v_.tpr * v_.cs; }
  int ord(int r) const {
    return int(std::find(reduces_.begin(), reduces_.end(), r) - reduces_.begin());
  }
  std::string off(int a) { return e_.value({ValueSlot::Offset, a}); }

  // ---- addressing ----------------------------------------------------------------------------
  // The base of access a in the current row; with vector columns, of row + e (the bases b<a>
  // are the thread's first row's; e steps the innermost kept dim).
  std::string rb(int a) {
    rb_used_[a] = true;
    if (!cv_ || e_.cls(a, K_ - 1) == Cls::Zero) return "b" + S(a);
    const std::string st =
        e_.cls(a, K_ - 1) == Cls::One ? "" : " * " + e_.value({ValueSlot::Stride, a, K_ - 1});
    return "(b" + S(a) + " + (I)e" + st + ")";
  }
  std::string addr(int a) {
    std::string c = e_.terms(a, K_, R_, [&](int d) {
      if (R_ - K_ == 1) return std::string("(I)col");
      j_used_[d] = true;
      return "j" + S(d);
    });
    return c.empty() ? rb(a) : rb(a) + " + " + c;
  }
  void reset_kernel() {
    e_.begin_kernel();
    rb_used_.assign(e_.accesses(), false);
    shared_.clear();
    cols_used_ = false;
    rx_.clear(), ax_.clear();
  }
  // Row decomposition over the kept dims and the row base of every access the kernel used.
  // `pre` names another row's indices and bases (prefetch: "n" for nrow's nk<d>, nb<a>). With
  // `uses`, only the bases that code names (prefetch: the prologue loads the input alone).
  std::string row_setup(const std::string& ind, const std::string& src = "row",
                        const std::string& pre = "", const std::string* uses = nullptr) {
    std::vector<bool> base(e_.accesses(), false), used(R_, false);
    for (int a = 0; a < e_.accesses(); ++a)
      base[a] = rb_used_[a] && (!uses || mentions(*uses, pre + "b" + S(a)));
    for (int a = 0; a < e_.accesses(); ++a)
      if (base[a])
        for (int d = 0; d < K_; ++d)
          if (e_.cls(a, d) != Cls::Zero) used[d] = true;
    std::string code = e_.decompose(src, 0, K_, used, pre + "k", ind);
    for (int a = 0; a < e_.accesses(); ++a) {
      if (!base[a]) continue;
      std::string t = e_.terms(a, 0, K_, [&](int d) { return pre + "k" + S(d); });
      code += ind + "const I " + pre + "b" + S(a) + " = " + off(a) + (t.empty() ? "" : " + " + t) +
              ";\n";
    }
    return code;
  }

  // Vector columns: drops the arrays of row values no later code reads (their declaration and
  // store the only mentions; nvcc warns of a variable set but never used).
  std::string prune_rows(std::string k) const {
    for (int id : rx_) {
      const std::string a = "rx" + S(id);
      auto word = [](char c) { return std::isalnum((unsigned char)c) || c == '_'; };
      int n = 0;
      for (size_t p = k.find(a); p != std::string::npos; p = k.find(a, p + 1))
        n += (p == 0 || !word(k[p - 1])) && (p + a.size() == k.size() || !word(k[p + a.size()]));
      if (n != 2) continue;
      for (const std::string& line :
           {e_.ntype(id) + " " + a + "[" + S(cv_) + "];\n", a + "[e] = r" + S(id) + ";\n"}) {
        const size_t p = k.find(line);
        if (p == std::string::npos) continue;
        const size_t b = k.rfind('\n', p) + 1;  // (npos + 1: the start)
        k.erase(b, p + line.size() - b);
      }
    }
    return k;
  }

  // Whether `code` names `id` as a whole identifier.
  static bool mentions(const std::string& code, const std::string& id) {
    auto word = [](char c) { return std::isalnum((unsigned char)c) || c == '_'; };
    for (size_t p = code.find(id); p != std::string::npos; p = code.find(id, p + 1))
      if ((p == 0 || !word(code[p - 1])) &&
          (p + id.size() == code.size() || !word(code[p + id.size()])))
        return true;
    return false;
  }

  // ---- node sets -------------------------------------------------------------------------------
  std::vector<int> full_in(const std::vector<bool>& need, int pass = -1) const {
    std::vector<int> v;
    for (int i = 0; i < int(g_.nodes.size()); ++i)
      if (need[i] && g_.nodes[i].space == Space::Full && (pass < 0 || g_.nodes[i].pass == pass))
        v.push_back(i);
    return v;
  }
  std::vector<int> reduces_of_pass(int q, const std::vector<bool>& need) const {
    std::vector<int> v;
    for (int r : reduces_)
      if (need[r] && g_.nodes[g_.nodes[r].a].pass == q) v.push_back(r);
    return v;
  }

  // ---- pieces ---------------------------------------------------------------------------------
  // An access a lane walks at unit stride along the one reduced dim: read or written as one
  // vector a chunk.
  // A staged leaf (Variant::stage) counts as one: its chunks are vectors of the block's tile.
  bool unit(int a) const {
    if (staged_.count(a)) return true;
    return R_ - K_ == 1 && e_.is_memory(a) && e_.cls(a, R_ - 1) == Cls::One && e_.vec_ok(a);
  }
  std::string vec_t(int a) const {
    return "lm_vec<" + std::string(Emitter::storage_type(e_.storage_dtype(a))) + ", " + S(v_.vw) +
           ">";
  }
  // A unit-stride bf16 leaf of an even chunk width held as 32-bit words (LOOM_CUDA_ROW_NARROW).
  bool words(int leaf) const {
    return row_narrow() && v_.vw >= 2 && v_.vw % 2 == 0 && unit(leaf) &&
           e_.storage_dtype(leaf) == DType::BFloat16;
  }
  // A leaf a vector-column thread loads as one cv_-wide vector a walked row: a Full leaf at unit
  // stride along the innermost kept dim (the launcher checks its alignment).
  bool cvec(int leaf) const {
    return cv_ && leaf < e_.leaves && e_.is_memory(leaf) && g_.leaves[leaf].space == Space::Full &&
           e_.cls(leaf, K_ - 1) == Cls::One;
  }
  // bf16 vector columns held as 32-bit words (LOOM_CUDA_ROW_NARROW), as words() for rows.
  bool cv_words(int leaf) const {
    return row_narrow() && cv_ % 2 == 0 && e_.storage_dtype(leaf) == DType::BFloat16;
  }
  std::string cv_vec_t(int leaf) const {
    return cv_words(leaf) ? "lm_vec<unsigned, " + S(cv_ / 2) + ">"
                          : "lm_vec<" + std::string(Emitter::storage_type(e_.storage_dtype(leaf))) +
                                ", " + S(cv_) + ">";
  }
  // One-row code run for each of a vector-column thread's rows: an unrolled loop over e whose
  // body first binds the row values (r<id>) and accumulators (a<r>, ai<r>) it names to element e
  // of their arrays, and last stores the row values it defines (`defs`, arrays declared here).
  // Without vector columns, `code` unchanged.
  std::string wrap(const std::string& code, const std::string& ind, const std::vector<int>& defs) {
    if (!cv_ || code.empty()) return code;
    std::string decl, pre, post;
    for (int id : defs) decl += ind + e_.ntype(id) + " rx" + S(id) + "[" + S(cv_) + "];\n";
    for (int id : rx_)
      if (mentions(code, "r" + S(id)))
        pre += ind + "  const " + e_.ntype(id) + " r" + S(id) + " = rx" + S(id) + "[e];\n";
    for (int r : ax_) {
      if (mentions(code, "a" + S(r)))
        pre += ind + "  " + e_.acc(r).type + "& a" + S(r) + " = ax" + S(r) + "[e];\n";
      if (e_.acc(r).index && mentions(code, "ai" + S(r)))
        pre += ind + "  long long& ai" + S(r) + " = axi" + S(r) + "[e];\n";
    }
    for (int id : defs) post += ind + "  rx" + S(id) + "[e] = r" + S(id) + ";\n";
    rx_.insert(defs.begin(), defs.end());
    std::string body;  // code, two spaces deeper
    for (size_t p = 0; p < code.size();) {
      size_t n = code.find('\n', p);
      n = n == std::string::npos ? code.size() : n + 1;
      body += (code[p] == '#' || code[p] == '\n' ? "" : "  ") + code.substr(p, n - p);
      p = n;
    }
    return decl + ind + "#pragma unroll\n" + ind + "for (int e = 0; e < " + S(cv_) + "; ++e) {\n" +
           pre + body + post + ind + "}\n";
  }

  std::string leaf_vec_t(int leaf) const {
    return words(leaf) ? "lm_vec<unsigned, " + S(v_.vw / 2) + ">" : vec_t(leaf);
  }
  // A chunk load or store of `type` at `addr`. (Streaming .cs hints lost 4-5 points of copy on
  // the H200, 2026-11-29: plain accesses only.)
  std::string vload(const std::string& type, const std::string& addr) {
    return "*(const " + type + "*)(" + addr + ")";
  }
  std::string vstore(const std::string& type, const std::string& addr, const std::string& val) {
    return "*(" + type + "*)(" + addr + ") = " + val + ";\n";
  }
  std::string chunk_addr(int a, const std::string& pre = "") {
    if (peel_) return e_.ptr(a) + " + (" + rb(a) + " - (I)sh + (I)(ch * " + S(v_.vw) + "u))";
    return e_.ptr(a) + " + (" + pre + rb(a) + " + (I)(ch * " + S(v_.vw) + "u))";
  }
  // Loads of every retained leaf's k chunks of a row into <dst><leaf>[k]: the row whose bases
  // are <pre>b<a>, where `valid` (row in range).
  std::string retained_loads(const std::string& dst, const std::string& pre,
                             const std::string& valid, const std::string& ind) {
    std::string code = ind + "#pragma unroll\n" + ind + "for (int k = 0; k < " + S(v_.k) +
                       "; ++k) {\n" + ind + "  const U ch = (U)" + lane_ + " + (U)(k * " +
                       S(v_.tpr) + ");\n" + ind + "  if (" + valid + " && ch < nch) {\n";
    for (int leaf : retained_)
      code += ind + "    " + dst + S(leaf) +
              "[k] = " + vload(leaf_vec_t(leaf), chunk_addr(leaf, pre)) + ";\n";
    return code + ind + "  }\n" + ind + "}\n";
  }

  // The column body of pass q for one column `col` of chunk k: evaluates `nodes`; accumulates
  // reductions over pass-q values; stores Full outputs when `store`; caches values later passes
  // read when `cached`. Unit-stride leaves come from the chunk's vectors lw<leaf>[k] (collected in
  // vleaves), unit-stride outputs go to ow<o> (collected in vouts).
  std::string col_body(int q, const std::vector<int>& nodes, bool store,
                       const std::vector<bool>* cached, const std::string& ind,
                       std::set<int>& vleaves, std::set<int>& vouts) {
    j_used_.assign(R_, false);
    const std::string el = v_.vw > 1 ? "e" : "0";
    const std::string slot = v_.vw > 1 ? "[k * " + S(v_.vw) + " + e]" : "[k]";
    Body b;
    b.nodes = nodes;
    b.raw = [&](int leaf) {
      if (cvec(leaf)) {
        vleaves.insert(leaf);
        const std::string v = "lw" + S(leaf) + "[k].v[";
        if (cv_words(leaf)) return "(unsigned short)(" + v + "e >> 1] >> ((e & 1) * 16))";
        return v + "e]";
      }
      if (!unit(leaf)) return e_.ptr(leaf) + "[" + addr(leaf) + "]";
      vleaves.insert(leaf);
      std::string v = (retained_.count(leaf) ? "lr" : "lw") + S(leaf) + "[k].v[";
      // Words: the bf16 column is a half of a 32-bit word; lm_b2f's shift of it folds into
      // one instruction (w << 16, or w & 0xffff0000) instead of an unpack, a widen and a shift.
      if (words(leaf)) return "(unsigned short)(" + v + "e >> 1] >> ((e & 1) * 16))";
      return v + el + "]";
    };
    b.lin = [&](int leaf) { return addr(leaf); };
    b.ref = [&](int id) {
      return g_.nodes[id].space == Space::Row ? "r" + S(id) : "c" + S(id) + slot;
    };
    b.after = [&](int id, std::string& code) {
      std::string f = "f" + S(id);
      if (cached && (*cached)[id]) code += ind + "c" + S(id) + slot + " = " + f + ";\n";
      if (g_.nodes[id].pass == q)
        for (int r : reduces_)
          if (g_.nodes[r].a == id) code += accumulate(r, f, ind);
      if (!store || (!again_.empty() && again_[id])) return;
      // A cast to bf16 read only by its stores: the store's conversion rounds it once (the same
      // bits: rounding an already rounded value is exact), not lm_rb then lm_f2b / cvt again.
      if (row_narrow() && g_.nodes[id].op == Op::Cast && g_.nodes[id].dtype == DType::BFloat16 &&
          !read_by_node(id)) {
        const std::string rb = "const float " + f + " = lm_rb(";
        size_t p = code.rfind(rb);
        if (p != std::string::npos) code.replace(p, rb.size(), "const float " + f + " = (");
      }
      for (int o = 0; o < int(g_.outputs.size()); ++o) {
        if (g_.outputs[o].node != id) continue;
        int a = e_.out_access(o);
        std::string v = e_.store(e_.storage_dtype(a), f);
        if (unit(a) && !scalar_out_) {
          vouts.insert(o);
          if (packed(a))
            code += ind + "of" + S(o) + "[e] = " + f + ";\n";
          else
            code += ind + "ow" + S(o) + ".v[" + el + "] = " + v + ";\n";
        } else {
          code += ind + e_.ptr(a) + "[" + addr(a) + "] = " + v + ";\n";
        }
      }
    };
    std::string code = e_.body(b, ind);
    if (R_ - K_ >= 2) code = e_.decompose("col", K_, R_, j_used_, "j", ind) + code;
    return code;
  }

  bool read_by_node(int id) const {
    for (const GNode& y : g_.nodes)
      if (y.a == id || y.b == id || y.c == id) return true;
    return false;
  }

  // Accumulates f into reduction r: max.NaN / min.NaN for float max and min where available.
  std::string accumulate(int r, const std::string& f, const std::string& ind) {
    std::string add = ind + e_.acc_add(r, "a" + S(r), "ai" + S(r), f, "col") + "\n";
    const Combine c = prim(g_.nodes[r].op).combine;
    if (!row_ptx() || (c != Combine::Max && c != Combine::Min) || e_.acc(r).type != "float")
      return add;
    return "#if __CUDA_ARCH__ >= 800\n" + ind + "asm(\"" + (c == Combine::Max ? "max" : "min") +
           ".NaN.f32 %0, %0, %1;\" : \"+f\"(a" + S(r) + ") : \"f\"((float)" + f + "));\n#else\n" +
           add + "#endif\n";
  }
  // A unit-stride bf16 or f16 output of float values in vectors of an even width: its columns
  // are collected as floats (of<o>) and converted two at a time into 32-bit words.
  bool packed(int a) const {
    DType t = e_.storage_dtype(a);
    int node = g_.outputs[a - e_.leaves].node;
    return row_ptx() && !scalar_out_ && v_.vw >= 2 && v_.vw % 2 == 0 && e_.ntype(node) == "float" &&
           (t == DType::BFloat16 || t == DType::Float16);
  }
  std::string packed_store(int o, const std::string& ind) {
    int a = e_.out_access(o), n = v_.vw / 2;
    bool bf = e_.storage_dtype(a) == DType::BFloat16;
    std::string w = "lm_vec<unsigned, " + S(n) + ">", lo = "of" + S(o) + "[2 * e]",
                hi = "of" + S(o) + "[2 * e + 1]", p = "op" + S(o);
    std::string code = ind + w + " " + p + ";\n" + ind + "#pragma unroll\n" + ind +
                       "for (int e = 0; e < " + S(n) + "; ++e) {\n";
    code += "#if __CUDA_ARCH__ >= 800\n" + ind + "  asm(\"cvt.rn." + (bf ? "bf16x2" : "f16x2") +
            ".f32 %0, %1, %2;\" : \"=r\"(" + p + ".v[e]) : \"f\"(" + hi + "), \"f\"(" + lo +
            "));\n#else\n";
    code += ind + "  " + p + ".v[e] = (unsigned)" + e_.store(e_.storage_dtype(a), lo) +
            " | ((unsigned)" + e_.store(e_.storage_dtype(a), hi) + " << 16);\n#endif\n";
    code += ind + "}\n" + ind + vstore(w, chunk_addr(a), p);
    return code;
  }

  // One step of the column walk of pass q: `uf` chunks a lane (chunk ch = cb + k * tpr for
  // k < uf; the caller sets cb). Every unit-stride leaf's vectors of the uf chunks are loaded
  // first (uf 16-byte loads in flight a lane), then each chunk is evaluated column by column and
  // its unit-stride outputs stored as vectors. `cond` guards a chunk (ch in range, row valid).
  std::string walk(int q, const std::vector<int>& nodes, bool store,
                   const std::vector<bool>* cached, int uf, const std::string& cond,
                   const std::string& ind) {
    if (cv_) return cv_walk(q, nodes, store, uf, cond, ind);
    std::set<int> vleaves, vouts, none;
    const std::string in2 = ind + "  ", in3 = ind + "    ";
    // Peeled rows: whole chunks take the vector body (in4, one level deeper), partial chunks
    // the element body, each column guarded and unit outputs stored element-wise.
    const std::string in4 = peel_ ? in3 + "  " : in3;
    std::string body =
        col_body(q, nodes, store, cached, v_.vw > 1 ? in4 + "  " : in4, vleaves, vouts);
    std::string part;
    if (peel_) {
      scalar_out_ = true;
      part = col_body(q, nodes, store, cached, in4 + "  ", vleaves, none);
      scalar_out_ = false;
    }
    const std::string chunk = ind + "  const U ch = cb + (U)(k * " + S(nl()) + ");\n";
    const std::string whole = "fc0 <= ch && ch < fc1";
    const std::string pcol = "ch * " + S(v_.vw) + "u + (U)e - sh";
    std::string code;
    // Retained leaves are loaded once, by the first pass that reads them, into the row's lr
    // arrays (declared by single()); the other leaves into this walk's lw arrays.
    std::vector<std::string> loads, parts;
    for (int leaf : vleaves) {
      bool keep = retained_.count(leaf) > 0;
      if (keep && !loaded_.insert(leaf).second) continue;
      std::string name = (keep ? "lr" : "lw") + S(leaf);
      if (!keep) code += ind + leaf_vec_t(leaf) + " " + name + "[" + S(uf) + "];\n";
      loads.push_back(staged_.count(leaf) ? staged_load(leaf, name, in4)
                      : shifted(leaf)     ? realigned_load(leaf, name, in4)
                                          : in4 + name + "[k] = " +
                                            vload(leaf_vec_t(leaf), chunk_addr(leaf)) + ";\n");
      if (peel_) parts.push_back(partial_load(leaf, name, in4));
    }
    if (!vleaves.empty()) e_.need("vec");
    if (!loads.empty()) {
      code +=
          ind + "#pragma unroll\n" + ind + "for (int k = 0; k < " + S(uf) + "; ++k) {\n" + chunk;
      code += in2 + "if (" + cond + ") {\n";
      if (peel_) code += in3 + "if (" + whole + ") {\n";
      for (const std::string& l : loads) code += l;
      if (peel_) {
        code += in3 + "} else {\n";
        for (const std::string& l : parts) code += l;
        code += in3 + "}\n";
      }
      code += in2 + "}\n" + ind + "}\n";
    }
    code += ind + "#pragma unroll\n" + ind + "for (int k = 0; k < " + S(uf) + "; ++k) {\n" + chunk;
    code += in2 + "if (" + cond + ") {\n";
    if (peel_) code += in3 + "if (" + whole + ") {\n";
    if (!vouts.empty()) e_.need("vec");
    for (int o : vouts)
      code += packed(e_.out_access(o)) ? in4 + "float of" + S(o) + "[" + S(v_.vw) + "];\n"
                                       : in4 + vec_t(e_.out_access(o)) + " ow" + S(o) + ";\n";
    // The column index, where the body reads it (strided or index leaves, argmax).
    if (v_.vw > 1) {
      code += in4 + "#pragma unroll\n" + in4 + "for (int e = 0; e < " + S(v_.vw) + "; ++e) {\n";
      if (names_col(body))
        code += in4 + "  const U col = " + (peel_ ? pcol : "ch * " + S(v_.vw) + "u + (U)e") + ";\n";
      code += body + in4 + "}\n";
    } else {
      code += (names_col(body) ? in3 + "const U col = ch;\n" : "") + body;
    }
    for (int o : vouts) {
      int a = e_.out_access(o);
      if (packed(a))
        code += packed_store(o, in4);
      else
        code += in4 + vstore(vec_t(a), chunk_addr(a), "ow" + S(o));
    }
    if (peel_) {
      code += in3 + "} else {\n" + in4 + "#pragma unroll\n" + in4 + "for (int e = 0; e < " +
              S(v_.vw) + "; ++e) {\n";
      code += in4 + "  const U col = " + pcol + ";\n" + in4 + "  if (col < cols) {\n";
      code += part + in4 + "  }\n" + in4 + "}\n" + in3 + "}\n";
    }
    // Prefetch 1: the last pass to read a retained chunk reloads its registers with the next
    // row's chunk, in flight while this row's later chunks, stores and reductions proceed.
    if (pf_ == 1)
      for (int leaf : vleaves)
        if (retained_.count(leaf) && last_read_[leaf] == q)
          code += in3 + "if (nrv) lr" + S(leaf) +
                  "[k] = " + vload(leaf_vec_t(leaf), chunk_addr(leaf, "n")) + ";\n";
    code += in2 + "}\n" + ind + "}\n";
    return code;
  }

  // The walk step of a vector-column thread: for each of its uf walked rows (ch = cb + k), one
  // cv_-wide vector of every vector leaf, all loaded first; then per row the one-column body for
  // each of the thread's columns e in turn (each column's sum in the scalar kernel's order).
  std::string cv_walk(int q, const std::vector<int>& nodes, bool store, int uf,
                      const std::string& cond, const std::string& ind) {
    std::set<int> vleaves, none;
    const std::string in2 = ind + "  ", in3 = ind + "    ";
    const std::string body = col_body(q, nodes, store, nullptr, in3, vleaves, none);
    // (The compute loop names ch only where its guard or body does.)
    auto head = [&](bool ch) {
      return ind + "#pragma unroll\n" + ind + "for (int k = 0; k < " + S(uf) + "; ++k) {\n" +
             (ch ? ind + "  const U ch = cb + (U)(k * " + S(nl()) + ");\n" : "") + in2 + "if (" +
             cond + ") {\n";
    };
    std::string code, loads;
    j_used_.assign(R_, false);
    for (int leaf : vleaves) {
      code += ind + cv_vec_t(leaf) + " lw" + S(leaf) + "[" + S(uf) + "];\n";
      std::string t = e_.terms(leaf, K_, R_, [&](int d) {
        if (R_ - K_ == 1) return std::string("(I)col");
        j_used_[d] = true;
        return "j" + S(d);
      });
      rb_used_[leaf] = true;
      loads += in3 + "lw" + S(leaf) + "[k] = " +
               vload(cv_vec_t(leaf),
                     e_.ptr(leaf) + " + (b" + S(leaf) + (t.empty() ? "" : " + " + t) + ")") +
               ";\n";
    }
    if (!vleaves.empty()) {
      e_.need("vec");
      code += head(true) + in3 + "const U col = ch;\n";
      if (R_ - K_ >= 2) code += e_.decompose("col", K_, R_, j_used_, "j", in3);
      code += loads + in2 + "}\n" + ind + "}\n";
    }
    const bool col = names_col(body);
    code += head(col || mentions(cond, "ch")) + (col ? in3 + "const U col = ch;\n" : "") +
            wrap(body, in3, {});
    return code + in2 + "}\n" + ind + "}\n";
  }

  bool shifted(int leaf) const { return peel_ && leaf < 64 && ((v_.shifted >> leaf) & 1); }

  // Chunk ch of a staged leaf: one vector of the block's tile (stage_setup says its layout),
  // or, where the launch gave too little shared memory, its vw elements from global memory at
  // the leaf's reduced stride (bf16 words: two columns a word, the low one first).
  std::string staged_load(int leaf, const std::string& name, const std::string& ind) {
    const std::string T = leaf_vec_t(leaf), W = S(v_.vw), dst = name + "[k]";
    const std::string at = "T" + S(leaf) + " + ((U)ch * " + S(v_.stage + 1) + "u + " +
                           (v_.rpb > 1 ? "grp" : "0u") + ") * " + W + "u";
    auto el = [&](const std::string& e) {
      std::string t =
          e_.terms(leaf, K_, R_, [&](int) { return "(I)(ch * " + W + "u + " + e + ")"; });
      return e_.ptr(leaf) + "[" + rb(leaf) + " + " + t + "]";
    };
    std::string c = ind + "if (stg) {\n" + ind + "  " + dst + " = " + vload(T, at) + ";\n";
    c += ind + "} else {\n" + ind + "  #pragma unroll\n";
    if (words(leaf))
      c += ind + "  for (int e = 0; e < " + S(v_.vw / 2) + "; ++e) " + dst + ".v[e] = (unsigned)" +
           el("2 * e") + " | ((unsigned)" + el("2 * e + 1") + " << 16);\n";
    else
      c += ind + "  for (int e = 0; e < " + W + "; ++e) " + dst + ".v[e] = " + el("e") + ";\n";
    return c + ind + "}\n";
  }

  // A whole chunk of a leaf `dshift` elements past the grid: the two aligned vectors it spans,
  // its columns picked in registers (bf16 words at an odd shift: one byte permute a word).
  std::string realigned_load(int leaf, const std::string& name, const std::string& ind) {
    const int W = v_.vw, d = v_.dshift;
    const std::string T = leaf_vec_t(leaf);
    const std::string at =
        e_.ptr(leaf) + " + (" + rb(leaf) + " - (I)sh - " + S(d) + " + (I)(ch * " + S(W) + "u))";
    std::string code = ind + "{\n" + ind + "  const " + T + " x0 = " + vload(T, at) + ";\n";
    code += ind + "  const " + T + " x1 = " + vload(T, at + " + " + S(W)) + ";\n";
    auto src = [&](int i, int n) {  // element i of the 2n-element concatenation x0, x1
      return (i < n ? "x0.v[" + S(i) : "x1.v[" + S(i - n)) + "]";
    };
    if (words(leaf)) {
      const int n = W / 2;
      for (int j = 0; j < n; ++j) {
        std::string w = d % 2 == 0 ? src(d / 2 + j, n)
                                   : "__byte_perm(" + src((d - 1) / 2 + j, n) + ", " +
                                         src((d + 1) / 2 + j, n) + ", 0x5432)";
        code += ind + "  " + name + "[k].v[" + S(j) + "] = " + w + ";\n";
      }
    } else {
      for (int e = 0; e < W; ++e)
        code += ind + "  " + name + "[k].v[" + S(e) + "] = " + src(d + e, W) + ";\n";
    }
    return code + ind + "}\n";
  }

  // Whether a column body reads `col` (strided or index leaves, argmax).
  static bool names_col(const std::string& body) { return mentions(body, "col"); }

  // The partial chunk of a peeled row into <name>[k]: its columns in the row, element by
  // element (no access outside the row: the row's ends need not be 16-byte aligned, and the
  // allocation's end need not be either), zero elsewhere.
  std::string partial_load(int leaf, const std::string& name, const std::string& ind) {
    const std::string T = Emitter::storage_type(e_.storage_dtype(leaf)), W = S(v_.vw);
    const std::string el =
        "c < cols ? " + e_.ptr(leaf) + "[" + rb(leaf) + " + (I)c] : (" + T + ")0;\n";
    std::string code = ind + "{\n";
    const bool w = words(leaf);
    if (w) code += ind + "  " + T + " t[" + W + "];\n";
    code += ind + "  #pragma unroll\n" + ind + "  for (int e = 0; e < " + W + "; ++e) {\n";
    code += ind + "    const U c = ch * " + W + "u + (U)e - sh;\n";
    code += ind + "    " + (w ? "t[e] = " : name + "[k].v[e] = ") + el + ind + "  }\n";
    if (w)
      code += ind + "  #pragma unroll\n" + ind + "  for (int e = 0; e < " + S(v_.vw / 2) +
              "; ++e) " + name +
              "[k].v[e] = (unsigned)t[2 * e] | ((unsigned)t[2 * e + 1] << 16);\n";
    return code + ind + "}\n";
  }

  // Chunks a lane of a loop walk takes a step: 4 (2 in 1024-thread blocks: 64 registers); a
  // thread a row (column reductions) takes `unroll`, default 1.
  int loop_chunks() const {
    if (!staged_.empty()) return std::max(1, v_.unroll);  // tile reads: shared-memory latency
    return v_.tpr == 1 ? std::max(1, v_.unroll) : v_.block() >= 1024 ? 2 : 4;
  }
  // The loop walk of a lane from chunk `start` to `end`, uf chunks a step. A thread a row with
  // uf > 1 first takes whole steps with no guards, so the compiler issues their (strided,
  // scalar) loads together before the in-order accumulation, then guarded last steps.
  std::string steps(int q, const std::vector<int>& nodes, bool store, int uf,
                    const std::string& start, const std::string& end, const std::string& ind) {
    const std::string stride = S(uf * nl()) + "u";
    std::string code;
    if (v_.tpr == 1 && uf > 1) {
      code += ind + "U cb = " + start + ";\n";
      code +=
          ind + "for (; cb + " + S((uf - 1) * nl()) + "u < " + end + "; cb += " + stride + ") {\n";
      code += walk(q, nodes, store, nullptr, uf, "true", ind + "  ");
      code += ind + "}\n" + ind + "for (; cb < " + end + "; cb += " + stride + ") {\n";
    } else {
      code += ind + "for (U cb = " + start + "; cb < " + end + "; cb += " + stride + ") {\n";
    }
    code += walk(q, nodes, store, nullptr, uf, "ch < " + end, ind + "  ");
    return code + ind + "}\n";
  }

  std::string row_nodes(const std::vector<int>& ids, const std::string& ind) {
    std::string code;
    for (int id : ids) {
      const GNode& n = g_.nodes[id];
      std::string raw, lin;
      if (n.leaf >= 0) lin = rb(n.leaf);
      if (is_load(n))
        raw = "(rv ? " + e_.ptr(n.leaf) + "[" + lin + "] : (" +
              Emitter::storage_type(g_.leaves[n.leaf].dtype) + ")0)";
      code += ind + e_.row_node(id, raw, lin);
    }
    return code;
  }

  std::string acc_decls(const std::vector<int>& rs, const std::string& ind, bool declare = true) {
    std::string code;
    if (cv_) {  // arrays, set element by element
      for (int r : rs) {
        if (!declare || !ax_.insert(r).second) continue;
        code += ind + e_.acc(r).type + " ax" + S(r) + "[" + S(cv_) + "];\n";
        if (e_.acc(r).index) code += ind + "long long axi" + S(r) + "[" + S(cv_) + "];\n";
      }
      const int keep = cv_;
      cv_ = 0;
      std::string init = acc_decls(rs, ind, false);
      cv_ = keep;
      return code + wrap(init, ind, {});
    }
    for (int r : rs) {
      code +=
          ind + (declare ? e_.acc(r).type + " " : "") + "a" + S(r) + " = " + e_.acc_init(r) + ";\n";
      if (e_.acc(r).index) code += ind + (declare ? "long long " : "") + "ai" + S(r) + " = -1;\n";
    }
    return code;
  }

  // Combines the accumulators of `rs` across the tpr lanes of each row; every lane ends with
  // the row's result.
  std::string lanes(const std::vector<int>& rs, const std::string& ind) {
    if (v_.cs > 1) return wrap(slices(rs, ind), ind, {});  // (pairs: a column at a time)
    if (v_.tpr == 1 || rs.empty()) return "";
    std::string code = ind + "#pragma unroll\n" + ind +
                       "for (int m = " + S(std::min(v_.tpr, 32) / 2) + "; m > 0; m >>= 1) {\n";
    for (int r : rs) {
      Acc a = e_.acc(r);
      code += ind + "  const " + a.type + " o" + S(r) + " = __shfl_xor_sync(0xffffffffu, a" + S(r) +
              ", m);\n";
      if (a.index)
        code += ind + "  const long long oi" + S(r) + " = __shfl_xor_sync(0xffffffffu, ai" + S(r) +
                ", m);\n";
      code += combine(r, "o" + S(r), "oi" + S(r), ind + "  ");
    }
    code += ind + "}\n";
    if (v_.tpr <= 32) return code;
    // Warp w of row group grp writes slot grp * W + w (= threadIdx.x >> 5).
    int W = v_.tpr / 32;
    // With par_ the slots are doubled and row-loop iteration `it` uses half it & 1: a lane
    // writes a half again two iterations later, after passing the next iteration's barrier,
    // which every lane reaches only after its reads here, so no barrier after the reads.
    std::string n = S(W * v_.rpb), at = v_.rpb > 1 ? "grp * " + S(W) + "u + " : "";
    const std::string dim = par_ ? "[2]" : "", half = par_ ? "[it & 1u]" : "";
    std::string write, read;
    for (int r : rs) {
      Acc a = e_.acc(r);
      shared_.insert("__shared__ " + a.type + " s" + S(r) + dim + "[" + n + "];");
      write += ind + "  s" + S(r) + half + "[threadIdx.x >> 5] = a" + S(r) + ";\n";
      read += ind + "a" + S(r) + " = s" + S(r) + half + "[" + at + "0];\n";
      if (a.index) {
        shared_.insert("__shared__ long long si" + S(r) + dim + "[" + n + "];");
        write += ind + "  si" + S(r) + half + "[threadIdx.x >> 5] = ai" + S(r) + ";\n";
        read += ind + "ai" + S(r) + " = si" + S(r) + half + "[" + at + "0];\n";
      }
    }
    code += ind + "if ((threadIdx.x & 31) == 0) {\n" + write + ind + "}\n";
    code += ind + "__syncthreads();\n" + read;
    code += ind + "for (int w = 1; w < " + S(W) + "; ++w) {\n";
    for (int r : rs)
      code += combine(r, "s" + S(r) + half + "[" + at + "w]", "si" + S(r) + half + "[" + at + "w]",
                      ind + "  ");
    code += ind + "}\n" + (par_ ? "" : ind + "__syncthreads();\n");
    return code;
  }

  // Column slices: each thread's accumulators through shared memory (slot t = slice * rpb +
  // column), each thread then combining its column's slices in slice order (the same on every
  // run, and every slice ends with the column's result). One reduction at a time through one
  // 8-byte slot a thread (and one for argmax's index): a group of many reductions (sum, max,
  // argmax, ...) at 1024 threads would pass the 48 KB of static shared memory otherwise.
  std::string slices(const std::vector<int>& rs, const std::string& ind) {
    if (rs.empty()) return "";
    const std::string n = S(v_.rpb * v_.cs), at = v_.rpb > 1 ? "grp" : "0";
    const std::string other = "[w * " + S(v_.rpb) + " + " + at + "]";
    shared_.insert("__shared__ long long lm_cs[" + n + "];");
    std::string code;
    for (int r : rs) {
      Acc a = e_.acc(r);
      const std::string v = "((" + a.type + "*)lm_cs)";
      code += ind + v + "[threadIdx.x] = a" + S(r) + ";\n";
      if (a.index) {
        shared_.insert("__shared__ long long lm_csi[" + n + "];");
        code += ind + "lm_csi[threadIdx.x] = ai" + S(r) + ";\n";
      }
      code += ind + "__syncthreads();\n" + ind + "a" + S(r) + " = " + v + "[" + at + "];\n";
      if (a.index) code += ind + "ai" + S(r) + " = lm_csi[" + at + "];\n";
      code += ind + "#pragma unroll\n" + ind + "for (int w = 1; w < " + S(v_.cs) + "; ++w) {\n";
      code += combine(r, v + other, a.index ? "lm_csi" + other : "0", ind + "  ");
      code += ind + "}\n" + ind + "__syncthreads();\n";
    }
    return code;
  }

  // Combines value b (index bi) into the accumulator of reduction r: max.NaN / min.NaN for
  // float max and min where available (lm_max's two NaN tests compiled to branches: a
  // 4096-column f32 softmax lane took 12 of them between its shuffles and shared reads).
  std::string combine(int r, const std::string& b, const std::string& bi, const std::string& ind) {
    std::string c = ind + e_.acc_combine(r, "a" + S(r), "ai" + S(r), b, bi) + "\n";
    const Combine cb = prim(g_.nodes[r].op).combine;
    if (!row_ptx() || (cb != Combine::Max && cb != Combine::Min) || e_.acc(r).type != "float")
      return c;
    return "#if __CUDA_ARCH__ >= 800\n" + ind + "asm(\"" + (cb == Combine::Max ? "max" : "min") +
           ".NaN.f32 %0, %0, %1;\" : \"+f\"(a" + S(r) + ") : \"f\"(" + b + "));\n#else\n" + c +
           "#endif\n";
  }

  std::string row_outputs(const std::string& cond, const std::string& ind) {
    std::string code;
    for (int o = 0; o < int(g_.outputs.size()); ++o) {
      int id = g_.outputs[o].node;
      if (g_.nodes[id].space != Space::Row) continue;
      int a = e_.out_access(o);
      code += ind + "  " + e_.ptr(a) + "[" + rb(a) +
              "] = " + e_.store(e_.storage_dtype(a), "r" + S(id)) + ";\n";
    }
    return code.empty() ? "" : wrap(ind + "if (" + cond + ") {\n" + code + ind + "}\n", ind, {});
  }

  std::string header(const std::string& name) {
    std::string lb = S(v_.block()) + (v_.minb > 0 ? ", " + S(v_.minb) : std::string());
    std::string h =
        "extern \"C\" __global__ void __launch_bounds__(" + lb + ") " + name + "(const P p) {\n";
    h += e_.decls();
    h += "  const U rows = " + e_.uvalue({ValueSlot::Rows}) + ";\n";
    if (cols_used_) h += "  const U cols = " + e_.uvalue({ValueSlot::Cols}) + ";\n";
    if (cols_used_ && !v_.split && !peel_)
      h += "  const U nch = cols" + (v_.vw > 1 ? " / " + S(v_.vw) + "u" : std::string()) + ";\n";
    if (v_.cs > 1) {  // column slices: a warp's threads adjacent columns of one slice
      h += "  const int lane = (int)(threadIdx.x / " + S(v_.rpb) + "u);\n";
      if (v_.rpb > 1) h += "  const U grp = threadIdx.x % " + S(v_.rpb) + "u;\n";
    } else {
      if (v_.tpr > 1) h += "  const int lane = (int)(threadIdx.x & " + S(v_.tpr - 1) + "u);\n";
      if (v_.rpb > 1) h += "  const U grp = threadIdx.x / " + S(v_.tpr) + "u;\n";
    }
    for (auto& s : shared_) h += "  " + s + "\n";
    return h;
  }

  // ---- one kernel for all passes
  // -----------------------------------------------------------------
  std::string single() {
    reset_kernel();
    par_ = v_.sync1 && v_.tpr > 32;
    std::vector<int> targets;
    for (auto& o : g_.outputs) targets.push_back(o.node);
    std::vector<bool> need = closure(g_, targets);
    const bool persistent = v_.k > 0;
    RowPlan plan = row_plan(g_, e_, v_.remat);
    const std::vector<int>& home = plan.home;
    std::vector<bool> cached(g_.nodes.size(), false);
    if (persistent) cached = plan.cached, retained_ = plan.retained;
    // Prefetch: the retained vectors of the block's next row (row + the grid's rows) load
    // while this row reduces and stores: 1 into the same registers, each chunk right after
    // the last pass's read of it; 2 into a second set (nx) at the top of the row, copied
    // over at its end. The first row loads before the loop; the walks load no retained leaf.
    pf_ = persistent && !retained_.empty() && !peel_ ? v_.prefetch : 0;
    last_read_.clear();
    if (pf_) {
      loaded_ = retained_;
      for (int q = 0; q <= last_; ++q)
        for (int id : full_in(need))
          if ((home[id] == q || plan.again[q][id]) && is_load(g_.nodes[id]) &&
              retained_.count(g_.nodes[id].leaf))
            last_read_[g_.nodes[id].leaf] = q;
    }
    const std::string in = "    ";
    std::string body, outer;
    for (int id = 0; id < int(g_.nodes.size()); ++id)
      if (cached[id]) body += in + e_.ntype(id) + " c" + S(id) + "[" + S(v_.k * v_.vw) + "];\n";
    for (int leaf : retained_) {
      e_.need("vec");
      std::string d = leaf_vec_t(leaf) + " lr" + S(leaf) + "[" + S(v_.k) + "];\n";
      if (pf_ == 2) d += "  " + leaf_vec_t(leaf) + " nx" + S(leaf) + "[" + S(v_.k) + "];\n";
      (pf_ ? outer : body) += (pf_ ? "  " : in) + d;
    }
    for (int q = 0; q <= last_; ++q) {
      std::vector<int> rown, defs, rs = reduces_of_pass(q, need);
      std::string seg;
      for (int id = 0; id < int(g_.nodes.size()); ++id)
        if (need[id] && g_.nodes[id].space == Space::Row && g_.nodes[id].pass == q) {
          defs.push_back(id);
          if (is_reduce(g_.nodes[id].op)) {
            seg += row_nodes(rown, in), rown.clear();
            seg += in + "const " + e_.ntype(id) + " r" + S(id) + " = " +
                   e_.acc_final(id, "a" + S(id), "ai" + S(id)) + ";\n";
          } else {
            rown.push_back(id);
          }
        }
      seg += row_nodes(rown, in);
      body += wrap(seg, in, defs);
      body += acc_decls(rs, in);
      std::vector<int> nodes;
      if (persistent) {
        again_ = plan.again[q];
        for (int id : full_in(need))
          if (home[id] == q || again_[id]) nodes.push_back(id);
      } else {
        std::vector<int> t;
        for (int r : rs) t.push_back(g_.nodes[r].a);
        if (q == last_)
          for (auto& o : g_.outputs)
            if (g_.nodes[o.node].space == Space::Full) t.push_back(o.node);
        nodes = full_in(closure(g_, t, [&](int id) { return g_.nodes[id].space == Space::Row; }));
      }
      if (!nodes.empty()) {
        cols_used_ = true;
        if (persistent) {
          body += in + "{\n" + in + "  const U cb = (U)" + lane_ + ";\n";
          body += walk(q, nodes, true, &cached, v_.k, "rv && ch < nch", in + "  ");
          body += in + "}\n";
        } else {
          int uf = loop_chunks();
          body += in + "if (rv) {\n";
          body += steps(q, nodes, q == last_, uf, lane_, "nch", in + "  ");
          body += in + "}\n";
        }
      }
      body += lanes(rs, in);
    }
    again_.clear(), loaded_.clear();
    body += row_outputs("rv && " + lane0_, in);
    const std::string grp = v_.rpb > 1 ? " + grp" : "";
    std::string next, first, swap;
    if (pf_) {
      next = in + "const U nrow = row + (U)gridDim.x * " + S(v_.rpb) + "u;\n" + in +
             "const bool nrv = nrow < rows;\n";
      std::string loads = pf_ == 2 ? retained_loads("nx", "n", "nrv", in) : "";
      first = retained_loads("lr", "", "rv", "    ");
      const std::string later = loads + body;
      next += row_setup(in, "nrow", "n", &later) + loads;
      first = "  {\n    const U row = (U)blockIdx.x * " + S(v_.rpb) + "u" + grp + ";\n" +
              "    const bool rv = row < rows;\n" + row_setup(in, "row", "", &first) + first +
              "  }\n";
      if (pf_ == 2) {
        swap = in + "#pragma unroll\n" + in + "for (int k = 0; k < " + S(v_.k) + "; ++k) {\n";
        for (int leaf : retained_) swap += in + "  lr" + S(leaf) + "[k] = nx" + S(leaf) + "[k];\n";
        swap += in + "}\n";
      }
    }
    // Staged tiles: the block copies its rows' tiles (rows rb .. rb + stage - 1; thread row cr),
    // then every lane reads them; a barrier after the row lets the next tile overwrite them.
    std::string stage_in, stage_out;
    if (!staged_.empty()) {
      outer += stage_setup(e_, v_);
      const std::string in3 = in + "    ";
      std::string copy = stage_copy(e_, v_, in3);
      for (int a : staged_) rb(a);
      copy = row_setup(in3, "srow", "s", &copy) + copy;
      stage_in = in + "if (stg) {\n" + in + "  const U cr = threadIdx.x % " + S(v_.stage) + "u;\n" +
                 in + "  const U srow = rb + cr;\n" + in + "  if (srow < rows) {\n" + copy + in +
                 "  }\n" + in + "}\n" + in + "__syncthreads();\n";
      stage_out = in + "__syncthreads();\n";
    }
    std::string k = header("loom_kernel") + outer + first;
    // Vector columns: rb counts groups of cv_ rows (rows % cv_ == 0: the launcher's rule).
    const std::string nrg = cv_ ? "rows / " + S(cv_) + "u" : "rows";
    k += "  for (U rb = (U)blockIdx.x * " + S(v_.rpb) + "u" + (par_ ? ", it = 0" : "") + "; rb < " +
         nrg + "; rb += (U)gridDim.x * " + S(v_.rpb) + "u" + (par_ ? ", it ^= 1u" : "") + ") {\n";
    k += "    const U row = " + (cv_ ? "(rb" + grp + ") * " + S(cv_) + "u" : "rb" + grp) + ";\n";
    k += "    const bool rv = row < rows;\n" + stage_in;
    const std::string rest = next + body + swap + stage_out;
    // Peeled rows: this row's shift and its chunks (whole ones fc0 .. fc1 - 1).
    std::string peel;
    if (peel_ && cols_used_) {
      const std::string w = S(v_.vw) + "u";
      peel = in + "const U sh = (U)" + rb(v_.shift) + " & " + S(v_.vw - 1) + "u;\n";
      peel += in + "const U nch = (cols + sh + " + S(v_.vw - 1) + "u) / " + w + ";\n";
      // Realigned leaves read a vector past a whole chunk's end: whole only where that stays
      // in the row (a view's last row may end at its storage's end).
      const std::string end = v_.shifted ? "(cols + sh + " + S(v_.dshift) + "u) / " + w + " - 1u"
                                         : "(cols + sh) / " + w;
      peel += in + "const U fc0 = sh ? 1u : 0u, fc1 = " + end + ";\n";
    }
    k += row_setup(in, "row", "", pf_ ? &rest : nullptr) + peel + rest + "  }\n}\n";
    return prune_rows(k);
  }

  // ---- split rows: kernel of pass q
  // --------------------------------------------------------------
  std::string split(int q, bool final_rows) {
    reset_kernel();
    par_ = false, pf_ = 0;  // no row loop; barriers follow each combine anyway
    const int NR = int(reduces_.size());
    const bool acc = q < last_, rows_here = q == last_ || final_rows;
    std::vector<int> targets;
    for (int r : reduces_)
      if (acc && g_.nodes[g_.nodes[r].a].pass == q) targets.push_back(g_.nodes[r].a);
    for (auto& o : g_.outputs) {
      bool full = g_.nodes[o.node].space == Space::Full;
      if ((full && q == last_) || (!full && rows_here)) targets.push_back(o.node);
    }
    std::vector<bool> need =
        closure(g_, targets, [&](int id) { return is_reduce(g_.nodes[id].op); });
    std::vector<bool> all(g_.nodes.size(), true);
    std::vector<int> rs = acc ? reduces_of_pass(q, all) : std::vector<int>{};
    // Partials of columns with comb: segment-major, a warp's columns adjacent.
    const bool segmajor = v_.tpr == 1 && v_.comb > 0;
    auto slot = [&](int r, const std::string& row, const std::string& seg) {
      std::string base = seg.empty() ? "(unsigned long long)" + row
                         : segmajor  ? "((unsigned long long)" + seg + " * rows + " + row + ")"
                                    : "((unsigned long long)" + row + " * gridDim.y + " + seg + ")";
      return "(" + base + " * " + S(NR) + " + " + S(ord(r)) + ") * 2";
    };
    const std::string in = "  ";
    // A row's scratch slots: with vector columns, of the thread's row e.
    const std::string row = cv_ ? "(row + (U)e)" : "row";
    std::string body, seg;
    // Row values known before this pass: reductions finished by earlier launches come from FIN.
    std::vector<int> rown, defs;
    auto flush_rows = [&](const std::string& ind) {
      seg += row_nodes(rown, ind);
      defs.insert(defs.end(), rown.begin(), rown.end());
      rown.clear();
    };
    for (int id = 0; id < int(g_.nodes.size()); ++id) {
      if (!need[id] || g_.nodes[id].space != Space::Row || g_.nodes[id].pass > q) continue;
      if (is_reduce(g_.nodes[id].op)) {
        flush_rows(in);
        std::string w = e_.scratch(kFinals) + "[" + slot(id, row, "") + "]";
        std::string wi = e_.scratch(kFinals) + "[" + slot(id, row, "") + " + 1]";
        seg += in + "const " + e_.ntype(id) + " r" + S(id) + " = rv ? " +
               e_.acc_final(id, e_.acc_from_word(id, w), wi) + " : (" + e_.ntype(id) + ")0;\n";
        defs.push_back(id);
      } else {
        rown.push_back(id);
      }
    }
    flush_rows(in);
    body += wrap(seg, in, defs);
    seg.clear(), defs.clear();
    body += acc_decls(rs, in);
    std::vector<int> nodes = full_in(need);
    if (!nodes.empty()) {
      cols_used_ = true;
      body += in + "if (rv) {\n";
      body += steps(q, nodes, q == last_, loop_chunks(), "ch0 + " + lane_, "ch1", in + "  ");
      body += in + "}\n";
    }
    if (acc) {
      body += lanes(rs, in);
      std::string part = e_.scratch(kPartials), fin = e_.scratch(kFinals);
      std::string cnt = e_.scratch(kCounters);
      std::string pw = in + "if (rv && " + lane0_ + ") {\n";
      for (int r : rs) {
        pw += in + "  " + part + "[" + slot(r, row, "blockIdx.y") +
              "] = " + e_.acc_to_word(r, "a" + S(r)) + ";\n";
        if (e_.acc(r).index)
          pw += in + "  " + part + "[" + slot(r, row, "blockIdx.y") + " + 1] = ai" + S(r) + ";\n";
      }
      body += wrap(pw + in + "}\n", in, {});
      body += in + "__threadfence();\n" + in + "__syncthreads();\n";
      shared_.insert("__shared__ unsigned lm_ticket;");
      body += in + "if (threadIdx.x == 0) lm_ticket = atomicAdd(" + cnt + " + blockIdx.x, 1u);\n";
      body += in + "__syncthreads();\n";
      // The last block of this row block to finish combines every segment, in segment order
      // per lane and then across lanes: the same order on every run.
      body += in + "if (lm_ticket == gridDim.y - 1) {\n";
      std::string in2 = in + "  ";
      body += in2 + "__threadfence();\n" + acc_decls(rs, in2, false);
      body += in2 + "if (rv) {\n";
      auto word = [&](int r, const std::string& s, bool index) {
        return "((volatile long long*)" + part + ")[" + slot(r, row, s) + (index ? " + 1]" : "]");
      };
      const std::string step = S(nl()) + "u";
      std::string s0 = lane_, lvl;  // (vector columns: each of the thread's columns in turn)
      if (v_.tpr == 1 && v_.comb > 1) {
        // Columns: comb partials a thread in flight, all loaded before any is accumulated, then
        // the rest one at a time; segment order either way. (nvcc 13 already unrolls the plain
        // loop 16 deep with its loads grouped, nvdisasm sm_90: this keeps the batching from
        // depending on that, with partials segment-major so a warp's loads are adjacent.)
        const int B = v_.comb;
        // One base pointer and a stride, both set in the loop (a 64-bit index a load, or the
        // stride held from before the loop: ptxas sm_90 40 registers for a 1000-column f32
        // mean, against 32 this way; the level-1 walk of the same kernel runs 8 blocks an SM
        // only within 32).
        lvl += in2 + "  U s = " + lane_ + ";\n";
        lvl += in2 + "  for (; s + " + S(B - 1) + "u * " + step + " < gridDim.y; s += " + S(B) +
               "u * " + step + ") {\n";
        lvl += in2 + "    const volatile long long* q = (volatile long long*)" + part +
               " + ((unsigned long long)s * rows + " + row + ") * " + S(NR * 2) + "u;\n";
        lvl += in2 + "    const unsigned long long qs = (unsigned long long)rows * " +
               S(NR * 2 * nl()) + "u;\n";
        auto word_k = [&](int r, bool index) {
          return "q[k * qs + " + S(ord(r) * 2 + (index ? 1 : 0)) + "u]";
        };
        std::string loads, adds;
        for (int r : rs) {
          lvl += in2 + "    long long w" + S(r) + "[" + S(B) + "];\n";
          loads += in2 + "      w" + S(r) + "[k] = " + word_k(r, false) + ";\n";
          std::string wi = "0";
          if (e_.acc(r).index) {
            lvl += in2 + "    long long wi" + S(r) + "[" + S(B) + "];\n";
            loads += in2 + "      wi" + S(r) + "[k] = " + word_k(r, true) + ";\n";
            wi = "wi" + S(r) + "[k]";
          }
          adds += in2 + "      " +
                  e_.acc_combine(r, "a" + S(r), "ai" + S(r),
                                 e_.acc_from_word(r, "w" + S(r) + "[k]"), wi) +
                  "\n";
        }
        const std::string loop =
            in2 + "    #pragma unroll\n" + in2 + "    for (int k = 0; k < " + S(B) + "; ++k) {\n";
        lvl += loop + loads + in2 + "    }\n" + loop + adds + in2 + "    }\n" + in2 + "  }\n";
        s0 = "s";
      }
      lvl += in2 + "  for (" + (s0 == "s" ? std::string() : "U s = " + s0) +
             "; s < gridDim.y; s += " + step + ") {\n";
      for (int r : rs)
        lvl += in2 + "    " +
               e_.acc_combine(r, "a" + S(r), "ai" + S(r), e_.acc_from_word(r, word(r, "s", false)),
                              word(r, "s", true)) +
               "\n";
      lvl += in2 + "  }\n";
      body += wrap(lvl, in2 + "  ", {}) + in2 + "}\n";
      body += lanes(rs, in2);
      std::string fw = in2 + "if (rv && " + lane0_ + ") {\n";
      for (int r : rs) {
        fw += in2 + "  " + fin + "[" + slot(r, row, "") + "] = " + e_.acc_to_word(r, "a" + S(r)) +
              ";\n";
        if (e_.acc(r).index)
          fw += in2 + "  " + fin + "[" + slot(r, row, "") + " + 1] = ai" + S(r) + ";\n";
      }
      body += wrap(fw + in2 + "}\n", in2, {});
      if (final_rows) {
        for (int id = 0; id < int(g_.nodes.size()); ++id) {
          if (!need[id] || g_.nodes[id].space != Space::Row || g_.nodes[id].pass <= q) continue;
          if (is_reduce(g_.nodes[id].op)) {
            flush_rows(in2);
            seg += in2 + "const " + e_.ntype(id) + " r" + S(id) + " = " +
                   e_.acc_final(id, "a" + S(id), "ai" + S(id)) + ";\n";
            defs.push_back(id);
          } else {
            rown.push_back(id);
          }
        }
        flush_rows(in2);
        body += wrap(seg, in2, defs);
        body += row_outputs("rv && " + lane0_, in2);
      }
      body += in2 + "if (threadIdx.x == 0) " + cnt + "[blockIdx.x] = 0;\n";
      body += in + "}\n";
    } else {
      body += row_outputs("rv && " + lane0_ + " && blockIdx.y == 0", in);
    }
    std::string k = header("loom_kernel_p" + S(q));
    const std::string r0 =
        "(U)blockIdx.x * " + S(v_.rpb) + "u" + (v_.rpb > 1 ? " + grp" : std::string());
    k += "  const U row = " + (cv_ ? "(" + r0 + ") * " + S(cv_) + "u" : r0) + ";\n";
    k += "  const bool rv = row < rows;\n";
    if (!nodes.empty()) {
      k += "  const U seglen = " + e_.uvalue({ValueSlot::SegLen}) + ";\n";
      k += "  const U c0 = (U)blockIdx.y * seglen;\n";
      k += "  const U c1 = c0 + seglen < cols ? c0 + seglen : cols;\n";
      k += "  const U ch0 = c0 / " + S(v_.vw) + "u, ch1 = c1 / " + S(v_.vw) + "u;\n";
    }
    k += row_setup(in) + body + "}\n";
    return prune_rows(k);
  }
};

}  // namespace

void generate_rows(const Group& g, const Variant& v, Generated& out) { RowGen(g, v).run(out); }

}  // namespace loom::cuda::gen

namespace loom::cuda {

int row_cache_bytes(const Group& g, int remat, int vw, bool retained_only, uint64_t novec) {
  // The launcher asks on every launch (about 1.8 us to plan a layer_norm): remembered per thread
  // by signature, which covers everything the answer depends on (ops, dtypes, stride classes).
  thread_local std::map<std::tuple<uint64_t, int, int, bool, uint64_t>, int> memo;
  std::tuple<uint64_t, int, int, bool, uint64_t> key{g.signature, remat, vw, retained_only, novec};
  if (g.signature != 0) {
    auto it = memo.find(key);
    if (it != memo.end()) return it->second;
    if (memo.size() > 4096) memo.clear();
  }
  gen::Emitter e(g);
  e.novec = novec;
  gen::RowPlan p = gen::row_plan(g, e, remat);
  int bytes = 0;
  for (size_t i = 0; i < p.cached.size(); ++i)
    if (p.cached[i] && !retained_only)
      bytes += itemsize(compute_dtype(g.nodes[i].dtype)) > 4 ? 8 : 4;
  for (int leaf : p.retained) {
    int isz = int(itemsize(g.leaves[leaf].dtype));
    bytes += vw > 0 ? (vw * isz + 3) / 4 * 4 / vw : isz;
  }
  if (g.signature != 0) memo.emplace(key, bytes);
  return bytes;
}

}  // namespace loom::cuda
