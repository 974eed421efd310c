// The CUDA lowering of every primitive, one case a row of fusion/prims.h: its compile weight, its
// remat level and its element expression, with the CPU interpreter's semantics (cpu/math.cpp,
// cpu/interp.cpp). No default: this file is compiled with -Werror=switch, so a new row fails the
// build until it is lowered here or declined (a null expression).
#include "cuda/prims.h"

#include <array>
#include <sstream>

#include "cuda/codegen_emit.h"
#include "tensor/error.h"

namespace loom::cuda::gen {

// One element of node n: its result type T, its first operand's compute type IT, the operands'
// values x, y (args), and x as a float for the float-valued unary ops (X).
struct Expr {
  Expr(Emitter& e_, int id, const std::vector<std::string>& args_)
      : e(e_), n(e_.g.nodes[id]), args(args_) {
    T = e.ntype(id);
    if (n.a >= 0) IT = Emitter::ctype(e.g.nodes[n.a].dtype);
    fp = is_fp(IT), dbl = IT == "double", uns = IT == "unsigned long long";
    if (!args.empty()) x = args[0];
    if (args.size() > 1) y = args[1];
    X = fp || !is_fp(T) ? x : "(" + T + ")" + x;  // FloatOut on a stray int
    one = lit(1), half = lit(0.5);
  }

  Emitter& e;
  const GNode& n;
  const std::vector<std::string>& args;
  std::string T, IT, x, y, X, one, half;
  bool fp = false, dbl = false;  // IT is float or double; IT is double
  bool uns = false;              // IT is uint64's: no value is below 0

