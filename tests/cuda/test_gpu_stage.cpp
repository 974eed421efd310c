// GPU row ops over the last dim of transposed inputs (the reduced dim strided, the kept dim
// unit-stride) against float64 references: the staged tiles of LOOM_CUDA_ROW_STAGE for softmax,
// log_softmax, layer_norm with weight and bias and rms_norm with weight (row kernels), and the
// plain reductions sum, mean, amax and argmax of the same views (column kernels). Row lengths
// 128, 1000, 1001, 4096 and 8192, kept counts that are not a multiple of any tile's rows, a
// transposed view at an offset into a wider storage, and a 3-D permuted view whose tiles cross
// from one outer index to the next (not adjacent in memory). Enough rows that the tiles make
// more blocks than an H200 has SMs (the launcher stages nothing with fewer). The references
// themselves are checked against the CPU device. Skips itself where CUDA is unavailable.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "../helpers.h"
#include "loom.h"

using namespace loom;

namespace {

const Device kGPU{DeviceKind::CUDA, 0};

enum class InView { Transposed, Offset, Permuted };

struct Case {
  int64_t rows, cols;
  DType dt;
  InView view = InView::Transposed;
};

const char* view_name(InView v) {
  return v == InView::Transposed ? "x.t()" : v == InView::Offset ? "offset x.t()" : "3-D permuted";
}

// The input of `c` on `dev`: rows x cols logical, unit stride along the kept dim.
//   Transposed: x.t() of a contiguous [cols, rows].
//   Offset:     columns 3 .. 3 + rows of a [cols, rows + 8] storage, transposed (offset 3,
//               reduced stride rows + 8).
//   Permuted:   [3, cols, rows / 3] permuted to [3, rows / 3, cols] and flattened by the kernel's
//               view of two kept dims: strides [cols * rows / 3, 1, rows / 3].
Tensor input(const Case& c, const Device& dev, uint32_t seed) {
  if (c.view == InView::Transposed) return lt::random({c.cols, c.rows}, c.dt, seed).to(dev).t();
  if (c.view == InView::Offset)
    return lt::random({c.cols, c.rows + 8}, c.dt, seed).to(dev).slice(1, 3, 3 + c.rows).t();
  return lt::random({3, c.cols, c.rows / 3}, c.dt, seed).to(dev).permute({0, 2, 1});
}

// Row-wise float64 reference of `op` over host values x (rows x cols, row-major), weight w and
// bias b (cols). Row outputs (sum ... argmax) give one value a row.
std::vector<double> reference(const std::string& op, const std::vector<double>& x,
                              const std::vector<double>& w, const std::vector<double>& b,
                              int64_t rows, int64_t cols) {
  const bool row_out = op == "sum" || op == "mean" || op == "amax" || op == "argmax";
  std::vector<double> out(size_t(row_out ? rows : rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    const double* xr = x.data() + r * cols;
    double* o = out.data() + (row_out ? r : r * cols);
    double mx = -INFINITY, s = 0, mean = 0, var = 0, ms = 0;
    int64_t at = 0;
    for (int64_t c = 0; c < cols; ++c) {
      if (xr[c] > mx) mx = xr[c], at = c;  // the first of equal maxima
      s += xr[c];
      ms += xr[c] * xr[c];
    }
    mean = s / double(cols);
    for (int64_t c = 0; c < cols; ++c) var += (xr[c] - mean) * (xr[c] - mean);
    if (op == "softmax" || op == "log_softmax") {
      double e = 0;
      for (int64_t c = 0; c < cols; ++c) e += std::exp(xr[c] - mx);
      for (int64_t c = 0; c < cols; ++c)
        o[c] = op == "softmax" ? std::exp(xr[c] - mx) / e : xr[c] - mx - std::log(e);
    } else if (op == "layer_norm") {
      double rstd = 1 / std::sqrt(var / double(cols) + 1e-5);
      for (int64_t c = 0; c < cols; ++c) o[c] = (xr[c] - mean) * rstd * w[c] + b[c];
    } else if (op == "rms_norm") {
      double rr = 1 / std::sqrt(ms / double(cols) + 1e-6);
      for (int64_t c = 0; c < cols; ++c) o[c] = xr[c] * rr * w[c];
    } else {
      *o = op == "sum" ? s : op == "mean" ? mean : op == "amax" ? mx : double(at);
    }
  }
  return out;
}

void check_stage(const Device& dev, const std::vector<Case>& cases) {
  uint32_t seed = 70;
  for (const Case& c : cases) {
    Tensor x = input(c, dev, ++seed);
    Tensor w = lt::random({c.cols}, c.dt, ++seed, 0.5, 1.5).to(dev);
    Tensor b = lt::random({c.cols}, c.dt, ++seed).to(dev);
    const std::vector<double> hx = lt::host(x), hw = lt::host(w), hb = lt::host(b);
    const int64_t rows = int64_t(hx.size()) / c.cols;
    const bool f32 = c.dt == DType::Float32;
    for (std::string op :
         {"softmax", "log_softmax", "layer_norm", "rms_norm", "sum", "mean", "amax", "argmax"}) {
      INFO(op << " " << dtype_name(c.dt) << " " << rows << "x" << c.cols << " "
              << view_name(c.view));
      const int64_t d = int64_t(x.shape().size()) - 1;
      Tensor y = op == "softmax"       ? softmax(x, d)
                 : op == "log_softmax" ? log_softmax(x, d)
                 : op == "layer_norm"  ? layer_norm(x, {c.cols}, w, b)
                 : op == "rms_norm"    ? rms_norm(x, {c.cols}, w, 1e-6)
                 : op == "sum"         ? sum(x, Dims{d})
                 : op == "mean"        ? mean(x, Dims{d})
                 : op == "amax"        ? amax(x, Dims{d})
                                       : argmax(x, d);
      const std::vector<double> want = reference(op, hx, hw, hb, rows, c.cols);
      if (op == "argmax" || op == "amax") {  // exact: the first of equal maxima, its value
        lt::check_equal(y, want);
        continue;
      }
      // Softmax values are about 1 / cols: relative tolerance, a tiny absolute one. Sums of
      // cols values in [-2, 2): an absolute part that grows with the row.
      const bool sm = op == "softmax";
      const bool red = op == "sum" || op == "mean";
      const double scale = op == "sum" ? double(c.cols) : op == "mean" ? 1.0 : 0.0;
      lt::Tol t = f32 ? lt::Tol{1e-4, sm    ? 1e-9
                                      : red ? 1e-6 * scale + 1e-6
                                            : 1e-5}
                      : lt::Tol{2e-2, sm    ? 1e-6
                                      : red ? 1e-4 * scale + 1e-3
                                            : 2e-2};
      lt::check_close(y, want, t);
    }
  }
}

}  // namespace

// The references and tolerances themselves, on the CPU device (the reference semantics).
TEST_CASE("gpu: staged row tile references agree with the CPU device") {
  const Device cpu{DeviceKind::CPU, 0};
  check_stage(cpu, {{67, 1001, DType::Float32},
                    {67, 1000, DType::BFloat16},
                    {61, 128, DType::BFloat16, InView::Offset},
                    {63, 129, DType::Float32, InView::Permuted}});
}

// Kept counts: 4363 = 33 * 132 + 7 rows (no tile of 4 .. 64 rows divides it; 68-1090 tiles) at
// up to 1001 columns; 1100 rows at 4096 and 8192 (tiles of 4 f32 or 8 bf16 rows: 138-275).
TEST_CASE("gpu: staged row tiles of transposed inputs match float64 references") {
  if (!backend_available(DeviceKind::CUDA)) {
    MESSAGE("CUDA unavailable, skipping GPU staged row tests");
    return;
  }
  std::vector<Case> cases;
  for (DType dt : {DType::Float32, DType::BFloat16}) {
    for (int64_t cols : {128, 1000, 1001}) cases.push_back({4363, cols, dt});
    for (int64_t cols : {4096, 8192}) cases.push_back({1100, cols, dt});
  }
  check_stage(kGPU, cases);
}

TEST_CASE("gpu: staged row tiles of offset and 3-D permuted views match float64 references") {
  if (!backend_available(DeviceKind::CUDA)) {
    MESSAGE("CUDA unavailable, skipping GPU staged row tests");
    return;
  }
  // Permuted: 3 x 1501 kept rows (4503), an outer index every 1501: tiles straddle it.
  check_stage(kGPU, {{4363, 1001, DType::Float32, InView::Offset},
                     {4363, 1000, DType::BFloat16, InView::Offset},
                     {1100, 4096, DType::BFloat16, InView::Offset},
                     {4503, 1000, DType::Float32, InView::Permuted},
                     {4503, 1001, DType::BFloat16, InView::Permuted},
                     {1101, 4096, DType::Float32, InView::Permuted}});
}
