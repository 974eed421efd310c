// Column reductions (a thread a kept column, Layout::Columns): vector columns
// (Variant::vec: a thread's adjacent columns as one load a walked row) and column slices
// (Variant::cs: a column's rows walked by several threads, combined through shared memory).
#include <cctype>

#include "cuda/codegen_rows.h"

namespace loom::cuda::gen {

std::string RowContext::cv_vec_t(int leaf) const {
  return cv_words(leaf) ? "lm_vec<unsigned, " + S(cv_ / 2) + ">"
                        : "lm_vec<" + std::string(Emitter::storage_type(e_.storage_dtype(leaf))) +
                              ", " + S(cv_) + ">";
}

// One-row code run for each of a vector-column thread's rows: an unrolled loop over e whose
// body first binds the row values (r<id>) and accumulators (a<r>, ai<r>) it names to element e
// of their arrays, and last stores the row values it defines (`defs`, arrays declared here).
// Without vector columns, `code` unchanged.
std::string RowContext::wrap(const std::string& code, const std::string& ind,
                             const std::vector<int>& defs) {
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

// Vector columns: drops the arrays of row values no later code reads (their declaration and
// store the only mentions; nvcc warns of a variable set but never used).
std::string RowContext::prune_rows(std::string k) const {
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

// The walk step of a vector-column thread: for each of its uf walked rows (ch = cb + k), one
// cv_-wide vector of every vector leaf, all loaded first; then per row the one-column body for
// each of the thread's columns e in turn (each column's sum in the scalar kernel's order).
std::string RowWalk::cv_walk(int q, const std::vector<int>& nodes, bool store, int uf,
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

// Column slices: each thread's accumulators through shared memory (slot t = slice * rpb +
// column), each thread then combining its column's slices in slice order (the same on every
// run, and every slice ends with the column's result). One reduction at a time through one
// 8-byte slot a thread (and one for argmax's index): a group of many reductions (sum, max,
// argmax, ...) at 1024 threads would pass the 48 KB of static shared memory otherwise.
std::string RowLanes::slices(const std::vector<int>& rs, const std::string& ind) {
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

}  // namespace loom::cuda::gen