  std::string lit(double v) const {
    std::ostringstream os;
    os.precision(17);
    os << v;
    std::string s = os.str();
    if (s.find_first_of(".e") == std::string::npos) s += ".0";
    return dbl ? s : s + "f";
  }
  // A math-library function in IT's precision (the float form has an 'f' suffix).
  std::string fn(const char* name) const { return std::string(name) + (dbl ? "" : "f"); }
  std::string call(const char* name, const std::string& v) const {
    return fn(name) + "(" + v + ")";
  }
  std::string math(const char* name) const { return call(name, X); }
  // f(X) in double, rounded once for a float input: for functions whose float forms miss the
  // bounds and that no kernel's speed depends on.
  std::string in_double(const std::string& f) const {
    return dbl ? f + "(" + X + ")" : "(" + T + ")" + f + "((double)" + X + ")";
  }
  // floor and friends: an integer passes through unchanged.
  std::string rounding(const char* name) const { return fp ? call(name, x) : x; }
  // `logical`: on bools the operator is a logical or / and (torch's bool + and *): kept 0 or 1
  // so later casts see 1, not 2.
  std::string bin(const char* o, bool logical = false) const {
    if (logical && T == "unsigned char")
      return "(unsigned char)((" + x + " " + o + " " + y + ") != 0)";
    return "(" + T + ")(" + x + " " + o + " " + y + ")";
  }
  std::string cmp(const char* o) const { return "(unsigned char)(" + x + " " + o + " " + y + ")"; }
  // `expr`, which calls the device helper `name` (the prelude then defines it).
  std::string helper(const char* name, const std::string& expr) const {
    e.need(name);
    return expr;
  }
};

namespace {

using S = std::string;

// Compile weights: math-library calls are inlined from libdevice, so each costs NVRTC several
// simple ops' time, and sin/cos/tan with their slow path's argument reduction many more.
constexpr int kSimple = 1, kLibm = 6, kTrig = 40;

// v, of the compute type of narrow integer dtype `to`, wrapped to `to`'s own type (the CPU's
// wrap_int, tensor/convert.h); other dtypes: v itself.
S wrap_narrow(DType to, const S& v) {
  if (!is_narrow_int(to)) return v;
  return "(" + S(Emitter::ctype(to)) + ")(" + Emitter::storage_type(to) + ")(" + v + ")";
}

// As the CPU's cast (cpu/math.cpp float_to_int): a float into a signed integer saturates at its
// compute type's range, then wraps; into an unsigned one it wraps through int64 (uint64
// saturates from 2^64).
S cast_expr(const Expr& c) {
  const DType to = c.n.dtype;
  const S& x = c.x;
  if (to == DType::Bool) return "(unsigned char)(" + x + " != 0)";
  if (is_integral(to) && c.fp) {
    if (to == DType::UInt64) return c.helper("f2u64", "lm_f2u64(" + x + ")");
    if (is_unsigned(to)) return wrap_narrow(to, c.helper("f2u", "lm_f2u(" + x + ")"));
    c.e.need("f2i");
    if (to == DType::Int64)
      return "lm_f2i<long long>(" + x + ", (-9223372036854775807ll - 1), 9223372036854775807ll)";
    return wrap_narrow(to, "lm_f2i<int>(" + x + ", (-2147483647 - 1), 2147483647)");
  }
  // A narrow load already holds a value of its type: copying it needs no rounding.
  const GNode& a = c.e.g.nodes[c.n.a];
  if (is_load(a) && a.dtype == to) return x;
  S r = c.IT == c.T ? x : "(" + c.T + ")" + x;
  if (to == DType::Float16) r = c.helper("rh", "lm_rh(" + r + ")");
  if (to == DType::BFloat16) r = c.helper("rb", "lm_rb(" + r + ")");
  return wrap_narrow(to, r);
}

S random_expr(const Expr& c, const char* helper) {
  const int s = c.n.scalar;
  return c.helper(helper, "lm_" + S(helper) + "((unsigned long long)" + c.e.scalar_i(s) +
                              ", (unsigned long long)" + c.e.scalar_i(s + 1) +
                              " + (unsigned long long)(" + c.x + "))");
}

// The lowering of one row: {weight, remat level, expression[, wide accumulator]}.
CudaPrim lowering(Op op) {
  switch (op) {
    // ---- unary ---------------------------------------------------------------------------------
    case Op::Neg:
      return {kSimple, 1, [](const Expr& c) { return "(" + c.T + ")(-" + c.x + ")"; }};
    case Op::Abs:
      return {kSimple, 0, [](const Expr& c) -> S {
                if (c.IT == "unsigned char" || c.uns) return c.x;  // bool, uint64: >= 0
                if (c.fp) return c.call("fabs", c.x);              // abs(-0.0) is +0.0
                return "(" + c.x + " < 0 ? (" + c.T + ")(-" + c.x + ") : " + c.x + ")";
              }};
    case Op::Sign:
      return {kSimple, 0, [](const Expr& c) -> S {
                const S& x = c.x;
                if (c.IT == "unsigned char") return "(unsigned char)(" + x + " != 0)";
                if (c.uns) return "(" + c.T + ")(" + x + " != 0)";
                S s = "(" + c.T + ")((" + x + " > 0) - (" + x + " < 0))";
                return c.fp ? "(" + x + " != " + x + " ? " + x + " : " + s + ")" : s;
              }};
    case Op::Square:
      return {kSimple, 0, [](const Expr& c) { return "(" + c.T + ")(" + c.x + " * " + c.x + ")"; }};
    case Op::Relu:
      return {kSimple, 0, [](const Expr& c) -> S {
                const S& x = c.x;
                if (c.IT == "unsigned char") return x;  // bool: >= 0
                if (!c.fp) return "(" + x + " > 0 ? " + x + " : (" + c.T + ")0)";
                return "(" + x + " > 0 ? " + x + " : (" + x + " != " + x + " ? " + x + " : (" +
                       c.T + ")0))";
              }};
    case Op::Floor:
      return {kSimple, 0, [](const Expr& c) { return c.rounding("floor"); }};
    case Op::Ceil:
      return {kSimple, 0, [](const Expr& c) { return c.rounding("ceil"); }};
    case Op::Round:
      return {kSimple, 0, [](const Expr& c) { return c.rounding("rint"); }};
    case Op::Trunc:
      return {kSimple, 0, [](const Expr& c) { return c.rounding("trunc"); }};
    case Op::BitwiseNot:
      return {kSimple, 0, [](const Expr& c) {
                return c.T == "unsigned char" ? "(unsigned char)(!" + c.x + ")"
                                              : "(" + c.T + ")(~" + c.x + ")";
              }};
    case Op::Exp:  // level 2: a softmax's e, about 10 instructions an element for 4 bytes
      return {kLibm, 2, [](const Expr& c) {
                // Row kernels' fast exp (Variant::fexp): ex2.approx of x log2 e.
                if (c.e.fast_exp && c.T == "float") return c.helper("fexp", "lm_fexp(" + c.X + ")");
                return c.math("exp");
              }};
    case Op::Exp2:
      return {kLibm, 0, [](const Expr& c) { return c.math("exp2"); }};
    case Op::Expm1:
      return {kLibm, 0, [](const Expr& c) { return c.math("expm1"); }};
    case Op::Log:
      return {kLibm, 0, [](const Expr& c) { return c.math("log"); }};
    case Op::Log2:
      return {kLibm, 0, [](const Expr& c) { return c.math("log2"); }};
    case Op::Log1p:
      return {kLibm, 0, [](const Expr& c) { return c.math("log1p"); }};
    case Op::Sqrt:
      return {kSimple, 0, [](const Expr& c) { return c.math("sqrt"); }};
    case Op::Rsqrt:
      return {kSimple, 0, [](const Expr& c) { return "(" + c.one + " / " + c.math("sqrt") + ")"; }};
    case Op::Reciprocal:
      return {kSimple, 0, [](const Expr& c) { return "(" + c.one + " / " + c.X + ")"; }};
    case Op::Sin:
      return {kTrig, 0, [](const Expr& c) { return c.math("sin"); }};
    case Op::Cos:
      return {kTrig, 0, [](const Expr& c) { return c.math("cos"); }};
    case Op::Tan:
      return {kTrig, 0, [](const Expr& c) { return c.math("tan"); }};
    case Op::Tanh:
      return {kLibm, 0, [](const Expr& c) { return c.math("tanh"); }};
    case Op::Asin:
      return {kLibm, 0, [](const Expr& c) { return c.math("asin"); }};
    case Op::Acos:
      return {kLibm, 0, [](const Expr& c) { return c.math("acos"); }};
    case Op::Atan:
      return {kLibm, 0, [](const Expr& c) { return c.math("atan"); }};
    case Op::Sinh:
      return {kLibm, 0, [](const Expr& c) { return c.math("sinh"); }};
    case Op::Cosh:
      return {kLibm, 0, [](const Expr& c) { return c.math("cosh"); }};
    case Op::Erf:
      return {kLibm, 0, [](const Expr& c) { return c.math("erf"); }};
    case Op::Sigmoid:  // the activations: device helpers (cuda/codegen_prelude.cpp)
      return {kLibm, 0,
              [](const Expr& c) { return c.helper("sigmoid", "lm_sigmoid(" + c.X + ")"); }};
    case Op::Gelu:
      return {kLibm, 0, [](const Expr& c) {
                if (c.n.dtype == DType::BFloat16 || c.n.dtype == DType::Float16)
                  return c.helper("gelunarrow", "lm_gelu_narrow(" + c.X + ")");
                return c.helper("gelu", "lm_gelu(" + c.X + ")");
              }};
    case Op::GeluTanh:
      return {kLibm, 0,
              [](const Expr& c) { return c.helper("gelutanh", "lm_gelu_tanh(" + c.X + ")"); }};
    case Op::Silu:
      return {kLibm, 0, [](const Expr& c) { return c.helper("silu", "lm_silu(" + c.X + ")"); }};
    case Op::Softplus:
      return {kLibm, 0,
              [](const Expr& c) { return c.helper("softplus", "lm_softplus(" + c.X + ")"); }};
    case Op::IsNan:
      return {kSimple, 0,
              [](const Expr& c) { return "(unsigned char)(" + c.x + " != " + c.x + ")"; }};
    case Op::IsInf:
      return {kSimple, 0, [](const Expr& c) {
                return c.fp ? "(unsigned char)isinf(" + c.x + ")"
                            : "(unsigned char)(" + c.x + " != " + c.x + ")";
              }};
    case Op::IsFinite:
      return {kSimple, 0, [](const Expr& c) {
                return c.fp ? "(unsigned char)isfinite(" + c.x + ")"
                            : "(unsigned char)(" + c.x + " == " + c.x + ")";
              }};
    case Op::LogicalNot:
      return {kSimple, 0, [](const Expr& c) { return "(unsigned char)(" + c.x + " == 0)"; }};
    case Op::Log10:
      return {kLibm, 0, [](const Expr& c) { return c.math("log10"); }};
    case Op::Cbrt:
      return {kLibm, 0, [](const Expr& c) { return c.math("cbrt"); }};
    case Op::Asinh:
      return {kLibm, 0, [](const Expr& c) { return c.math("asinh"); }};
    case Op::Acosh:
      return {kLibm, 0, [](const Expr& c) { return c.math("acosh"); }};
    case Op::Atanh:
      return {kLibm, 0, [](const Expr& c) { return c.math("atanh"); }};
    case Op::Erfc:
      return {kLibm, 0, [](const Expr& c) { return c.math("erfc"); }};
    case Op::Erfinv:
      return {kLibm, 0, [](const Expr& c) { return c.math("erfinv"); }};
    case Op::Lgamma:
      return {kTrig, 0, [](const Expr& c) { return c.in_double("lgamma"); }};
    case Op::Digamma:
      return {kTrig, 0,
              [](const Expr& c) { return c.helper("digamma", c.in_double("lm_digamma")); }};
    case Op::Sinc:
      return {kTrig, 0, [](const Expr& c) { return c.helper("sinc", c.in_double("lm_sinc")); }};
    case Op::Deg2rad:
      return {kSimple, 0,
              [](const Expr& c) { return "(" + c.X + " * " + c.lit(0.017453292519943295) + ")"; }};
    case Op::Rad2deg:
      return {kSimple, 0,
              [](const Expr& c) { return "(" + c.X + " * " + c.lit(57.295779513082323) + ")"; }};
    case Op::Frac:  // floats only (the op layer rejects integers)
      return {kSimple, 0,
              [](const Expr& c) { return "(" + c.x + " - " + c.call("trunc", c.x) + ")"; }};
    case Op::Signbit:
      return {kSimple, 0, [](const Expr& c) -> S {
                if (c.fp) return "(unsigned char)(signbit(" + c.x + ") != 0)";
                if (c.IT == "unsigned char" || c.uns) return "(unsigned char)0";
                return "(unsigned char)(" + c.x + " < 0)";
              }};

    // ---- binary --------------------------------------------------------------------------------
    case Op::Add:
      return {kSimple, 1, [](const Expr& c) { return c.bin("+", true); }};
    case Op::Sub:
      return {kSimple, 1, [](const Expr& c) { return c.bin("-"); }};
    case Op::Mul:
      return {kSimple, 1, [](const Expr& c) { return c.bin("*", true); }};
    case Op::Div:
      return {kSimple, 0, [](const Expr& c) {
                return c.fp ? "(" + c.x + " / " + c.y + ")"
                            : "((float)" + c.x + " / (float)" + c.y + ")";
              }};
    case Op::FloorDiv:
      return {kSimple, 0, [](const Expr& c) {
                if (c.fp) return c.helper("ffdiv", "lm_ffdiv(" + c.x + ", " + c.y + ")");
                return c.helper("ifdiv", "lm_fdiv(" + c.x + ", " + c.y + ")");
              }};
    case Op::Remainder:
      return {kLibm, 0, [](const Expr& c) {
                if (!c.fp) return c.helper("imod", "lm_imod(" + c.x + ", " + c.y + ")");
                return c.helper(c.dbl ? "fmodd" : "fmodf",
                                (c.dbl ? "lm_fmodd(" : "lm_fmodf(") + c.x + ", " + c.y + ")");
              }};
    case Op::Pow:
      return {kLibm, 0, [](const Expr& c) {
                if (c.fp) return c.fn("pow") + "(" + c.x + ", " + c.y + ")";
                return c.helper("ipow", "lm_ipow(" + c.x + ", " + c.y + ")");
              }};
    case Op::Maximum:
      return {kSimple, 0,
              [](const Expr& c) { return c.helper("max", "lm_max(" + c.x + ", " + c.y + ")"); }};
    case Op::Minimum:
      return {kSimple, 0,
              [](const Expr& c) { return c.helper("min", "lm_min(" + c.x + ", " + c.y + ")"); }};
    case Op::Atan2:
      return {kLibm, 0, [](const Expr& c) { return c.fn("atan2") + "(" + c.x + ", " + c.y + ")"; }};
    case Op::Eq:
      return {kSimple, 0, [](const Expr& c) { return c.cmp("=="); }};
    case Op::Ne:
      return {kSimple, 0, [](const Expr& c) { return c.cmp("!="); }};
    case Op::Lt:
      return {kSimple, 0, [](const Expr& c) { return c.cmp("<"); }};
    case Op::Le:
      return {kSimple, 0, [](const Expr& c) { return c.cmp("<="); }};
    case Op::Gt:
      return {kSimple, 0, [](const Expr& c) { return c.cmp(">"); }};
    case Op::Ge:
      return {kSimple, 0, [](const Expr& c) { return c.cmp(">="); }};
    case Op::LogicalAnd:
      return {kSimple, 0, [](const Expr& c) {
                return "(unsigned char)((" + c.x + " != 0) && (" + c.y + " != 0))";
              }};
    case Op::LogicalOr:
      return {kSimple, 0, [](const Expr& c) {
                return "(unsigned char)((" + c.x + " != 0) || (" + c.y + " != 0))";
              }};
    case Op::LogicalXor:
      return {kSimple, 0, [](const Expr& c) {
                return "(unsigned char)((" + c.x + " != 0) != (" + c.y + " != 0))";
              }};
    case Op::BitwiseAnd:
      return {kSimple, 0, [](const Expr& c) { return c.bin("&"); }};
    case Op::BitwiseOr:
      return {kSimple, 0, [](const Expr& c) { return c.bin("|"); }};
    case Op::BitwiseXor:
      return {kSimple, 0, [](const Expr& c) { return c.bin("^"); }};
    case Op::BitwiseLeftShift:  // torch's out-of-range counts (C leaves them undefined)
      return {kSimple, 0, [](const Expr& c) {
                return "(" + c.T + ")" + c.helper("shl", "lm_shl(" + c.x + ", " + c.y + ")");
              }};
    case Op::BitwiseRightShift:
      return {kSimple, 0, [](const Expr& c) {
                return "(" + c.T + ")" + c.helper("shr", "lm_shr(" + c.x + ", " + c.y + ")");
              }};
    case Op::Hypot:
      return {kLibm, 0, [](const Expr& c) { return c.fn("hypot") + "(" + c.x + ", " + c.y + ")"; }};
    case Op::Copysign:
      return {kSimple, 0,
              [](const Expr& c) { return c.fn("copysign") + "(" + c.x + ", " + c.y + ")"; }};
    case Op::Nextafter:
      return {kSimple, 0,
              [](const Expr& c) { return c.fn("nextafter") + "(" + c.x + ", " + c.y + ")"; }};
    case Op::Logaddexp:
      return {kLibm, 0, [](const Expr& c) {
                return c.helper("logaddexp", "lm_logaddexp(" + c.x + ", " + c.y + ")");
              }};
    case Op::Logaddexp2:
      return {kLibm, 0, [](const Expr& c) {
                return c.helper("logaddexp2", "lm_logaddexp2(" + c.x + ", " + c.y + ")");
              }};
    case Op::Xlogy:
      return {kLibm, 0, [](const Expr& c) {
                return c.helper("xlogy", "lm_xlogy(" + c.x + ", " + c.y + ")");
              }};
    case Op::Fmod:
      return {kLibm, 0, [](const Expr& c) {
                if (c.fp) return c.fn("fmod") + "(" + c.x + ", " + c.y + ")";
                return c.helper("ifmod", "lm_ifmod(" + c.x + ", " + c.y + ")");
              }};

    // ---- reductions: identity and combine from the list's columns (acc_identity, acc_step) ----
    case Op::Sum:  // a mean's sum into float64 accumulates in double
      return {kSimple, 0, nullptr, WideAcc::IntoF64};
    case Op::Prod:  // in double, as the CPU
      return {kSimple, 0, nullptr, WideAcc::Always};
    case Op::Max:
    case Op::Min:
    case Op::ArgMax:
    case Op::ArgMin:
    case Op::Any:
    case Op::All:
      return {kSimple, 0, nullptr};

    // ---- the rest ------------------------------------------------------------------------------
    case Op::Where:
      return {kSimple, 0, [](const Expr& c) {
                return "(" + c.x + " ? " + c.args[1] + " : " + c.args[2] + ")";
              }};
    case Op::Cast:
    case Op::Copy:
      return {kSimple, 1, cast_expr};
    case Op::Const:
      return {kSimple, 0, [](const Expr& c) -> S {
                const Scalar& s = c.e.g.scalars[c.n.scalar];
                S v = s.kind == Scalar::Kind::Float ? c.e.scalar_f(c.n.scalar)
                                                    : c.e.scalar_i(c.n.scalar);
                if (c.T == "unsigned char") return "(unsigned char)(" + v + " != 0)";
                return "(" + c.T + ")" + v;
              }};
    case Op::Iota:
      return {kSimple, 0, [](const Expr& c) { return "(long long)(" + c.x + ")"; }};
    case Op::Rand:
      return {kLibm, 0, [](const Expr& c) { return random_expr(c, "rand"); }};
    case Op::Randn:
      return {kLibm, 0, [](const Expr& c) { return random_expr(c, "randn"); }};
    case Op::Empty:       // memory only
    case Op::MatMul:      // run by the backend (cuda/cublaslt.cpp)
    case Op::CumSum:      // declined: the backend has no scan, so cumsum records a reduction
    case Op::Svdvals:     // declined: the backend has no SVD; svdvals runs on the host
    case Op::Gather:      // run by the backend (cuda/index_kernels.cpp)
    case Op::ScatterAdd:  // likewise
      return {kSimple, 0, nullptr};
    case Op::NumOps:
      break;
  }
  throw Error(ErrorKind::Runtime, "cuda: not a primitive");
}

}  // namespace

const CudaPrim& cuda_prim(Op op) {
  static const auto table = [] {
    std::array<CudaPrim, size_t(Op::NumOps)> t{};
    for (size_t i = 0; i < t.size(); ++i) t[i] = lowering(Op(i));
    return t;
  }();
  return table[size_t(op)];
}

std::string element_expr(Emitter& e, int id, const std::vector<std::string>& args) {
  const GNode& n = e.g.nodes[id];
  const CudaPrim& p = cuda_prim(n.op);
  if (!p.expr)
    throw Error(ErrorKind::Runtime,
                std::string("cuda codegen: no lowering for op ") + op_name(n.op));
  S v = p.expr(Expr(e, id, args));
  // A narrow integer's value wraps to its type after each op, as its store would (the CPU's
  // wrap_run); Cast and Copy wrap as they convert, Where picks values of the type, and a
  // Const is used as the scalar is (the CPU's Const rows are not wrapped either).
  if (n.op == Op::Cast || n.op == Op::Copy || n.op == Op::Where || n.op == Op::Const) return v;
  return wrap_narrow(n.dtype, v);
}

std::string acc_identity(Identity id, const std::string& acc) {
  const bool lo = id == Identity::Lowest;
  switch (id) {
    case Identity::Zero:
      return "0";
    case Identity::One:
      return "1";
    case Identity::Lowest:
    case Identity::Highest:
      if (acc == "float")
        return lo ? "__uint_as_float(0xff800000u)" : "__uint_as_float(0x7f800000u)";
      if (acc == "double")
        return lo ? "__longlong_as_double(-4503599627370496ll)"
                  : "__longlong_as_double(0x7ff0000000000000ll)";
      if (acc == "unsigned long long") return lo ? "0ull" : "18446744073709551615ull";
      return lo ? "(-9223372036854775807ll - 1)" : "9223372036854775807ll";
    case Identity::None:
      break;
  }
  throw Error(ErrorKind::Runtime, "cuda codegen: a reduction without an identity");
}

std::string acc_step(Emitter& e, Combine c, const std::string& a, const std::string& ai,
                     const std::string& b, const std::string& bi) {
  switch (c) {
    case Combine::Add:
      return a + " += " + b + ";";
    case Combine::Mul:
      return a + " *= " + b + ";";
    case Combine::Max:
      e.need("max");
      return a + " = lm_max(" + a + ", " + b + ");";
    case Combine::Min:
      e.need("min");
      return a + " = lm_min(" + a + ", " + b + ");";
    case Combine::ArgMax:
    case Combine::ArgMin:
      e.need("argcomb");
      return std::string("lm_arg<") + (c == Combine::ArgMax ? "true" : "false") + ">(" + a + ", " +
             ai + ", " + b + ", " + bi + ");";
    case Combine::Or:
      return a + " |= " + b + ";";
    case Combine::And:
      return a + " &= " + b + ";";
    case Combine::None:
      break;
  }
  return "";
}

}  // namespace loom::cuda::gen
