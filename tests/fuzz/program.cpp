// The program model: instruction attributes, the text form, program properties and run().
#include "program.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <stdexcept>
#include <unordered_set>

#include "exec.h"

namespace loom::fuzz {

bool Instr::has(const std::string& k) const {
  for (auto& [a, b] : kw)
    if (a == k) return true;
  return false;
}

const std::string& Instr::get(const std::string& k) const {
  for (auto& [a, b] : kw)
    if (a == k) return b;
  throw Error(ErrorKind::Value, op + ": missing attribute '" + k + "'");
}

void Instr::set(const std::string& k, const std::string& v) {
  for (auto& [a, b] : kw)
    if (a == k) {
      b = v;
      return;
    }
  kw.emplace_back(k, v);
}

// ---- text ----------------------------------------------------------------------------------

namespace {

std::string instr_text(const Instr& in) {
  std::string s;
  if (in.out >= 0) s = "%" + std::to_string(in.out) + " = ";
  s += in.op;
  for (auto& a : in.args)
    s += " " + (a.is_val ? "%" + std::to_string(a.val) : num_str(a.num, a.is_int));
  for (auto& [k, v] : in.kw) s += " " + k + "=" + v;
  return s;
}

}  // namespace

std::string to_text(const Program& p) {
  std::string s = "# loom_fuzz program, seed " + std::to_string(p.seed) + "\n";
  for (auto& in : p.code) s += instr_text(in) + "\n";
  s += "out";
  for (int o : p.outputs) s += " %" + std::to_string(o);
  return s + "\n";
}

Program parse(const std::string& text) {
  Program p;
  std::istringstream is(text);
  std::string line;
  int lineno = 0;
  while (std::getline(is, line)) {
    ++lineno;
    if (line.rfind("# loom_fuzz program, seed ", 0) == 0) p.seed = std::stoull(line.substr(26));
    if (auto h = line.find('#'); h != std::string::npos) line.resize(h);
    std::istringstream ls(line);
    std::vector<std::string> tok;
    for (std::string t; ls >> t;) tok.push_back(t);
    if (tok.empty()) continue;
    auto bad = [&](const std::string& why) {
      return std::runtime_error("parse: line " + std::to_string(lineno) + ": " + why + ": " + line);
    };
    auto ref = [&](const std::string& t) {
      if (t.size() < 2 || t[0] != '%') throw bad("expected %N, got '" + t + "'");
      return std::stoi(t.substr(1));
    };
    if (tok[0] == "out") {
      for (size_t i = 1; i < tok.size(); ++i) p.outputs.push_back(ref(tok[i]));
      continue;
    }
    Instr in;
    size_t i = 0;
    if (tok[0][0] == '%') {
      if (tok.size() < 3 || tok[1] != "=") throw bad("expected '%N = op ...'");
      in.out = ref(tok[0]);
      i = 2;
    }
    in.op = tok[i++];
    for (; i < tok.size(); ++i) {
      const std::string& t = tok[i];
      if (t[0] == '%') {
        in.args.push_back(Operand::v(ref(t)));
      } else if (auto eq = t.find('='); eq != std::string::npos) {
        in.kw.emplace_back(t.substr(0, eq), t.substr(eq + 1));
      } else {
        char* end = nullptr;
        double x = std::strtod(t.c_str(), &end);
        if (end != t.c_str() + t.size()) throw bad("bad operand '" + t + "'");
        in.args.push_back(Operand::s(x, t.find_first_of(".eEn") == std::string::npos));
      }
    }
    p.code.push_back(std::move(in));
  }
  return p;
}

// ---- properties ----------------------------------------------------------------------------

bool is_discontinuous_op(const std::string& op) {
  static const std::unordered_set<std::string> ops = {"sign",
                                                      "floor",
                                                      "ceil",
                                                      "round",
                                                      "trunc",
                                                      "bitwise_not",
                                                      "isnan",
                                                      "isinf",
                                                      "isfinite",
                                                      "logical_not",
                                                      "floor_divide",
                                                      "remainder",
                                                      "atan2",
                                                      "eq",
                                                      "ne",
                                                      "lt",
                                                      "le",
                                                      "gt",
                                                      "ge",
                                                      "logical_and",
                                                      "logical_or",
                                                      "logical_xor",
                                                      "bitwise_and",
                                                      "bitwise_or",
                                                      "bitwise_xor",
                                                      "where",
                                                      "argmax",
                                                      "argmin",
                                                      "any",
                                                      "all",
                                                      "toint",
                                                      "frac",
                                                      "signbit",
                                                      "fmod",
                                                      "copysign",
                                                      "bitwise_left_shift",
                                                      "bitwise_right_shift"};
  return ops.count(op) > 0;
}

bool has_discontinuous(const Program& p) {
  for (auto& in : p.code) {
    if (is_discontinuous_op(in.op)) return true;
    if (in.op == "cast" && !is_floating(parse_dtype(in.get("dtype")))) return true;
  }
  return false;
}

bool has_reduced_float(const Program& p) {
  for (auto& in : p.code)
    if (in.op == "rt") return true;
  return false;
}

const char* mode_name(Mode m) {
  return m == Mode::Fused ? "fused" : m == Mode::Unfused ? "fusion-off" : "float64";
}

// ---- run -----------------------------------------------------------------------------------

namespace {

struct FusionScope {
  bool was = fusion_enabled();
  explicit FusionScope(bool on) { set_fusion(on); }
  ~FusionScope() { set_fusion(was); }
};

double maxabs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v)
    if (std::isfinite(x)) m = std::max(m, std::fabs(x));
  return m;
}

