// Comparing the three runs of a program.
//
// Fused vs fusion-off: ints and bools exactly; floats within 1e-5 relative plus an absolute
// floor of 1e-6 times the output's magnitude, plus 4x the rounding noise measured on that
// output (clipped at 1e-3 of the magnitude): an ill-conditioned output (noise amplified by a
// normalization of a nearly constant row, a cancellation, an exp) may differ as much as that.
// The noise is the oracle's own float32 error (|fusion-off - float64|), and when that does not
// cover a difference, the larger of it and the error of a float64 run that rounds every value it
// makes by float32's unit roundoff (RunOptions::perturb): one sample of the oracle's error can be
// small by luck where the fused run's is not. Programs with float16 or bfloat16 round trips: 2e-2
// relative, and one narrow ulp of the largest magnitude the output was computed from, as a value
// rounded to the narrow type flips to its neighbour when float32 noise crosses a rounding
// boundary (a sum that cancels afterwards keeps the whole ulp).
// Versus float64 (programs without discontinuous ops only): 1e-3 relative plus 1e-3 times the
// largest magnitude among the values the output was computed from. NaN must match NaN.
#include <cmath>
#include <sstream>

#include "exec.h"
#include "program.h"

namespace loom::fuzz {
namespace {

std::string index_str(const Shape& s, size_t flat) {
  std::vector<int64_t> idx(s.size());
  for (int d = int(s.size()) - 1; d >= 0; --d) {
    idx[size_t(d)] = s[size_t(d)] ? int64_t(flat) % s[size_t(d)] : 0;
    flat = s[size_t(d)] ? flat / size_t(s[size_t(d)]) : 0;
  }
  return "[" + ints_str(idx) + "]";
}

std::string out_desc(const Output& o) {
  return o.name + " (" + dtype_tag(o.dtype) + " " + shape_str(o.shape) + ")";
}

// The coarsest relative ulp among the program's narrow round trips: a value in [2^e, 2^(e+1))
// rounded to float16 moves by 2^(e-10) when it flips, to bfloat16 by 2^(e-7).
double narrow_ulp(const Program& p) {
  double u = 0;
  for (auto& in : p.code)
    if (in.op == "rt") u = std::max(u, in.get("dtype") == "bf16" ? 0x1p-7 : 0x1p-10);
  return u;
}

Verdict mismatch(const std::string& what, const std::string& msg) {
  return {Verdict::Kind::Mismatch, what, msg};
}

// |a - b| within tol; NaN only matches NaN and infinities match exactly.
bool near(double a, double b, double tol) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  if (std::isinf(a) || std::isinf(b)) return a == b;
  return std::fabs(a - b) <= tol;
}

double maxabs(const std::vector<double>& v) {
  double m = 0;
  for (double x : v)
    if (std::isfinite(x)) m = std::max(m, std::fabs(x));
  return m;
}

// A float32 run's error on one output (vs float64), clipped so that flips don't loosen much.
double oracle_error(const Output& u, const Output* r, double mag) {
  if (!r || r->v.size() != u.v.size()) return 1e-3 * mag;
  double e = 0;
  for (size_t i = 0; i < u.v.size(); ++i) {
    double d = std::fabs(u.v[i] - r->v[i]);
    if (std::isfinite(d)) e = std::max(e, std::min(d, 1e-3 * (std::fabs(r->v[i]) + mag)));
  }
  return e;
}

std::string elem_msg(const Output& a, const char* an, const Output& b, const char* bn, size_t i,
                     double tol, size_t bad) {
  std::ostringstream os;
  os.precision(9);
  os << out_desc(a) << ": " << bad << " of " << a.v.size() << " elements differ; first at " << i
     << " " << index_str(a.shape, i) << ": " << an << " " << a.v[i] << " vs " << bn << " " << b.v[i]
     << " (tolerance " << tol << ")";
  return os.str();
}

// Fused vs fusion-off for one output; z: the perturbed float64 run's, if there is one.
// narrow_ulp: programs with float16 / bfloat16 round trips, their coarsest relative ulp.
std::string compare_fu(const Output& f, const Output& u, const Output* r, const Output* z,
                       double rtol, double narrow_ulp) {
  bool exact = !is_floating(u.dtype);
  double mag = std::max(1.0, maxabs(u.v));
  double noise = oracle_error(u, r, mag);
  if (z && r && z->v.size() == r->v.size()) noise = std::max(noise, oracle_error(*z, r, mag));
  double slack = exact ? 0 : 1e-6 * mag + 4 * noise + narrow_ulp * (r ? r->scale : mag);
  size_t bad = 0, first = 0;
  double ftol = 0;
  for (size_t i = 0; i < u.v.size(); ++i) {
    double tol = exact ? 0 : rtol * std::fabs(u.v[i]) + slack;
    if (!near(f.v[i], u.v[i], tol) && bad++ == 0) first = i, ftol = tol;
  }
  return bad ? elem_msg(f, "fused", u, "fusion-off", first, ftol, bad) : "";
}

// A float32 run vs float64 for one output. A gradient's element that is not finite in one of
// the two is not compared: products of a derivative past float32's range with one that
// underflowed (0 * inf) are NaN there and finite in float64, and the other way round.
std::string compare_ref(const Output& a, const char* an, const Output& r, double rtol) {
  bool grad = a.name.rfind("grad ", 0) == 0;
  size_t bad = 0, first = 0;
  double ftol = 0;
  for (size_t i = 0; i < r.v.size(); ++i) {
    if (std::fabs(r.v[i]) > 1e30) continue;  // beyond float32's range: not comparable
    if (grad && !(std::isfinite(a.v[i]) && std::isfinite(r.v[i]))) continue;
    double tol = rtol * (std::fabs(r.v[i]) + r.scale);
    if (!near(a.v[i], r.v[i], tol) && bad++ == 0) first = i, ftol = tol;
  }
  return bad ? elem_msg(a, an, r, "float64", first, ftol, bad) : "";
}

}  // namespace

