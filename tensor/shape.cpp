#include "tensor/shape.h"

#include <optional>
#include <sstream>

#include "tensor/error.h"

namespace loom {

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

void contiguous_strides(const Shape& s, Strides& out) {
  out.resize(s.size());
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    out[i] = acc;
    acc *= s[i] > 0 ? s[i] : 1;
  }
}

Strides contiguous_strides(const Shape& s) {
  Strides st;
  contiguous_strides(s, st);
  return st;
}

std::optional<int64_t> collapsed_stride(const Shape& shape, const Strides& strides, int i0,
                                        int i1) {
  int64_t s = 0, span = 0;
  for (int d = i1 - 1; d >= i0; --d) {
    if (shape[d] == 1) continue;
    if (span == 0) {
      s = strides[d], span = shape[d];
    } else {
      if (strides[d] != s * span) return std::nullopt;
      span *= shape[d];
    }
  }
  return s;
}

std::optional<Strides> view_strides(const Shape& old_shape, const Strides& old_strides,
                                    const Shape& shape) {
  if (numel(old_shape) == 0 || old_shape.empty()) return contiguous_strides(shape);
  Strides out(shape.size());
  int view_d = int(shape.size()) - 1;
  int64_t base = old_strides.back(), tensor_n = 1, view_n = 1;
  for (int d = int(old_shape.size()) - 1; d >= 0; --d) {
    tensor_n *= old_shape[d];
    if (d == 0 || (old_shape[d - 1] != 1 && old_strides[d - 1] != tensor_n * base)) {
      while (view_d >= 0 && (view_n < tensor_n || shape[view_d] == 1)) {
        out[view_d] = view_n * base;
        view_n *= shape[view_d];
        --view_d;
      }
      if (view_n != tensor_n) return std::nullopt;
      if (d > 0) base = old_strides[d - 1], tensor_n = 1, view_n = 1;
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

std::string shape_str(const Shape& s) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  os << "]";
  return os.str();
}

Shape broadcast_shapes(const char* op, const Shape& a, const Shape& b) {
  // A rank-0 side (a scalar operand) or equal shapes: the other shape, without the dim loop
  // (a scalar op's every call comes here).
  if (b.empty() || a == b) return a;
  if (a.empty()) return b;
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    LOOM_CHECK(da == db || da == 1 || db == 1, Value, op, ": shapes ", shape_str(a), " and ",
               shape_str(b), " cannot be broadcast together (dim ", i, ": ", da, " vs ", db, ")");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

int normalize_dim(const char* op, int64_t dim, int rank) {
  int r = rank == 0 ? 1 : rank;  // torch accepts dim 0 / -1 on scalars
  LOOM_CHECK(dim >= -r && dim < r, Index, op, ": dim ", dim, " out of range for a tensor of rank ",
             rank, " (expected in [", -r, ", ", r - 1, "])");
  return int(dim < 0 ? dim + r : dim);
}

int normalize_dim(const char* op, int64_t dim, const Shape& shape, int extra) {
  int rank = int(shape.size());
  int r = rank + extra == 0 ? 1 : rank + extra;  // torch accepts dim 0 / -1 on scalars
  LOOM_CHECK(dim >= -r && dim < r, Index, op, ": dim ", dim, " out of range for a tensor of shape ",
             shape_str(shape), " (rank ", rank, "; expected a dim in [", -r, ", ", r - 1, "])");
  return int(dim < 0 ? dim + r : dim);
}

void check_sizes(const char* op, const Shape& s) {
  int64_t n = 1;
  for (auto d : s) {
    LOOM_CHECK(d >= 0, Value, op, ": negative size ", d, " in shape ", shape_str(s));
    LOOM_CHECK(d == 0 || n <= INT64_MAX / d, Value, op, ": shape ", shape_str(s),
               " has more elements than int64 can count");
    n *= d;
  }
}

bool is_contiguous(const Shape& shape, const Strides& strides) {
  int64_t acc = 1;
  for (int i = int(shape.size()) - 1; i >= 0; --i) {
    if (shape[i] == 1) continue;
    if (strides[i] != acc) return false;
    acc *= shape[i];
  }
  return true;
}

}  // namespace loom
