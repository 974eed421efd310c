#pragma once
// Autocast (torch.autocast): a thread-local mode per device kind in which the matmul family
// (matmul, bmm, linear layers, attention's products) runs in a lower precision (bfloat16 or
// float16) and the losses in float32, as torch's policy on both devices; on CUDA the ops that
// need range (softmax, log_softmax, logsumexp, layer_norm, rms_norm, norm, cumsum) also take
// float32 inputs and give float32, while on the CPU they keep the low dtype (torch's CPU
// policy; loom accumulates them in float32 either way). Other ops follow the usual promotion.
// float64 tensors are never cast. The backward runs with autocast off (gradients keep the
// dtypes the forward's casts record).
#include "tensor/device.h"
#include "tensor/dtype.h"

namespace loom {

class Tensor;

bool autocast_enabled(DeviceKind k);
DType autocast_dtype(DeviceKind k);  // bfloat16 on the CPU, float16 on CUDA until set
void set_autocast(DeviceKind k, bool enabled, DType dtype);

// RAII: autocast on (or off) for `k` in a scope, restored at its end.
class AutocastGuard {
 public:
  AutocastGuard(DeviceKind k, bool enabled, DType dtype);
  explicit AutocastGuard(DeviceKind k, bool enabled = true)
      : AutocastGuard(k, enabled, autocast_dtype(k)) {}
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  DeviceKind kind_;
  bool prev_on_;
  DType prev_dtype_;
};

// Turns autocast off on every device kind for a scope (the backward).
class AutocastOff {
 public:
  AutocastOff();
  ~AutocastOff();
  AutocastOff(const AutocastOff&) = delete;
  AutocastOff& operator=(const AutocastOff&) = delete;

 private:
  bool prev_[2];
};

// For the ops: whether autocast wants `x` cast to the lower dtype (x is a float32 or a float
// of the other 16-bit kind, autocast on for its device) / to float32 (x is a 16-bit float;
// `range_op`: one of the ops only CUDA's policy lifts to float32).
bool autocast_to_low(const Tensor& x);
bool autocast_to_f32(const Tensor& x, bool range_op = false);
// x as the matmul family / the float32 ops take it under autocast (x itself when not).
Tensor autocast_low(const Tensor& x);
Tensor autocast_f32(const Tensor& x, bool range_op = false);

}  // namespace loom
