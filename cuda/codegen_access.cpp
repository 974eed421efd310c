// The row kernels' state, addressing and chunk vectors (RowContext, codegen_rows.h).
#include <cctype>

#include "cuda/codegen_rows.h"
#include "tensor/error.h"
#include "tensor/knobs.h"

namespace loom::cuda::gen {

// LOOM_CUDA_ROW_PTX=0 turns off, for GPU A/B runs, the sm_80+ instructions the row kernels use
// where the portable helpers cost several: a NaN-propagating max/min accumulate and lane
// combine (max.NaN.f32, one instruction for lm_max's compares) and packed f32 -> bf16/f16 stores
// (cvt.rn.bf16x2.f32: two columns an instruction for lm_f2b's eight). A bf16 softmax's PTX came
// near the issue limit at the copy's bandwidth, not just short of bytes in flight. Read once;
// older GPUs compile the portable helpers (#if).
bool row_ptx() {
  static const bool on = knob_flag(Knob::CudaRowPtx);
  return on;
}

// LOOM_CUDA_ROW_NARROW (default on; 0: u16 vectors): bf16 row elements cost fewer instructions.
// Unit-stride bf16 leaves are held as 32-bit words, a column converted with one shift or mask
// (u16 vectors take an unpack, a widen and a shift, in every pass that recomputes x); a bf16
// cast only stored skips lm_rb (its store rounds once). A bf16 element has few issue slots at
// the copy's bandwidth, and a layer_norm's PTX used most of them. Read once.
bool row_narrow() {
  static const bool on = knob_flag(Knob::CudaRowNarrow);
  return on;
}

// LOOM_CUDA_ROW_CONST (default on; 0: loaded every element): a leaf with one value a row is read
// once a row (row_const), not cached a column where a later pass reads it: a layer_norm
// backward's saved rstd took k * vw registers a lane for one value a row.
bool row_const_on() {
  static const bool on = knob_flag(Knob::CudaRowConst);
  return on;
}

RowContext::RowContext(const Group& g, const Variant& v) : g_(g), v_(v), e_(g) {
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
    LOOM_CHECK(v.tpr == 1 && v.k == 0 && v.vw == 1 && K_ >= 1 && (v.vec & (v.vec - 1)) == 0, Value,
               "cuda codegen: vector columns (vec ", v.vec,
               ") need a loop or split column reduction, got ", v.key());
    cv_ = v.vec;
  }
  for (auto& o : g.outputs) (g.nodes[o.node].space == Space::Full ? full_out_ : row_out_) = true;
  if (v.stage > 0 && !v.split)
    for (int a : stage_leaves(e_)) staged_.insert(a);
  for (int o = 0; o < int(g.outputs.size()); ++o)
    if (g.outputs[o].colsum)
      (g.nodes[g.outputs[o].node].space == Space::Full ? csf_ : csr_).push_back(o);
  LOOM_CHECK(!colsums() || (!v.split && v.stage == 0 && v.vec <= 1 && v.cs == 1 && v.shift < 0),
             Value, "cuda codegen: column sums need a row kernel of whole rows, got ", v.key());
}

void RowContext::finish(Generated& out, const std::string& kernels) {
  out.source = e_.prelude() + kernels;
  out.params = e_.spec();
  out.reduces = int(reduces_.size());
}

// The base of access a in the current row; with vector columns, of row + e (the bases b<a>
// are the thread's first row's; e steps the innermost kept dim).
std::string RowContext::rb(int a) {
  rb_used_[a] = true;
  if (!cv_ || e_.cls(a, K_ - 1) == Cls::Zero) return "b" + S(a);
  const std::string st =
      e_.cls(a, K_ - 1) == Cls::One ? "" : " * " + e_.value({ValueSlot::Stride, a, K_ - 1});
  return "(b" + S(a) + " + (I)e" + st + ")";
}

std::string RowContext::addr(int a) {
  std::string c = e_.terms(a, K_, R_, [&](int d) {
    if (R_ - K_ == 1) return std::string("(I)col");
    j_used_[d] = true;
    return "j" + S(d);
  });
  return c.empty() ? rb(a) : rb(a) + " + " + c;
}

void RowContext::reset_kernel() {
  e_.begin_kernel();
  rb_used_.assign(e_.accesses(), false);
  shared_.clear();
  rconst_.clear();
  cols_used_ = false;
  rx_.clear(), ax_.clear();
}

// Row decomposition over the kept dims and the row base of every access the kernel used.
// `pre` names another row's indices and bases (prefetch: "n" for nrow's nk<d>, nb<a>). With
// `uses`, only the bases that code names (prefetch: the prologue loads the input alone).
std::string RowContext::row_setup(const std::string& ind, const std::string& src,
                                  const std::string& pre, const std::string* uses) {
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
    code +=
        ind + "const I " + pre + "b" + S(a) + " = " + off(a) + (t.empty() ? "" : " + " + t) + ";\n";
  }
  return code;
}

// Whether `code` names `id` as a whole identifier.
bool RowContext::mentions(const std::string& code, const std::string& id) {
  auto word = [](char c) { return std::isalnum((unsigned char)c) || c == '_'; };
  for (size_t p = code.find(id); p != std::string::npos; p = code.find(id, p + 1))
    if ((p == 0 || !word(code[p - 1])) &&
        (p + id.size() == code.size() || !word(code[p + id.size()])))
      return true;
  return false;
}

std::vector<int> RowContext::full_in(const std::vector<bool>& need, int pass) const {
  std::vector<int> v;
  for (int i = 0; i < int(g_.nodes.size()); ++i)
    if (need[i] && g_.nodes[i].space == Space::Full && (pass < 0 || g_.nodes[i].pass == pass))
      v.push_back(i);
  return v;
}

std::vector<int> RowContext::reduces_of_pass(int q, const std::vector<bool>& need) const {
  std::vector<int> v;
  for (int r : reduces_)
    if (need[r] && g_.nodes[g_.nodes[r].a].pass == q) v.push_back(r);
  return v;
}

// A chunk load or store of `type` at `addr`. (Streaming .cs hints measured slower: plain
// accesses only.)
std::string RowContext::vload(const std::string& type, const std::string& addr) {
  return "*(const " + type + "*)(" + addr + ")";
}

std::string RowContext::vstore(const std::string& type, const std::string& addr,
                               const std::string& val) {
  return "*(" + type + "*)(" + addr + ") = " + val + ";\n";
}

std::string RowContext::chunk_addr(int a, const std::string& pre) {
  if (peel_) return e_.ptr(a) + " + (" + rb(a) + " - (I)sh + (I)(ch * " + S(v_.vw) + "u))";
  return e_.ptr(a) + " + (" + pre + rb(a) + " + (I)(ch * " + S(v_.vw) + "u))";
}

}  // namespace loom::cuda::gen
