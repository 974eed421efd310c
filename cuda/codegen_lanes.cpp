// What a row kernel pass does around its walk (RowLanes, codegen_rows.h): row values,
// accumulators and their combine across a row's lanes, row outputs, the kernel header.
#include "cuda/codegen_rows.h"
#include "fusion/prims.h"

namespace loom::cuda::gen {

std::string RowLanes::row_nodes(const std::vector<int>& ids, const std::string& ind) {
  std::string code;
  for (int id : ids) {
    const GNode& n = g_.nodes[id];
    std::string raw, lin;
    if (n.leaf >= 0) lin = rb(n.leaf);
    if (is_load(n))
      raw = "(rv ? " + e_.ptr(n.leaf) + "[" + lin + "] : (" +
            Emitter::storage_type(g_.leaves[n.leaf].dtype) + ")0)";
    if (n.op == Op::Gather) {  // a row gather: x[row, t] clamped into the row, one load a row
      const int x = g_.nodes[n.a].leaf;
      const std::string k = "(I)min(max((long long)r" + S(n.b) + ", 0LL), (long long)" +
                            e_.value({ValueSlot::Cols}) + " - 1LL)";
      const std::string t = e_.terms(x, K_, R_, [&](int) { return k; });
      raw = "(rv ? " + e_.ptr(x) + "[" + rb(x) + (t.empty() ? "" : " + " + t) + "] : (" +
            Emitter::storage_type(g_.leaves[x].dtype) + ")0)";
    }
    code += ind + e_.row_node(id, raw, lin);
  }
  return code;
}

std::string RowLanes::acc_decls(const std::vector<int>& rs, const std::string& ind, bool declare) {
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
std::string RowLanes::lanes(const std::vector<int>& rs, const std::string& ind) {
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

// Combines value b (index bi) into the accumulator of reduction r: max.NaN / min.NaN for
// float max and min where available (lm_max's two NaN tests compiled to branches: a
// 4096-column f32 softmax lane took 12 of them between its shuffles and shared reads).
std::string RowLanes::combine(int r, const std::string& b, const std::string& bi,
                              const std::string& ind) {
  std::string c = ind + e_.acc_combine(r, "a" + S(r), "ai" + S(r), b, bi) + "\n";
  const Combine cb = prim(g_.nodes[r].op).combine;
  if (!row_ptx() || (cb != Combine::Max && cb != Combine::Min) || e_.acc(r).type != "float")
    return c;
  return "#if __CUDA_ARCH__ >= 800\n" + ind + "asm(\"" + (cb == Combine::Max ? "max" : "min") +
         ".NaN.f32 %0, %0, %1;\" : \"+f\"(a" + S(r) + ") : \"f\"(" + b + "));\n#else\n" + c +
         "#endif\n";
}

std::string RowLanes::row_outputs(const std::string& cond, const std::string& ind) {
  std::string code;
  for (int o = 0; o < int(g_.outputs.size()); ++o) {
    int id = g_.outputs[o].node;
    if (g_.nodes[id].space != Space::Row) continue;
    if (g_.outputs[o].colsum) {  // (its kernel's rows only: the caller's condition)
      code += ind + "  csr" + S(o) + " += r" + S(id) + ";\n";
      continue;
    }
    int a = e_.out_access(o);
    code += ind + "  " + e_.ptr(a) + "[" + rb(a) +
            "] = " + e_.store(e_.storage_dtype(a), "r" + S(id)) + ";\n";
  }
  return code.empty() ? "" : wrap(ind + "if (" + cond + ") {\n" + code + ind + "}\n", ind, {});
}

std::string RowLanes::header(const std::string& name) {
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

}  // namespace loom::cuda::gen
