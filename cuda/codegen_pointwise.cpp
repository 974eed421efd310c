// Pointwise kernels: a grid-stride loop over the group's elements. Contiguous 1-D groups read
// and write `vec` elements a thread with aligned vector accesses (then a scalar tail); other
// groups decompose the linear index over the space. Broadcast loads are hoisted out of the loop.
#include "cuda/codegen_emit.h"

namespace loom::cuda::gen {

void generate_pointwise(const Group& g, const Variant& v, Generated& out) {
  Emitter e(g);
  const bool contig = v.vec >= 1;
  const int V = std::max(1, v.vec);
  std::vector<int> targets;
  for (auto& o : g.outputs) targets.push_back(o.node);
  std::vector<bool> need = closure(g, targets);

  // An access that reads the same element everywhere.
  auto constant = [&](int a) {
    for (int d = 0; d < e.rank; ++d)
      if (e.cls(a, d) != Cls::Zero) return false;
    return true;
  };
  auto off = [&](int a) { return e.value({ValueSlot::Offset, a}); };

  std::string top;  // once per thread: Row nodes (scalars) and broadcast loads
  std::vector<int> loop_nodes;
  for (int id = 0; id < int(g.nodes.size()); ++id) {
    if (!need[id]) continue;
    const GNode& n = g.nodes[id];
    int a = n.leaf;
    if (n.space == Space::Row) {
      std::string raw = a >= 0 && is_load(n) ? e.ptr(a) + "[" + off(a) + "]" : "";
      top += "  " + e.row_node(id, raw, a >= 0 ? off(a) : "");
    } else if (is_load(n) && constant(a)) {
      top += "  const " + e.ntype(id) + " f" + std::to_string(id) + " = " +
             e.load(g.leaves[a].dtype, e.ptr(a) + "[" + off(a) + "]") + ";\n";
    } else {
      loop_nodes.push_back(id);
    }
  }
  auto outside = [&](int id) {
    return std::string(g.nodes[id].space == Space::Row ? "r" : "f") + std::to_string(id);
  };

  // One element at linear position `idx` (an I expression) of a contiguous group.
  auto contig_body = [&](const std::string& idx, const std::string& ind) {
    auto at = [&](int a) {
      std::string o = off(a);
      return e.rank == 1 && e.cls(a, 0) == Cls::One ? o + " + " + idx : o;
    };
    Body b;
    b.nodes = loop_nodes;
    b.raw = [&](int leaf) { return e.ptr(leaf) + "[" + at(leaf) + "]"; };
    b.lin = at;
    b.ref = outside;
    b.after = [&](int id, std::string& code) {
      for (int o = 0; o < int(g.outputs.size()); ++o) {
        if (g.outputs[o].node != id) continue;
        int a = e.out_access(o);
        code += ind + e.ptr(a) + "[" + at(a) +
                "] = " + e.store(e.storage_dtype(a), "f" + std::to_string(id)) + ";\n";
      }
    };
    return e.body(b, ind);
  };

  std::string loop;
  const std::string tid = "(U)blockIdx.x * blockDim.x + threadIdx.x";
  if (V > 1 && e.rank > 1) {
    // n-D with every access at unit or zero stride along the last dim (a row broadcast, a
    // column slice): V consecutive elements of one row a thread, unit-stride accesses as
    // vectors; the index decomposes once per vector.
    e.need("vec");
    const int R = e.rank;
    const std::string VS = std::to_string(V), last = "x" + std::to_string(R - 1);
    std::vector<bool> used(R, false);
    auto at = [&](int a, bool elem) {
      std::string t = e.terms(a, 0, R, [&](int d) {
        used[d] = true;
        return d == R - 1 && elem ? "(" + last + " + j)" : "x" + std::to_string(d);
      });
      return t.empty() ? off(a) : off(a) + " + " + t;
    };
    auto vec_t = [&](int a) {
      return "lm_vec<" + std::string(Emitter::storage_type(e.storage_dtype(a))) + ", " + VS + ">";
    };
    std::set<int> vec_leaves;
    Body b;
    b.nodes = loop_nodes;
    b.raw = [&](int leaf) {
      if (e.cls(leaf, R - 1) != Cls::One) return e.ptr(leaf) + "[" + at(leaf, true) + "]";
      vec_leaves.insert(leaf);
      return "lv" + std::to_string(leaf) + ".v[j]";
    };
    b.lin = [&](int leaf) { return at(leaf, true); };
    b.ref = outside;
    b.after = [&](int id, std::string& code) {
      for (int o = 0; o < int(g.outputs.size()); ++o)
        if (g.outputs[o].node == id)
          code += "      ov" + std::to_string(o) +
                  ".v[j] = " + e.store(e.storage_dtype(e.out_access(o)), "f" + std::to_string(id)) +
                  ";\n";
    };
    std::string inner = e.body(b, "      "), pre, post;
    for (int leaf : vec_leaves)
      pre += "    const " + vec_t(leaf) + " lv" + std::to_string(leaf) + " = *(const " +
             vec_t(leaf) + "*)(" + e.ptr(leaf) + " + (" + at(leaf, false) + "));\n";
    for (int o = 0; o < int(g.outputs.size()); ++o) {
      int a = e.out_access(o);
      pre += "    " + vec_t(a) + " ov" + std::to_string(o) + ";\n";
      post += "    *(" + vec_t(a) + "*)(" + e.ptr(a) + " + (" + at(a, false) + ")) = ov" +
              std::to_string(o) + ";\n";
    }
    used[R - 1] = true;
    loop += "  const U nv = n / " + VS + ";\n";
    loop += "  for (U i = " + tid + "; i < nv; i += step) {\n";
    loop += e.decompose("i * " + VS + "u", 0, R, used, "x", "    ") + pre;
    loop += "#pragma unroll\n    for (int j = 0; j < " + VS + "; ++j) {\n" + inner + "    }\n";
    loop += post + "  }\n";
  } else if (contig && V > 1) {
    e.need("vec");
    std::string VS = std::to_string(V);
    std::string pre, post;
    Body b;
    b.nodes = loop_nodes;
    auto vec_t = [&](int a) {
      return "lm_vec<" + std::string(Emitter::storage_type(e.storage_dtype(a))) + ", " + VS + ">";
    };
    std::set<int> vec_leaves;
    b.raw = [&](int leaf) {
      if (e.cls(leaf, 0) == Cls::Zero) return e.ptr(leaf) + "[" + off(leaf) + "]";
      vec_leaves.insert(leaf);
      return "lv" + std::to_string(leaf) + ".v[j]";
    };
    b.lin = [&](int leaf) {
      return e.cls(leaf, 0) == Cls::Zero ? off(leaf) : off(leaf) + " + base + j";
    };
    b.ref = outside;
    b.after = [&](int id, std::string& code) {
      for (int o = 0; o < int(g.outputs.size()); ++o)
        if (g.outputs[o].node == id)
          code += "      ov" + std::to_string(o) +
                  ".v[j] = " + e.store(e.storage_dtype(e.out_access(o)), "f" + std::to_string(id)) +
                  ";\n";
    };
    std::string inner = e.body(b, "      ");
    for (int leaf : vec_leaves)
      pre += "    const " + vec_t(leaf) + " lv" + std::to_string(leaf) + " = *(const " +
             vec_t(leaf) + "*)(" + e.ptr(leaf) + " + " + off(leaf) + " + base);\n";
    for (int o = 0; o < int(g.outputs.size()); ++o) {
      int a = e.out_access(o);
      pre += "    " + vec_t(a) + " ov" + std::to_string(o) + ";\n";
      post += "    *(" + vec_t(a) + "*)(" + e.ptr(a) + " + " + off(a) + " + base) = ov" +
              std::to_string(o) + ";\n";
    }
    loop += "  const U nv = n / " + VS + ";\n";
    loop += "  for (U i = " + tid + "; i < nv; i += step) {\n";
    loop += "    const I base = (I)(i * " + VS + ");\n" + pre;
    loop += "#pragma unroll\n    for (int j = 0; j < " + VS + "; ++j) {\n" + inner + "    }\n";
    loop += post + "  }\n";
    loop += "  for (U i = nv * " + VS + " + " + tid + "; i < n; i += step) {\n";
    loop += contig_body("(I)i", "    ") + "  }\n";
  } else if (contig) {
    loop += "  for (U i = " + tid + "; i < n; i += step) {\n";
    loop += contig_body("(I)i", "    ") + "  }\n";
  } else {
    std::vector<bool> used(e.rank, false);
    auto idx = [&](int d) {
      used[d] = true;
      return "x" + std::to_string(d);
    };
    auto at = [&](int a) {
      std::string t = e.terms(a, 0, e.rank, idx);
      return t.empty() ? off(a) : off(a) + " + " + t;
    };
    Body b;
    b.nodes = loop_nodes;
    b.raw = [&](int leaf) { return e.ptr(leaf) + "[" + at(leaf) + "]"; };
    b.lin = at;
    b.ref = outside;
    b.after = [&](int id, std::string& code) {
      for (int o = 0; o < int(g.outputs.size()); ++o) {
        if (g.outputs[o].node != id) continue;
        int a = e.out_access(o);
        code += "    " + e.ptr(a) + "[" + at(a) +
                "] = " + e.store(e.storage_dtype(a), "f" + std::to_string(id)) + ";\n";
      }
    };
    std::string inner = e.body(b, "    ");
    loop += "  for (U i = " + tid + "; i < n; i += step) {\n";
    loop += e.decompose("i", 0, e.rank, used, "x", "    ") + inner + "  }\n";
  }

  std::string n = e.uvalue({ValueSlot::N});
  std::string k = "extern \"C\" __global__ void __launch_bounds__(256) loom_kernel(const P p) {\n";
  k += e.decls();
  k += "  const U n = " + n + ";\n  const U step = (U)blockDim.x * gridDim.x;\n";
  k += top + loop + "}\n";
  out.source = e.prelude() + k;
  out.entries = {"loom_kernel"};
  out.params = e.spec();
}

}  // namespace loom::cuda::gen
