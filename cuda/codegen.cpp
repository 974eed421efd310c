// The shared half of the code generator: variant keys, layouts, types, loads and stores, node
// statements (each primitive's expression and a reduction's identity and combine come from
// cuda/prims.cpp), accumulators, parameters and the prelude.
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
namespace {

// Helpers a kernel may use, in dependency order (a helper's dependencies come first).
struct Snippet {
  const char* name;
  const char* deps;
  const char* code;
};

const Snippet kSnippets[] = {
    {"h2f", "",
     "__device__ __forceinline__ float lm_h2f(unsigned short h) {\n"
     "  float f;\n  asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"(h));\n  return f;\n}\n"},
    {"f2h", "",
     "__device__ __forceinline__ unsigned short lm_f2h(float f) {\n"
     "  unsigned short h;\n  asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(f));\n"
     "  return h;\n}\n"},
    {"b2f", "",
     "__device__ __forceinline__ float lm_b2f(unsigned short b) {\n"
     "  return __uint_as_float((unsigned)b << 16);\n}\n"},
    {"f2b", "",
     // Round to nearest even; NaN stays a quiet NaN (tensor/half.h). sm_80 and later convert
     // in one instruction (the integer rounding took ~6 a value: a bf16 row kernel's store
     // side was instruction-bound on the H200).
     "__device__ __forceinline__ unsigned short lm_f2b(float f) {\n"
     "#if __CUDA_ARCH__ >= 800\n"
     "  unsigned short b;\n  asm(\"cvt.rn.bf16.f32 %0, %1;\" : \"=h\"(b) : \"f\"(f));\n"
     "  return b;\n"
     "#else\n"
     "  unsigned u = __float_as_uint(f);\n"
     "  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);\n"
     "  u += 0x7fffu + ((u >> 16) & 1u);\n  return (unsigned short)(u >> 16);\n"
     "#endif\n}\n"},
    {"rh", "h2f f2h",
     "__device__ __forceinline__ float lm_rh(float f) { return lm_h2f(lm_f2h(f)); }\n"},
    {"rb", "b2f f2b",
     "__device__ __forceinline__ float lm_rb(float f) { return lm_b2f(lm_f2b(f)); }\n"},
    {"fexp", "",  // exp as 2^(x log2 e): FMUL + MUFU.EX2 (expf: ~9 SASS instructions)
     "__device__ __forceinline__ float lm_fexp(float x) {\n  float y;\n"
     "  asm(\"ex2.approx.ftz.f32 %0, %1;\" : \"=f\"(y) : \"f\"(x * 1.44269504088896341f));\n"
     "  return y;\n}\n"},
    {"max", "",
     "template <class T>\n__device__ __forceinline__ T lm_max(T a, T b) {\n"
     "  if (a != a) return a;\n  if (b != b) return b;\n  return a > b ? a : b;\n}\n"},
    {"min", "",
     "template <class T>\n__device__ __forceinline__ T lm_min(T a, T b) {\n"
     "  if (a != a) return a;\n  if (b != b) return b;\n  return a < b ? a : b;\n}\n"},
    {"ifdiv", "",  // python floor division; integer division by zero gives 0
     "template <class T>\n__device__ __forceinline__ T lm_fdiv(T a, T b) {\n"
     "  if (b == 0) return 0;\n  T q = a / b;\n"
     "  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;\n  return q;\n}\n"},
    {"imod", "",
     "template <class T>\n__device__ __forceinline__ T lm_imod(T a, T b) {\n"
     "  if (b == 0) return 0;\n  T r = a % b;\n"
     "  if (r != 0 && ((r < 0) != (b < 0))) r += b;\n  return r;\n}\n"},
    {"fmodf", "",
     "__device__ __forceinline__ float lm_fmodf(float a, float b) {\n"
     "  float r = fmodf(a, b);\n  if (r != 0 && ((r < 0) != (b < 0))) r += b;\n  return r;\n}\n"},
    {"fmodd", "",
     "__device__ __forceinline__ double lm_fmodd(double a, double b) {\n"
     "  double r = fmod(a, b);\n  if (r != 0 && ((r < 0) != (b < 0))) r += b;\n  return r;\n}\n"},
    {"ipow", "",
     "template <class T>\n__device__ __forceinline__ T lm_ipow(T a, T e) {\n"
     "  if (e < 0) return a == 1 ? (T)1 : a == -1 ? (T)((e & 1) ? -1 : 1) : (T)0;\n"
     "  T r = 1;\n  while (e) {\n    if (e & 1) r = (T)(r * a);\n    a = (T)(a * a);\n"
     "    e >>= 1;\n  }\n  return r;\n}\n"},
    {"f2i", "",  // float -> int saturates, NaN -> 0 (int8 wraps inside the int32 range)
     "template <class To, class F>\n"
     "__device__ __forceinline__ To lm_f2i(F v, To lo, To hi, int wrap8) {\n"
     "  if (!(v == v)) return 0;\n  if (v >= (F)hi) return hi;\n  if (v <= (F)lo) return lo;\n"
     "  To r = (To)v;\n  return wrap8 ? (To)(signed char)r : r;\n}\n"},
    {"f2u8", "",
     "template <class F>\n__device__ __forceinline__ int lm_f2u8(F v) {\n"
     "  if (!(v == v)) return 0;\n  F c = v < (F)9.2e18 ? v : (F)9.2e18;\n"
     "  c = c > (F)-9.2e18 ? c : (F)-9.2e18;\n  return (int)(unsigned char)(long long)c;\n}\n"},
    {"philox", "",  // Philox-4x32-10, as fusion/philox.h
     "__device__ __forceinline__ void lm_philox(unsigned long long ctr, unsigned long long key,\n"
     "                                          unsigned& r0, unsigned& r1) {\n"
     "  unsigned c0 = (unsigned)ctr, c1 = (unsigned)(ctr >> 32), c2 = 0, c3 = 0;\n"
     "  unsigned k0 = (unsigned)key, k1 = (unsigned)(key >> 32);\n"
     "#pragma unroll\n  for (int r = 0; r < 10; ++r) {\n"
     "    unsigned long long p0 = 0xD2511F53ull * c0, p1 = 0xCD9E8D57ull * c2;\n"
     "    unsigned n0 = (unsigned)(p1 >> 32) ^ c1 ^ k0, n1 = (unsigned)p1;\n"
     "    unsigned n2 = (unsigned)(p0 >> 32) ^ c3 ^ k1, n3 = (unsigned)p0;\n"
     "    c0 = n0; c1 = n1; c2 = n2; c3 = n3;\n    k0 += 0x9E3779B9u; k1 += 0xBB67AE85u;\n  }\n"
     "  r0 = c0; r1 = c1;\n}\n"},
    {"rand", "philox",
     "__device__ __forceinline__ float lm_rand(unsigned long long key, unsigned long long ctr) {\n"
     "  unsigned a, b;\n  lm_philox(ctr, key, a, b);\n"
     "  return (float)(a >> 8) * (1.0f / 16777216.0f);\n}\n"},
    {"randn", "philox",  // Box-Muller in double, as the CPU
     "__device__ __forceinline__ float lm_randn(unsigned long long key, unsigned long long ctr) {\n"
     "  unsigned a, b;\n  lm_philox(ctr, key, a, b);\n"
     "  double u1 = ((double)(a >> 8) + 1.0) * (1.0 / 16777216.0);\n"
     "  double u2 = (double)(b >> 8) * (1.0 / 16777216.0);\n"
     "  return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));\n}\n"},
    {"argcomb", "",
     // (a, ai) takes (b, bi) when b is the better extreme; NaN is the extreme; ties keep the
     // lower index, so any combining order gives the first index.
     "template <bool MX, class T>\n"
     "__device__ __forceinline__ void lm_arg(T& a, long long& ai, T b, long long bi) {\n"
     "  if (bi < 0) return;\n  bool take;\n  if (ai < 0) take = true;\n"
     "  else if (a != a) take = (b != b) && bi < ai;\n  else if (b != b) take = true;\n"
     "  else if (b == a) take = bi < ai;\n  else take = MX ? b > a : b < a;\n"
     "  if (take) {\n    a = b;\n    ai = bi;\n  }\n}\n"},
    {"vec", "",
     "template <class T, int V>\n"
     "struct alignas(sizeof(T) * V > 16 ? 16 : sizeof(T) * V) lm_vec {\n  T v[V];\n};\n"},
};

}  // namespace

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
  return a < leaves ? g.leaves[a].dtype : g.nodes[g.outputs[a - leaves].node].dtype;
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
      return "long long";
    case DType::Bool:
      return "unsigned char";
    default:
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
    case DType::Int32:
      return "int";
    case DType::Int64:
      return "long long";
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
      return "(int)" + raw;
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
      return "(unsigned char)" + v;
    case DType::Int8:
      return "(signed char)" + v;
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

std::string Emitter::prelude() const {
  std::string s = "// loom generated kernel\n";
  s += g.index64 ? "typedef long long I;\ntypedef unsigned long long U;\n"
                 : "typedef int I;\ntypedef unsigned U;\n";
  std::set<std::string> want = helpers_;
  // Pull in dependencies (the table lists them before their users, so one reverse walk does).
  for (int i = int(std::size(kSnippets)) - 1; i >= 0; --i) {
    if (!want.count(kSnippets[i].name)) continue;
    std::istringstream deps(kSnippets[i].deps);
    for (std::string d; deps >> d;) want.insert(d);
  }
  for (const Snippet& sn : kSnippets)
    if (want.count(sn.name)) s += sn.code;
  s += "struct P {\n";
  if (!ptr_slots_.empty()) s += "  const void* p[" + std::to_string(ptr_slots_.size()) + "];\n";
  if (!g.scalars.empty())
    s += "  union {\n    double f;\n    long long i;\n  } s[" + std::to_string(g.scalars.size()) +
         "];\n";
  if (!values_.empty()) s += "  I v[" + std::to_string(values_.size()) + "];\n";
  s += "};\n";
  return s;
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