Output read(const Tensor& t, const std::string& name) {
  return Output{name, t.dtype(), t.shape(), t.to_vector<double>()};
}

// Ref64: each output's scale is the largest magnitude over the values it was computed from.
void set_scales(const Program& p, Env& e, std::vector<Output>& outs, size_t npeek) {
  std::vector<double> h(e.vals.size(), 0);
  for (size_t i = 0; i < e.vals.size(); ++i)
    if (e.vals[i].defined()) h[i] = maxabs(e.vals[i].to_vector<double>());
  for (auto& in : p.code) {
    double m = 0;
    for (auto& a : in.args) m = std::max(m, a.is_val ? h[size_t(a.val)] : std::fabs(a.num));
    if (in.out >= 0) h[size_t(in.out)] = std::max(h[size_t(in.out)], m);
    if (is_inplace_op(in.op)) {
      int t = in.args[0].val, r = e.root[size_t(t)];
      h[size_t(t)] = std::max(h[size_t(t)], m);
      if (r >= 0) h[size_t(r)] = std::max(h[size_t(r)], m);
    }
  }
  size_t k = 0;
  for (auto& in : p.code)
    if (in.op == "peek") outs[k++].scale = std::max(1.0, h[size_t(in.args[0].val)]);
  for (size_t i = 0; i < p.outputs.size(); ++i)
    outs[npeek + i].scale = std::max(1.0, h[size_t(p.outputs[i])]);
}

}  // namespace

// The gradients of the weighted outputs with respect to the leaves, appended to res.outs.
void append_grads(const Program& p, Env& e, const std::vector<std::pair<int, Tensor>>& leaves,
                  Mode mode, RunResult& res) {
  Tensor loss;
  for (size_t k = 0; k < p.outputs.size(); ++k) {
    const Tensor& t = e.at(p.outputs[k]);
    if (!is_floating(t.dtype()) || !t.requires_grad()) continue;
    Tensor w = tensor<double>(loss_weights(size_t(t.numel()), k), t.shape()).to(t.device());
    Tensor term = (cast(t, DType::Float64) * w).sum();
    loss = loss.defined() ? loss + term : term;
  }
  std::vector<Tensor> xs;
  for (auto& [id, leaf] : leaves) xs.push_back(leaf);
  std::vector<Tensor> gs(xs.size());
  if (loss.defined() && !xs.empty()) gs = autograd::grad({loss}, xs, {}, {}, false, true);
  for (size_t j = 0; j < xs.size(); ++j) {
    Output o = read(gs[j].defined() ? gs[j] : zeros_like(xs[j]),
                    "grad %" + std::to_string(leaves[j].first));
    if (mode == Mode::Ref64) {
      double m = 1;
      for (double v : o.v)
        if (std::isfinite(v)) m = std::max(m, std::fabs(v));
      o.scale = m;
    }
    res.outs.push_back(std::move(o));
  }
}

