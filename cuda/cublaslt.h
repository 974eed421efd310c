#pragma once
// matmul on the GPU: cuBLASLt (opened with dlopen, like the driver) for float32 (TF32 off, so
// results match float32 math), float64, float16 and bfloat16 with any strides it can express;
// a generated kernel for integer types and layouts it cannot (broadcast rows, odd strides).
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cuda/driver.h"
#include "fusion/group.h"

namespace loom::cuda {

// Compiles (or finds in the caches) a module and returns its entry points, in order. The pointer
// holds the module loaded: a caller that keeps the functions keeps it (the backend's own table of
// modules is cleared by clear_kernel_cache, which would otherwise unload them under the caller).
using Functions = std::shared_ptr<const std::vector<Function>>;
using CompileFn = std::function<Functions(
    const std::string& source, const std::vector<std::string>& entries, const std::string& tag)>;

class Matmul {
 public:
  Matmul(int dev, Stream stream, CompileFn compile);
  ~Matmul();
  // Runs an opaque MatMul group on `stream`: inputs [..., M, K] and [..., K, N] (batch dims
  // broadcast, any strides), output contiguous [..., M, N].
  void run(const Group& g, const Stream& stream);
  // Frees what was kept for stream `id` (its cuBLASLt workspace), ordered on `on`.
  void retire(uint64_t id, const Stream& on);
  bool cublaslt_available() const;

 private:
  struct Lt;
  bool run_lt(const Node& n, void* out);
  void run_naive(const Node& n, void* out);
  int dev_;
  Stream stream_;  // the stream of the run in progress
  CompileFn compile_;
  std::unique_ptr<Lt> lt_;
};

// Source of the fallback kernel (entry "loom_matmul") for element type `t`.
std::string matmul_fallback_source(DType t);

}  // namespace loom::cuda
