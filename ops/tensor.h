#pragma once
// Tensor: a handle to {Buffer, View, dtype}. Copies share the buffer (like torch).
// Ops record lazily; values exist after a sync point (item, to_vector, printing, sync).
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fusion/node.h"
#include "tensor/device.h"
#include "tensor/dtype.h"
#include "tensor/error.h"
#include "tensor/scalar.h"
#include "tensor/shape.h"
#include "tensor/storage.h"

namespace loom {

class Tensor;
struct GradNode;
struct AutogradMeta;
using Dims = std::vector<int64_t>;

// A slice for indexing: an int, a range with step, None (new axis), Ellipsis, or all.
struct Slice {
  enum class Kind : uint8_t { Index, Range, NewAxis, Ellipsis } kind = Kind::Range;
  int64_t index = 0;
  std::optional<int64_t> start, stop;
  int64_t step = 1;
  static Slice at(int64_t i) { return {Kind::Index, i, {}, {}, 1}; }
  static Slice range(std::optional<int64_t> a = {}, std::optional<int64_t> b = {},
                     int64_t step = 1) {
    return {Kind::Range, 0, a, b, step};
  }
  static Slice all() { return {}; }
  static Slice newaxis() { return {Kind::NewAxis, 0, {}, {}, 1}; }
  static Slice ellipsis() { return {Kind::Ellipsis, 0, {}, {}, 1}; }
};

class Tensor {
 public:
  Tensor() = default;
  Tensor(std::shared_ptr<Buffer> buf, View view, DType dtype, Device device);

  bool defined() const { return buf_ != nullptr; }
  const Shape& shape() const { return view_.shape; }
  const Strides& strides() const { return view_.strides; }
  int64_t offset() const { return view_.offset; }
  int64_t size(int64_t dim) const;
  int dim() const { return int(view_.shape.size()); }
  int64_t numel() const { return loom::numel(view_.shape); }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  bool is_contiguous() const { return loom::is_contiguous(view_.shape, view_.strides); }
  const View& view_info() const { return view_; }
  const std::shared_ptr<Buffer>& buffer() const { return buf_; }
  std::shared_ptr<Storage> storage() const { return buf_->cur; }
  bool is_pending() const { return buf_ && buf_->cur->pending(); }
  bool same_buffer(const Tensor& o) const { return buf_ == o.buf_; }

  // Sync points.
  template <typename T>
  T item() const;
  template <typename T>
  std::vector<T> to_vector() const;  // row-major, converted to T
  std::string str() const;           // like torch's repr
  const void* data_ptr() const;      // syncs; the view's first element

  // Movement and views (no copies).
  Tensor reshape(const Dims& shape) const;
  Tensor view(const Dims& shape) const;  // like reshape, errors if a copy would be needed
  Tensor flatten(int64_t start = 0, int64_t end = -1) const;
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor permute(const Dims& order) const;
  Tensor transpose(int64_t a, int64_t b) const;
  Tensor t() const;
  Tensor expand(const Dims& shape) const;
  Tensor broadcast_to(const Dims& shape) const { return expand(shape); }
  Tensor slice(int64_t dim, std::optional<int64_t> start, std::optional<int64_t> stop,
               int64_t step = 1) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor index(const std::vector<Slice>& idx) const;
  Tensor operator[](int64_t i) const { return select(0, i); }
  // Indexing by integer tensors (ops/ops.h).
  Tensor gather(int64_t dim, const Tensor& index) const;
  Tensor index_select(int64_t dim, const Tensor& index) const;
  Tensor take_along_dim(const Tensor& indices, std::optional<int64_t> dim = {}) const;
  Tensor scatter_add(int64_t dim, const Tensor& index, const Tensor& src) const;
  Tensor index_add(int64_t dim, const Tensor& index, const Tensor& source, Scalar alpha = 1) const;
  Tensor contiguous() const;
  Tensor clone() const;
  Tensor to(DType t) const;
  Tensor to(Device d) const;
  std::vector<Tensor> split(int64_t size, int64_t dim = 0) const;
  std::vector<Tensor> chunk(int64_t n, int64_t dim = 0) const;

