// The in-place programs of tests/inplace_programs.h on the GPU, fused and fusion-off, against the
// eager model: by default every program of up to 2 statements (float32 over the full alphabet,
// float64 over the short one: ~240 kernels to compile); LOOM_INPLACE_LEN=3 adds the float32 and
// float64 programs of 3 statements over the short alphabet (~3000 NVRTC compiles, minutes).
// Skips itself where CUDA is unavailable.
#include "../inplace_programs.h"

using loom::DType;
using namespace lt::inplace;

TEST_CASE("gpu: every short in-place program, fused == fusion-off == eager model") {
  if (!loom::backend_available(loom::DeviceKind::CUDA)) {
    MESSAGE("CUDA unavailable, skipping the GPU in-place programs");
    return;
  }
  int len = env_int("LOOM_INPLACE_LEN", 2);
  loom::Device gpu{loom::DeviceKind::CUDA, 0};
  check_all({{DType::Float32, gpu, true, 1, std::min(len, 2)},
             {DType::Float32, gpu, false, 3, len},
             {DType::Float64, gpu, false, 1, len}});
}
