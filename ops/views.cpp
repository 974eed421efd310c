// Views and movement: new shape/strides/offset over the same buffer; copies only where
// a view cannot express the result (contiguous, clone, cat).
#include <algorithm>
#include <numeric>

#include "ops/grad_node.h"
#include "ops/record.h"

namespace loom {
namespace {

Shape infer_shape(const char* op, const Dims& dims, int64_t n, const Shape& from) {
  Shape s(dims.begin(), dims.end());
  int infer = -1;
  int64_t known = 1;
  for (int i = 0; i < int(s.size()); ++i) {
    if (s[i] == -1) {
      LOOM_CHECK(infer < 0, Value, op, ": only one dimension can be inferred (-1) in ",
                 shape_str(s), " (input of shape ", shape_str(from), ")");
      infer = i;
    } else {
      LOOM_CHECK(s[i] >= 0, Value, op, ": invalid size ", s[i], " in shape ", shape_str(s),
                 " (input of shape ", shape_str(from), ")");
      known *= s[i];
    }
  }
  if (infer >= 0) {
    LOOM_CHECK(known != 0 && n % known == 0, Value, op, ": shape ", shape_str(s),
               " is invalid for input of shape ", shape_str(from));
    s[infer] = n / known;
  }
  LOOM_CHECK(numel(s) == n, Value, op, ": shape ", shape_str(s), " is invalid for input of shape ",
             shape_str(from), " (", n, " elements)");
  return s;
}

// Records the backward of view `r` of x when x is in the graph.
template <typename F>
Tensor tracked(Tensor r, const char* name, const Tensor& x, F back) {
  r.buffer()->viewed = true;
  if (autograd::needs_grad(x)) autograd::record_view(r, name, x, std::move(back));
  return r;
}

Dims dims_of(const Shape& s) { return Dims(s.begin(), s.end()); }

// The gradient of region view r of a tensor of shape xs: zeros with the region set to g. The
// fill is no op of the graph; with create_graph its own backward reads the region back.
Tensor region_grad(const Tensor& g, const Shape& xs, autograd::RegionGrad r) {
  Tensor z;
  {
    NoGradGuard fill;
    z = zeros(xs, {g.dtype(), g.device()});
    r.view_of(z).copy_(g);
  }
  if (autograd::needs_grad(g)) {
    autograd::record(z, "SliceScatterBackward0", {g}, {},
                     [r](const Tensor& gz, const std::vector<Tensor>&, const std::vector<bool>&) {
                       return std::vector<Tensor>{r.view_of(gz)};
                     });
  } else {
    r.whole = z;
    r.src = g;
    autograd::note_region_grad(std::move(r));
  }
  return z;
}

}  // namespace

Tensor Tensor::view(const Dims& dims) const {
  Shape s = infer_shape("view", dims, numel(), shape());
  auto st = view_strides(shape(), strides(), s);
  LOOM_CHECK(st.has_value(), Value, "view: shape ", shape_str(s),
             " is not compatible with the input's strides (input shape ", shape_str(shape()),
             "); use reshape");
  return tracked(Tensor(buf_, View{s, *st, offset()}, dtype_, device_), "ViewBackward0", *this,
                 [xs = dims_of(shape())](const Tensor& g) { return g.reshape(xs); });
}

Tensor Tensor::reshape(const Dims& dims) const {
  Shape s = infer_shape("reshape", dims, numel(), shape());
  if (auto st = view_strides(shape(), strides(), s))
    return tracked(Tensor(buf_, View{s, *st, offset()}, dtype_, device_), "ViewBackward0", *this,
                   [xs = dims_of(shape())](const Tensor& g) { return g.reshape(xs); });
  return contiguous().view(Dims(s.begin(), s.end()));
}

Tensor Tensor::flatten(int64_t start, int64_t end) const {
  if (dim() == 0) return reshape({1});
  int a = normalize_dim("flatten", start, shape()), b = normalize_dim("flatten", end, shape());
  LOOM_CHECK(a <= b, Value, "flatten: start dim ", start, " comes after end dim ", end,
             " for a tensor of shape ", shape_str(shape()));
  Dims s(shape().begin(), shape().begin() + a);
  int64_t m = 1;
  for (int d = a; d <= b; ++d) m *= shape()[d];
  s.push_back(m);
  s.insert(s.end(), shape().begin() + b + 1, shape().end());
  return reshape(s);
}

Tensor Tensor::squeeze() const {
  View v{{}, {}, offset()};
  for (int d = 0; d < dim(); ++d)
    if (shape()[d] != 1) v.shape.push_back(shape()[d]), v.strides.push_back(strides()[d]);
  return tracked(Tensor(buf_, v, dtype_, device_), "SqueezeBackward0", *this,
                 [xs = dims_of(shape())](const Tensor& g) { return g.reshape(xs); });
}

Tensor Tensor::squeeze(int64_t dm) const {
  if (dim() == 0) return *this;
  int d = normalize_dim("squeeze", dm, shape());
  if (shape()[d] != 1) return *this;
  View v = view_;
  v.shape.erase(v.shape.begin() + d);
  v.strides.erase(v.strides.begin() + d);
  return tracked(Tensor(buf_, v, dtype_, device_), "SqueezeBackward1", *this,
                 [d](const Tensor& g) { return g.unsqueeze(d); });
}

Tensor Tensor::unsqueeze(int64_t dm) const {
  int d = normalize_dim("unsqueeze", dm, shape(), 1);
  View v = view_;
  int64_t st = d < dim() ? strides()[d] * shape()[d] : 1;
  v.shape.insert(v.shape.begin() + d, 1);
  v.strides.insert(v.strides.begin() + d, st);
  return tracked(Tensor(buf_, v, dtype_, device_), "UnsqueezeBackward0", *this,
                 [d](const Tensor& g) { return g.squeeze(d); });
}

Tensor Tensor::permute(const Dims& order) const {
  LOOM_CHECK(int(order.size()) == dim(), Value, "permute: ", order.size(),
             " dims given for a tensor of shape ", shape_str(shape()));
  View v{{}, {}, offset()};
  std::vector<bool> seen(dim(), false);
  for (auto o : order) {
    int d = normalize_dim("permute", o, shape());
    LOOM_CHECK(!seen[d], Value, "permute: dim ", o, " repeats in the order ",
               shape_str(Shape(order.begin(), order.end())), " for a tensor of shape ",
               shape_str(shape()));
    seen[d] = true;
    v.shape.push_back(shape()[d]);
    v.strides.push_back(strides()[d]);
  }
  Dims inverse(order.size());
  for (size_t i = 0; i < order.size(); ++i)
    inverse[size_t(normalize_dim("permute", order[i], shape()))] = int64_t(i);
  return tracked(Tensor(buf_, v, dtype_, device_), "PermuteBackward0", *this,
                 [inverse](const Tensor& g) { return g.permute(inverse); });
}

Tensor Tensor::transpose(int64_t a, int64_t b) const {
  if (dim() == 0) return *this;
  int x = normalize_dim("transpose", a, shape()), y = normalize_dim("transpose", b, shape());
  View v = view_;
  std::swap(v.shape[x], v.shape[y]);
  std::swap(v.strides[x], v.strides[y]);
  return tracked(Tensor(buf_, v, dtype_, device_), "TransposeBackward0", *this,
                 [x, y](const Tensor& g) { return g.transpose(x, y); });
}

Tensor Tensor::t() const {
  LOOM_CHECK(dim() <= 2, Value, "t: expects a tensor of at most 2 dims, got shape ",
             shape_str(shape()));
  return dim() < 2 ? *this : transpose(0, 1);
}

Tensor Tensor::expand(const Dims& dims) const {
  LOOM_CHECK(int(dims.size()) >= dim(), Value, "expand: cannot expand shape ", shape_str(shape()),
             " to ", shape_str(Shape(dims.begin(), dims.end())), " (fewer dims)");
  int lead = int(dims.size()) - dim();
  View v{Shape(dims.size()), Strides(dims.size()), offset()};
  for (int i = 0; i < int(dims.size()); ++i) {
    int64_t want = dims[i];
    if (i < lead) {
      LOOM_CHECK(want >= 0, Value, "expand: size ", want,
                 " is not allowed for a new leading dim (shape ", shape_str(shape()), " to ",
                 shape_str(Shape(dims.begin(), dims.end())), ")");
      v.shape[i] = want, v.strides[i] = 0;
      continue;
    }
    int64_t have = shape()[i - lead];
    if (want == -1) want = have;
    LOOM_CHECK(want == have || have == 1, Value, "expand: the size of dim ", i, " (", have,
               ") must match the new size ", want, " or be 1 (shape ", shape_str(shape()), " to ",
               shape_str(Shape(dims.begin(), dims.end())), ")");
    v.shape[i] = want;
    v.strides[i] = (have == 1 && want != 1) ? 0 : strides()[i - lead];
  }
  return tracked(
      Tensor(buf_, v, dtype_, device_), "ExpandBackward0", *this,
      [xs = shape(), dt = dtype_](const Tensor& g) { return autograd::sum_to(g, xs, dt); });
}

Tensor Tensor::slice(int64_t dm, std::optional<int64_t> start, std::optional<int64_t> stop,
                     int64_t step) const {
  LOOM_CHECK(dim() > 0, Index, "slice: cannot slice a 0-dim tensor (shape [])");
  int d = normalize_dim("slice", dm, shape());
  LOOM_CHECK(step > 0, Value, "slice: step must be positive, got ", step, " (dim ", d,
             " of a tensor of shape ", shape_str(shape()), ")");
  int64_t n = shape()[d];
  auto fix = [&](std::optional<int64_t> v, int64_t dflt) {
    if (!v) return dflt;
    int64_t x = *v < 0 ? *v + n : *v;
    return std::clamp<int64_t>(x, 0, n);
  };
  int64_t a = fix(start, 0), b = fix(stop, n);
  int64_t len = b > a ? (b - a + step - 1) / step : 0;
  View v = view_;
  v.offset += a * strides()[d];
  v.shape[d] = len;
  v.strides[d] = strides()[d] * step;
  return tracked(Tensor(buf_, v, dtype_, device_), "SliceBackward0", *this,
                 [xs = shape(), d, a, b, step](const Tensor& g) {
                   return region_grad(g, xs,
                                      {.dim = d, .start = a, .stop = std::max(a, b), .step = step});
                 });
}

Tensor Tensor::select(int64_t dm, int64_t index) const {
  LOOM_CHECK(dim() > 0, Index, "select: cannot index a 0-dim tensor (shape [])");
  int d = normalize_dim("select", dm, shape());
  int64_t n = shape()[d];
  LOOM_CHECK(index >= -n && index < n, Index, "select: index ", index, " is out of bounds for dim ",
             d, " with size ", n, " (shape ", shape_str(shape()), ")");
  if (index < 0) index += n;
  View v = view_;
  v.offset += index * strides()[d];
  v.shape.erase(v.shape.begin() + d);
  v.strides.erase(v.strides.begin() + d);
  return tracked(Tensor(buf_, v, dtype_, device_), "SelectBackward0", *this,
                 [xs = shape(), d, index](const Tensor& g) {
                   return region_grad(
                       g, xs, {.dim = d, .start = index, .stop = index + 1, .selected = true});
                 });
}

Tensor Tensor::narrow(int64_t dm, int64_t start, int64_t length) const {
  int d = normalize_dim("narrow", dm, shape());
  int64_t n = shape()[d];
  if (start < 0) start += n;
  LOOM_CHECK(start >= 0 && length >= 0 && start + length <= n, Index, "narrow: start ", start,
             " and length ", length, " out of range for dim ", d, " of size ", n, " (shape ",
             shape_str(shape()), ")");
  return slice(d, start, start + length);
}

Tensor Tensor::index(const std::vector<Slice>& idx) const {
  int specified = 0, ell = 0;
  for (auto& s : idx) {
    if (s.kind == Slice::Kind::Ellipsis)
      ++ell;
    else if (s.kind != Slice::Kind::NewAxis)
      ++specified;
  }
  LOOM_CHECK(ell <= 1, Index, "index: an index can only have a single ellipsis (", ell,
             " given for a tensor of shape ", shape_str(shape()), ")");
  LOOM_CHECK(specified <= dim(), Index, "index: too many indices for a tensor of shape ",
             shape_str(shape()), " (", specified, " given)");
  Tensor t = *this;
  int d = 0;
  for (auto& s : idx) {
    switch (s.kind) {
      case Slice::Kind::Index:
        t = t.select(d, s.index);
        break;
      case Slice::Kind::Range:
        t = t.slice(d, s.start, s.stop, s.step), ++d;
        break;
      case Slice::Kind::NewAxis:
        t = t.unsqueeze(d), ++d;
        break;
      case Slice::Kind::Ellipsis:
        d += dim() - specified;
        break;
    }
  }
  return t;
}

Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  return clone();
}