Verdict compare(const Program& p, const RunResult& f, const RunResult& u, const RunResult& r,
                const RunResult* z) {
  using Err = RunResult::Err;
  if (u.err == Err::Call && f.err == Err::Call) return {Verdict::Kind::Invalid, "invalid", u.error};
  const RunResult* runs[] = {&f, &u, &r};
  const char* names[] = {"fused", "fusion-off", "float64"};
  for (int k = 0; k < 3; ++k)
    if (runs[k]->err != Err::None)
      return mismatch(runs[k]->err == Err::Sync ? "sync-error" : "call-error",
                      std::string(names[k]) + " raised: " + runs[k]->error);
  if (f.outs.size() != u.outs.size() || r.outs.size() != u.outs.size())
    return mismatch("meta", "different numbers of outputs");
  for (size_t k = 0; k < u.outs.size(); ++k) {
    const Output &fo = f.outs[k], &uo = u.outs[k], &ro = r.outs[k];
    if (fo.shape != uo.shape || fo.dtype != uo.dtype || fo.v.size() != uo.v.size())
      return mismatch("meta", out_desc(fo) + " fused vs " + out_desc(uo) + " fusion-off");
    if (ro.shape != uo.shape || ro.v.size() != uo.v.size())
      return mismatch("meta", out_desc(uo) + " fusion-off vs " + out_desc(ro) + " float64");
  }
  bool narrow = has_reduced_float(p);
  double ulp = narrow ? narrow_ulp(p) : 0;
  bool zok = z && z->err == RunResult::Err::None && z->outs.size() == u.outs.size();
  for (size_t k = 0; k < u.outs.size(); ++k) {
    std::string m = compare_fu(f.outs[k], u.outs[k], &r.outs[k], zok ? &z->outs[k] : nullptr,
                               narrow ? 2e-2 : 1e-5, ulp);
    if (!m.empty()) return mismatch("fused-vs-unfused", m);
  }
  if (has_discontinuous(p)) return {};
  for (size_t k = 0; k < u.outs.size(); ++k) {
    if (!is_floating(u.outs[k].dtype)) continue;
    double rtol = narrow ? 3e-2 : 1e-3;
    std::string m = compare_ref(u.outs[k], "fusion-off", r.outs[k], rtol);
    if (m.empty()) m = compare_ref(f.outs[k], "fused", r.outs[k], rtol);
    if (!m.empty()) return mismatch("vs-f64", m);
  }
  return {};
}

