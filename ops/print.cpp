// Printing like torch: values (summarised past 1000 elements), dtype and device.
#include <cmath>
#include <iomanip>
#include <sstream>

#include "ops/record.h"

namespace loom {
namespace {

struct Fmt {
  bool is_float, sci = false, ints = false;
  int width = 1;
  std::string one(double v) const {
    std::ostringstream os;
    if (!is_float) {
      os << int64_t(v);
    } else if (std::isnan(v)) {
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

void emit(std::ostringstream& os, const std::vector<double>& v, const Shape& s, const Strides& st,
          int d, int64_t off, const Fmt& f, bool summarize, int indent, DType dt) {
  if (s.empty()) {
    os << (dt == DType::Bool ? (v[off] != 0 ? "True" : "False") : f.one(v[off]));
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
      std::string e = dt == DType::Bool ? (v[off + i * st[d]] != 0 ? "True" : "False")
                                         : f.one(v[off + i * st[d]]);
      os << std::setw(f.width) << e;
    } else {
      emit(os, v, s, st, d + 1, off + i * st[d], f, summarize, indent + 1, dt);
    }
    if (i + 1 < n) {
      os << ",";
      if (d + 1 == int(s.size())) os << " ";
      else os << std::string(int(s.size()) - d - 1, '\n') << std::string(indent + 1, ' ');
    }
  }
  os << "]";
}

}  // namespace

std::string Tensor::str() const {
  std::vector<double> v = to_vector<double>();
  Fmt f{is_floating(dtype_)};
  double mx = 0, mn = INFINITY;
  bool all_int = true;
  for (double x : v) {
    if (!std::isfinite(x)) continue;
    mx = std::max(mx, std::fabs(x));
    if (x != 0) mn = std::min(mn, std::fabs(x));
    if (x != std::floor(x)) all_int = false;
  }
  if (f.is_float) {
    f.ints = all_int;
    f.sci = mx >= 1e8 || (mn < 1e-4 && !all_int) || (mn != INFINITY && mx / mn > 1e3 && !all_int);
  }
  bool summarize = numel() > 1000;
  // Like torch, floats take their width from the nonzero finite values (nan, inf and zeros
  // are padded to it or overflow it); integers from every value.
  for (double x : v)
    if (!f.is_float || (std::isfinite(x) && x != 0))
      f.width = std::max<int>(f.width, int(f.one(x).size()));
  if (dtype_ == DType::Bool) f.width = 5;
  std::ostringstream os;
  os << "tensor(";
  emit(os, v, shape(), contiguous_strides(shape()), 0, 0, f, summarize, 7, dtype_);
  if (summarize) os << ", shape=" << shape_str(shape());
  if (dtype_ != DType::Float32 && dtype_ != DType::Int64 && dtype_ != DType::Bool)
    os << ", dtype=" << dtype_name(dtype_);
  if (device_ != kCPU) os << ", device='" << device_.str() << "'";
  os << ")";
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.str(); }

}  // namespace loom
