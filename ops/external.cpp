// from_external: tensors over memory that loom does not own (zero-copy interop).
#include "ops/record.h"

namespace loom {

Tensor from_external(void* data, const Shape& shape, const Strides& strides, DType dtype,
                     Device device, std::function<void()> deleter) {
  check_sizes("from_external", shape);
  LOOM_CHECK(strides.size() == shape.size(), Value, "from_external: ", strides.size(),
             " strides given for shape ", shape_str(shape));
  // The storage spans the lowest to the highest element the view touches.
  bool empty = numel(shape) == 0;
  int64_t lo = 0, hi = 0;
  for (size_t d = 0; d < shape.size() && !empty; ++d) {
    int64_t ext = (shape[d] - 1) * strides[d];
    (ext < 0 ? lo : hi) += ext;
  }
  size_t isz = itemsize(dtype);
  size_t bytes = empty ? 0 : size_t(hi - lo + 1) * isz;
  char* base = static_cast<char*>(data) + lo * int64_t(isz);
  auto mem = std::make_shared<Memory>(base, bytes, device);
  mem->deleter = deleter ? std::move(deleter) : [] {};
  auto st = std::make_shared<Storage>();
  st->device = device;
  st->nbytes = bytes;
  st->mem = std::move(mem);
  st->id = next_storage_id();
  Tensor t = make_result(st, shape, dtype, device);
  return Tensor(t.buffer(), View{shape, empty ? contiguous_strides(shape) : strides, -lo}, dtype,
                device);
}

}  // namespace loom
