// Row kernels (not split): one kernel runs every pass of a row group, persistent (each lane
// holds its chunks between passes) or looped (each pass walks the row again); see codegen_rows.h.
#include "cuda/codegen_rows.h"

namespace loom::cuda::gen {

namespace {

class RowKernel : public RowLanes {
 public:
  RowKernel(const Group& g, const Variant& v) : RowLanes(g, v) {}

  void run(Generated& out) {
    std::string kernels = single();
    out.entries = {"loom_kernel"};
    if (colsums()) {
      kernels += colsum_kernel();
      out.entries.push_back("loom_colsum");
      out.colsum_cols = int(csf_.size()), out.colsum_ones = int(csr_.size());
      out.colsum_bytes = cs_type() == "double" ? 8 : 4;
    }
    finish(out, kernels);
  }

 private:
  std::string single();
};

// The one kernel of every pass.
std::string RowKernel::single() {
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
  std::string rdefs;  // the row's values of leaves read once a row (row_const)
  for (int leaf : rconst_) {
    const std::string t = Emitter::storage_type(g_.leaves[leaf].dtype);
    rdefs += in + "const " + t + " rl" + S(leaf) + " = rv ? " + e_.ptr(leaf) + "[" + rb(leaf) +
             "] : (" + t + ")0;\n";
  }
  body = rdefs + body;
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
  outer += colsum_decls("  ");
  const std::string parts = colsum_parts("  ");
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
    const std::string end =
        v_.shifted ? "(cols + sh + " + S(v_.dshift) + "u) / " + w + " - 1u" : "(cols + sh) / " + w;
    peel += in + "const U fc0 = sh ? 1u : 0u, fc1 = " + end + ";\n";
  }
  k += row_setup(in, "row", "", pf_ ? &rest : nullptr) + peel + rest + "  }\n" + parts + "}\n";
  return prune_rows(k);
}

}  // namespace

void generate_rows(const Group& g, const Variant& v, Generated& out) {
  if (v.split)
    generate_split(g, v, out);
  else
    RowKernel(g, v).run(out);
}

}  // namespace loom::cuda::gen
