#pragma once
// The program generator's state (internal to the fuzzer). generate.cpp holds the driver and
// value helpers, gen_ops.cpp the op families.
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "exec.h"
#include "meta.h"

namespace loom::fuzz {

constexpr double kMaxFloat = 1e8, kMaxInt = 1e9;
constexpr int64_t kMaxNumel = 400000;  // no broadcast blow-ups ([n, 1] + [n] is n^2)
// Ops that amplify their input's absolute rounding error (exp, sin, a tensor exponent) only
// read values whose history stays below this, so float32 stays within 1e-3 of float64.
constexpr double kMaxHistAmplified = 1e3;

double unary_bound(const std::string& op, double b);
// A binary op's bound from its operands' (rv: the right operand is a value, not a scalar).
double binary_bound(const std::string& op, double l, double r, bool rv);

// What an in-place update does (Gen::update): Any picks one by the weights in gen_inplace.cpp.
enum class Upd { Any, ScalarArith, TensorArith, Fill, Clamp, Copy, Region, Addc, Lerp };

struct Undo {  // a pending round trip: apply `in` to a value of shape `shape`
  Shape shape;
  Instr in;
};

class Gen {
 public:
  Gen(uint64_t seed, const GenOptions& opt) : rng_(seed), opt_(opt) {
    p_.seed = seed;
    env_.shadow = true;
  }
  Program run();

 private:
  // ---- randomness
  int ri(int a, int b) { return std::uniform_int_distribution<int>(a, b)(rng_); }
  bool coin(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  template <typename T>
  const T& one(const std::vector<T>& v) {
    return v[size_t(ri(0, int(v.size()) - 1))];
  }
  Operand scalar(bool nonzero = false);

  // ---- values
  const Tensor& T(int id) { return env_.vals[size_t(id)]; }
  const Shape& S(int id) { return T(id).shape(); }
  DType D(int id) { return T(id).dtype(); }
  bool is_float(int id) { return D(id) == DType::Float32 || D(id) == DType::Float64; }
  int pick(const std::function<bool(int)>& ok);
  int pick_float() {
    return pick([&](int v) { return is_float(v); });
  }
  Shape base_variant();
  Shape variant_of(Shape s);
  int new_input(Shape s);
  int partner(Shape s);  // a value that broadcasts to s (often of shape s)
  bool writable(int id);
  // A discontinuous op may read it: its value is not pinned to a rounding-sensitive spot.
  bool steady(int id) { return !meta_[size_t(id)].pinned; }

  // ---- emitting
  int emit(Instr in, const std::function<Meta(int)>& meta);
  void finish_meta(const Instr& in, Meta& m);
  int emit_op(const std::string& op, std::vector<Operand> args,
              std::vector<std::pair<std::string, std::string>> kw,
              const std::function<Meta(int)>& meta) {
    Instr in;
    in.op = op, in.args = std::move(args), in.kw = std::move(kw);
    return emit(std::move(in), meta);
  }
  bool emit_inplace(Instr in, double new_bound);
  int emit_view(const Instr& in);  // a view of in.args[0], its meta following the operand's
  void sync_point();

  // ---- op families
  bool unary();
  bool binary();
  bool compare_where();
  bool reduction();
  bool normalization();
  bool view();
  bool reshape_like(int x);
  bool split_cat(int x);
  std::string rand_range(int64_t n);
  std::string rand_index(int id);
  bool inplace();
  bool reread();
  int write_view(int t);
  int read_view(int x);
  int derive(int x);
  bool update(int t, int src = -1, Upd kind = Upd::Any);
  bool cast();
  bool undo();

  std::mt19937_64 rng_;
  GenOptions opt_;
  Program p_;
  Env env_;
  std::vector<Meta> meta_;
  std::vector<int> live_;
  std::vector<int> updated_;
  std::vector<Undo> undo_;
  Shape base_;
  bool disc_ = true;
  int next_ = 0;
};

}  // namespace loom::fuzz
