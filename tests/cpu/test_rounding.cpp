// Fused CPU loops round each op as its own kernel does: a product feeding an add or a subtract
// is rounded before it (no silent fma contraction), so fused and fusion-off agree bit for bit.
#include "../helpers.h"

using namespace loom;

TEST_CASE("cpu rounding: fused multiply-add programs equal fusion-off bit for bit") {
  for (DType dt : {DType::Float32, DType::Float64})
    for (int64_t n : {int64_t(1), int64_t(17), int64_t(1000), int64_t(70001)}) {
      INFO(dtype_name(dt) << " " << n << " elements");
      Tensor x = lt::random({n}, dt, uint32_t(3 + n), -4, 4);
      Tensor y = lt::random({n}, dt, uint32_t(5 + n), -4, 4);
      Tensor z = lt::random({n}, dt, uint32_t(7 + n), -4, 4);
      Tensor w = lt::random({n}, dt, uint32_t(9 + n), -4, 4);
      lt::check_fused_matches_unfused([&] { return x * y + z; }, {}, true);
      lt::check_fused_matches_unfused([&] { return z - x * y; }, {}, true);
      lt::check_fused_matches_unfused([&] { return x * x - 0.25; }, {}, true);
      lt::check_fused_matches_unfused([&] { return x * 1.5 + 0.5; }, {}, true);
      lt::check_fused_matches_unfused([&] { return x * y - z * w; }, {}, true);
      lt::check_fused_matches_unfused([&] { return addcmul(z, x, y, 0.75); }, {}, true);
      lt::check_fused_matches_unfused([&] { return (x * y + z) * w + x; }, {}, true);
    }
  // rows: a per-row and a per-column operand broadcast into the multiply-add
  Tensor m = lt::random({64, 300}, DType::Float32, 21, -3, 3);
  Tensor r = lt::random({64, 1}, DType::Float32, 22, -3, 3);
  Tensor c = lt::random({300}, DType::Float32, 23, -3, 3);
  lt::check_fused_matches_unfused([&] { return m * c + r; }, {}, true);
  lt::check_fused_matches_unfused([&] { return (m - r) * c - m * m; }, {}, true);
}
