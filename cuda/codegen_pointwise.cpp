// Pointwise kernels. Contiguous 1-D groups and n-D groups whose every access has unit or zero
// stride along the last dim take `vec` elements a vector, `unroll` vectors a thread per
// iteration: all vector loads of an iteration are issued first (memory-level parallelism),
// then the vectors are computed one by one in a rolled loop that rotates the loaded registers
// (a register array indexed by the loop counter would live in local memory), so the element
// body appears once per lane of ONE vector, or once in all when `roll` rolls the lane loop too
// (big bodies: cold compile time). A 1-D group's last partial vector goes through the
// same code with masked lane loads and stores (no separate scalar tail loop). Other groups
// decompose the linear index over the space per element. Broadcast loads are hoisted.
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

  std::string loop;
  const std::string tid = "(U)lm_bx * blockDim.x + threadIdx.x";
  if (V > 1) {
    // Vectors: 1-D contiguous (index `base`, the vector's first element, with a masked last
    // vector) or n-D with unit/zero last-dim strides (index variables x<d> of the vector's first
    // element; the last dim is a multiple of V, so every vector is whole).
    e.need("vec");
    const int R = e.rank, UU = std::max(1, v.unroll);
    const bool nd = R > 1;
    const std::string VS = std::to_string(V), US = std::to_string(UU);
    const std::string last = "x" + std::to_string(R - 1);
    std::vector<bool> used(R, false);
    // Address of access `a` at lane j (elem) or at the vector's first element.
    auto at = [&](int a, bool elem) {
      if (!nd) {
        if (e.cls(a, 0) == Cls::Zero) return off(a);
        return off(a) + " + base" + (elem ? " + j" : "");
      }
      std::string t = e.terms(a, 0, R, [&](int d) {
        used[d] = true;
        return d == R - 1 && elem ? "(" + last + " + j)" : "x" + std::to_string(d);
      });
      return t.empty() ? off(a) : off(a) + " + " + t;
    };
    auto vec_t = [&](int a) {
      return "lm_vec<" + std::string(Emitter::storage_type(e.storage_dtype(a))) + ", " + VS + ">";
    };
    auto unit = [&](int a) { return e.cls(a, R - 1) == Cls::One; };
    const std::string lane = v.roll ? "0" : "j";
    std::set<int> vec_leaves;
    Body b;
    b.nodes = loop_nodes;
    b.raw = [&](int leaf) {
      if (!unit(leaf)) return e.ptr(leaf) + "[" + at(leaf, true) + "]";
      vec_leaves.insert(leaf);
      return "lv" + std::to_string(leaf) + "[0].v[" + lane + "]";
    };
    b.lin = [&](int leaf) { return at(leaf, true); };
    b.ref = outside;
    b.after = [&](int id, std::string& code) {
      for (int o = 0; o < int(g.outputs.size()); ++o) {
        if (g.outputs[o].node != id) continue;
        std::string ov = "ov" + std::to_string(o) + ".v[";
        std::string val = e.store(e.storage_dtype(e.out_access(o)), "f" + std::to_string(id));
        if (!v.roll) {
          code += "        " + ov + "j] = " + val + ";\n";
          continue;
        }
        // Rolled lanes: shift the finished lanes down, the new one in at the top.
        for (int k = 0; k + 1 < V; ++k)
          code +=
              "        " + ov + std::to_string(k) + "] = " + ov + std::to_string(k + 1) + "];\n";
        code += "        " + ov + std::to_string(V - 1) + "] = " + val + ";\n";
      }
    };
    std::string inner = e.body(b, "        ");
    if (v.roll)  // the next lane of every loaded vector to lane 0
      for (int leaf : vec_leaves)
        for (int k = 0; k + 1 < V; ++k) {
          std::string l = "lv" + std::to_string(leaf) + "[0].v[";
          inner += "        " + l + std::to_string(k) + "] = " + l + std::to_string(k + 1) + "];\n";
        }
    if (nd) used[R - 1] = true;
    for (int o = 0; o < int(g.outputs.size()); ++o) at(e.out_access(o), false);  // marks used
    for (int leaf : vec_leaves) at(leaf, false);
    std::vector<int> dims;  // index variables carried from the load phase to the compute phase
    for (int d = 0; nd && d < R; ++d)
      if (used[d]) dims.push_back(d);

    // Load phase: every vector of the iteration, unrolled (U consecutive block-wide strips).
    std::string load = "  for (U i0 = (U)lm_bx * (blockDim.x * " + US +
                       "u) + threadIdx.x; i0 < nv; i0 += step) {\n";
    for (int leaf : vec_leaves)
      load += "    " + vec_t(leaf) + " lv" + std::to_string(leaf) + "[" + US + "];\n";
    for (int d : dims) load += "    I xa" + std::to_string(d) + "[" + US + "];\n";
    load += "#pragma unroll\n    for (int u = 0; u < " + US + "; ++u) {\n";
    load += "      const U i = i0 + (U)u * blockDim.x;\n";
    if (nd) {
      load += "      if (i < nv) {\n";
      load += e.decompose("i * " + VS + "u", 0, R, used, "x", "        ");
      for (int d : dims)
        load += "        xa" + std::to_string(d) + "[u] = x" + std::to_string(d) + ";\n";
      for (int leaf : vec_leaves)
        load += "        lv" + std::to_string(leaf) + "[u] = *(const " + vec_t(leaf) + "*)(" +
                e.ptr(leaf) + " + (" + at(leaf, false) + "));\n";
      load += "      }\n";
    } else {
      // Whole vectors only; the partial last one is loaded lane by lane in the compute loop,
      // so its masked loads are compiled once, not once per unrolled vector.
      load += "      const U base = i * " + VS + "u;\n      if (i < nfull) {\n";
      for (int leaf : vec_leaves)
        load += "        lv" + std::to_string(leaf) + "[u] = *(const " + vec_t(leaf) + "*)(" +
                e.ptr(leaf) + " + " + at(leaf, false) + ");\n";
      load += "      }\n";
    }
    load += "    }\n";
    if (!nd && vec_leaves.empty()) load = load.substr(0, load.find("#pragma unroll\n"));

    // Compute phase: one vector at a time, rolled; the arrays rotate down after each.
    std::string comp = "#pragma unroll 1\n    for (int u = 0; u < " + US + "; ++u) {\n";
    comp += "      const U i = i0 + (U)u * blockDim.x;\n      if (i >= nv) break;\n";
    if (!nd) {
      comp += "      const U base = i * " + VS + "u;\n";
      if (!vec_leaves.empty()) {
        comp += "      if (i >= nfull) {\n";
        for (int leaf : vec_leaves)
          comp += "        lv" + std::to_string(leaf) + "[0] = " + vec_t(leaf) + "{};\n";
        comp += "#pragma unroll\n        for (int j = 0; j < " + VS + "; ++j)\n";
        comp += "          if (base + j < n) {\n";
        for (int leaf : vec_leaves)
          comp += "            lv" + std::to_string(leaf) + "[0].v[j] = " + e.ptr(leaf) + "[" +
                  at(leaf, true) + "];\n";
        comp += "          }\n      }\n";
      }
    }
    for (int d : dims)
      comp += "      const I x" + std::to_string(d) + " = xa" + std::to_string(d) + "[0];\n";
    for (int o = 0; o < int(g.outputs.size()); ++o)
      comp += "      " + vec_t(e.out_access(o)) + " ov" + std::to_string(o) + ";\n";
    comp += std::string(v.roll ? "#pragma unroll 1\n" : "#pragma unroll\n") +
            "      for (int j = 0; j < " + VS + "; ++j) {\n" + inner + "      }\n";
    std::string vstore;
    for (int o = 0; o < int(g.outputs.size()); ++o) {
      int a = e.out_access(o);
      vstore += (nd ? "      " : "        ") + std::string("*(") + vec_t(a) + "*)(" + e.ptr(a) +
                " + (" + at(a, false) + ")) = ov" + std::to_string(o) + ";\n";
    }
    if (nd) {
      comp += vstore;
    } else {
      comp += "      if (i < nfull) {\n" + vstore + "      } else {\n";
      comp += "#pragma unroll\n        for (int j = 0; j < " + VS + "; ++j)\n";
      comp += "          if (base + j < n) {\n";
      for (int o = 0; o < int(g.outputs.size()); ++o) {
        int a = e.out_access(o);
        comp += "            " + e.ptr(a) + "[" + at(a, true) + "] = ov" + std::to_string(o) +
                ".v[j];\n";
      }
      comp += "          }\n      }\n";
    }
    if (UU > 1) {
      comp += "#pragma unroll\n      for (int k = 0; k + 1 < " + US + "; ++k) {\n";
      for (int leaf : vec_leaves)
        comp +=
            "        lv" + std::to_string(leaf) + "[k] = lv" + std::to_string(leaf) + "[k + 1];\n";
      for (int d : dims)
        comp += "        xa" + std::to_string(d) + "[k] = xa" + std::to_string(d) + "[k + 1];\n";
      comp += "      }\n";
    }
    comp += "    }\n";

    if (nd) {
      loop += "  const U nv = n / " + VS + "u;\n";
    } else {
      loop += "  const U nfull = n / " + VS + "u, nv = nfull + (n % " + VS + "u != 0);\n";
    }
    loop += load + comp + "  }\n";
  } else if (contig) {
    auto at = [&](int a) {
      std::string o = off(a);
      return e.rank == 1 && e.cls(a, 0) == Cls::One ? o + " + (I)i" : o;
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
    loop += "  for (U i = " + tid + "; i < n; i += step) {\n";
    loop += e.body(b, "    ") + "  }\n";
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

  const int UU = V > 1 ? std::max(1, v.unroll) : 1;
  std::string n = e.uvalue({ValueSlot::N});
  // The body takes its block and grid (lm_bx, lm_gx) as arguments: the kernel of segments
  // (segments_source) runs it for each group's share of one grid.
  std::string k =
      "__device__ __forceinline__ void loom_body(const P& p, unsigned lm_bx, "
      "unsigned lm_gx) {\n";
  k += e.decls();
  k += "  const U n = " + n + ";\n  const U step = (U)blockDim.x * lm_gx" +
       (UU > 1 ? " * " + std::to_string(UU) + "u" : std::string()) + ";\n";
  k += top + loop + "}\n";
  k += "extern \"C\" __global__ void __launch_bounds__(256) loom_kernel(const P p) {\n"
       "  loom_body(p, blockIdx.x, gridDim.x);\n}\n";
  out.source = e.prelude() + k;
  out.entries = {"loom_kernel"};
  out.params = e.spec();
}

}  // namespace loom::cuda::gen

namespace loom::cuda {

std::string segments_source(const Generated& pointwise, int k) {
  // A block finds its group by the grid's prefix of blocks (start), then runs the body with its
  // block and grid within that group's share. __grid_constant__: the segments are read where
  // the launch put them, not copied per thread to be indexed.
  const std::string K = std::to_string(k);
  return pointwise.source + "struct PS {\n  P seg[" + K + "];\n  unsigned start[" + K +
         " + 1];\n  int n;\n};\n"
         "extern \"C\" __global__ void __launch_bounds__(256) "
         "loom_kernel_seg(const __grid_constant__ PS q) {\n"
         "  int lo = 0, hi = q.n - 1;\n"
         "  while (lo < hi) {\n"
         "    const int mid = (lo + hi + 1) / 2;\n"
         "    if (blockIdx.x >= q.start[mid]) lo = mid; else hi = mid - 1;\n"
         "  }\n"
         "  loom_body(q.seg[lo], blockIdx.x - q.start[lo], q.start[lo + 1] - q.start[lo]);\n}\n";
}

}  // namespace loom::cuda
