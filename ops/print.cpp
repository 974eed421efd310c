// Printing like torch: values (summarised past 1000 elements), dtype and device.
#include <cmath>
#include <iomanip>
#include <sstream>

#include "ops/record.h"

namespace loom {
namespace {

// One float as torch prints it, by the tensor's format (sci, ints: every value is whole).
struct Fmt {
  bool sci = false, ints = false;
  std::string one(double v) const {
    std::ostringstream os;
    if (std::isnan(v)) {
      os << "nan";
    } else if (std::isinf(v)) {
      os << (v > 0 ? "inf" : "-inf");
    } else if (sci) {
      os << std::scientific << std::setprecision(4) << v;
    } else if (ints) {
      os << std::fixed << std::setprecision(0) << v << ".";
    } else {
      os << std::fixed << std::setprecision(4) << v;
    }
    return os.str();
  }
};

// The elements as text, row-major, and the width they are padded to. Integers from their exact
// values (a double would round int64 and uint64 values past 2^53).
std::vector<std::string> cells(const Tensor& t, int* width) {
  std::vector<std::string> c;
  *width = 1;
  if (is_bool(t.dtype())) {
    for (bool b : t.to_vector<bool>()) c.push_back(b ? "True" : "False");
    *width = 5;
    return c;
  }
  if (t.dtype() == DType::UInt64) {
    for (uint64_t v : t.to_vector<uint64_t>()) c.push_back(std::to_string(v));
  } else if (is_integral(t.dtype())) {
    for (int64_t v : t.to_vector<int64_t>()) c.push_back(std::to_string(v));
  }
  if (!c.empty() || t.numel() == 0) {
    for (auto& e : c) *width = std::max<int>(*width, int(e.size()));
    return c;
  }
  std::vector<double> v = t.to_vector<double>();
  Fmt f;
  double mx = 0, mn = INFINITY;
  bool all_int = true;
  for (double x : v) {
    if (!std::isfinite(x)) continue;
    mx = std::max(mx, std::fabs(x));
    if (x != 0) mn = std::min(mn, std::fabs(x));
    if (x != std::floor(x)) all_int = false;
  }
  f.ints = all_int;
  f.sci = mx >= 1e8 || (mn < 1e-4 && !all_int) || (mn != INFINITY && mx / mn > 1e3 && !all_int);
  // Like torch, floats take their width from the nonzero finite values (nan, inf and zeros are
  // padded to it or overflow it).
  for (double x : v) {
    c.push_back(f.one(x));
    if (std::isfinite(x) && x != 0) *width = std::max<int>(*width, int(c.back().size()));
  }
  return c;
}

void emit(std::ostringstream& os, const std::vector<std::string>& v, const Shape& s,
          const Strides& st, int d, int64_t off, int width, bool summarize, int indent) {
  if (s.empty()) {
    os << v[off];
    return;
  }
  os << "[";
  int64_t n = s[d];
  bool cut = summarize && n > 6;
  for (int64_t i = 0; i < n; ++i) {
    if (cut && i == 3) {
      // torch prints the innermost ellipsis as an element " ..." (",  ...,").
      os << (d + 1 == int(s.size()) ? " ..., " : "...,\n" + std::string(indent + 1, ' '));
      i = n - 3;
    }
    if (d + 1 == int(s.size())) {
      os << std::setw(width) << v[off + i * st[d]];
    } else {
      emit(os, v, s, st, d + 1, off + i * st[d], width, summarize, indent + 1);
    }
    if (i + 1 < n) {
      os << ",";
      if (d + 1 == int(s.size()))
        os << " ";
      else
        os << std::string(int(s.size()) - d - 1, '\n') << std::string(indent + 1, ' ');
    }
  }
  os << "]";
}

}  // namespace

std::string Tensor::str() const {
  int width = 1;
  std::vector<std::string> v = cells(*this, &width);
  bool summarize = numel() > 1000;
  std::ostringstream os;
  os << "tensor(";
  emit(os, v, shape(), contiguous_strides(shape()), 0, 0, width, summarize, 7);
  if (summarize) os << ", shape=" << shape_str(shape());
  if (dtype_ != DType::Float32 && dtype_ != DType::Int64 && dtype_ != DType::Bool)
    os << ", dtype=" << dtype_name(dtype_);
  if (device_ != kCPU) os << ", device='" << device_.str() << "'";
  if (grad_fn()) os << ", grad_fn=<" << grad_fn_name() << ">";  // as torch prints the graph
  else if (requires_grad()) os << ", requires_grad=True";
  os << ")";
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.str(); }

}  // namespace loom
