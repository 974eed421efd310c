// The generator's in-place families: single updates of a value or of a fresh view of it, and
// reads of a buffer between two writes of it (y = f(x); x.op_(...); y.op_(x)): the fused
// program must give y the x of before the write even where y is computed, and itself updated
// in place, after it. Both families write pending values as often as memory (a sync point
// before the first step makes x memory; one between the steps splits them over two flushes).
#include <algorithm>
#include <cmath>
#include <numeric>

#include "gen.h"

namespace loom::fuzz {
namespace {

size_t norm_dim(int64_t d, size_t r) { return size_t(d < 0 ? d + int64_t(r) : d); }

// The constant-dim mask of a view (in.op) of a value of shape `from` with mask c.
std::vector<char> view_cmask(const Instr& in, std::vector<char> c, const Shape& from,
                             const Shape& to) {
  size_t r = from.size();
  const std::string& op = in.op;
  if (op == "permute") {
    auto o = parse_ints(in.get("order"));
    std::vector<char> n(o.size());
    for (size_t i = 0; i < o.size(); ++i) n[i] = c[norm_dim(o[i], r)];
    c = n;
  } else if (op == "transpose") {
    auto d = parse_ints(in.get("dims"));
    std::swap(c[norm_dim(d[0], r)], c[norm_dim(d[1], r)]);
  } else if (op == "select") {
    c.erase(c.begin() + long(norm_dim(std::stoll(in.get("dim")), r)));
  } else if (op == "unsqueeze") {
    c.insert(c.begin() + long(norm_dim(std::stoll(in.get("dim")), r + 1)), 1);
  } else if (op == "index") {
    c = cm_index(c, parse_slices(in.get("idx")));
  } else if (op == "expand") {  // new leading dims are constant, expanded size-1 dims stay so
    c.insert(c.begin(), to.size() - std::min(to.size(), r), 1);
  } else if (op != "slice") {
    c = cm_reshape(c, from, to);
  }
  c.resize(to.size(), 0);
  cm_fix(c, to);
  return c;
}

template <typename T>
T weighted(std::mt19937_64& rng, const std::vector<std::pair<T, int>>& w) {
  int total = 0;
  for (auto& e : w) total += e.second;
  int r = std::uniform_int_distribution<int>(0, total - 1)(rng);
  for (auto& e : w) {
    if (r < e.second) return e.first;
    r -= e.second;
  }
  return w.back().first;
}

std::vector<int64_t> random_order(int r, std::mt19937_64& rng) {
  std::vector<int64_t> o(static_cast<size_t>(r));
  std::iota(o.begin(), o.end(), 0);
  std::shuffle(o.begin(), o.end(), rng);
  return o;
}

}  // namespace

int Gen::emit_view(const Instr& in) {
  int x = in.args[0].val;
  const Meta mx = meta_[size_t(x)];
  const Shape sx = S(x);
  return emit(in, [&](int id) {
    Meta m = mx;
    m.cmask = view_cmask(in, mx.cmask, sx, S(id));
    return m;
  });
}

void Gen::sync_point() {
  Instr in;
  in.op = "sync";
  p_.code.push_back(in);
}

// A fresh view of t to write through: an index, a slice, a select, a transpose or a
// permutation (sometimes undone again: the written view then has t's layout, through two view
// ops), an unsqueeze. -1 when none fits or the view is not writable.
int Gen::write_view(int t) {
  const Shape st = S(t);
  int r = int(st.size());
  Instr v;
  v.args = {Operand::v(t)};
  int k = ri(0, 7), d = r ? ri(0, r - 1) : 0;
  if (k == 0 && r >= 1) {
    v.op = "index", v.kw = {{"idx", rand_index(t)}};
  } else if (k == 1 && r >= 1) {
    int b = ri(0, r - 1);
    v.op = "transpose", v.kw = {{"dims", std::to_string(d) + "," + std::to_string(b - r)}};
  } else if (k == 2 && r >= 1 && st[size_t(d)] > 0) {
    v.op = "select",
    v.kw = {{"dim", std::to_string(d)}, {"i", std::to_string(ri(0, int(st[size_t(d)]) - 1))}};
  } else if (k == 3 && r >= 1) {
    int n = int(std::max<int64_t>(st[size_t(d)], 1));
    v.op = "slice", v.kw = {{"dim", std::to_string(d)},
                            {"start", coin(0.3) ? "none" : std::to_string(ri(0, n - 1))},
                            {"stop", coin(0.3) ? "none" : std::to_string(ri(1, n))},
                            {"step", std::to_string(one(std::vector<int>{1, 1, 2}))}};
  } else if ((k == 4 || k == 5) && r >= 1) {
    auto o = random_order(r, rng_);
    v.op = "permute", v.kw = {{"order", ints_str(o)}};
    if (k == 5) {  // and back: x.permute(o).permute(inverse of o)
      int u = emit_view(v);
      if (u < 0) return -1;
      std::vector<int64_t> inv(o.size());
      for (size_t i = 0; i < o.size(); ++i) inv[size_t(o[i])] = int64_t(i);
      v.args = {Operand::v(u)}, v.kw = {{"order", ints_str(inv)}};
    }
  } else if (k == 6) {
    v.op = "unsqueeze", v.kw = {{"dim", std::to_string(ri(0, r))}};
  } else {
    return -1;
  }
  int u = emit_view(v);
  return u >= 0 && writable(u) ? u : -1;
}

// A view of x to read as an operand of an update of a value of x's shape: a round trip
// through a permutation or a transpose, a one-element slice expanded back to x's shape, or
// the slice alone (broadcast by the update).
int Gen::read_view(int x) {
  const Shape sx = S(x);
  int r = int(sx.size());
  if (r == 0) return -1;
  int k = ri(0, 3), d = ri(0, r - 1);
  Instr v;
  v.args = {Operand::v(x)};
  if (k <= 1) {
    int b = ri(0, r - 1);
    auto o = random_order(r, rng_);
    std::vector<int64_t> inv(o.size());
    for (size_t i = 0; i < o.size(); ++i) inv[size_t(o[i])] = int64_t(i);
    if (k == 0)
      v.op = "permute", v.kw = {{"order", ints_str(o)}};
    else
      v.op = "transpose", v.kw = {{"dims", std::to_string(d) + "," + std::to_string(b)}};
    int u = emit_view(v);
    if (u < 0) return -1;
    v.args = {Operand::v(u)};
    if (k == 0) v.kw = {{"order", ints_str(inv)}};
    return emit_view(v);
  }
  if (sx[size_t(d)] == 0) return -1;
  int i = ri(0, int(sx[size_t(d)]) - 1);
  v.op = "slice", v.kw = {{"dim", std::to_string(d)},
                          {"start", std::to_string(i)},
                          {"stop", std::to_string(i + 1)},
                          {"step", "1"}};
  int u = emit_view(v);
  if (u < 0 || k == 2) return u;
  Instr e;
  e.op = "expand", e.args = {Operand::v(u)};
  e.kw = {{"shape", ints_str(std::vector<int64_t>(sx.begin(), sx.end()))}};
  return emit_view(e);
}

// A value computed from x, of x's shape (so that x may update it): arithmetic with a scalar
// or with a partner value, a unary op, a clone.
int Gen::derive(int x) {
  const Meta mx = meta_[size_t(x)];
  int k = ri(0, 9);
  if (k < 5 || k >= 7) {
    std::string op = k < 5 ? one(std::vector<std::string>{"mul", "mul", "add", "sub", "div"})
                           : one(std::vector<std::string>{"add", "sub", "mul", "maximum"});
    std::vector<Operand> args = {Operand::v(x)};
    if (k < 5) {
      args.push_back(scalar(op == "div"));
    } else if (k < 9) {
      int b = partner(S(x));
      if (b < 0) return -1;
      args.push_back(Operand::v(b));
    } else {
      return emit_op("clone", args, {}, [&](int) { return mx; });
    }
    if (coin(0.3)) std::swap(args[0], args[1]);
    auto bnd = [&](const Operand& o) {
      return o.is_val ? meta_[size_t(o.val)].bound : std::fabs(o.num);
    };
    auto cm = [&](const Operand& o) {
      return o.is_val ? meta_[size_t(o.val)].cmask : std::vector<char>{};
    };
    double bound = binary_bound(op, bnd(args[0]), bnd(args[1]), args[1].is_val);
    return emit_op(op, args, {}, [&](int id) {
      Meta m;
      m.bound = bound;
      m.cmask = cm_broadcast(cm(args[0]), cm(args[1]), S(id));
      return m;
    });
  }
  std::string op = one(std::vector<std::string>{"neg", "abs", "relu", "tanh", "sigmoid", "square"});
  if (op == "square" && mx.bound > 1e3) op = "neg";
  double b = unary_bound(op, mx.bound);
  return emit_op(op, {Operand::v(x)}, {}, [&](int id) {
    Meta m = mx;
    m.bound = b;
    cm_fix(m.cmask, S(id));
    return m;
  });
}

// One in-place update of the writable value t. With src >= 0 the update reads src (which
// broadcasts to t's shape); otherwise its operands are scalars or partner values.
bool Gen::update(int t, int src, Upd kind) {
  const Shape st = S(t);
  double b = meta_[size_t(t)].bound;
  if (kind == Upd::Any) {
    using W = std::vector<std::pair<Upd, int>>;
    static const W any = {{Upd::ScalarArith, 2}, {Upd::TensorArith, 3}, {Upd::Fill, 1},
                          {Upd::Clamp, 1},       {Upd::Copy, 1},        {Upd::Region, 2},
                          {Upd::Addc, 1},        {Upd::Lerp, 1}};
    static const W reading = {
        {Upd::TensorArith, 5}, {Upd::Copy, 1}, {Upd::Addc, 1}, {Upd::Lerp, 1}};
    kind = weighted(rng_, src >= 0 ? reading : any);
  }
  Instr in;
  in.args = {Operand::v(t)};
  // Appends the operand read (src, else a partner of shape s) and returns its bound.
  auto value = [&](const Shape& s, bool use_src = true) {
    int w = use_src && src >= 0 ? src : partner(s);
    if (w >= 0) in.args.push_back(Operand::v(w));
    return w >= 0 ? meta_[size_t(w)].bound : -1.0;
  };
  static const std::vector<std::string> arith = {"mul_", "add_", "sub_", "div_"};
  double nb = b;
  switch (kind) {
    case Upd::ScalarArith: {
      in.op = one(arith);
      Operand s = scalar(true);
      in.args.push_back(s);
      nb = in.op == "mul_" ? b * std::fabs(s.num) : in.op == "div_" ? 4 * b : b + std::fabs(s.num);
      break;
    }
    case Upd::TensorArith: {
      in.op = one(arith);
      double bw = value(st);
      if (bw < 0) return false;
      if ((in.op == "add_" || in.op == "sub_") && coin(0.25)) {
        double a = one(std::vector<double>{0.5, -2.0, 0.25, 3.0});
        in.kw = {{"alpha", num_str(a)}};
        bw *= std::fabs(a);
      }
      nb = in.op == "mul_" ? b * bw : in.op == "div_" ? 2 * b : b + bw;
      break;
    }
    case Upd::Fill: {
      if (coin(0.3)) {
        in.op = "zero_", nb = 0;
        break;
      }
      in.op = "fill_";
      Operand s = scalar();
      in.args.push_back(s);
      nb = std::fabs(s.num);
      break;
    }
    case Upd::Clamp: {
      in.op = "clamp_";
      int lo = ri(-8, 4), hi = lo + ri(0, 8);
      in.kw = {{"lo", coin(0.2) ? "none" : num_str(lo / 4.0)},
               {"hi", coin(0.2) ? "none" : num_str(hi / 4.0)}};
      break;
    }
    case Upd::Copy:
      in.op = "copy_";
      nb = value(st);
      if (nb < 0) return false;
      break;
    case Upd::Region: {
      in.op = "index_put";
      std::string idx = rand_index(t);
      Shape region;
      try {
        region = T(t).index(parse_slices(idx)).shape();
      } catch (const Error&) {
        return false;
      }
      in.kw = {{"idx", idx}};
      if (src < 0 && coin(0.3)) {
        Operand s = scalar();
        in.args.push_back(s);
        nb = std::max(b, std::fabs(s.num));
      } else {
        double bw = value(region);
        if (bw < 0) return false;
        nb = std::max(b, bw);
      }
      break;
    }
    case Upd::Addc: {  // t + v * a * c, t + v * a / (|c| + 0.5); src is a or c
      in.op = coin(0.5) ? "addcmul_" : "addcdiv_";
      bool first = coin(0.5);
      double ba = value(st, first), bc = value(st, !first);
      if (ba < 0 || bc < 0) return false;
      double v = one(std::vector<double>{0.5, -1.0, 0.25, 2.0});
      in.kw = {{"value", num_str(v)}};
      nb = b + std::fabs(v) * (in.op == "addcmul_" ? ba * bc : 2 * ba);
      break;
    }
    case Upd::Lerp: {  // t + (e - t) * w
      double be = value(st);
      if (be < 0) return false;
      double w = one(std::vector<double>{0.25, 0.5, 0.75, -0.5, 1.5});
      in.op = "lerp_", in.kw = {{"weight", num_str(w)}};
      nb = std::max(b, be) * (std::fabs(1 - w) + std::fabs(w));
      break;
    }
    case Upd::Any:
      return false;
  }
  return emit_inplace(in, std::max(b, nb));
}

bool Gen::inplace() {
  int t = pick([&](int v) { return writable(v); });
  if (t < 0) return false;
  if (coin(0.5)) {  // write through a fresh view: u = t[...]; u.op_(...)
    int u = write_view(t);
    if (u >= 0) t = u;
  }
  return update(t);
}

// y = f(x); x.op_(...); y.op_(x): y must see x before the write. Variants: x in memory or
// pending, an earlier write of x too, x written through a view or a region, y reading x
// through a view, an expand, or another pending value updated in place; x reading y back;
// sync points between the steps or not.
bool Gen::reread() {
  int x = pick([&](int v) { return writable(v); });
  if (x < 0) return false;
  size_t n0 = p_.code.size();
  if (coin(0.3)) sync_point();
  if (coin(0.25)) update(x);
  int y = derive(x);
  if (y >= 0 && writable(y)) {
    if (coin(0.1)) sync_point();
    int w = coin(0.5) ? write_view(x) : -1;
    update(w >= 0 ? w : x, -1, coin(0.2) ? Upd::Region : Upd::Any);
    if (coin(0.1)) sync_point();
    int src = x, k = ri(0, 9);
    if (k == 6 || k == 7) {
      int v = read_view(x);
      if (v >= 0) src = v;
    } else if (k >= 8) {
      int z = derive(coin(0.5) ? x : y);
      if (z >= 0 && writable(z) && update(z)) src = z;
    }
    update(y, src);
    if (coin(0.25)) update(x, y);
    if (coin(0.1)) {
      Instr in;
      in.op = "peek", in.args = {Operand::v(y)};
      p_.code.push_back(in);
    }
  }
  return p_.code.size() > n0;
}

}  // namespace loom::fuzz