Tensor Tensor::clone() const {
  auto n = new_node(Op::Copy, dtype_, shape(), device_);
  n->in.push_back(as_input(*this));
  Tensor r = record_node(std::move(n));
  if (autograd::needs_grad(*this)) autograd::record_same("CloneBackward0", *this, r);
  return r;
}

Tensor Tensor::to(DType t) const { return cast(*this, t); }

std::vector<Tensor> Tensor::split(int64_t size, int64_t dm) const {
  int d = normalize_dim("split", dm, shape());
  LOOM_CHECK(size > 0, Value, "split: split size must be positive, got ", size,
             " (tensor of shape ", shape_str(shape()), ")");
  std::vector<Tensor> out;
  int64_t n = shape()[d];
  for (int64_t s = 0; s < n || (n == 0 && out.empty()); s += size) {
    out.push_back(narrow(d, s, std::min(size, n - s)));
    if (n == 0) break;
  }
  return out;
}

std::vector<Tensor> Tensor::chunk(int64_t k, int64_t dm) const {
  LOOM_CHECK(k > 0, Value, "chunk: number of chunks must be positive, got ", k,
             " (tensor of shape ", shape_str(shape()), ")");
  int d = normalize_dim("chunk", dm, shape());
  int64_t n = shape()[d];
  return split(std::max<int64_t>(1, (n + k - 1) / k), d);
}

