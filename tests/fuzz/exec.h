#pragma once
// The instruction interpreter shared by run() and the generator (which executes each
// candidate on never-synced placeholder tensors to learn shapes, dtypes and validity).
#include <string>
#include <vector>

#include "program.h"

namespace loom::fuzz {

struct Env {
  Mode mode = Mode::Fused;
  bool shadow = false;  // generator: inputs are uninitialized, sync points do nothing
  const RunOptions* ro = nullptr;
  std::vector<Tensor> vals;  // by value id
  std::vector<int> root;     // the value whose buffer a value views (itself when fresh)
  std::vector<Output> peeks;

  Tensor& at(int id);
  void grow(int id);
};

// Executes one instruction; loom::Error propagates (an invalid program, or a sync failure).
void exec(const Instr& in, Env& env);

// Helpers shared with the generator and the text form.
DType parse_dtype(const std::string& s);
const char* dtype_tag(DType t);                         // "f32", ...
std::vector<int64_t> parse_ints(const std::string& s);  // "0,-1,2"; "" is empty
std::string ints_str(const std::vector<int64_t>& v);
// The shortest text that reads back as x; floats keep a '.' or an exponent.
std::string num_str(double x, bool integer = false);
std::vector<Slice> parse_slices(const std::string& s);  // "1:-1:2,:,3,None,..."
// Randn data of the input instruction's shape (row-major).
std::vector<double> input_data(const Instr& in);
// A fixed random direction in the input's space (entries in [-1, 1]), for finite differences.
std::vector<double> input_direction(const Instr& in);
// The loss weights of output k of n elements (the loss is sum over outputs of out * weights).
std::vector<double> loss_weights(size_t n, size_t k);
bool is_inplace_op(const std::string& op);

}  // namespace loom::fuzz
