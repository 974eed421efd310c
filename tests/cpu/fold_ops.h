#pragma once
// Ops by letter for the CPU fold tests (tests/cpu/test_fold, test_tail, test_pre): '+', '-',
// '*', '/' on doubles and tensors (either side a scalar), and the folded functions 't' tanh,
// 's' sigmoid, 'e' exp in float64 and on tensors.
#include <cmath>

#include "loom.h"

namespace lt::fold {

inline double arith(char op, double x, double y) {
  return op == '+' ? x + y : op == '-' ? x - y : op == '/' ? x / y : x * y;
}
template <class A, class B>
loom::Tensor arith(char op, const A& x, const B& y) {
  return op == '+' ? x + y : op == '-' ? x - y : op == '/' ? x / y : x * y;
}

inline double f64(char f, double v) {
  return f == 't' ? std::tanh(v) : f == 's' ? 1.0 / (1.0 + std::exp(-v)) : std::exp(v);
}
inline loom::Tensor ft(char f, const loom::Tensor& v) {
  return f == 't' ? loom::tanh(v) : f == 's' ? loom::sigmoid(v) : loom::exp(v);
}

}  // namespace lt::fold
