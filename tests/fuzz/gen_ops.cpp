// The generator's op families: each picks operands, emits one or a few instructions and says
// how the result's bound and constant dims follow from the operands'.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "gen.h"

namespace loom::fuzz {

double unary_bound(const std::string& op, double b) {
  double c = std::min(b, 20.0);
  if (op == "sign" || op == "sin" || op == "cos" || op == "tanh" || op == "sigmoid" ||
      op == "erf" || op == "isnan" || op == "isinf" || op == "isfinite" || op == "logical_not" ||
      op == "sinc" || op == "frac" || op == "signbit")
    return 1;
  if (op == "square") return b * b;
  if (op == "exp" || op == "expm1" || op == "sinh" || op == "cosh") return std::exp(c) + 1;
  if (op == "exp2") return std::exp2(c) + 1;
  if (op == "log" || op == "log2" || op == "log1p" || op == "log10")
    return std::log2(b + 1.5) + 1.5;
  if (op == "sqrt") return std::sqrt(b + 0.5);
  if (op == "rsqrt") return 1.5;
  if (op == "reciprocal") return 2;
  if (op == "tan") return 3.1;
  if (op == "asin" || op == "atan") return 1.6;
  if (op == "acos") return 3.2;
  // The math library, over the domains exec.cpp's guards give (program.h)
  if (op == "cbrt") return std::cbrt(b) + 1;
  if (op == "asinh") return std::asinh(b) + 1;
  if (op == "acosh") return std::acosh(b + 1.5) + 1;  // of |x| + 1.5
  if (op == "atanh") return 1.8;                      // of x clamped to 15/16: 1.71
  if (op == "erfinv") return 1.4;                     // 1.32
  if (op == "erfc") return 2;
  if (op == "lgamma") return std::max(1.0, std::lgamma(b + 0.5)) + 1;  // of |x| + 0.5
  if (op == "digamma") return std::max(2.0, std::log(b + 0.5)) + 1;    // -1.96 at 0.5
  if (op == "deg2rad") return b * 0.0175 + 1;
  if (op == "rad2deg") return b * 57.3 + 1;
  return b + 1;  // neg abs relu floor ceil round trunc bitwise_not gelu silu softplus
}

double binary_bound(const std::string& op, double l, double r, bool rv) {
  if (op == "add" || op == "sub" || op == "hypot") return l + r;
  if (op == "mul") return l * r;
  if (op == "div" || op == "floor_divide") return rv ? 2 * l + 1 : l / r + 1;
  if (op == "remainder" || op == "fmod") return rv ? r + 1 : r;
  if (op == "maximum" || op == "minimum") return std::max(l, r);
  if (op == "pow")
    return rv ? std::max(std::pow(l + 0.5, 2), 4.0)
              : std::pow(l + 0.5, std::fabs(r)) + std::pow(2, r);
  if (op == "atan2") return 3.2;
  if (op == "copysign") return l;
  if (op == "nextafter") return l + 1;
  if (op == "logaddexp" || op == "logaddexp2") return std::max(l, r) + 1;
  if (op == "xlogy") return l * (std::log2(r + 1.5) + 1.5);  // y read as |y| + 0.5 (a tensor)
  if (op == "bitwise_left_shift") return std::ldexp(l, int(std::min(r, 62.0))) + 1;
  return std::max(l, r) + 1;  // logical / bitwise (a right shift only shrinks)
}

namespace {

using KW = std::vector<std::pair<std::string, std::string>>;

std::vector<std::string> unary_names() {
  std::vector<std::string> v;
#define LOOM_X(name, api, kind) v.push_back(#api);
  LOOM_UNARY_OPS(LOOM_X)
#undef LOOM_X
  return v;
}

// The BinaryKind::Floating rows (hypot, nextafter, logaddexp, logaddexp2).
bool floating_binary(const std::string& op) {
  static const std::set<std::string> rows = [] {
    std::set<std::string> v;
#define LOOM_X(name, api, kind) \
  if (BinaryKind::kind == BinaryKind::Floating) v.insert(#api);
    LOOM_BINARY_OPS(LOOM_X)
#undef LOOM_X
    return v;
  }();
  return rows.count(op) > 0;
}

std::vector<int> all_dims(int r) {
  std::vector<int> d(static_cast<size_t>(r));
  std::iota(d.begin(), d.end(), 0);
  return d;
}

}  // namespace

bool Gen::unary() {
  static const std::vector<std::string> names = unary_names();
  std::string op = one(names);
  if (!disc_ && is_discontinuous_op(op)) return false;
  bool disc = is_discontinuous_op(op);
  bool floats = op == "frac";  // torch has no integer frac
  int x = pick([&](int v) {
    return (D(v) != DType::Bool || coin(0.3)) && (!disc || steady(v)) && (!floats || is_float(v));
  });
  if (x < 0) return false;
  // sin(pi x) of sinc, like sin, turns x's rounding into a phase error growing with |x|
  static const std::vector<std::string> amplify = {"exp",  "exp2", "expm1", "sinh",
                                                   "cosh", "sin",  "cos",   "sinc"};
  bool amp = std::find(amplify.begin(), amplify.end(), op) != amplify.end();
  if (amp && meta_[size_t(x)].hist > kMaxHistAmplified) return false;
  double b = unary_bound(op, meta_[size_t(x)].bound);
  return emit_op(op, {Operand::v(x)}, {}, [&](int id) {
           Meta m = meta_[size_t(x)];
           m.bound = b;
           if (is_discontinuous_op(op)) m.cmask.assign(S(id).size(), 1);  // few levels
           cm_fix(m.cmask, S(id));
           return m;
         }) >= 0;
}

bool Gen::binary() {
  static const std::vector<std::string> common = {"add",     "sub",     "mul", "div",
                                                  "maximum", "minimum", "pow"};
  static const std::vector<std::string> rare = {
      "atan2",      "floor_divide",       "remainder",          "fmod",       "logical_and",
      "logical_or", "logical_xor",        "bitwise_and",        "bitwise_or", "bitwise_xor",
      "hypot",      "copysign",           "nextafter",          "logaddexp",  "logaddexp2",
      "xlogy",      "bitwise_left_shift", "bitwise_right_shift"};
  std::string op = coin(0.85) ? one(common) : one(rare);
  if (!disc_ && is_discontinuous_op(op)) return false;
  bool disc = is_discontinuous_op(op);
  // BinaryKind::Floating rows raise a TypeError for integer or bool tensors; the shifts take
  // integers only (not bool)
  bool floats = floating_binary(op);
  bool shift = op == "bitwise_left_shift" || op == "bitwise_right_shift";
  auto kind_ok = [&](int v) {
    if (floats) return is_float(v);
    if (shift) return !is_floating(D(v)) && D(v) != DType::Bool;
    return D(v) != DType::Bool || coin(0.2);
  };
  int a = pick([&](int v) { return kind_ok(v) && (!disc || steady(v)); });
  if (a < 0) return false;
  std::vector<Operand> args;
  int side = coin(0.25) ? ri(0, 1) : 2;  // 0: scalar left, 1: scalar right, 2: two values
  Operand s = op == "pow" && side == 1
                  ? one(std::vector<Operand>{Operand::s(0.5), Operand::s(1.5), Operand::s(2, true),
                                             Operand::s(3.0), Operand::s(-0.5), Operand::s(-1.0)})
                  : scalar(op == "div" || op == "floor_divide" || op == "remainder" ||
                           op == "fmod" || op == "pow" || op == "xlogy");
  if ((op == "pow" && side == 0) || (op == "xlogy" && side == 1)) s.num = std::fabs(s.num);
  // counts in range mostly, now and then past the width or negative (torch's 0 / sign fill)
  if (shift) s = Operand::s(coin(0.8) ? ri(0, 6) : one(std::vector<int>{-1, 31, 32, 63, 64}), true);
  if (shift && side == 0) s = Operand::s(ri(-5, 5), true);  // a shifted scalar
  int b = -1;
  if (side == 2) {
    b = partner(S(a));
    if (b < 0 || (disc && !steady(b)) || !kind_ok(b)) return false;
    args = coin(0.5) ? std::vector<Operand>{Operand::v(a), Operand::v(b)}
                     : std::vector<Operand>{Operand::v(b), Operand::v(a)};
  } else {
    args =
        side == 0 ? std::vector<Operand>{s, Operand::v(a)} : std::vector<Operand>{Operand::v(a), s};
  }
  if (op == "pow" && args[1].is_val && meta_[size_t(args[1].val)].hist > kMaxHistAmplified)
    return false;
  double l = args[0].is_val ? meta_[size_t(args[0].val)].bound : std::fabs(args[0].num);
  double r = args[1].is_val ? meta_[size_t(args[1].val)].bound : std::fabs(args[1].num);
  if (op == "bitwise_left_shift" && !args[1].is_val && (args[1].num < 0 || args[1].num >= 64))
    r = 0;  // the result is 0
  double bound = binary_bound(op, l, r, args[1].is_val);
  // of real values, not integer or bool levels (those rows may be constant)
  bool real = op == "remainder" || op == "fmod" || op == "atan2" || op == "copysign";
  return emit_op(op, args, {}, [&](int id) {
           Meta m;
           m.bound = bound;
           const auto& ca = args[0].is_val ? meta_[size_t(args[0].val)].cmask : std::vector<char>{};
           const auto& cb = args[1].is_val ? meta_[size_t(args[1].val)].cmask : std::vector<char>{};
           m.cmask = cm_broadcast(ca, cb, S(id));
           if (!real && is_discontinuous_op(op)) m.cmask.assign(S(id).size(), 1);
           return m;
         }) >= 0;
}

bool Gen::compare_where() {
  if (!disc_) return false;
  static const std::vector<std::string> cmps = {"eq", "ne", "lt", "le", "gt", "ge"};
  int c = coin(0.3) ? pick([&](int v) { return D(v) == DType::Bool; }) : -1;
  if (c < 0) {
    int a = pick([&](int v) { return D(v) != DType::Bool && steady(v); });
    if (a < 0) return false;
    std::vector<Operand> args = {Operand::v(a), coin(0.5) ? scalar() : Operand::v(partner(S(a)))};
    if (args[1].is_val) {  // two related values may be equal up to rounding: x vs f(f(x))
      int b = args[1].val;
      if (b < 0 || !steady(b) || (meta_[size_t(a)].deps & meta_[size_t(b)].deps)) return false;
    }
    if (coin(0.2)) std::swap(args[0], args[1]);
    c = emit_op(one(cmps), args, {}, [&](int id) {
      Meta m;
      m.bound = 1;
      m.cmask.assign(S(id).size(), 1);  // bool: rows may be constant
      return m;
    });
    if (c < 0 || coin(0.3)) return c >= 0;  // sometimes the mask itself is the value
  }
  Operand x = coin(0.2) ? scalar() : Operand::v(partner(S(c)));
  Operand y = coin(0.3) ? scalar() : Operand::v(partner(S(c)));
  if ((x.is_val && x.val < 0) || (y.is_val && y.val < 0)) return false;
  auto bnd = [&](const Operand& o) {
    return o.is_val ? meta_[size_t(o.val)].bound : std::fabs(o.num);
  };
  auto cm = [&](const Operand& o) {
    return o.is_val ? meta_[size_t(o.val)].cmask : std::vector<char>{};
  };
  return emit_op("where", {Operand::v(c), x, y}, {}, [&](int id) {
           Meta m;
           m.bound = std::max(bnd(x), bnd(y));
           m.cmask = cm_broadcast(cm_broadcast(meta_[size_t(c)].cmask, cm(x), S(id)), cm(y), S(id));
           return m;
         }) >= 0;
}

bool Gen::reduction() {
  static const std::vector<std::string> ops = {
      "sum",  "sum", "sum", "mean",      "mean", "mean",   "amax",   "amax", "amin", "amin",
      "prod", "var", "std", "logsumexp", "norm", "argmax", "argmin", "any",  "all",  "cumsum"};
  std::string op = one(ops);
  if (!disc_ && is_discontinuous_op(op)) return false;
  bool want_bool = op == "any" || op == "all";
  bool ints_ok = op == "sum" || op == "prod" || op == "amax" || op == "amin" || op == "cumsum" ||
                 op == "argmax" || op == "argmin";
  int x = pick([&](int v) {
    return want_bool ? D(v) == DType::Bool : is_float(v) || (ints_ok && D(v) != DType::Bool);
  });
  if (x < 0) return false;
  const Meta mx = meta_[size_t(x)];
  const Shape sx = S(x);
  int r = int(sx.size());
  KW kw;
  std::vector<int> red;  // reduced dims
  bool keep = coin(0.7);
  if (op == "argmax" || op == "argmin" || op == "cumsum") {
    if (r == 0 || (op != "cumsum" && coin(0.25))) {
      if (op == "cumsum") return false;
      kw.emplace_back("dim", "none");
      red = all_dims(r);
    } else {
      int d = ri(0, r - 1);
      red = {d};
      kw.emplace_back("dim", std::to_string(coin(0.3) ? d - r : d));
    }
    if (op == "cumsum" && sx[size_t(red[0])] > 64) return false;  // quadratic in the length
    if (op != "cumsum") kw.emplace_back("keep", keep ? "1" : "0");
  } else {
    std::vector<int64_t> dims;
    if (r > 0 && coin(0.8)) {
      for (int d = 0; d < r; ++d)
        if (coin(0.45)) dims.push_back(d);
      if (dims.empty()) dims.push_back(ri(0, r - 1));
      for (int64_t d : dims) red.push_back(int(d));
      for (auto& d : dims)
        if (coin(0.3)) d -= r;
    } else {
      red = all_dims(r);
    }
    if (op == "logsumexp" && dims.empty()) dims = std::vector<int64_t>(red.begin(), red.end());
    if (op == "logsumexp" && dims.empty()) return false;
    kw.emplace_back("dims", ints_str(dims));
    kw.emplace_back("keep", keep ? "1" : "0");
  }
  // Ties make argmax/argmin depend on the last ulp (see Meta::ties).
  if ((op == "argmax" || op == "argmin") && (mx.ties || mx.pinned)) return false;
  double n = 1;
  for (int d : red) n *= double(sx[size_t(d)]);
  double b = mx.bound, bound = b;
  if (op == "sum" || op == "cumsum")
    bound = b * n;
  else if (op == "prod") {
    if (n > 8) return false;
    bound = std::pow(std::max(b, 1.0), n);
  } else if (op == "var" || op == "std") {
    if (mx.constant_over(red, sx)) return false;
    // corr=1 over one element is 0/0, a NaN: where it reaches pow's base, whether the exponent
    // is exactly 0 (float32 underflow, pow(NaN, 0) = 1) or tiny (float64: NaN) decides the
    // result, which no tolerance covers. The draw stays, so other programs keep their streams.
    bool corr = coin(0.5);
    kw.emplace_back("corr", corr && n > 1 ? "1" : "0");
    bound = op == "var" ? 2 * b * b + 1 : 1.5 * b + 1;
  } else if (op == "logsumexp")
    bound = b + std::log(n + 1) + 1;
  else if (op == "norm") {
    std::string p = one(std::vector<std::string>{"2", "2", "1", "inf", "3"});
    kw.emplace_back("p", p);
    bound = p == "1" ? b * n : p == "inf" ? b : b * std::sqrt(n) + 1;
  } else if (op == "argmax" || op == "argmin")
    bound = std::max(1.0, double(numel(sx)));
  else if (op == "any" || op == "all")
    bound = 1;
  return emit_op(op, {Operand::v(x)}, kw, [&](int id) {
           Meta m;
           m.bound = bound;
           std::vector<char> c = mx.cmask;
           if (op == "cumsum") {
             c[size_t(red[0])] = 0;
           } else if (keep) {
             for (int d : red) c[size_t(d)] = 1;
           } else {
             std::vector<char> k;
             for (int d = 0; d < r; ++d)
               if (std::find(red.begin(), red.end(), d) == red.end()) k.push_back(c[size_t(d)]);
             c = k;
           }
           if (c.size() != S(id).size()) c.assign(S(id).size(), 0);  // argmax keepdim, all dims
           if (is_discontinuous_op(op)) c.assign(S(id).size(), 1);   // indices, bools
           m.cmask = c;
           cm_fix(m.cmask, S(id));
           return m;
         }) >= 0;
}

bool Gen::normalization() {
  static const std::vector<std::string> ops = {"softmax", "log_softmax", "layer_norm", "rms_norm"};
  std::string op = one(ops);
  int x = pick([&](int v) { return is_float(v) && T(v).dim() > 0; });
  if (x < 0) return false;
  const Meta mx = meta_[size_t(x)];
  const Shape sx = S(x);
  int r = int(sx.size());
  if (op == "softmax" || op == "log_softmax") {
    int d = ri(0, r - 1);
    double n = double(sx[size_t(d)]);
    double bound = op == "softmax" ? 1 : 2 * mx.bound + std::log(n + 1) + 1;
    return emit_op(op, {Operand::v(x)}, {{"dim", std::to_string(coin(0.3) ? d - r : d)}}, [&](int) {
             Meta m = mx;
             m.bound = bound;
             if (n == 1) m.cmask.assign(m.cmask.size(), 1), m.ties = true;  // exactly 1 or 0
             return m;
           }) >= 0;
  }
  int k = std::min(r, ri(1, 2));
  std::vector<int> red;
  for (int d = r - k; d < r; ++d) red.push_back(d);
  if (mx.constant_over(red, sx) || mx.noise) return false;
  Shape ts(sx.end() - k, sx.end());
  std::vector<Operand> args = {Operand::v(x)};
  KW kw = {{"k", std::to_string(k)}};
  double bw = 1, bb = 0;
  std::vector<char> cw, cb;
  bool w = coin(0.5), bias = op == "layer_norm" && coin(0.5);
  auto param = [&](double& bnd, std::vector<char>& cm) {
    int p = pick([&](int v) { return is_float(v) && S(v) == ts; });
    if (p < 0 || coin(0.5)) p = new_input(ts);
    if (p < 0) return false;
    args.push_back(Operand::v(p));
    bnd = meta_[size_t(p)].bound, cm = meta_[size_t(p)].cmask;
    return true;
  };
  if (w && !param(bw, cw)) return false;
  if (bias && !param(bb, cb)) return false;
  kw.emplace_back("w", w ? "1" : "0");
  if (op == "layer_norm") kw.emplace_back("b", bias ? "1" : "0");
  kw.emplace_back("eps", "1e-05");
  double n = double(numel(ts));
  double bound = std::sqrt(n + 1) * bw + bb;
  return emit_op(op, args, kw, [&](int id) {
           Meta m;
           m.bound = bound;
           m.cmask = cm_broadcast(cm_broadcast(mx.cmask, cw, S(id)), cb, S(id));
           if (n == 1) {  // a one-element row normalizes to 0 or about +-1: few levels
             m.cmask.assign(m.cmask.size(), 1);
             m.ties = true;
           }
           return m;
         }) >= 0;
}

bool Gen::cast() {
  int x = pick([](int) { return true; });
  if (x < 0) return false;
  const Meta mx = meta_[size_t(x)];
  auto same = [&](int) { return mx; };
  if (!is_float(x))
    return emit_op("cast", {Operand::v(x)}, {{"dtype", coin(0.7) ? "f32" : "f64"}}, same) >= 0;
  int r = ri(0, 9);
  if (r < 4)
    return emit_op("cast", {Operand::v(x)}, {{"dtype", D(x) == DType::Float32 ? "f64" : "f32"}},
                   same) >= 0;
  if (r < 7) {
    bool half = coin(0.5);
    if (half && mx.bound > 1e4) return false;
    return emit_op("rt", {Operand::v(x)}, {{"dtype", half ? "f16" : "bf16"}}, same) >= 0;
  }
  if (!disc_ || mx.bound > 1e6 || !steady(x)) return false;
  return emit_op("toint", {Operand::v(x)}, {}, [&](int) {
           Meta m = mx;
           m.bound += 1;
           m.cmask.assign(m.cmask.size(), 1);  // integer levels: rows may be constant
           return m;
         }) >= 0;
}

bool Gen::undo() {
  if (undo_.empty()) return false;
  size_t k = size_t(ri(0, int(undo_.size()) - 1));
  Undo u = undo_[k];
  undo_.erase(undo_.begin() + long(k));
  int x = -1;
  for (auto it = live_.rbegin(); it != live_.rend() && x < 0; ++it)
    if (T(*it).defined() && S(*it) == u.shape) x = *it;
  if (x < 0) return false;
  u.in.args = {Operand::v(x)};
  const Meta mx = meta_[size_t(x)];
  Shape from = S(x);
  return emit(u.in, [&](int id) {
           Meta m = mx;
           m.cmask = cm_reshape(mx.cmask, from, S(id));
           if (u.in.op == "permute") {
             auto o = parse_ints(u.in.get("order"));
             for (size_t i = 0; i < o.size(); ++i) m.cmask[i] = mx.cmask[size_t(o[i])];
           }
           return m;
         }) >= 0;
}

}  // namespace loom::fuzz