Tensor cat(const std::vector<Tensor>& xs, int64_t dm) {
  LOOM_CHECK(!xs.empty(), Value, "cat: expected a non-empty list of tensors");
  const Tensor& f = xs[0];
  for (size_t i = 0; i < xs.size(); ++i)
    LOOM_CHECK(xs[i].dim() > 0, Value,
               "cat: zero-dimensional tensors cannot be concatenated (tensor ", i, " has shape ",
               shape_str(xs[i].shape()), ")");
  int d = normalize_dim("cat", dm, f.shape());
  Shape out = f.shape();
  DType t = f.dtype();
  out[d] = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const Tensor& x = xs[i];
    check_same_device("cat", f, x);
    bool ok = x.dim() == f.dim();
    for (int k = 0; ok && k < f.dim(); ++k) ok = k == d || x.shape()[k] == f.shape()[k];
    LOOM_CHECK(ok, Value, "cat: sizes of tensors must match except in dim ", d,
               ": tensor 0 has shape ", shape_str(f.shape()), ", tensor ", i, " has shape ",
               shape_str(x.shape()));
    out[d] += x.shape()[d];
    t = promote_types(t, x.dtype());
  }
  Tensor r = empty(out, {t, f.device()});
  {
    NoGradGuard parts;  // one node for the whole cat, below
    int64_t off = 0;
    for (auto& x : xs) {
      int64_t len = x.shape()[d];
      if (len) r.narrow(d, off, len).copy_(x);
      off += len;
    }
  }
  if (autograd::needs_grad(xs)) {
    std::vector<int64_t> lens;
    for (auto& x : xs) lens.push_back(x.shape()[d]);
    autograd::record(
        r, "CatBackward0", xs, {},
        [d, lens](const Tensor& g, const std::vector<Tensor>&, const std::vector<bool>& need) {
          std::vector<Tensor> gs;
          int64_t off = 0;
          for (size_t i = 0; i < lens.size(); ++i, off += lens[i - 1])
            gs.push_back(need[i] ? g.narrow(d, off, lens[i]) : Tensor());
          return gs;
        });
  }
  return r;
}

Tensor stack(const std::vector<Tensor>& xs, int64_t dm) {
  LOOM_CHECK(!xs.empty(), Value, "stack: expected a non-empty list of tensors");
  int d = normalize_dim("stack", dm, xs[0].shape(), 1);
  std::vector<Tensor> u;
  for (size_t i = 0; i < xs.size(); ++i) {
    LOOM_CHECK(xs[i].shape() == xs[0].shape(), Value,
               "stack: expects each tensor to be equal size, "
               "but got ",
               shape_str(xs[0].shape()), " at entry 0 and ", shape_str(xs[i].shape()), " at entry ",
               i);
    u.push_back(xs[i].unsqueeze(d));
  }
  return cat(u, d);
}

}  // namespace loom