  // In place (recorded like other ops; views of the same buffer see the result).
  Tensor& add_(const Tensor& o, Scalar alpha = 1);
  Tensor& add_(Scalar s);
  Tensor& sub_(const Tensor& o, Scalar alpha = 1);
  Tensor& sub_(Scalar s);
  Tensor& mul_(const Tensor& o);
  Tensor& mul_(Scalar s);
  Tensor& div_(const Tensor& o);
  Tensor& div_(Scalar s);
  Tensor& copy_(const Tensor& src);
  Tensor& fill_(Scalar s);
  Tensor& zero_() { return fill_(0); }
  Tensor& clamp_(std::optional<Scalar> lo, std::optional<Scalar> hi);
  Tensor& addcmul_(const Tensor& a, const Tensor& b, Scalar value = 1);
  Tensor& addcdiv_(const Tensor& a, const Tensor& b, Scalar value = 1);
  Tensor& lerp_(const Tensor& end, Scalar weight);
  Tensor& masked_fill_(const Tensor& mask, Scalar value);
  Tensor masked_fill(const Tensor& mask, Scalar value) const;
  Tensor& scatter_add_(int64_t dim, const Tensor& index, const Tensor& src);
  Tensor& index_add_(int64_t dim, const Tensor& index, const Tensor& source, Scalar alpha = 1);
  void index_put(const std::vector<Slice>& idx, const Tensor& value);  // t[idx] = value
  void index_put(const std::vector<Slice>& idx, Scalar value);

  // Unary ops from the table, as methods: x.exp(), x.sigmoid(), ...
#define LOOM_X(name, api, kind) Tensor api() const;
  LOOM_UNARY_OPS(LOOM_X)
#undef LOOM_X

  // Reductions.
  Tensor sum(const Dims& dims = {}, bool keepdim = false) const;
  Tensor mean(const Dims& dims = {}, bool keepdim = false) const;
  Tensor prod(const Dims& dims = {}, bool keepdim = false) const;
  Tensor amax(const Dims& dims = {}, bool keepdim = false) const;
  Tensor amin(const Dims& dims = {}, bool keepdim = false) const;
  Tensor max(const Dims& dims = {}, bool keepdim = false) const { return amax(dims, keepdim); }
  Tensor min(const Dims& dims = {}, bool keepdim = false) const { return amin(dims, keepdim); }
  Tensor argmax(std::optional<int64_t> dim = {}, bool keepdim = false) const;
  Tensor argmin(std::optional<int64_t> dim = {}, bool keepdim = false) const;
  Tensor var(const Dims& dims = {}, double correction = 1, bool keepdim = false) const;
  Tensor std(const Dims& dims = {}, double correction = 1, bool keepdim = false) const;
  Tensor logsumexp(const Dims& dims, bool keepdim = false) const;
  Tensor norm(double p = 2, const Dims& dims = {}, bool keepdim = false) const;
  Tensor all(const Dims& dims = {}, bool keepdim = false) const;
  Tensor any(const Dims& dims = {}, bool keepdim = false) const;
  Tensor cumsum(int64_t dim) const;

  Tensor softmax(int64_t dim) const;
  Tensor log_softmax(int64_t dim) const;
  Tensor matmul(const Tensor& o) const;

  // Autograd (ops/autograd.h). The graph place is shared by this tensor's copies.
  bool requires_grad() const;
  Tensor& requires_grad_(bool on = true);  // a leaf's flag; floating tensors only
  bool is_leaf() const;                    // no grad_fn (every tensor not made by a tracked op)
  Tensor grad() const;                     // undefined when none
  void set_grad(const Tensor& g);          // an undefined Tensor clears it
  std::string grad_fn_name() const;        // "" for a leaf: MulBackward0, ...
  const std::shared_ptr<GradNode>& grad_fn() const;
  void backward(const std::optional<Tensor>& gradient = {}, std::optional<bool> retain_graph = {},
                bool create_graph = false) const;
  Tensor detach() const;  // same buffer and view, no graph place
  Tensor& detach_();      // this tensor (and its copies) leave the graph
  // torch's `t.data = other`: this handle takes other's memory, view, dtype and device and
  // keeps its graph place (requires_grad, grad, hooks). Other handles keep the old memory.
  void set_data(const Tensor& other);
  void retain_grad() const;
  bool retains_grad() const;
  // hook(grad) runs when this tensor's gradient is computed; a defined result replaces it.
  int register_hook(std::function<Tensor(const Tensor&)> hook) const;
  void remove_hook(int id) const;
  uint32_t version() const;  // bumped by every in-place write to the buffer

 private:
  friend Tensor make_result(std::shared_ptr<Storage>, const Shape&, DType, Device);
  friend Tensor record_node(std::shared_ptr<Node>);
  friend void assign_inplace(Tensor& t, const Tensor& value);
  friend struct AutogradAccess;
  std::shared_ptr<Buffer> buf_;
  View view_;
  DType dtype_ = DType::Float32;
  Device device_;
  std::shared_ptr<AutogradMeta> ag_;  // null: no graph place (most tensors)
};

}  // namespace loom

#include "ops/autograd.h"
#include "ops/ops.h"
