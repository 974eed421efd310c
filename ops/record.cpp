#include "ops/record.h"

#include <algorithm>

#include "tensor/block_alloc.h"

namespace loom {

Tensor::Tensor(std::shared_ptr<Buffer> buf, View view, DType dtype, Device device)
    : buf_(std::move(buf)), view_(std::move(view)), dtype_(dtype), device_(device) {}

int64_t Tensor::size(int64_t dim) const { return view_.shape[normalize_dim("size", dim, shape())]; }

Tensor make_result(std::shared_ptr<Storage> st, const Shape& shape, DType dt, Device d) {
  // Filled in place (the returned Tensor is the caller's): a View built apart was moved twice.
  Tensor t;
  t.buf_ = std::allocate_shared<Buffer>(BlockAlloc<Buffer>());
  bool pending = st->pending();
  t.buf_->cur = std::move(st);
  if (pending) track(t.buf_, d);
  t.view_.shape = shape;
  contiguous_strides(shape, t.view_.strides);
  t.dtype_ = dt;
  t.device_ = d;
  return t;
}

Input as_input(const Tensor& t) { return Input{t.storage(), t.view_info(), t.dtype()}; }

Input operand(const Tensor& t, DType dt, const Shape& shape) {
  // The common case (no cast, no broadcast) without the two intermediate Tensors.
  if (t.dtype() == dt && t.shape() == shape) return as_input(t);
  NoGradGuard operand;  // the node's own rule covers the cast
  return as_input(expand_to(cast(t, dt), shape));
}

void add_input(Node& n, const Tensor& t) {
  n.in.emplace_back(t.buffer()->cur, t.view_info(), t.dtype());
}

void add_operand(Node& n, const Tensor& t, DType dt, const Shape& shape) {
  if (t.dtype() == dt && t.shape() == shape) return add_input(n, t);
  NoGradGuard operand;  // the node's own rule covers the cast
  add_input(n, expand_to(cast(t, dt), shape));
}

std::shared_ptr<Node> new_node(Op op, DType dt, const Shape& shape, Device d) {
  // For overwrite: value-initializing zeroed all 900 bytes of the Node before its member
  // initializers ran (op and dtype, the only members without one, are set below).
  auto n = std::allocate_shared_for_overwrite<Node>(BlockAlloc<Node>());
  n->op = op;
  n->dtype = dt;
  n->shape = shape;
  n->device = d;
  return n;
}

Tensor record_node(std::shared_ptr<Node> n) {
  // The result's view is made from the node before record_into(): once it returns, another
  // thread's flush may run the node and drop it (TSan saw the Node freed under a later read).
  // Filled in place, and the buffer tracked by the record itself (one trace lookup, one lock).
  Tensor t;
  const Shape& shape = n->shape;
  t.view_.shape = shape;
  contiguous_strides(shape, t.view_.strides);
  t.dtype_ = n->dtype;
  t.device_ = n->device;
  t.buf_ = std::allocate_shared<Buffer>(BlockAlloc<Buffer>());
  record_into(std::move(n), t.buf_);
  return t;
}

Tensor const_tensor(Scalar s, DType dt, Device d, const Shape& shape) {
  auto n = new_node(Op::Const, dt, shape, d);
  n->value = s;
  return record_node(std::move(n));
}

void add_scalar(Node& n, Scalar s, DType dt) {
  n.value = s;
  n.in.emplace_back().dtype = dt;  // no storage, an empty view
}

Tensor expand_to(const Tensor& t, const Shape& s) {
  if (t.shape() == s) return t;
  // Broadcast view: new leading dims and size-1 dims read with stride 0 (shapes were
  // already checked by broadcast_shapes).
  View v{s, Strides(s.size(), 0), t.offset()};
  size_t lead = s.size() - t.shape().size();
  for (size_t i = lead; i < s.size(); ++i)
    if (t.shape()[i - lead] == s[i]) v.strides[i] = t.strides()[i - lead];
  return Tensor(t.buffer(), std::move(v), t.dtype(), t.device());
}

void check_same_device(const char* op, const Tensor& a, const Tensor& b) {
  LOOM_CHECK(a.device() == b.device(), Value, op, ": expected all tensors on the same device, got ",
             a.device().str(), " and ", b.device().str(), " (shapes ", shape_str(a.shape()),
             " and ", shape_str(b.shape()), ")");
}

DType result_type(const Tensor& a, const Tensor& b) {
  bool za = a.dim() == 0, zb = b.dim() == 0;
  if (za == zb) return promote_types(a.dtype(), b.dtype());
  const Tensor& z = za ? a : b;
  const Tensor& t = za ? b : a;
  return dtype_category(z.dtype()) > dtype_category(t.dtype()) ? z.dtype() : t.dtype();
}

DType result_type(const Tensor& a, Scalar s) {
  if (s.category() > dtype_category(a.dtype())) return s.default_dtype();
  return a.dtype();
}

Tensor float_input(const char* op, const Tensor& x) {
  LOOM_CHECK(is_floating(x.dtype()), Type, op, ": needs a floating point tensor, got ",
             dtype_name(x.dtype()), " of shape ", shape_str(x.shape()));
  return cast(x, acc_float(x.dtype()));
}

Shape keep_shape(const Shape& s, const std::vector<int>& ax) {
  Shape k = s;
  for (int a : ax) k[a] = 1;
  return k;
}

std::vector<int> reduce_axes(const char* op, const Dims& dims, const Shape& shape) {
  int rank = int(shape.size());
  std::vector<int> ax;
  if (dims.empty()) {
    for (int d = 0; d < rank; ++d) ax.push_back(d);
    return ax;
  }
  for (auto d : dims) {
    int k = normalize_dim(op, d, shape);
    LOOM_CHECK(std::find(ax.begin(), ax.end(), k) == ax.end(), Value, op, ": dim ", d,
               " appears multiple times in the list of dims (tensor of shape ", shape_str(shape),
               ")");
    ax.push_back(k);
  }
  if (rank == 0) return {};
  std::sort(ax.begin(), ax.end());
  return ax;
}

void assign_inplace(Tensor& t, const Tensor& value) {
  LOOM_CHECK(value.shape() == t.shape() && value.dtype() == t.dtype(), Runtime,
             "internal: in-place value must match the target");
  // Another thread's flush reads the buffer's version and may run (and drop) `value`'s node.
  std::lock_guard<std::recursive_mutex> lock(runtime_mutex());
  ++t.buf_->version;
  auto old = t.storage();
  bool whole = t.offset() == 0 && t.is_contiguous() &&
               size_t(t.numel()) * itemsize(t.dtype()) == old->nbytes;
  if (whole) {
    // A fresh result nobody else holds becomes the new version directly (no extra copy).
    auto vs = value.storage();
    if (vs->pending() && value.buffer().use_count() == 1 && value.offset() == 0 &&
        value.is_contiguous() && !vs->node->base && vs != old && vs->node->op != Op::Const &&
        vs->nbytes == old->nbytes) {
      vs->node->reuse = old;
      t.buf_->cur = vs;
    } else {
      auto n = new_node(Op::Copy, t.dtype(), t.shape(), t.device());
      n->in.push_back(as_input(value));
      n->reuse = old;
      t.buf_->cur = record(std::move(n));
    }
  } else {
    auto n = new_node(Op::Copy, t.dtype(), t.shape(), t.device());
    n->in.push_back(as_input(value));
    n->base = old;
    n->region = std::make_unique<View>(t.view_info());
    t.buf_->cur = record(std::move(n));
  }
  track(t.buf_, t.device());
}

}  // namespace loom
