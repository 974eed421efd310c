// Staged row tiles (Variant::stage, LOOM_CUDA_ROW_STAGE): rows of a leaf whose one reduced dim is
// strided and whose innermost kept dim is unit-stride (a softmax over the last dim of x.t()). A
// lane of the plain row kernel reads such a row an element a reduced index apart, one 32-byte
// sector for 2-4 useful bytes (a small part of the copy's bandwidth). A staged block first copies
// its `stage` consecutive kept rows, the whole reduced length, into dynamic shared memory: thread t
// takes tile row t % stage and reduced indices t / stage, t / stage + block / stage, ..., so a
// warp's loads are runs of `stage` adjacent elements (16-64 bytes) and every byte fetched is used.
// The passes then run as in the loop row kernel, the leaf walked like a unit-stride one: chunk
// ch (vw columns) of tile row r is one vector of the tile, at [(ch * pitch + r) * vw] with
// pitch = stage + 1 (odd), so the 16-byte vectors of a warp's lanes (consecutive ch, one row)
// fall in different banks (vw 1: 4-byte words, 32 banks). Outputs stay rows of the logical
// shape, stored by the row kernel's lanes as before (vectors of consecutive columns).
//
// A kernel checks the dynamic shared memory its launch got (%dynamic_smem_size) and reads the
// leaf's chunks from global memory, element by element at its stride, when it is short (a
// launch path that passes no dynamic shared memory): the same results, never an access past
// the tile.
#include <algorithm>

#include "cuda/codegen_emit.h"

namespace loom::cuda::gen {

bool stage_leaf(const Emitter& e, int a) {
  if (a >= e.leaves || !e.is_memory(a) || e.g.leaves[a].space != Space::Full) return false;
  if (e.rank - e.kept != 1 || e.kept < 1) return false;
  return e.cls(a, e.rank - 1) == Cls::Var && e.cls(a, e.kept - 1) == Cls::One;
}

std::vector<int> stage_leaves(const Emitter& e) {
  std::vector<int> v;
  for (int a = 0; a < e.leaves; ++a)
    if (stage_leaf(e, a)) v.push_back(a);
  // Widest first: each tile starts at a multiple of its element size (cols * pitch * wider).
  std::stable_sort(v.begin(), v.end(), [&](int x, int y) {
    return itemsize(e.storage_dtype(x)) > itemsize(e.storage_dtype(y));
  });
  return v;
}

int stage_col_bytes(const Emitter& e, int rows) {
  int b = 0;
  for (int a : stage_leaves(e)) b += (rows + 1) * int(itemsize(e.storage_dtype(a)));
  return b;
}

namespace {
std::string S(int64_t i) { return std::to_string(i); }
}  // namespace

std::string stage_setup(Emitter& e, const Variant& v) {
  const std::vector<int> ls = stage_leaves(e);
  std::string c = "  extern __shared__ __align__(16) unsigned char lm_sm[];\n";
  c += "  unsigned lm_dsm;\n  asm(\"mov.u32 %0, %%dynamic_smem_size;\" : \"=r\"(lm_dsm));\n";
  c += "  const bool stg = (unsigned long long)lm_dsm >= (unsigned long long)cols * " +
       S(stage_col_bytes(e, v.stage)) + "ull;\n";
  std::string at = "0";
  for (int a : ls) {
    const std::string t = Emitter::storage_type(e.storage_dtype(a));
    c += "  " + t + "* T" + S(a) + " = (" + t + "*)(lm_sm + " + at + ");\n";
    at += " + (unsigned long long)cols * " + S((v.stage + 1) * int(itemsize(e.storage_dtype(a))));
  }
  return c;
}

std::string stage_copy(Emitter& e, const Variant& v, const std::string& ind) {
  const std::vector<int> ls = stage_leaves(e);
  // 8 loads in flight a thread (over all tiles): within 32 registers without spills (ptxas;
  // 16 guarded loads spilled).
  const int R = v.stage, JS = v.block() / R, P = R + 1;
  const int U8 = std::max(2, 8 / std::max(1, int(ls.size())));
  const std::string in2 = ind + "  ";
  auto src = [&](int a, const std::string& j) {
    std::string t = e.terms(a, e.kept, e.rank, [&](int) { return "(I)(" + j + ")"; });
    return e.ptr(a) + "[sb" + S(a) + " + " + t + "]";
  };
  auto dst = [&](int a, const std::string& j) {
    if (v.vw == 1) return "T" + S(a) + "[(" + j + ") * " + S(P) + "u + cr]";
    const std::string w = S(v.vw) + "u";
    return "T" + S(a) + "[((" + j + ") / " + w + " * " + S(P) + "u + cr) * " + w + " + (" + j +
           ") % " + w + "]";
  };
  // Whole steps of U8 indices a thread, then one step for the rest (a short row's only step),
  // its loads clamped to the row's last index (no predicate a load) and its stores guarded: all
  // loads of a step, then its shared stores, so its global loads are in flight together (a
  // load after a shared store through another pointer would wait for it).
  const std::string ju = "j + (U)(u * " + S(JS) + ")", in4 = in2 + "  ";
  auto step = [&](bool last) {
    std::string c;
    for (int a : ls) {
      const std::string t = Emitter::storage_type(e.storage_dtype(a));
      c += in2 + t + " x" + S(a) + "[" + S(U8) + "];\n";
    }
    const std::string at = last ? "(" + ju + " < cols ? " + ju + " : cols - 1u)" : ju;
    c += in2 + "#pragma unroll\n" + in2 + "for (int u = 0; u < " + S(U8) + "; ++u) {\n";
    for (int a : ls) c += in4 + "x" + S(a) + "[u] = " + src(a, at) + ";\n";
    c += in2 + "}\n" + in2 + "#pragma unroll\n" + in2 + "for (int u = 0; u < " + S(U8) +
         "; ++u) {\n";
    const std::string g = last ? in4 + "if (" + ju + " < cols) {\n" : "";
    const std::string i5 = last ? in4 + "  " : in4;
    c += g;
    for (int a : ls) c += i5 + dst(a, ju) + " = x" + S(a) + "[u];\n";
    return c + (last ? in4 + "}\n" : "") + in2 + "}\n";
  };
  std::string c = ind + "U j = threadIdx.x / " + S(R) + "u;\n";
  c += ind + "for (; j + " + S((U8 - 1) * JS) + "u < cols; j += " + S(U8 * JS) + "u) {\n";
  c += step(false) + ind + "}\n";
  c += ind + "if (j < cols) {\n" + step(true);
  return c + ind + "}\n";
}

}  // namespace loom::cuda::gen

namespace loom::cuda {

int stage_col_bytes(const Group& g, int rows) {
  gen::Emitter e(g);
  return gen::stage_col_bytes(e, rows);
}

}  // namespace loom::cuda