// The gradients' independent check: the float64 gradients (r's "grad %N" outputs) along each
// input's direction against a central difference of the float64 loss along it.
Verdict directional(const Program& p, const RunOptions& ro, const RunResult& r) {
  const double eps = 1e-6;
  RunOptions a = ro;
  a.grads = false;
  auto loss = [&](double shift, double* out) {
    a.input_shift = shift;
    RunResult x = run(p, Mode::Ref64, a);
    if (x.err != RunResult::Err::None || x.outs.size() < p.outputs.size()) return false;
    size_t first = x.outs.size() - p.outputs.size();
    double s = 0;
    for (size_t k = 0; k < p.outputs.size(); ++k) {
      const Output& o = x.outs[first + k];
      if (!is_floating(o.dtype)) continue;
      std::vector<double> w = loss_weights(o.v.size(), k);
      for (size_t i = 0; i < o.v.size(); ++i) s += o.v[i] * w[i];
    }
    *out = s;
    return std::isfinite(s);
  };
  double lp = 0, lm = 0;
  if (!loss(eps, &lp) || !loss(-eps, &lm)) return {};
  double numeric = (lp - lm) / (2 * eps), analytic = 0, mag = 0;
  for (const Instr& in : p.code) {
    if (in.op != "input") continue;
    std::string name = "grad %" + std::to_string(in.out);
    for (const Output& o : r.outs) {
      if (o.name != name) continue;
      std::vector<double> dir = input_direction(in);
      for (size_t i = 0; i < o.v.size() && i < dir.size(); ++i) {
        analytic += o.v[i] * dir[i];
        mag += std::fabs(o.v[i] * dir[i]);
      }
    }
  }
  if (!std::isfinite(analytic) || !std::isfinite(mag)) return {};
  double tol = 1e-4 * (mag + 1) + 1e-3 * std::fabs(numeric);
  if (std::fabs(numeric - analytic) <= tol) return {};
  std::ostringstream os;
  os.precision(10);
  os << "the float64 gradients along the inputs' directions give " << analytic
     << ", a central difference of the loss " << numeric << " (tolerance " << tol << ")";
  return mismatch("grad-vs-finite-difference", os.str());
}

Verdict check(const Program& p, const RunOptions& ro) {
  RunResult f = run(p, Mode::Fused, ro);
  RunResult u = run(p, Mode::Unfused, ro);
  if (u.err == RunResult::Err::Call && f.err == RunResult::Err::Call)
    return {Verdict::Kind::Invalid, "invalid", u.error};
  RunResult r = run(p, Mode::Ref64, ro);
  Verdict v = compare(p, f, u, r);
  // (a float16 or bfloat16 round trip is a step function in float64: no derivative to compare)
  if (ro.grads && v.kind == Verdict::Kind::Pass && !has_discontinuous(p) && !has_reduced_float(p))
    return directional(p, ro, r);
  if (v.kind != Verdict::Kind::Mismatch || v.what != "fused-vs-unfused") return v;
  RunOptions po = ro;  // a second sample of the rounding noise (only when needed: it costs a run)
  po.perturb = true;
  RunResult z = run(p, Mode::Ref64, po);
  return compare(p, f, u, r, &z);
}

std::string report(const Program& p, const Verdict& v) {
  std::string k = v.kind == Verdict::Kind::Pass      ? "pass"
                  : v.kind == Verdict::Kind::Invalid ? "invalid program"
                                                     : "MISMATCH (" + v.what + ")";
  return k + ": " + v.msg + "\n" + to_text(p);
}

}  // namespace loom::fuzz
