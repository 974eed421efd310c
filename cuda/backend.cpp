// Placeholder until the CUDA backend lands: CUDA reports unavailable.
#include "tensor/backend.h"

namespace loom {
bool init_cuda_backend() { return false; }
}  // namespace loom
