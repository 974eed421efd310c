// The generator's view and movement families.
#include <algorithm>
#include <numeric>

#include "gen.h"

namespace loom::fuzz {
namespace {

using KW = std::vector<std::pair<std::string, std::string>>;

std::string opt_str(bool none, int64_t v) { return none ? "none" : std::to_string(v); }

}  // namespace

std::string Gen::rand_range(int64_t n) {
  int64_t m = std::max<int64_t>(n, 1);
  std::string a = coin(0.5) ? "" : std::to_string(ri(-int(m), int(m)));
  std::string b = coin(0.5) ? "" : std::to_string(ri(-int(m), int(m)));
  int step = one(std::vector<int>{1, 1, 2, 3});
  return a + ":" + b + (step > 1 ? ":" + std::to_string(step) : "");
}

std::string Gen::rand_index(int id) {
  const Shape s = S(id);
  int r = int(s.size());
  int m = r ? ri(1, r) : 0;
  bool ell = r && coin(0.15);
  std::vector<std::string> e;
  for (int i = 0; i < m; ++i) {
    int64_t n = s[size_t(ell ? r - m + i : i)];
    int k = ri(0, 99);
    if (k < 40)
      e.push_back(":");
    else if (k < 75 || n == 0)
      e.push_back(rand_range(n));
    else
      e.push_back(std::to_string(ri(-int(n), int(n) - 1)));
  }
  if (ell) e.insert(e.begin(), "...");
  if (coin(0.15)) e.insert(e.begin() + ri(0, int(e.size())), "None");
  if (e.empty()) e.push_back(":");
  std::string t;
  for (size_t i = 0; i < e.size(); ++i) t += (i ? "," : "") + e[i];
  return t;
}

bool Gen::reshape_like(int x) {
  const Shape sx = S(x);
  const Meta mx = meta_[size_t(x)];
  int r = int(sx.size());
  std::vector<int64_t> to(sx.begin(), sx.end());
  int k = ri(0, 3);
  Instr in;
  in.args = {Operand::v(x)};
  if (k == 0 && r >= 2) {  // merge two adjacent dims
    int d = ri(0, r - 2);
    to[size_t(d)] *= to[size_t(d) + 1];
    to.erase(to.begin() + d + 1);
  } else if (k == 1 && r >= 1) {  // split a dim into two factors
    int d = ri(0, r - 1);
    int64_t n = to[size_t(d)], f = 1;
    for (int64_t c = 2; c <= n; ++c)
      if (n % c == 0 && coin(0.5)) f = c;
    to[size_t(d)] = n ? n / f : 0;
    to.insert(to.begin() + d, f);
  } else if (k == 2 && r >= 1) {
    int a = ri(0, r - 1), b = ri(a, r - 1);
    in.op = "flatten";
    in.kw = {{"start", std::to_string(a)}, {"end", std::to_string(b)}};
  } else {
    to = {numel(sx)};
  }
  if (in.op.empty()) {
    std::vector<int64_t> w = to;
    if (!w.empty() && numel(sx) > 0 && coin(0.3)) w[size_t(ri(0, int(w.size()) - 1))] = -1;
    in.op = "reshape";
    in.kw = {{"shape", ints_str(w)}};
  }
  int id = emit(in, [&](int v) {
    Meta m = mx;
    m.cmask = cm_reshape(mx.cmask, sx, S(v));
    return m;
  });
  if (id < 0) return false;
  Instr back;
  back.op = "reshape";
  back.kw = {{"shape", ints_str(std::vector<int64_t>(sx.begin(), sx.end()))}};
  undo_.push_back({S(id), back});
  return true;
}

bool Gen::split_cat(int x) {
  const Shape sx = S(x);
  const Meta mx = meta_[size_t(x)];
  int r = int(sx.size());
  std::vector<int> ds;
  for (int d = 0; d < r; ++d)
    if (sx[size_t(d)] >= 2) ds.push_back(d);
  if (ds.empty()) return false;
  int d = one(ds);
  int64_t n = sx[size_t(d)];
  int64_t k = ri(1, int(n) - 1);
  std::string at = std::to_string(coin(0.5) ? k : k - n);
  auto piece = [&](const std::string& a, const std::string& b) {
    return emit_op("slice", {Operand::v(x)},
                   {{"dim", std::to_string(d)}, {"start", a}, {"stop", b}, {"step", "1"}},
                   [&](int v) {
                     Meta m = mx;
                     cm_fix(m.cmask, S(v));
                     return m;
                   });
  };
  std::vector<Operand> parts;
  if (coin(0.25)) {  // cat with a new input of a different length
    Shape other = sx;
    other[size_t(d)] = ri(1, 4);
    int o = new_input(other);
    if (o < 0) return false;
    parts = {Operand::v(x), Operand::v(o)};
  } else {
    int a = piece("none", at), b = piece(at, "none");
    if (a < 0 || b < 0) return false;
    parts = {Operand::v(a), Operand::v(b)};
  }
  if (coin(0.5)) std::swap(parts[0], parts[1]);
  double bound = mx.bound;
  for (auto& p : parts) bound = std::max(bound, meta_[size_t(p.val)].bound);
  return emit_op("cat", parts, {{"dim", std::to_string(coin(0.3) ? d - r : d)}}, [&](int v) {
           Meta m = mx;
           m.bound = bound;
           m.cmask[size_t(d)] = 0;
           cm_fix(m.cmask, S(v));
           return m;
         }) >= 0;
}

bool Gen::view() {
  int x = pick([](int) { return true; });
  if (x < 0) return false;
  const Shape sx = S(x);
  const Meta mx = meta_[size_t(x)];
  int r = int(sx.size());
  int k = ri(0, 11);
  if (k == 7) return reshape_like(x);
  if (k == 11) return split_cat(x);
  Instr in;
  in.args = {Operand::v(x)};
  std::function<void(std::vector<char>&)> cm = [](std::vector<char>&) {};
  Instr back;  // the inverse, for a later round trip
  if (k == 0 && r >= 2) {
    std::vector<int64_t> o(static_cast<size_t>(r)), inv(static_cast<size_t>(r));
    std::iota(o.begin(), o.end(), 0);
    std::shuffle(o.begin(), o.end(), rng_);
    for (int i = 0; i < r; ++i) inv[size_t(o[size_t(i)])] = i;
    in.op = "permute", in.kw = {{"order", ints_str(o)}};
    back.op = "permute", back.kw = {{"order", ints_str(inv)}};
    cm = [o](std::vector<char>& c) {
      std::vector<char> n(c.size());
      for (size_t i = 0; i < o.size(); ++i) n[i] = c[size_t(o[i])];
      c = n;
    };
  } else if (k == 1 && r >= 2) {
    int a = ri(0, r - 1), b = ri(0, r - 1);
    in.op = "transpose", in.kw = {{"dims", std::to_string(a) + "," + std::to_string(b - r)}};
    back = in;
    cm = [a, b](std::vector<char>& c) { std::swap(c[size_t(a)], c[size_t(b)]); };
  } else if (k == 2 && r >= 1) {
    int d = ri(0, r - 1);
    int64_t n = std::max<int64_t>(sx[size_t(d)], 1);
    in.op = "slice";
    in.kw = {{"dim", std::to_string(coin(0.3) ? d - r : d)},
             {"start", opt_str(coin(0.3), ri(-int(n), int(n)))},
             {"stop", opt_str(coin(0.3), ri(-int(n), int(n)))},
             {"step", std::to_string(one(std::vector<int>{1, 1, 2, 3}))}};
  } else if (k == 3 && r >= 1) {
    std::string idx = rand_index(x);
    in.op = "index", in.kw = {{"idx", idx}};
    cm = [idx](std::vector<char>& c) { c = cm_index(c, parse_slices(idx)); };
  } else if (k == 4 && r >= 1) {
    int d = ri(0, r - 1);
    int64_t n = sx[size_t(d)];
    if (n == 0) return false;
    in.op = "select",
    in.kw = {{"dim", std::to_string(d)}, {"i", std::to_string(ri(-int(n), int(n) - 1))}};
    cm = [d](std::vector<char>& c) { c.erase(c.begin() + d); };
  } else if (k == 5) {
    int d = ri(0, r);
    in.op = "unsqueeze", in.kw = {{"dim", std::to_string(coin(0.3) ? d - r - 1 : d)}};
    back.op = "squeeze", back.kw = {{"dim", std::to_string(d)}};
    cm = [d](std::vector<char>& c) { c.insert(c.begin() + d, 1); };
  } else if (k == 6) {
    std::vector<int> ones;
    for (int d = 0; d < r; ++d)
      if (sx[size_t(d)] == 1) ones.push_back(d);
    if (ones.empty()) return false;
    in.op = "squeeze";
    if (coin(0.3)) {
      in.kw = {{"dim", "none"}};
      cm = [](std::vector<char>& c) { c.clear(); };  // refilled by cm_fix below
    } else {
      int d = one(ones);
      in.kw = {{"dim", std::to_string(d)}};
      cm = [d](std::vector<char>& c) { c.erase(c.begin() + d); };
    }
  } else if (k == 8) {
    std::vector<int64_t> to(sx.begin(), sx.end());
    bool changed = false;
    for (int d = 0; d < r; ++d)
      if (to[size_t(d)] == 1 && coin(0.6)) {
        int64_t bd = d + int(base_.size()) - r;
        to[size_t(d)] = bd >= 0 && base_[size_t(bd)] > 1 ? base_[size_t(bd)] : ri(2, 4);
        changed = true;
      } else if (coin(0.3)) {
        to[size_t(d)] = -1;
      }
    int lead = coin(0.25) ? 1 : 0;
    if (lead) to.insert(to.begin(), ri(1, 3)), changed = true;
    if (!changed) return false;
    in.op = "expand", in.kw = {{"shape", ints_str(to)}};
    cm = [lead](std::vector<char>& c) {
      if (lead) c.insert(c.begin(), 1);
    };
  } else if (k == 9 || k == 10) {
    in.op = k == 9 ? "contiguous" : "clone";
  } else {
    return false;
  }
  int id = emit(in, [&](int v) {
    Meta m = mx;
    cm(m.cmask);
    m.cmask.resize(S(v).size(), 0);
    cm_fix(m.cmask, S(v));
    return m;
  });
  if (id < 0) return false;
  if (!back.op.empty() && coin(0.7)) undo_.push_back({S(id), back});
  return true;
}

}  // namespace loom::fuzz
