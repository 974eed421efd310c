// Greedy shrinking (delta debugging over instructions, then operands, outputs and shapes).
#include "shrink.h"

#include <algorithm>
#include <set>
#include <unordered_map>

#include "exec.h"

namespace loom::fuzz {
namespace {

// Removes instructions [a, b) and, transitively, every instruction using a value they define.
bool remove_cone(Program& p, size_t a, size_t b) {
  std::set<int> dead;
  std::vector<Instr> kept;
  for (size_t i = 0; i < p.code.size(); ++i) {
    const Instr& in = p.code[i];
    bool drop = i >= a && i < b;
    for (auto& o : in.args) drop = drop || (o.is_val && dead.count(o.val));
    if (!drop) {
      kept.push_back(in);
    } else if (in.out >= 0) {
      dead.insert(in.out);
    }
  }
  std::vector<int> outs;
  for (int o : p.outputs)
    if (!dead.count(o)) outs.push_back(o);
  bool peek = std::any_of(kept.begin(), kept.end(), [](auto& in) { return in.op == "peek"; });
  if (outs.empty() && !peek) return false;
  p.code = std::move(kept);
  p.outputs = std::move(outs);
  return true;
}

// Removes instruction i (defining v), reading its operand `with` wherever v was used.
void bypass(Program& p, size_t i, int with) {
  int v = p.code[i].out;
  p.code.erase(p.code.begin() + long(i));
  for (auto& in : p.code)
    for (auto& o : in.args)
      if (o.is_val && o.val == v) o.val = with;
  for (auto& o : p.outputs)
    if (o == v) o = with;
  std::sort(p.outputs.begin(), p.outputs.end());
  p.outputs.erase(std::unique(p.outputs.begin(), p.outputs.end()), p.outputs.end());
}

class Shrinker {
 public:
  Shrinker(Program p, const FailFn& f, int max) : p_(std::move(p)), fails_(f), max_(max) {}

  Program run() {
    bool progress = true;
    while (progress && tries_ < max_) {
      progress = false;
      progress |= chunks();
      progress |= bypasses();
      progress |= outputs();
      progress |= shapes();
      progress |= scalars();
    }
    return p_;
  }
  int tries() const { return tries_; }
  int accepted() const { return accepted_; }

 private:
  bool attempt(const Program& c) {
    if (tries_ >= max_) return false;
    ++tries_;
    if (!fails_(c)) return false;
    p_ = c;
    ++accepted_;
    return true;
  }

  bool chunks() {
    bool any = false;
    for (size_t size = std::max<size_t>(p_.code.size() / 2, 1); size >= 1; size /= 2) {
      for (size_t i = 0; i < p_.code.size();) {
        Program c = p_;
        if (remove_cone(c, i, std::min(i + size, c.code.size())) && attempt(c)) {
          any = true;
        } else {
          i += size;
        }
      }
      if (size == 1) break;
    }
    return any;
  }

  bool bypasses() {
    bool any = false;
    for (size_t i = 0; i < p_.code.size(); ++i) {
      const Instr in = p_.code[i];
      if (in.out < 0) continue;
      for (auto& o : in.args) {
        if (!o.is_val) continue;
        Program c = p_;
        bypass(c, i, o.val);
        if (attempt(c)) {
          any = true;
          --i;
          break;
        }
      }
    }
    return any;
  }

  bool outputs() {
    bool any = false;
    for (size_t i = 0; p_.outputs.size() > 1 && i < p_.outputs.size();) {
      Program c = p_;
      c.outputs.erase(c.outputs.begin() + long(i));
      if (attempt(c))
        any = true;
      else
        ++i;
    }
    return any;
  }

  // Smaller input shapes: one dim of one input, then one right-aligned dim of every input.
  bool shapes() {
    bool any = false;
    for (size_t i = 0; i < p_.code.size(); ++i) {
      if (p_.code[i].op != "input") continue;
      auto s = parse_ints(p_.code[i].get("shape"));
      for (size_t d = 0; d < s.size(); ++d) {
        for (int64_t t : {int64_t(1), s[d] / 2, s[d] - 1}) {
          if (t < 1 || t >= s[d]) continue;
          Program c = p_;
          auto n = s;
          n[d] = t;
          c.code[i].set("shape", ints_str(n));
          if (attempt(c)) {
            s = n, any = true;
            break;
          }
        }
      }
      if (!s.empty()) {  // drop a leading dim
        Program c = p_;
        c.code[i].set("shape", ints_str(std::vector<int64_t>(s.begin() + 1, s.end())));
        if (attempt(c)) any = true;
      }
    }
    for (size_t k = 0; k < 4; ++k) {  // dim k from the right, in every input at once
      int64_t size = 0;
      for (auto& in : p_.code)
        if (in.op == "input") {
          auto s = parse_ints(in.get("shape"));
          if (s.size() > k && s[s.size() - 1 - k] > 1) size = std::max(size, s[s.size() - 1 - k]);
        }
      for (int64_t t : {int64_t(1), size / 2, size - 1}) {
        if (size <= 1 || t < 1 || t >= size) continue;
        Program c = p_;
        for (auto& in : c.code)
          if (in.op == "input") {
            auto s = parse_ints(in.get("shape"));
            if (s.size() > k && s[s.size() - 1 - k] == size) s[s.size() - 1 - k] = t;
            in.set("shape", ints_str(s));
          }
        if (attempt(c)) {
          any = true;
          break;
        }
      }
    }
    return any;
  }

  // A value operand of a binary op becomes the scalar 2.0.
  bool scalars() {
    bool any = false;
    for (size_t i = 0; i < p_.code.size(); ++i) {
      Instr& in = p_.code[i];
      if (in.args.size() != 2 || is_inplace_op(in.op) || in.op == "cat") continue;
      if (!in.args[0].is_val || !in.args[1].is_val) continue;
      Program c = p_;
      c.code[i].args[1] = Operand::s(2.0);
      if (attempt(c)) any = true;
    }
    return any;
  }

  Program p_;
  const FailFn& fails_;
  int max_, tries_ = 0, accepted_ = 0;
};

}  // namespace

FailFn same_failure(const std::string& what, const RunOptions& ro) {
  return [what, ro](const Program& p) {
    Verdict v = check(p, ro);
    return v.kind == Verdict::Kind::Mismatch && v.what == what;
  };
}

Program shrink(const Program& p, const FailFn& fails, int max_tries, ShrinkStats* stats) {
  Shrinker s(p, fails, max_tries);
  Program r = compact(s.run());
  if (stats) stats->tries = s.tries(), stats->accepted = s.accepted();
  return r;
}

Program compact(const Program& p) {
  Program c = p;
  std::unordered_map<int, int> id;
  int next = 0;
  for (auto& in : c.code)
    if (in.out >= 0) id[in.out] = next++;
  auto map = [&](int v) { return id.count(v) ? id[v] : v; };
  for (auto& in : c.code) {
    if (in.out >= 0) in.out = id[in.out];
    for (auto& o : in.args)
      if (o.is_val) o.val = map(o.val);
  }
  for (auto& o : c.outputs) o = map(o);
  return c;
}

}  // namespace loom::fuzz
