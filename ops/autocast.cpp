// Autocast's thread-local state and the casts the ops ask it for (ops/autocast.h).
#include "ops/autocast.h"

#include "ops/record.h"

namespace loom {
namespace {

struct State {
  bool on[2] = {false, false};
  DType dtype[2] = {DType::BFloat16, DType::Float16};  // torch's defaults: CPU, CUDA
};
thread_local State t_state;

int slot(DeviceKind k) { return k == DeviceKind::CPU ? 0 : 1; }

bool eligible(const Tensor& x) {
  return x.defined() && is_floating(x.dtype()) && x.dtype() != DType::Float64 &&
         t_state.on[slot(x.device().kind)];
}

}  // namespace

bool autocast_enabled(DeviceKind k) { return t_state.on[slot(k)]; }
DType autocast_dtype(DeviceKind k) { return t_state.dtype[slot(k)]; }

void set_autocast(DeviceKind k, bool enabled, DType dtype) {
  LOOM_CHECK(dtype == DType::BFloat16 || dtype == DType::Float16, Value,
             "autocast: dtype must be bfloat16 or float16, got ", dtype_name(dtype));
  t_state.on[slot(k)] = enabled;
  t_state.dtype[slot(k)] = dtype;
}

AutocastGuard::AutocastGuard(DeviceKind k, bool enabled, DType dtype)
    : kind_(k), prev_on_(autocast_enabled(k)), prev_dtype_(autocast_dtype(k)) {
  set_autocast(k, enabled, dtype);
}

AutocastGuard::~AutocastGuard() { set_autocast(kind_, prev_on_, prev_dtype_); }

AutocastOff::AutocastOff() : prev_{t_state.on[0], t_state.on[1]} {
  t_state.on[0] = t_state.on[1] = false;
}

AutocastOff::~AutocastOff() {
  t_state.on[0] = prev_[0];
  t_state.on[1] = prev_[1];
}

bool autocast_to_low(const Tensor& x) {
  return eligible(x) && x.dtype() != t_state.dtype[slot(x.device().kind)];
}

bool autocast_to_f32(const Tensor& x, bool range_op) {
  return eligible(x) && x.dtype() != DType::Float32 &&
         !(range_op && x.device().kind == DeviceKind::CPU);
}

Tensor autocast_low(const Tensor& x) {
  return autocast_to_low(x) ? cast(x, t_state.dtype[slot(x.device().kind)]) : x;
}

Tensor autocast_f32(const Tensor& x, bool range_op) {
  return autocast_to_f32(x, range_op) ? cast(x, DType::Float32) : x;
}

}  // namespace loom
