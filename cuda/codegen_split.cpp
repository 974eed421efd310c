// Split row kernels (few rows, long columns): each row is cut into gridDim.y segments, one
// launch a pass writes per-segment partials and the last block of each row block combines
// them in segment order (deterministic); see codegen_rows.h.
#include "cuda/codegen_rows.h"

namespace loom::cuda::gen {

namespace {

class SplitKernel : public RowLanes {
 public:
  SplitKernel(const Group& g, const Variant& v) : RowLanes(g, v) {}

  void run(Generated& out) {
    std::string kernels;
    int n = full_out_ ? last_ + 1 : last_;  // no Full outputs: the last pass has nothing to walk
    for (int q = 0; q < n; ++q) {
      kernels += split(q, !full_out_ && q == last_ - 1);
      out.entries.push_back("loom_kernel_p" + std::to_string(q));
    }
    out.final_rows = !full_out_;
    finish(out, kernels);
  }

 private:
  std::string split(int q, bool final_rows);
};

// The kernel of pass q; with `final_rows`, it also writes the row outputs of the last pass.
std::string SplitKernel::split(int q, bool final_rows) {
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
  std::vector<bool> need = closure(g_, targets, [&](int id) { return is_reduce(g_.nodes[id].op); });
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
      // the rest one at a time; segment order either way. (nvcc already unrolls the plain loop
      // with its loads grouped: this keeps the batching from depending on that, with partials
      // segment-major so a warp's loads are adjacent.)
      const int B = v_.comb;
      // One base pointer and a stride, both set in the loop (a 64-bit index a load, or the
      // stride held from before the loop, took more registers than the 32 within which the
      // level-1 walk of the same kernel runs 8 blocks an SM).
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
                e_.acc_combine(r, "a" + S(r), "ai" + S(r), e_.acc_from_word(r, "w" + S(r) + "[k]"),
                               wi) +
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

}  // namespace

void generate_split(const Group& g, const Variant& v, Generated& out) {
  SplitKernel(g, v).run(out);
}

}  // namespace loom::cuda::gen
