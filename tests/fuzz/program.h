#pragma once
// Differential fuzzing of loom: random programs over a pool of values, run fused, with fusion
// off (the oracle) and in float64 (the reference), then compared.
//
// Text form, one instruction a line ('#' starts a comment):
//   %0 = input f32 [3,4,1] seed=17        randn data from std::mt19937(seed)
//   %3 = add %0 %1                        value operands are %N, scalars are numbers:
//   %4 = mul %3 2                         "2" is an int scalar, "2.0" / "0.5" a float scalar
//   %5 = sum %4 dims=0,2 keep=1           attributes are key=value
//   %6 = index %5 idx=1:-1:2,:,None       slices: a:b:c, int (select), None, ...
//   mul_ %6 2.0                           in-place ops define no value (below)
//   sync                                  a sync point
//   peek %5                               a sync point that also records %5's value there
//   out %5 %6                             the values compared at the end
// In-place ops: add_ sub_ mul_ div_ %t (%v | scalar) [alpha=A: add_ / sub_ of a value];
// fill_ %t scalar; zero_ %t; clamp_ %t lo=L hi=H (none: no bound); copy_ %t %v;
// index_put %t (%v | scalar) idx=...; addcmul_ / addcdiv_ %t %a %b value=V;
// lerp_ %t %e weight=W.
// Domain guards are part of the ops: log/log2/log10/sqrt/rsqrt/log1p/reciprocal/lgamma/digamma
// read abs(x)+0.5, acosh abs(x)+1.5, exp/exp2/expm1/sinh/cosh read clamp(x,-20,20), tan
// clamp(x,-1.25,1.25), asin/acos clamp(x,-0.875,0.875), atanh/erfinv clamp(x,-0.9375,0.9375);
// div/floor_divide/remainder/fmod/div_ divide by abs(y)+0.5 (a tensor y), xlogy reads
// abs(y)+0.5, addcdiv_ by abs(b)+0.5; pow is pow(abs(x)+0.5, y) with a tensor exponent
// clamped to [-2, 2].
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "loom.h"

namespace loom::fuzz {

// One operand: a value (%N) or a scalar literal.
struct Operand {
  bool is_val = true;
  int val = -1;
  double num = 0;
  bool is_int = false;  // scalar written without a decimal point
  static Operand v(int id) { return {true, id, 0, false}; }
  static Operand s(double x, bool integer = false) { return {false, -1, x, integer}; }
};

struct Instr {
  int out = -1;  // the value defined, or -1 (in-place ops, sync, peek)
  std::string op;
  std::vector<Operand> args;
  std::vector<std::pair<std::string, std::string>> kw;  // in order

  bool has(const std::string& k) const;
  const std::string& get(const std::string& k) const;  // throws if absent
  void set(const std::string& k, const std::string& v);
};

struct Program {
  uint64_t seed = 0;
  std::vector<Instr> code;
  std::vector<int> outputs;
};

// ---- generation and text -------------------------------------------------------------------

struct GenOptions {
  int min_ops = 5, max_ops = 60;
  // false: no in-place families (gradient checks: a write into a view of a value in the
  // autograd graph raises, which would make most such programs invalid there).
  bool inplace = true;
};
Program generate(uint64_t seed, const GenOptions& opt = {});
std::string to_text(const Program& p);
Program parse(const std::string& text);  // throws std::runtime_error on bad text

// Properties used by the comparison.
bool has_discontinuous(const Program& p);  // floor, comparisons, argmax, casts to int, ...
bool has_reduced_float(const Program& p);  // float16 / bfloat16 round trips
bool is_discontinuous_op(const std::string& op);

// ---- running -------------------------------------------------------------------------------

enum class Mode { Fused, Unfused, Ref64 };
const char* mode_name(Mode m);

struct RunOptions {
  std::string fault;     // test hook: in Fused mode, results of this op are scaled by 1.001
  Device device = kCPU;  // where the Fused run happens (fusion-off and float64 stay on the CPU)
  // Ref64 only: every float64 value an instruction makes is scaled by 1 + 2^-24 or 1 - 2^-24
  // (a random sign an element), float32's rounding on each op, to measure how much the program
  // amplifies rounding (compare.cpp).
  bool perturb = false;
  // Also differentiate: every floating input is a leaf that requires grad (the program reads a
  // clone of it, so in-place updates of inputs stay legal), and the gradients of the sum of the
  // outputs times fixed weights with respect to them are appended to the outputs ("grad %N").
  // A program whose backward raises (a write into a view of a tracked value, an op without a
  // derivative) is a call error in every mode, so invalid for this check.
  bool grads = false;
  // Every input moved by input_shift times its direction (input_direction): the float64 runs of
  // a finite difference along that direction, which checks the gradients independently.
  double input_shift = 0;
};

struct Output {
  std::string name;  // "%5", or "peek %5 @3" for a mid-program read
  DType dtype = DType::Float32;
  Shape shape;
  std::vector<double> v;
  double scale = 1;  // Ref64 only: largest magnitude over the value's inputs' history
};

struct RunResult {
  enum class Err { None, Call, Sync } err = Err::None;
  std::string error;  // message, with the instruction that raised
  std::vector<Output> outs;
};

RunResult run(const Program& p, Mode mode, const RunOptions& ro = {});

// ---- comparison ----------------------------------------------------------------------------

struct Verdict {
  enum class Kind { Pass, Invalid, Mismatch } kind = Kind::Pass;
  std::string what;  // mismatch class: "sync-error", "meta", "fused-vs-unfused", "vs-f64", ...
  std::string msg;   // details: the first differing element
};

// Runs the program three ways and compares them.
Verdict check(const Program& p, const RunOptions& ro = {});
// perturbed: a run in Ref64 mode with RunOptions::perturb, a second sample of rounding noise.
Verdict compare(const Program& p, const RunResult& fused, const RunResult& unfused,
                const RunResult& ref, const RunResult* perturbed = nullptr);
// A full report: the verdict, then the program text.
std::string report(const Program& p, const Verdict& v);

}  // namespace loom::fuzz
