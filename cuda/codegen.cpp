// The shared half of the code generator: variant keys, layouts, types, loads and stores, node
// statements (each primitive's expression and a reduction's identity and combine come from
// cuda/prims.cpp), accumulators and parameters. The prelude is in codegen_prelude.cpp.
#include "cuda/codegen.h"

#include <algorithm>
#include <sstream>

#include "cuda/codegen_emit.h"
#include "cuda/prims.h"
#include "tensor/error.h"

namespace loom::cuda {

std::string Variant::key() const {
  std::ostringstream os;
  if (!reduce) {
    os << "pw_v" << vec;
    if (vec > 1) os << "_u" << unroll << (roll ? "_roll" : "");
  } else {
    os << (split ? "split" : "row") << "_t" << tpr << "_r" << rpb << "_k" << k << "_w" << vw;
    if (remat) os << "_m" << (remat > 1 ? "2" : "");
    if (minb > 0) os << "_b" << minb;
    if (unroll > 1) os << "_u" << unroll;
    if (sync1) os << "_s1";
    if (prefetch) os << "_p" << prefetch;
    if (fexp) os << "_x";
    if (shift >= 0) os << "_h" << shift << "n" << std::hex << novec << std::dec;
    if (shifted) os << "d" << dshift << "s" << std::hex << shifted << std::dec;
    if (stage) os << "_g" << stage;
    if (vec > 1) os << "_v" << vec;
    if (comb) os << "_c" << int(comb);
    if (cs > 1) os << "_l" << int(cs);
  }
  return os.str();
}

size_t ParamSpec::bytes() const {
  size_t b = values_offset() + values.size() * (index64 ? 8 : 4);
  return std::max<size_t>(8, (b + 7) / 8 * 8);
}

Layout layout_of(const Group& g) {
  gen::Emitter e(g);
  if (!g.has_reduce()) {
    if (e.rank > 1) return Layout::Pointwise;
    for (int a = 0; a < e.accesses(); ++a)
      if (e.rank == 1 && e.cls(a, 0) == gen::Cls::Var) return Layout::Pointwise;
    return Layout::PointwiseContiguous;
  }
  if (e.rank == e.kept) return Layout::Columns;  // one element a row
  bool row = false, col = false;
  for (int a = 0; a < e.accesses(); ++a) {
    if (!e.is_memory(a)) continue;
    bool full = a < e.leaves ? g.leaves[a].space == Space::Full
                             : g.nodes[g.outputs[a - e.leaves].node].space == Space::Full;
    if (!full) continue;
    if (e.cls(a, e.rank - 1) == gen::Cls::One) row = true;
    if (e.kept > 0 && e.cls(a, e.kept - 1) == gen::Cls::One) col = true;
  }
  return row || !col ? Layout::Rows : Layout::Columns;
}

Generated generate(const Group& g, const Variant& v) {
  LOOM_CHECK(!g.opaque, Value, "cuda codegen: opaque groups run through the backend directly");
  Generated out;
  if (v.reduce)
    gen::generate_rows(g, v, out);
  else
    gen::generate_pointwise(g, v, out);
  return out;
}

namespace gen {

Emitter::Emitter(const Group& g_) : g(g_) {
  rank = int(g.space.size());
  kept = g.n_kept;
  leaves = int(g.leaves.size());
}

const Strides& Emitter::strides(int a) const {
  return a < leaves ? g.leaves[a].strides : g.outputs[a - leaves].strides;
}

Cls Emitter::cls(int a, int d) const {
  int64_t s = strides(a)[d];
  return s == 0 ? Cls::Zero : s == 1 ? Cls::One : Cls::Var;
}

DType Emitter::storage_dtype(int a) const {
  return a < leaves ? g.leaves[a].dtype : g.outputs[a - leaves].dtype(g.nodes);
}

int Emitter::ptr_slot(int code) {
  size_t i = 0;
  while (i < ptr_slots_.size() && ptr_slots_[i] != code) ++i;
  if (i == ptr_slots_.size()) ptr_slots_.push_back(code);
  used_.insert(int(i));
  return int(i);
}

std::string Emitter::ptr(int a) {
  ptr_slot(a);
  return a < leaves ? "L" + std::to_string(a) : "O" + std::to_string(a - leaves);
}

std::string Emitter::scratch(int which) {
  ptr_slot(which);
  return which == kPartials ? "PART" : which == kFinals ? "FIN" : "CNT";
}

std::string Emitter::terms(int a, int d0, int d1, const std::function<std::string(int)>& idx) {
  std::string s;
  for (int d = d0; d < d1; ++d) {
    Cls c = cls(a, d);
    if (c == Cls::Zero) continue;
    if (!s.empty()) s += " + ";
    s += c == Cls::One ? idx(d) : idx(d) + " * " + value({ValueSlot::Stride, a, d});
  }
  return s;
}

std::string Emitter::decompose(const std::string& src, int d0, int d1,
                               const std::vector<bool>& used, const std::string& var,
                               const std::string& ind) {
  int lo = -1;
  for (int d = d0; d < d1 && lo < 0; ++d)
    if (used[d]) lo = d;
  if (lo < 0) return "";
  std::string t = "t" + var, code = ind + "U " + t + " = " + src + ";\n";
  for (int d = d1 - 1; d >= lo; --d) {
    std::string name = var + std::to_string(d), size = value({ValueSlot::Size, -1, d});
    if (d == d0) {
      code += ind + "const I " + name + " = (I)" + t + ";\n";
    } else if (d == lo) {
      code += ind + "const I " + name + " = (I)(" + t + " % (U)" + size + ");\n";
    } else {
      if (used[d]) code += ind + "const I " + name + " = (I)(" + t + " % (U)" + size + ");\n";
      code += ind + t + " /= (U)" + size + ";\n";
    }
  }
  return code;
}

std::string Emitter::value(ValueSlot s) {
  for (size_t i = 0; i < values_.size(); ++i)
    if (values_[i] == s) return "p.v[" + std::to_string(i) + "]";
  values_.push_back(s);
  return "p.v[" + std::to_string(values_.size() - 1) + "]";
}

ParamSpec Emitter::spec() const {
  ParamSpec p;
  p.ptrs = ptr_slots_;
  p.scalars = int(g.scalars.size());
  p.values = values_;
  p.index64 = g.index64;
  return p;
}

std::string Emitter::decls() const {
  std::string s;
  for (int i : used_) {
    int a = ptr_slots_[i];
    std::string slot = "p.p[" + std::to_string(i) + "]";
    if (a == kPartials || a == kFinals) {
      s += std::string("  long long* ") + (a == kPartials ? "PART" : "FIN") + " = (long long*)" +
           slot + ";\n";
    } else if (a == kCounters) {
      s += "  unsigned* CNT = (unsigned*)" + slot + ";\n";
    } else if (a < leaves) {
      std::string t = storage_type(g.leaves[a].dtype);
      s += "  const " + t + "* L" + std::to_string(a) + " = (const " + t + "*)" + slot + ";\n";
    } else {
      std::string t = storage_type(storage_dtype(a));
      s += "  " + t + "* O" + std::to_string(a - leaves) + " = (" + t + "*)" + slot + ";\n";
    }
  }
  return s;
}

const char* Emitter::ctype(DType t) {
  switch (t) {
    case DType::Float16:
    case DType::BFloat16:
    case DType::Float32:
      return "float";
    case DType::Float64:
      return "double";
    case DType::Int64:
    case DType::UInt32:  // computed in int64 (tensor/dtype.h)
      return "long long";
    case DType::UInt64:
      return "unsigned long long";
    case DType::Bool:
      return "unsigned char";
    default:  // int32, and the narrower integers it computes
      return "int";
  }
}

const char* Emitter::storage_type(DType t) {
  switch (t) {
    case DType::Bool:
    case DType::UInt8:
      return "unsigned char";
    case DType::Int8:
      return "signed char";
    case DType::Int16:
      return "short";
    case DType::UInt16:
      return "unsigned short";
    case DType::Int32:
      return "int";
    case DType::UInt32:
      return "unsigned int";
    case DType::Int64:
      return "long long";
    case DType::UInt64:
      return "unsigned long long";
    case DType::Float16:
    case DType::BFloat16:
      return "unsigned short";
    case DType::Float32:
      return "float";
    case DType::Float64:
      return "double";
  }
  return "?";
}

std::string Emitter::load(DType t, const std::string& raw) {
  switch (t) {
    case DType::Float16:
      need("h2f");
      return "lm_h2f(" + raw + ")";
    case DType::BFloat16:
      need("b2f");
      return "lm_b2f(" + raw + ")";
    case DType::Bool:
      return "(unsigned char)(" + raw + " != 0)";
    case DType::UInt8:
    case DType::Int8:
    case DType::Int16:
    case DType::UInt16:
    case DType::UInt32:
      return "(" + std::string(ctype(t)) + ")" + raw;  // widened to the compute type
    default:
      return raw;
  }
}

std::string Emitter::store(DType t, const std::string& v) {
  switch (t) {
    case DType::Float16:
      need("f2h");
      return "lm_f2h(" + v + ")";
    case DType::BFloat16:
      need("f2b");
      return "lm_f2b(" + v + ")";
    case DType::Bool:
      return "(unsigned char)(" + v + " != 0)";
    case DType::UInt8:
    case DType::Int8:
    case DType::Int16:
    case DType::UInt16:
    case DType::UInt32:
      return "(" + std::string(storage_type(t)) + ")" + v;  // truncates
    default:
      return v;
  }
}

std::string Emitter::op_expr(int id, const std::vector<std::string>& args) {
  return element_expr(*this, id, args);
}

std::string Emitter::index_expr(int id, const std::string& lin) {
  return element_expr(*this, id, {lin});
}

std::string Emitter::body(const Body& b, const std::string& ind) {
  std::string code;
  std::vector<bool> here(g.nodes.size(), false);
  for (int id : b.nodes) here[id] = true;
  for (int id : b.nodes) {
    const GNode& n = g.nodes[id];
    std::string v;
    if (is_load(n)) {
      v = load(g.leaves[n.leaf].dtype, b.raw(n.leaf));
    } else if (n.leaf >= 0) {
      v = index_expr(id, b.lin(n.leaf));
    } else {
      std::vector<std::string> args;
      for (int a : {n.a, n.b, n.c})
        if (a >= 0) args.push_back(here[a] ? "f" + std::to_string(a) : b.ref(a));
      v = op_expr(id, args);
    }
    code += ind + "const " + ntype(id) + " f" + std::to_string(id) + " = " + v + ";\n";
    if (b.after) b.after(id, code);
  }
  return code;
}

std::string Emitter::row_node(int id, const std::string& raw, const std::string& lin) {
  const GNode& n = g.nodes[id];
  std::string v;
  if (is_load(n)) {
    v = load(g.leaves[n.leaf].dtype, raw);
  } else if (n.op == Op::Gather) {  // a row gather: `raw` reads its tensor's leaf
    v = load(g.leaves[g.nodes[n.a].leaf].dtype, raw);
  } else if (n.leaf >= 0) {
    v = index_expr(id, lin);
  } else {
    std::vector<std::string> args;
    for (int a : {n.a, n.b, n.c})
      if (a >= 0) args.push_back("r" + std::to_string(a));
    v = op_expr(id, args);
  }
  return "const " + ntype(id) + " r" + std::to_string(id) + " = " + v + ";\n";
}

Acc Emitter::acc(int r) const {
  const GNode& n = g.nodes[r];
  std::string it = ctype(g.nodes[n.a].dtype);
  Acc a;
  a.index = reduce_kind(n.op) == ReduceKind::Index;
  if (reduce_kind(n.op) == ReduceKind::Bool) {
    a.type = "int";
  } else if (it == "float") {
    const WideAcc w = cuda_prim(n.op).wide;
    const bool wide = w == WideAcc::Always || (w == WideAcc::IntoF64 && n.dtype == DType::Float64);
    a.type = wide ? "double" : "float";
  } else if (it == "double") {
    a.type = "double";
  } else if (it == "unsigned long long") {
    a.type = it;  // uint64: its extremes compare unsigned
  } else {
    a.type = "long long";
  }
  return a;
}

std::string Emitter::acc_init(int r) {
  return acc_identity(prim(g.nodes[r].op).identity, acc(r).type);
}

std::string Emitter::acc_add(int r, const std::string& a, const std::string& ai,
                             const std::string& v, const std::string& col) {
  const Combine c = prim(g.nodes[r].op).combine;
  // Or / And fold the value's truth; the others the value in the accumulator's type.
  const std::string b =
      c == Combine::Or || c == Combine::And ? "(" + v + " != 0)" : "(" + acc(r).type + ")" + v;
  return acc_step(*this, c, a, ai, b, "(long long)" + col);
}

std::string Emitter::acc_combine(int r, const std::string& a, const std::string& ai,
                                 const std::string& b, const std::string& bi) {
  return acc_step(*this, prim(g.nodes[r].op).combine, a, ai, b, bi);
}

std::string Emitter::acc_final(int r, const std::string& a, const std::string& ai) const {
  const GNode& n = g.nodes[r];
  const std::string T = ntype(r);
  if (acc(r).index) return "(" + T + ")(" + ai + " < 0 ? 0 : " + ai + ")";
  if (reduce_kind(n.op) == ReduceKind::Bool) return "(" + T + ")(" + a + " != 0)";
  return "(" + T + ")" + a;
}

std::string Emitter::acc_to_word(int r, const std::string& a) {
  return is_fp(acc(r).type) ? "__double_as_longlong((double)" + a + ")" : "(long long)" + a;
}

std::string Emitter::acc_from_word(int r, const std::string& w) {
  std::string t = acc(r).type;
  if (t == "float") return "(float)__longlong_as_double(" + w + ")";
  if (t == "double") return "__longlong_as_double(" + w + ")";
  return "(" + t + ")" + w;
}

std::vector<bool> closure(const Group& g, const std::vector<int>& targets,
                          const std::function<bool(int)>& stop) {
  std::vector<bool> need(g.nodes.size(), false);
  std::vector<int> st = targets;
  while (!st.empty()) {
    int t = st.back();
    st.pop_back();
    if (t < 0 || need[t]) continue;
    need[t] = true;
    if (stop && stop(t)) continue;
    const GNode& n = g.nodes[t];
    for (int a : {n.a, n.b, n.c}) st.push_back(a);
  }
  return need;
}

}  // namespace gen
}  // namespace loom::cuda