RunResult run(const Program& p, Mode mode, const RunOptions& ro) {
  RunResult res;
  FusionScope scope(mode == Mode::Fused);
  Env e;
  e.mode = mode;
  e.ro = &ro;
  // Handles die after their last use (dead intermediates are never materialized), except in
  // the reference, which keeps every value to measure scales.
  int n = 0;
  for (auto& in : p.code) {
    n = std::max(n, in.out + 1);
    for (auto& a : in.args)
      if (a.is_val) n = std::max(n, a.val + 1);
  }
  for (int o : p.outputs) n = std::max(n, o + 1);
  std::vector<int> last(size_t(n), -1);
  for (size_t i = 0; i < p.code.size(); ++i)
    for (auto& a : p.code[i].args)
      if (a.is_val && a.val >= 0) last[size_t(a.val)] = int(i);
  for (int o : p.outputs)
    if (o >= 0) last[size_t(o)] = INT_MAX;
  bool keep = mode == Mode::Ref64;
  e.grow(n - 1);
  std::vector<std::pair<int, Tensor>> leaves;  // ro.grads: input id, its leaf
  for (size_t i = 0; i < p.code.size(); ++i) {
    const Instr& in = p.code[i];
    try {
      exec(in, e);
      if (ro.grads && in.op == "input" && is_floating(e.at(in.out).dtype())) {
        Tensor leaf = e.at(in.out).detach();
        leaf.requires_grad_();
        leaves.push_back({in.out, leaf});
        e.at(in.out) = leaf.clone();
      }
    } catch (const std::exception& ex) {
      bool sync = in.op == "peek" || in.op == "sync";
      res.err = sync ? RunResult::Err::Sync : RunResult::Err::Call;
      res.error = "line " + std::to_string(i + 1) + " (" + instr_text(in) + "): " + ex.what();
      return res;
    }
    if (keep) continue;
    for (auto& a : in.args)
      if (a.is_val && a.val >= 0 && last[size_t(a.val)] == int(i)) e.vals[size_t(a.val)] = Tensor();
    if (in.out >= 0 && last[size_t(in.out)] < int(i)) e.vals[size_t(in.out)] = Tensor();
  }
  try {
    res.outs = std::move(e.peeks);
    size_t npeek = res.outs.size();
    for (int o : p.outputs)
      if (o < 0 || o >= int(e.vals.size()) || !e.vals[size_t(o)].defined()) {
        res.err = RunResult::Err::Call;
        res.error = "output %" + std::to_string(o) + " is not defined";
        return res;
      }
    for (int o : p.outputs) res.outs.push_back(read(e.at(o), "%" + std::to_string(o)));
    if (mode == Mode::Ref64) set_scales(p, e, res.outs, npeek);
  } catch (const std::exception& ex) {
    res.err = RunResult::Err::Sync;
    res.error = std::string("reading outputs: ") + ex.what();
    return res;
  }
  if (ro.grads) {
    try {
      append_grads(p, e, leaves, mode, res);
    } catch (const std::exception& ex) {
      res.err = RunResult::Err::Call;
      res.error = std::string("backward: ") + ex.what();
    }
  }
  return res;
}

}  // namespace loom::fuzz
