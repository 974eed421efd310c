// generate(seed): random programs. Each candidate instruction is executed on placeholder
// tensors (recorded, never synced), so loom itself says whether it is valid and what shape
// and dtype it makes. Besides that the generator tracks per value what meta.h lists (bound,
// history, constant dims, ties, pinned), so that float rounding never looks like a fusion
// bug: no overflow, no normalized constant rows, no argmax over ties, no floor of a sum of
// probabilities.
#include <algorithm>
#include <cmath>

#include "gen.h"

namespace loom::fuzz {

Operand Gen::scalar(bool nonzero) {
  if (coin(0.3)) {
    int k = ri(-3, 3);
    if (k == 0 && nonzero) k = 2;
    return Operand::s(k, true);
  }
  int k = ri(-12, 12);  // dyadic: constant rows stay exact through sums
  if (k == 0 && (nonzero || coin(0.5))) k = ri(1, 12);
  return Operand::s(k / 4.0);
}

int Gen::pick(const std::function<bool(int)>& ok) {
  std::vector<int> c;
  for (int v : live_)
    if (T(v).defined() && ok(v)) c.push_back(v);
  if (c.empty()) return -1;
  if (coin(0.5)) return c[size_t(std::max(0, int(c.size()) - ri(1, 3)))];
  return one(c);
}

Shape Gen::variant_of(Shape s) {
  Shape v = s;
  for (auto& d : v)
    if (coin(0.3)) d = 1;
  if (!v.empty() && coin(0.2)) v.erase(v.begin(), v.begin() + ri(1, int(v.size())));
  return v;
}

Shape Gen::base_variant() { return coin(0.5) ? base_ : variant_of(base_); }

int Gen::new_input(Shape s) {
  Instr in;
  in.op = "input";
  in.set("dtype", coin(0.1) ? "f64" : "f32");
  in.set("shape", ints_str(std::vector<int64_t>(s.begin(), s.end())));
  in.set("seed", std::to_string(ri(1, 1 << 30)));
  if (coin(0.1)) in.set("scale", coin(0.5) ? "0.25" : "8.0");
  double sc = in.has("scale") ? std::stod(in.get("scale")) : 1;
  return emit(std::move(in), [&](int id) { return Meta::fresh(S(id), 5 * sc); });
}

// A value that broadcasts to shape `s` (often one of shape s), else a new input.
int Gen::partner(Shape s) {
  auto fits = [&](int v) {
    const Shape& sv = S(v);
    if (sv.size() > s.size()) return false;
    for (size_t i = 0; i < sv.size(); ++i) {
      int64_t x = sv[sv.size() - 1 - i], y = s[s.size() - 1 - i];
      if (x != y && x != 1) return false;
    }
    return sv == s || coin(0.5);
  };
  int b = coin(0.75) ? pick(fits) : -1;
  if (b >= 0) return b;
  return new_input(coin(0.5) ? s : variant_of(s));
}

bool Gen::writable(int id) {
  const Tensor& t = T(id);
  for (int d = 0; d < t.dim(); ++d)
    if (t.strides()[size_t(d)] == 0 && t.shape()[size_t(d)] > 1) return false;
  return is_float(id);
}

int Gen::emit(Instr in, const std::function<Meta(int)>& meta) {
  in.out = next_;
  env_.grow(in.out);
  try {
    exec(in, env_);
  } catch (const Error&) {
    env_.vals[size_t(in.out)] = Tensor();
    return -1;
  }
  int id = next_;
  if (meta_.size() <= size_t(id)) meta_.resize(size_t(id) + 1);
  meta_[size_t(id)] = meta(id);
  finish_meta(in, meta_[size_t(id)]);
  double cap = is_floating(D(id)) ? kMaxFloat : kMaxInt;
  if (!(meta_[size_t(id)].bound <= cap) || numel(S(id)) > kMaxNumel) {
    env_.vals[size_t(id)] = Tensor();
    return -1;
  }
  ++next_;
  p_.code.push_back(std::move(in));
  live_.push_back(id);
  return id;
}

namespace {

// Ops whose result saturates (equal elements) once |input| exceeds the given bound.
double saturation(const std::string& op) {
  if (op == "relu" || op == "maximum" || op == "minimum" || op == "pow" || op == "rt") return 0;
  if (op == "erf" || op == "erfc") return 3.5;
  if (op == "atanh" || op == "erfinv") return 0.9375;
  if (op == "tanh") return 8;
  if (op == "gelu" || op == "gelu_tanh" || op == "silu") return 10;
  if (op == "sigmoid") return 15;
  if (op == "exp" || op == "exp2" || op == "expm1" || op == "sinh" || op == "cosh") return 20;
  if (op == "tan") return 1.25;
  if (op == "asin" || op == "acos") return 0.875;
  return INFINITY;
}

}  // namespace

// What every value inherits from its operands: history bound and ties.
void Gen::finish_meta(const Instr& in, Meta& m) {
  m.hist = m.bound;
  double b = 0;
  bool levels = false, noise = false;
  std::vector<int> roots;
  for (auto& a : in.args) {
    if (!a.is_val) continue;
    const Meta& x = meta_[size_t(a.val)];
    m.hist = std::max(m.hist, x.hist);
    m.ties = m.ties || x.ties;
    m.pinned = m.pinned || x.pinned;
    levels = levels || x.levels;
    noise = noise || x.noise;
    m.deps |= x.deps;
    b = std::max(b, x.bound);
    roots.push_back(env_.root[size_t(a.val)]);
  }
  // Ops that map integer-like levels to integer-like levels exactly (sums stay small).
  static const std::vector<std::string> exact = {
      "neg",     "abs",     "relu",       "sign",      "add",     "sub",     "mul",     "square",
      "maximum", "minimum", "where",      "sum",       "cumsum",  "amax",    "amin",    "prod",
      "cat",     "clone",   "contiguous", "expand",    "flatten", "permute", "reshape", "select",
      "slice",   "squeeze", "transpose",  "unsqueeze", "index",   "cast",    "rt",      "toint"};
  if (is_discontinuous_op(in.op))
    m.levels = true;
  else if (levels && std::find(exact.begin(), exact.end(), in.op) != exact.end())
    m.levels = true;
  else if (levels)
    m.pinned = true;
  // m.pinned is still the operands' here (a normalizing op sets its own below).
  m.noise = noise || ((in.op == "sum" || in.op == "mean") && m.pinned);
  static const std::vector<std::string> normalizing = {
      "softmax", "log_softmax", "layer_norm", "rms_norm", "logsumexp", "mean", "var", "std"};
  if (std::find(normalizing.begin(), normalizing.end(), in.op) != normalizing.end())
    m.pinned = true;
  if (in.op == "input") m.deps = uint64_t(1) << (in.out % 64);
  std::sort(roots.begin(), roots.end());
  bool same = std::adjacent_find(roots.begin(), roots.end()) != roots.end();
  if (same && in.op != "cat") m.cmask.assign(m.cmask.size(), 1);  // x - x: maybe constant
  if (same || is_discontinuous_op(in.op) || b > saturation(in.op)) m.ties = true;
  const Shape& s = S(in.out);
  for (size_t d = 0; d < s.size(); ++d)
    if (m.cmask[d] && s[d] > 1) m.ties = true;
}

// In-place updates change every value sharing the target's buffer: their bounds grow, they
// may hold ties, and a fill or clamp may make their rows constant.
bool Gen::emit_inplace(Instr in, double new_bound) {
  if (!(new_bound <= kMaxFloat)) return false;
  try {
    exec(in, env_);
  } catch (const Error&) {
    return false;
  }
  int t = in.args[0].val, r = env_.root[size_t(t)];
  const std::string& op = in.op;
  bool arith = op == "add_" || op == "sub_" || op == "mul_" || op == "div_" || op == "addcmul_" ||
               op == "addcdiv_" || op == "lerp_";
  // t + x or t - x where t was computed from x (y = x + 0; y.sub_(x)) may cancel to rounding
  // noise: rows may then be constant up to rounding, and a discontinuous op must not read it.
  bool sums = arith && op != "mul_" && op != "div_";
  bool cancel = false;
  std::vector<char> operand;  // an arithmetic update's tensor operands, aligned to the target
  for (size_t i = 1; arith && i < in.args.size(); ++i)
    if (in.args[i].is_val) {
      const Meta& x = meta_[size_t(in.args[i].val)];
      operand = cm_broadcast(operand, x.cmask, S(t));
      cancel = cancel || (sums && (x.deps & meta_[size_t(t)].deps));
    }
  for (int v : live_)
    if (env_.root[size_t(v)] == r) {
      Meta& m = meta_[size_t(v)];
      m.bound = std::max(m.bound, new_bound);
      // Fills, clamps and copies may make rows constant; arithmetic keeps what was constant.
      if (!arith || cancel) m.cmask.assign(m.cmask.size(), 1);
      if (arith && !cancel && v == t) m.cmask = cm_broadcast(m.cmask, operand, S(v));
      m.ties = true;  // fills, clamps and broadcast copies
      m.pinned = m.pinned || cancel;
      for (auto& a : in.args)
        if (a.is_val) {
          const Meta& x = meta_[size_t(a.val)];
          m.hist = std::max(m.hist, x.hist);
          m.pinned = m.pinned || x.pinned || (x.levels && (op == "div_" || op == "addcdiv_"));
          m.noise = m.noise || x.noise;
          m.deps |= x.deps;
        }
      m.hist = std::max(m.hist, m.bound);
    }
  updated_.push_back(t);
  updated_.push_back(r);
  p_.code.push_back(std::move(in));
  return true;
}

Program Gen::run() {
  int rank = one(std::vector<int>{1, 1, 2, 2, 2, 2, 3, 3, 3, 4, 4});
  bool empty_dim = coin(0.04);
  for (int d = 0; d < rank; ++d) {
    int r = ri(0, 99);
    base_.push_back(r < 70 ? ri(2, 6) : r < 85 ? ri(7, 13) : 1);
  }
  if (empty_dim) base_[size_t(ri(0, rank - 1))] = 0;
  bool large = coin(0.012);
  if (large) {  // long rows: the CPU backend's chunked and parallel-segment paths (short)
    base_ = {ri(16385, 80000)};
    if (coin(0.5)) base_.insert(coin(0.5) ? base_.begin() : base_.end(), ri(1, 2));
  }
  disc_ = coin(0.6);
  int n_in = ri(1, 3);
  for (int i = 0; i < n_in; ++i) new_input(i == 0 ? base_ : base_variant());
  if (coin(0.25)) sync_point();  // the inputs in memory (a float32 input is a pending cast)
  int target = ri(opt_.min_ops, large ? std::min(opt_.max_ops, 16) : opt_.max_ops), done = 0;
  using Fam = bool (Gen::*)();
  static const std::pair<Fam, int> fams[] = {
      {&Gen::unary, 18},        {&Gen::binary, 18}, {&Gen::compare_where, 5}, {&Gen::reduction, 12},
      {&Gen::normalization, 6}, {&Gen::view, 16},   {&Gen::inplace, 10},      {&Gen::reread, 5},
      {&Gen::cast, 5},          {&Gen::undo, 4}};
  std::vector<std::pair<Fam, int>> use(std::begin(fams), std::end(fams));
  if (!opt_.inplace)
    for (auto& f : use)
      if (f.first == &Gen::inplace || f.first == &Gen::reread) f.second = 0;
  int total = 0;
  for (auto& f : use) total += f.second;
  for (int attempt = 0; done < target && attempt < 30 * target; ++attempt) {
    int r = ri(0, total + 3);
    if (r >= total) {  // the rare ones: a new input, a sync point, a mid-program read
      int x = pick([](int) { return true; });
      if (r <= total + 1 || x < 0) {
        new_input(base_variant());
      } else if (r == total + 2) {
        Instr in;
        in.op = "sync";
        p_.code.push_back(in);
      } else {
        Instr in;
        in.op = "peek", in.args = {Operand::v(x)};
        p_.code.push_back(in);
      }
      ++done;
      continue;
    }
    for (auto& f : use) {
      if (r < f.second) {
        if ((this->*f.first)()) ++done;
        break;
      }
      r -= f.second;
    }
  }
  // Outputs: the last few values, every value written in place, and a few others.
  std::vector<int> outs;
  int k = ri(1, 3);
  for (auto it = live_.rbegin(); it != live_.rend() && k > 0; ++it, --k) outs.push_back(*it);
  for (int v : updated_) outs.push_back(v);
  for (int v : live_)
    if (coin(0.1)) outs.push_back(v);
  std::sort(outs.begin(), outs.end());
  outs.erase(std::unique(outs.begin(), outs.end()), outs.end());
  p_.outputs = outs;
  env_ = Env();  // drop the placeholders: their nodes are dead and never run
  return std::move(p_);
}

Program generate(uint64_t seed, const GenOptions& opt) { return Gen(seed, opt).run(); }

}  // namespace loom::fuzz
