// The instruction interpreter: one handler per op name, with the domain guards of program.h.
#include "exec.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

namespace loom::fuzz {
namespace {

using Handler = Tensor (*)(const Instr&, Env&);

Tensor val(Env& e, const Instr& in, size_t i) {
  if (i >= in.args.size() || !in.args[i].is_val)
    throw Error(ErrorKind::Value, in.op + ": operand " + std::to_string(i) + " is not a value");
  return e.at(in.args[i].val);
}
Scalar scal(const Operand& o) { return o.is_int ? Scalar(int64_t(o.num)) : Scalar(o.num); }
bool arg_is_val(const Instr& in, size_t i) { return i < in.args.size() && in.args[i].is_val; }

// Float dtypes run as float64 in the reference; int and bool stay.
DType mapped(const Env& e, DType t) {
  return e.mode == Mode::Ref64 && (t == DType::Float32 || t == DType::Float64) ? DType::Float64 : t;
}

Tensor pos(const Tensor& x) { return add(abs(x), Scalar(0.5)); }
Tensor clampd(const Tensor& x, double b) { return clamp(x, Scalar(-b), Scalar(b)); }

// r * (1 +- 2^-24), the sign drawn per element (RunOptions::perturb).
Tensor perturbed(const Tensor& r, uint32_t seed) {
  std::mt19937 g(seed);
  std::vector<double> f(size_t(r.numel()));
  for (auto& x : f) x = (g() & 1) ? 1 + 0x1p-24 : 1 - 0x1p-24;
  return mul(r, tensor<double>(f, r.shape(), Options(DType::Float64)));
}

// ---- table ops -----------------------------------------------------------------------------

using UnaryFn = Tensor (*)(const Tensor&);
const std::unordered_map<std::string, UnaryFn>& unary_fns() {
  static const std::unordered_map<std::string, UnaryFn> m = {
#define LOOM_X(name, api, kind) {#api, static_cast<UnaryFn>(&loom::api)},
      LOOM_UNARY_OPS(LOOM_X)
#undef LOOM_X
  };
  return m;
}

Tensor guard_unary(const std::string& op, const Tensor& x) {
  // lgamma and digamma on [0.5, inf): clear of their poles, through their roots (1 and 2;
  // 1.46), where the tolerance model's noise covers the cancellation
  static const std::unordered_set<std::string> positive = {
      "log", "log2", "sqrt", "rsqrt", "log1p", "reciprocal", "log10", "lgamma", "digamma"};
  static const std::unordered_set<std::string> bounded = {"exp", "exp2", "expm1", "sinh", "cosh"};
  if (positive.count(op)) return pos(x);
  if (bounded.count(op)) return clampd(x, 20);
  if (op == "tan") return clampd(x, 1.25);
  if (op == "asin" || op == "acos") return clampd(x, 0.875);
  // atanh and erfinv inside (-1, 1), to 15/16 (their slopes 8.3 and 5.0 there); acosh from
  // 1.5, clear of its square-root edge at 1
  if (op == "atanh" || op == "erfinv") return clampd(x, 0.9375);
  if (op == "acosh") return add(abs(x), Scalar(1.5));
  return x;
}

struct BinaryFns {
  Tensor (*tt)(const Tensor&, const Tensor&);
  Tensor (*ts)(const Tensor&, Scalar);
  Tensor (*st)(Scalar, const Tensor&);
};
const std::unordered_map<std::string, BinaryFns>& binary_fns() {
  static const std::unordered_map<std::string, BinaryFns> m = {
#define LOOM_X(name, api, kind)                                        \
  {#api,                                                               \
   {static_cast<Tensor (*)(const Tensor&, const Tensor&)>(&loom::api), \
    static_cast<Tensor (*)(const Tensor&, Scalar)>(&loom::api),        \
    static_cast<Tensor (*)(Scalar, const Tensor&)>(&loom::api)}},
      LOOM_BINARY_OPS(LOOM_X)
#undef LOOM_X
  };
  return m;
}

Tensor binary(const Instr& in, Env& e) {
  const BinaryFns& f = binary_fns().at(in.op);
  bool divides = in.op == "div" || in.op == "floor_divide" || in.op == "remainder" ||
                 in.op == "fmod" || in.op == "xlogy";  // xlogy: log's domain
  bool power = in.op == "pow";
  auto lhs = [&](const Tensor& a) { return power ? pos(a) : a; };
  auto rhs = [&](const Tensor& b) { return divides ? pos(b) : power ? clampd(b, 2) : b; };
  if (in.args.size() != 2) throw Error(ErrorKind::Value, in.op + ": needs two operands");
  bool va = arg_is_val(in, 0), vb = arg_is_val(in, 1);
  if (va && vb) return f.tt(lhs(val(e, in, 0)), rhs(val(e, in, 1)));
  if (va) return f.ts(lhs(val(e, in, 0)), scal(in.args[1]));
  if (vb) return f.st(scal(in.args[0]), rhs(val(e, in, 1)));
  throw Error(ErrorKind::Value, in.op + ": needs a value operand");
}

Tensor where_op(const Instr& in, Env& e) {
  Tensor c = val(e, in, 0);
  bool va = arg_is_val(in, 1), vb = arg_is_val(in, 2);
  if (in.args.size() != 3) throw Error(ErrorKind::Value, "where: needs three operands");
  if (va && vb) return where(c, val(e, in, 1), val(e, in, 2));
  if (va) return where(c, val(e, in, 1), scal(in.args[2]));
  if (vb) return where(c, scal(in.args[1]), val(e, in, 2));
  return where(c, scal(in.args[1]), scal(in.args[2]));
}

// ---- reductions ----------------------------------------------------------------------------

Dims dims_of(const Instr& in) { return parse_ints(in.get("dims")); }
bool keep_of(const Instr& in) { return in.has("keep") && in.get("keep") == "1"; }

Tensor reduce(const Instr& in, Env& e) {
  Tensor x = val(e, in, 0);
  const std::string& op = in.op;
  bool k = keep_of(in);
  if (op == "argmax" || op == "argmin") {
    std::optional<int64_t> d;
    if (in.get("dim") != "none") d = std::stoll(in.get("dim"));
    return op == "argmax" ? argmax(x, d, k) : argmin(x, d, k);
  }
  if (op == "cumsum") return cumsum(x, std::stoll(in.get("dim")));
  Dims d = dims_of(in);
  if (op == "sum") return sum(x, d, k);
  if (op == "mean") return mean(x, d, k);
  if (op == "prod") return prod(x, d, k);
  if (op == "amax") return amax(x, d, k);
  if (op == "amin") return amin(x, d, k);
  if (op == "any") return any(x, d, k);
  if (op == "all") return all(x, d, k);
  if (op == "logsumexp") return logsumexp(x, d, k);
  if (op == "var") return var(x, d, std::stod(in.get("corr")), k);
  if (op == "std") return loom::std(x, d, std::stod(in.get("corr")), k);
  if (op == "norm") {
    const std::string& p = in.get("p");
    double pv = p == "inf" ? INFINITY : std::stod(p);
    return norm(x, pv, d, k);
  }
  throw std::logic_error("reduce: " + op);
}

Tensor softmaxes(const Instr& in, Env& e) {
  Tensor x = val(e, in, 0);
  int64_t d = std::stoll(in.get("dim"));
  return in.op == "softmax" ? softmax(x, d) : log_softmax(x, d);
}

// layer_norm %x [%w] [%b] k=K w=0|1 b=0|1 eps=E   (rms_norm: no bias)
Tensor norms(const Instr& in, Env& e) {
  Tensor x = val(e, in, 0);
  int k = std::stoi(in.get("k"));
  Dims ns;
  for (int i = x.dim() - k; i < x.dim(); ++i) ns.push_back(i >= 0 ? x.shape()[i] : -1);
  size_t a = 1;
  std::optional<Tensor> w, b;
  if (in.get("w") == "1") w = val(e, in, a++);
  if (in.has("b") && in.get("b") == "1") b = val(e, in, a++);
  double eps = std::stod(in.get("eps"));
  if (in.op == "layer_norm") return layer_norm(x, ns, w, b, eps);
  return rms_norm(x, ns, w, eps);
}

// ---- views and movement --------------------------------------------------------------------

Tensor views(const Instr& in, Env& e) {
  Tensor x = val(e, in, 0);
  const std::string& op = in.op;
  if (op == "permute") return x.permute(parse_ints(in.get("order")));
  if (op == "transpose") {
    Dims d = parse_ints(in.get("dims"));
    if (d.size() != 2) throw Error(ErrorKind::Value, "transpose: dims=a,b");
    return x.transpose(d[0], d[1]);
  }
  if (op == "slice") {
    auto opt = [&](const char* k) -> std::optional<int64_t> {
      const std::string& s = in.get(k);
      if (s == "none") return std::nullopt;
      return std::stoll(s);
    };
    return x.slice(std::stoll(in.get("dim")), opt("start"), opt("stop"),
                   std::stoll(in.get("step")));
  }
  if (op == "index") return x.index(parse_slices(in.get("idx")));
  if (op == "select") return x.select(std::stoll(in.get("dim")), std::stoll(in.get("i")));
  if (op == "unsqueeze") return x.unsqueeze(std::stoll(in.get("dim")));
  if (op == "squeeze") {
    if (in.get("dim") == "none") return x.squeeze();
    return x.squeeze(std::stoll(in.get("dim")));
  }
  if (op == "reshape") return x.reshape(parse_ints(in.get("shape")));
  if (op == "flatten") return x.flatten(std::stoll(in.get("start")), std::stoll(in.get("end")));
  if (op == "expand") return x.expand(parse_ints(in.get("shape")));
  if (op == "contiguous") return x.contiguous();
  if (op == "clone") return x.clone();
  throw std::logic_error("views: " + op);
}

Tensor cat_op(const Instr& in, Env& e) {
  std::vector<Tensor> xs;
  for (size_t i = 0; i < in.args.size(); ++i) xs.push_back(val(e, in, i));
  return cat(xs, std::stoll(in.get("dim")));
}

// ---- casts ---------------------------------------------------------------------------------

// cast always copies (so aliasing is the same in every mode); rt rounds through a narrow
// float; toint is round then int32.
Tensor casts(const Instr& in, Env& e) {
  Tensor x = val(e, in, 0);
  if (in.op == "toint") return cast(round(x), DType::Int32);
  DType t = parse_dtype(in.get("dtype"));
  if (in.op == "rt") return cast(cast(x, t), x.dtype());
  Tensor r = cast(x, mapped(e, t));
  return r.same_buffer(x) ? r.clone() : r;
}

// ---- leaves --------------------------------------------------------------------------------

Tensor input_op(const Instr& in, Env& e) {
  DType t = mapped(e, parse_dtype(in.get("dtype")));
  Dims s = parse_ints(in.get("shape"));
  Shape sh(s.begin(), s.end());
  check_sizes("input", sh);
  if (e.shadow) return empty(sh, t);
  Device d = e.mode == Mode::Fused && e.ro ? e.ro->device : kCPU;
  std::vector<double> v = input_data(in);
  if (e.ro && e.ro->input_shift != 0) {
    std::vector<double> dir = input_direction(in);
    for (size_t i = 0; i < v.size(); ++i) v[i] += e.ro->input_shift * dir[i];
  }
  return tensor<double>(v, sh, Options(t, d));
}

// ---- in place ------------------------------------------------------------------------------

Tensor inplace(const Instr& in, Env& e) {
  Tensor& t = e.at(in.args.at(0).val);
  const std::string& op = in.op;
  bool tv = arg_is_val(in, 1);
  if (op == "fill_") {
    t.fill_(scal(in.args.at(1)));
  } else if (op == "zero_") {
    t.zero_();
  } else if (op == "clamp_") {
    auto opt = [&](const char* k) -> std::optional<Scalar> {
      const std::string& s = in.get(k);
      if (s == "none") return std::nullopt;
      return Scalar(std::stod(s));
    };
    t.clamp_(opt("lo"), opt("hi"));
  } else if (op == "copy_") {
    t.copy_(val(e, in, 1));
  } else if (op == "index_put") {
    auto idx = parse_slices(in.get("idx"));
    if (tv)
      t.index_put(idx, val(e, in, 1));
    else
      t.index_put(idx, scal(in.args.at(1)));
  } else if (op == "addcmul_" || op == "addcdiv_") {
    Tensor a = val(e, in, 1), b = val(e, in, 2);
    Scalar v = Scalar(std::stod(in.get("value")));
    op == "addcmul_" ? t.addcmul_(a, b, v) : t.addcdiv_(a, pos(b), v);
  } else if (op == "lerp_") {
    t.lerp_(val(e, in, 1), Scalar(std::stod(in.get("weight"))));
  } else {
    Tensor o = tv ? val(e, in, 1) : Tensor();
    if (op == "div_" && tv) o = pos(o);
    Scalar s = tv ? Scalar(0) : scal(in.args.at(1));
    // add_ / sub_ of a tensor take alpha=A (the operand scaled first).
    if (in.has("alpha") && (!tv || (op != "add_" && op != "sub_")))
      throw Error(ErrorKind::Value, op + ": alpha needs add_ or sub_ with a tensor operand");
    Scalar alpha = in.has("alpha") ? Scalar(std::stod(in.get("alpha"))) : Scalar(int64_t(1));
    if (op == "add_")
      tv ? t.add_(o, alpha) : t.add_(s);
    else if (op == "sub_")
      tv ? t.sub_(o, alpha) : t.sub_(s);
    else if (op == "mul_")
      tv ? t.mul_(o) : t.mul_(s);
    else if (op == "div_")
      tv ? t.div_(o) : t.div_(s);
    else
      throw std::logic_error("inplace: " + op);
  }
  return Tensor();
}

Tensor sync_op(const Instr& in, Env& e) {
  if (e.shadow) return Tensor();
  if (in.op == "sync") {
    loom::sync();
    return Tensor();
  }
  Tensor x = val(e, in, 0);
  Output o{"peek %" + std::to_string(in.args[0].val) + " @" + std::to_string(e.peeks.size()),
           x.dtype(), x.shape(), x.to_vector<double>()};
  e.peeks.push_back(std::move(o));
  return Tensor();
}

const std::unordered_map<std::string, Handler>& handlers() {
  static const std::unordered_map<std::string, Handler> m = [] {
    std::unordered_map<std::string, Handler> h;
    for (auto& [name, fn] : unary_fns())
      h[name] = [](const Instr& in, Env& e) {
        return unary_fns().at(in.op)(guard_unary(in.op, val(e, in, 0)));
      };
    for (auto& [name, fn] : binary_fns()) h[name] = binary;
    h["where"] = where_op;
    for (const char* r : {"sum", "mean", "prod", "amax", "amin", "any", "all", "logsumexp", "var",
                          "std", "norm", "argmax", "argmin", "cumsum"})
      h[r] = reduce;
    h["softmax"] = h["log_softmax"] = softmaxes;
    h["layer_norm"] = h["rms_norm"] = norms;
    for (const char* v : {"permute", "transpose", "slice", "index", "select", "unsqueeze",
                          "squeeze", "reshape", "flatten", "expand", "contiguous", "clone"})
      h[v] = views;
    h["cat"] = cat_op;
    h["cast"] = h["rt"] = h["toint"] = casts;
    h["input"] = input_op;
    for (const char* v : {"add_", "sub_", "mul_", "div_", "fill_", "zero_", "clamp_", "copy_",
                          "index_put", "addcmul_", "addcdiv_", "lerp_"})
      h[v] = inplace;
    h["sync"] = h["peek"] = sync_op;
    return h;
  }();
  return m;
}

}  // namespace

Tensor& Env::at(int id) {
  if (id < 0 || id >= int(vals.size()) || !vals[size_t(id)].defined())
    throw Error(ErrorKind::Value, "%" + std::to_string(id) + " is not defined");
  return vals[size_t(id)];
}

void Env::grow(int id) {
  if (id >= int(vals.size())) vals.resize(size_t(id) + 1), root.resize(size_t(id) + 1, -1);
}

bool is_inplace_op(const std::string& op) {
  return (!op.empty() && op.back() == '_') || op == "index_put";
}

void exec(const Instr& in, Env& e) {
  auto it = handlers().find(in.op);
  if (it == handlers().end()) throw Error(ErrorKind::Value, "unknown op '" + in.op + "'");
  Tensor r = it->second(in, e);
  if (in.out < 0) return;
  if (!r.defined()) throw Error(ErrorKind::Value, in.op + ": defines no value");
  if (e.mode == Mode::Fused && e.ro && e.ro->fault == in.op && is_floating(r.dtype()))
    r = mul(r, Scalar(1.001));
  e.grow(in.out);
  int rt = in.out;
  for (auto& a : in.args)
    if (a.is_val && r.same_buffer(e.at(a.val))) rt = e.root[size_t(a.val)];
  // (a view stays a view: its rounding is its base's)
  if (e.mode == Mode::Ref64 && e.ro && e.ro->perturb && rt == in.out && r.dtype() == DType::Float64)
    r = perturbed(r, uint32_t(in.out) + 1);
  e.vals[size_t(in.out)] = r;
  e.root[size_t(in.out)] = rt;
}

// ---- helpers -------------------------------------------------------------------------------

DType parse_dtype(const std::string& s) {
  static const std::pair<const char*, DType> names[] = {
      {"f32", DType::Float32},   {"f64", DType::Float64}, {"f16", DType::Float16},
      {"bf16", DType::BFloat16}, {"i32", DType::Int32},   {"i64", DType::Int64},
      {"bool", DType::Bool}};
  for (auto& [n, t] : names)
    if (s == n) return t;
  throw Error(ErrorKind::Value, "unknown dtype '" + s + "'");
}

const char* dtype_tag(DType t) {
  switch (t) {
    case DType::Float32:
      return "f32";
    case DType::Float64:
      return "f64";
    case DType::Float16:
      return "f16";
    case DType::BFloat16:
      return "bf16";
    case DType::Int32:
      return "i32";
    case DType::Int64:
      return "i64";
    case DType::Bool:
      return "bool";
    default:
      return dtype_name(t);
  }
}

std::vector<int64_t> parse_ints(const std::string& s) {
  std::vector<int64_t> r;
  size_t i = 0;
  while (i < s.size()) {
    size_t j = s.find(',', i);
    if (j == std::string::npos) j = s.size();
    r.push_back(std::stoll(s.substr(i, j - i)));
    i = j + 1;
  }
  return r;
}

std::string num_str(double x, bool integer) {
  if (integer) return std::to_string(int64_t(x));
  char buf[64];
  for (int prec = 1; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*g", prec, x);
    if (std::strtod(buf, nullptr) == x) break;
  }
  std::string s = buf;
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

std::string ints_str(const std::vector<int64_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s;
}

std::vector<Slice> parse_slices(const std::string& s) {
  std::vector<Slice> r;
  size_t i = 0;
  while (i <= s.size() && !s.empty()) {
    size_t j = s.find(',', i);
    if (j == std::string::npos) j = s.size();
    std::string t = s.substr(i, j - i);
    if (t == "None") {
      r.push_back(Slice::newaxis());
    } else if (t == "...") {
      r.push_back(Slice::ellipsis());
    } else if (t.find(':') == std::string::npos) {
      r.push_back(Slice::at(std::stoll(t)));
    } else {
      std::string part[3];
      int k = 0;
      for (char c : t) c == ':' ? (void)++k : (void)(part[k] += c);
      auto opt = [](const std::string& p) -> std::optional<int64_t> {
        if (p.empty()) return std::nullopt;
        return std::stoll(p);
      };
      r.push_back(
          Slice::range(opt(part[0]), opt(part[1]), part[2].empty() ? 1 : std::stoll(part[2])));
    }
    i = j + 1;
  }
  return r;
}

std::vector<double> input_data(const Instr& in) {
  Dims s = parse_ints(in.get("shape"));
  int64_t n = 1;
  for (auto d : s) n *= d;
  std::mt19937 g(uint32_t(std::stoull(in.get("seed"))));
  std::normal_distribution<double> nd;
  double scale = in.has("scale") ? std::stod(in.get("scale")) : 1.0;
  std::vector<double> v(size_t(std::max<int64_t>(n, 0)));
  for (auto& x : v) x = nd(g) * scale;
  return v;
}

std::vector<double> input_direction(const Instr& in) {
  std::vector<double> v(input_data(in).size());
  std::mt19937 g(uint32_t(std::stoull(in.get("seed"))) ^ 0x5bd1e995u);
  std::uniform_real_distribution<double> u(-1, 1);
  for (auto& x : v) x = u(g);
  return v;
}

std::vector<double> loss_weights(size_t n, size_t k) {
  std::vector<double> w(n);
  uint64_t h = 0x9e3779b97f4a7c15ull * (k + 1);
  for (auto& x : w) {
    h ^= h >> 31, h *= 0xbf58476d1ce4e5b9ull, h ^= h >> 29;
    x = double(h % 2001) / 1000.0 - 1.0;
  }
  return w;
}

}  // namespace loom::fuzz
