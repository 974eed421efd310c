// A row kernel pass's walk over its columns (RowWalk, codegen_rows.h): chunk loads, the column
// body of each chunk, and its stores.
#include "cuda/codegen_rows.h"
#include "fusion/prims.h"

namespace loom::cuda::gen {

// Loads of every retained leaf's k chunks of a row into <dst><leaf>[k]: the row whose bases
// are <pre>b<a>, where `valid` (row in range).
std::string RowWalk::retained_loads(const std::string& dst, const std::string& pre,
                                    const std::string& valid, const std::string& ind) {
  std::string code = ind + "#pragma unroll\n" + ind + "for (int k = 0; k < " + S(v_.k) +
                     "; ++k) {\n" + ind + "  const U ch = (U)" + lane_ + " + (U)(k * " + S(v_.tpr) +
                     ");\n" + ind + "  if (" + valid + " && ch < nch) {\n";
  for (int leaf : retained_)
    code += ind + "    " + dst + S(leaf) +
            "[k] = " + vload(leaf_vec_t(leaf), chunk_addr(leaf, pre)) + ";\n";
  return code + ind + "  }\n" + ind + "}\n";
}

// The column body of pass q for one column `col` of chunk k: evaluates `nodes`; accumulates
// reductions over pass-q values; stores Full outputs when `store`; caches values later passes
// read when `cached`. Unit-stride leaves come from the chunk's vectors lw<leaf>[k] (collected in
// vleaves), unit-stride outputs go to ow<o> (collected in vouts).
std::string RowWalk::col_body(int q, const std::vector<int>& nodes, bool store,
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
    if (rconst_ok() && row_const(e_, leaf)) {
      rconst_.insert(leaf);
      return "rl" + S(leaf);
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
      if (g_.outputs[o].colsum) {
        code += colsum_add(o, f, ind);
        continue;
      }
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

// Accumulates f into reduction r: max.NaN / min.NaN for float max and min where available.
std::string RowWalk::accumulate(int r, const std::string& f, const std::string& ind) {
  std::string add = ind + e_.acc_add(r, "a" + S(r), "ai" + S(r), f, "col") + "\n";
  const Combine c = prim(g_.nodes[r].op).combine;
  if (!row_ptx() || (c != Combine::Max && c != Combine::Min) || e_.acc(r).type != "float")
    return add;
  return "#if __CUDA_ARCH__ >= 800\n" + ind + "asm(\"" + (c == Combine::Max ? "max" : "min") +
         ".NaN.f32 %0, %0, %1;\" : \"+f\"(a" + S(r) + ") : \"f\"((float)" + f + "));\n#else\n" +
         add + "#endif\n";
}

std::string RowWalk::packed_store(int o, const std::string& ind) {
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
std::string RowWalk::walk(int q, const std::vector<int>& nodes, bool store,
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
  // arrays (declared by single()); the other leaves into this walk's lw arrays, all chunks
  // first -- except, in a row that holds its values, leaves every row reads alike (a norm's
  // weight and bias): cache hits, loaded at their chunk, so their k chunks do not sit in
  // registers beside the held ones (row_walk_regs counts one chunk of them).
  std::vector<std::string> loads, parts, late;
  for (int leaf : vleaves) {
    bool keep = retained_.count(leaf) > 0;
    if (keep && !loaded_.insert(leaf).second) continue;
    std::string name = (keep ? "lr" : "lw") + S(leaf);
    if (!keep) code += ind + leaf_vec_t(leaf) + " " + name + "[" + S(uf) + "];\n";
    if (!keep && v_.k > 0 && !peel_ && !staged_.count(leaf) && row_invariant(leaf)) {
      late.push_back(in4 + name + "[k] = " + vload(leaf_vec_t(leaf), chunk_addr(leaf)) + ";\n");
      continue;
    }
    loads.push_back(staged_.count(leaf) ? staged_load(leaf, name, in4)
                    : shifted(leaf)     ? realigned_load(leaf, name, in4)
                                        : in4 + name + "[k] = " +
                                          vload(leaf_vec_t(leaf), chunk_addr(leaf)) + ";\n");
    if (peel_) parts.push_back(partial_load(leaf, name, in4));
  }
  if (!vleaves.empty()) e_.need("vec");
  if (!loads.empty()) {
    code += ind + "#pragma unroll\n" + ind + "for (int k = 0; k < " + S(uf) + "; ++k) {\n" + chunk;
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
  for (const std::string& l : late) code += l;
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

// Chunk ch of a staged leaf: one vector of the block's tile (stage_setup says its layout),
// or, where the launch gave too little shared memory, its vw elements from global memory at
// the leaf's reduced stride (bf16 words: two columns a word, the low one first).
std::string RowWalk::staged_load(int leaf, const std::string& name, const std::string& ind) {
  const std::string T = leaf_vec_t(leaf), W = S(v_.vw), dst = name + "[k]";
  const std::string at = "T" + S(leaf) + " + ((U)ch * " + S(v_.stage + 1) + "u + " +
                         (v_.rpb > 1 ? "grp" : "0u") + ") * " + W + "u";
  auto el = [&](const std::string& e) {
    std::string t = e_.terms(leaf, K_, R_, [&](int) { return "(I)(ch * " + W + "u + " + e + ")"; });
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
std::string RowWalk::realigned_load(int leaf, const std::string& name, const std::string& ind) {
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

// The partial chunk of a peeled row into <name>[k]: its columns in the row, element by
// element (no access outside the row: the row's ends need not be 16-byte aligned, and the
// allocation's end need not be either), zero elsewhere.
std::string RowWalk::partial_load(int leaf, const std::string& name, const std::string& ind) {
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
    code += ind + "  #pragma unroll\n" + ind + "  for (int e = 0; e < " + S(v_.vw / 2) + "; ++e) " +
            name + "[k].v[e] = (unsigned)t[2 * e] | ((unsigned)t[2 * e + 1] << 16);\n";
  return code + ind + "}\n";
}

// Chunks a lane of a loop walk takes a step: 4 (2 in 1024-thread blocks: 64 registers); a
// thread a row (column reductions) takes `unroll`, default 1.
int RowWalk::loop_chunks() const {
  if (!staged_.empty()) return std::max(1, v_.unroll);  // tile reads: shared-memory latency
  if (v_.tpr == 1) return std::max(1, v_.unroll);
  // A step's chunks of every vector leaf are loaded before it computes: at most 64 registers
  // of them a thread, and at most the block's registers a thread less 32 (a split reduction
  // whose last pass took an optimizer's update in, eight arrays of float32 chunks, spilled 456
  // bytes a thread at 4 chunks a step).
  int bytes = 0;
  for (int a = 0; a < int(g_.leaves.size()); ++a)
    if (unit(a)) bytes += v_.vw * int(itemsize(e_.storage_dtype(a)));
  const int budget = std::min(256, (65536 / v_.block() - 32) * 4);
  int uf = v_.block() >= 1024 ? 2 : 4;
  while (uf > 1 && uf * bytes > budget) uf /= 2;
  return uf;
}

// The loop walk of a lane from chunk `start` to `end`, uf chunks a step. A thread a row with
// uf > 1 first takes whole steps with no guards, so the compiler issues their (strided,
// scalar) loads together before the in-order accumulation, then guarded last steps.
std::string RowWalk::steps(int q, const std::vector<int>& nodes, bool store, int uf,
                           const std::string& start, const std::string& end,
                           const std::string& ind) {
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

}  // namespace loom::cuda::gen
