// Column sums inside a row kernel (GOutput::colsum; RowContext, codegen_rows.h): a norm's
// weight and bias gradients summed over the rows in the kernel of dx, which reads x and dy
// anyway, and a loss's mean of its rows' terms in their kernel.
#include "cuda/codegen_rows.h"

namespace loom::cuda::gen {

namespace {
const char* kWidth = "CW";  // the partial row's length: a column a Full sum, then one a Row sum
}

// This thread's row group's partial row: its block's (of a persistent row, whose groups then
// add theirs together) or its own (of a looping row).
std::string RowContext::part_row() const {
  return "((U)blockIdx.x * " + S(v_.rpb) + "u + " + (v_.rpb > 1 ? "grp" : "0u") + ")";
}

std::string RowContext::cs_type() const {
  for (auto& o : g_.outputs)
    if (o.colsum && g_.nodes[o.node].dtype == DType::Float64) return "double";
  return "float";
}

// Before the row loop: the partials' pointer and width, and the sums a thread keeps. A looping
// row group zeroes its partial row (its elements are added in memory, by other lanes than the
// zeroing ones: a barrier).
std::string RowContext::colsum_decls(const std::string& ind) {
  if (!colsums()) return "";
  const std::string pt = cs_type(), cols = e_.uvalue({ValueSlot::Cols});
  std::string c = ind + pt + "* const CS = (" + pt + "*)" + e_.scratch(kPartials) + ";\n";
  c += ind + "const U " + kWidth + " = " + S(int(csf_.size())) + "u * " + cols + " + " +
       S(int(csr_.size())) + "u;\n";
  const int n = v_.k * v_.vw;
  if (v_.k > 0)  // a persistent row's lanes hold their columns' sums in registers
    for (int o : csf_) {
      const std::string t = e_.ntype(g_.outputs[o].node);
      c += ind + t + " cs" + S(o) + "[" + S(n) + "];\n" + ind + "#pragma unroll\n" + ind +
           "for (int i = 0; i < " + S(n) + "; ++i) cs" + S(o) + "[i] = (" + t + ")0;\n";
    }
  for (int o : csr_) c += ind + e_.ntype(g_.outputs[o].node) + " csr" + S(o) + " = 0;\n";
  if (v_.k == 0 && !csf_.empty()) {
    c += ind + "{\n" + ind + "  const U pi = " + part_row() + ";\n" + ind + "  if (pi < rows)\n" +
         ind + "    for (U c = (U)" + lane_ + "; c < " + kWidth + "; c += " + S(nl()) +
         "u) CS[(unsigned long long)pi * " + kWidth + " + c] = (" + pt + ")0;\n" + ind + "}\n" +
         ind + "__syncthreads();\n";
  }
  return c;
}

// Column `col` (chunk k, element e) of Full sum o's node value f, in a walk's store step.
std::string RowContext::colsum_add(int o, const std::string& f, const std::string& ind) {
  const int i = int(std::find(csf_.begin(), csf_.end(), o) - csf_.begin());
  if (v_.k > 0)
    return ind + "cs" + S(o) + (v_.vw > 1 ? "[k * " + S(v_.vw) + " + e]" : "[k]") + " += " + f +
           ";\n";
  return ind + "CS[(unsigned long long)" + part_row() + " * " + kWidth + " + " + S(i) +
         "u * cols + col] += (" + cs_type() + ")" + f + ";\n";
}

// After the row loop: a persistent block's row groups add their sums into the block's partial
// row in group order (a barrier a group: each lane reads what the same lane of the group
// before wrote); a looping row group writes its Row sums beside the columns it added up.
std::string RowContext::colsum_parts(const std::string& ind) {
  if (!colsums()) return "";
  const std::string pt = cs_type(), grp = v_.rpb > 1 ? "grp" : "0u";
  const std::string nf = csf_.empty() ? "" : S(int(csf_.size())) + "u * cols + ";
  const std::string mine = part_row() + " < rows";
  std::string c;
  if (v_.k == 0) {
    std::string w;
    for (size_t j = 0; j < csr_.size(); ++j)
      w += ind + "  CS[(unsigned long long)" + part_row() + " * " + kWidth + " + " + nf +
           S(int(j)) + "u] = (" + pt + ")csr" + S(csr_[j]) + ";\n";
    return w.empty() ? "" : ind + "if (" + lane0_ + " && " + mine + ") {\n" + w + ind + "}\n";
  }
  const std::string in2 = ind + "    ";
  std::string add = ind + "  if (" + grp + " == gq && " + mine + ") {\n";
  add += ind + "    " + pt + "* const d = CS + (unsigned long long)blockIdx.x * " + kWidth + ";\n";
  auto sum = [&](const std::string& at, const std::string& v, const std::string& in) {
    return in + "d[" + at + "] = (gq ? d[" + at + "] : (" + pt + ")0) + (" + pt + ")" + v + ";\n";
  };
  if (!csf_.empty()) {
    add += in2 + "#pragma unroll\n" + in2 + "for (int k = 0; k < " + S(v_.k) + "; ++k) {\n";
    add += in2 + "  const U ch = (U)" + lane_ + " + (U)(k * " + S(v_.tpr) + ");\n";
    add += in2 + "  if (ch < nch) {\n" + in2 + "    #pragma unroll\n" + in2 +
           "    for (int e = 0; e < " + S(v_.vw) + "; ++e) {\n" + in2 +
           "      const U col = ch * " + S(v_.vw) + "u + (U)e;\n";
    for (size_t i = 0; i < csf_.size(); ++i)
      add += sum(S(int(i)) + "u * cols + col", "cs" + S(csf_[i]) + "[k * " + S(v_.vw) + " + e]",
                 in2 + "      ");
    add += in2 + "    }\n" + in2 + "  }\n" + in2 + "}\n";
  }
  if (!csr_.empty()) {
    add += in2 + "if (" + lane0_ + ") {\n";
    for (size_t j = 0; j < csr_.size(); ++j)
      add += sum(nf + S(int(j)) + "u", "csr" + S(csr_[j]), in2 + "  ");
    add += in2 + "}\n";
  }
  add += ind + "  }\n";
  c += ind + "for (U gq = 0; gq < " + S(v_.rpb) + "u; ++gq) {\n" + add;
  if (v_.rpb > 1) c += ind + "  __syncthreads();\n";
  return c + ind + "}\n";
}

// The module's second entry: element t of the partial row, the sum of every block's (or row
// group's) partial in order, in double, stored to its output's column.
std::string RowContext::colsum_kernel() {
  reset_kernel();
  const std::string in = "  ", pt = cs_type(), cols = e_.uvalue({ValueSlot::Cols});
  const std::string rows = e_.uvalue({ValueSlot::Rows}), blocks = e_.uvalue({ValueSlot::Blocks});
  std::string b = in + "const U cols = " + cols + ";\n" + in + "const U rows = " + rows + ";\n";
  b += in + "const U " + kWidth + " = " + S(int(csf_.size())) + "u * cols + " +
       S(int(csr_.size())) + "u;\n";
  b += in + "const U t = (U)blockIdx.x * 256u + threadIdx.x;\n" + in + "if (t >= " + kWidth +
       ") return;\n";
  // Partials: a block's of a persistent row kernel, else a row group's (those that had a row).
  const std::string np =
      v_.k > 0 ? "min(" + blocks + ", (rows + " + S(v_.rpb - 1) + "u) / " + S(v_.rpb) + "u)"
               : "min(" + blocks + " * " + S(v_.rpb) + "u, rows)";
  b += in + "const U np = " + np + ";\n";
  b += in + "const " + pt + "* const CS = (const " + pt + "*)" + e_.scratch(kPartials) + ";\n";
  b += in + "double s = 0.0;\n" + in + "for (U i = 0; i < np; ++i) s += (double)CS[" +
       "(unsigned long long)i * " + kWidth + " + t];\n";
  auto store = [&](int o, const std::string& at) {
    const int a = e_.out_access(o);
    const std::string v = "(" + e_.ntype(g_.outputs[o].node) + ")s";
    return e_.ptr(a) + "[" + at + "] = " + e_.store(e_.storage_dtype(a), v) + ";\n";
  };
  for (size_t i = 0; i < csf_.size(); ++i) {
    const int a = e_.out_access(csf_[i]);
    b += in + "if (t >= " + S(int(i)) + "u * cols && t < " + S(int(i) + 1) + "u * cols) {\n";
    std::vector<bool> used(R_, true);
    b += e_.decompose("t - " + S(int(i)) + "u * cols", K_, R_, used, "j", in + "  ");
    const std::string terms = e_.terms(a, K_, R_, [](int d) { return "j" + std::to_string(d); });
    const std::string at = e_.value({ValueSlot::Offset, a}) + (terms.empty() ? "" : " + " + terms);
    b += in + "  " + store(csf_[i], at) + in + "}\n";
  }
  for (size_t j = 0; j < csr_.size(); ++j)
    b += in + "if (t == " + S(int(csf_.size())) + "u * cols + " + S(int(j)) + "u) " +
         store(csr_[j], e_.value({ValueSlot::Offset, e_.out_access(csr_[j])}));
  return "extern \"C\" __global__ void __launch_bounds__(256) loom_colsum(const P p) {\n" +
         e_.decls() + b + "}\n";
}

}  // namespace loom::cuda::gen
