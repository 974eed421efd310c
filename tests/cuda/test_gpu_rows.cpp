// GPU row kernels against float64 references, on enough rows that every block walks several
// (the grid is capped at two waves): persistent rows held as retained storage vectors with cheap
// values recomputed each pass (remat 1 for bf16, 2 for f32 and the 32768-column bf16 softmax),
// under the register cap (__launch_bounds__ min blocks), with two retained inputs (a masked
// softmax), per-column weights and odd row lengths (single-column chunks). Skips itself where
// CUDA is unavailable.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "../helpers.h"
#include "loom.h"

using namespace loom;

namespace {

const Device kGPU{DeviceKind::CUDA, 0};

struct Case {
  int64_t rows, cols;
  DType dt;
  int64_t offset = 0;  // > 0: x is columns offset .. offset + cols of rows of cols + 8
  // On the GPU the offset view arrives as DLPack hands it over: a zero-copy tensor whose
  // pointer is its first element (misaligned), not an offset into an aligned storage.
  bool external = false;
};

// Row-wise reference in double over host values x (rows x cols), mask (same shape), w and b
// (cols) as the kernels see them (already rounded to their dtypes).
std::vector<double> reference(const std::string& op, const std::vector<double>& x,
                              const std::vector<double>& mask, const std::vector<double>& w,
                              const std::vector<double>& b, int64_t rows, int64_t cols) {
  std::vector<double> out(x.size()), z(static_cast<size_t>(cols));
  for (int64_t r = 0; r < rows; ++r) {
    const double* xr = x.data() + r * cols;
    double* o = out.data() + r * cols;
    if (op == "softmax" || op == "masked softmax") {
      double mx = -INFINITY, s = 0;
      for (int64_t c = 0; c < cols; ++c) {
        z[c] = op == "softmax" ? xr[c] : xr[c] * 0.125 + mask[size_t(r * cols + c)];
        mx = std::max(mx, z[c]);
      }
      for (int64_t c = 0; c < cols; ++c) s += std::exp(z[c] - mx);
      for (int64_t c = 0; c < cols; ++c) o[c] = std::exp(z[c] - mx) / s;
    } else if (op == "layer_norm") {
      double mean = 0, var = 0;
      for (int64_t c = 0; c < cols; ++c) mean += xr[c];
      mean /= double(cols);
      for (int64_t c = 0; c < cols; ++c) var += (xr[c] - mean) * (xr[c] - mean);
      double rstd = 1 / std::sqrt(var / double(cols) + 1e-5);
      for (int64_t c = 0; c < cols; ++c) o[c] = (xr[c] - mean) * rstd * w[c] + b[c];
    } else {  // rms_norm
      double ms = 0;
      for (int64_t c = 0; c < cols; ++c) ms += xr[c] * xr[c];
      double rr = 1 / std::sqrt(ms / double(cols) + 1e-6);
      for (int64_t c = 0; c < cols; ++c) o[c] = xr[c] * rr * w[c];
    }
  }
  return out;
}

// Every op of `cases` on `dev` against the float64 reference.
void check_rows(const Device& dev, const std::vector<Case>& cases) {
  uint32_t seed = 40;
  for (const Case& c : cases) {
    Tensor xb = lt::random({c.rows, c.cols + (c.offset ? 8 : 0)}, c.dt, ++seed);
    Tensor x = c.offset ? xb.slice(1, c.offset, c.offset + c.cols) : xb;
    Tensor mask = lt::random({c.rows, c.cols}, c.dt, ++seed);
    Tensor w = lt::random({c.cols}, c.dt, ++seed, 0.5, 1.5);
    Tensor b = lt::random({c.cols}, c.dt, ++seed);
    std::vector<double> hx = lt::host(x), hm = lt::host(mask), hw = lt::host(w), hb = lt::host(b);
    Tensor gx = c.offset ? xb.to(dev).slice(1, c.offset, c.offset + c.cols) : x.to(dev);
    if (c.external) {
      Tensor base = gx;  // kept alive by the deleter
      gx = from_external(const_cast<void*>(base.data_ptr()), {c.rows, c.cols}, {c.cols + 8, 1},
                         c.dt, dev, [base] {});
    }
    Tensor gm = mask.to(dev), gw = w.to(dev), gb = b.to(dev);
    loom::sync();
    const bool f32 = c.dt == DType::Float32;
    for (std::string op : {"softmax", "masked softmax", "layer_norm", "rms_norm"}) {
      INFO(op << " " << dtype_name(c.dt) << " " << c.rows << "x" << c.cols << " offset " << c.offset
              << (c.external ? " (external)" : ""));
      Tensor y = op == "softmax"          ? softmax(gx, 1)
                 : op == "masked softmax" ? softmax(gx * 0.125 + gm, 1)
                 : op == "layer_norm"     ? layer_norm(gx, {c.cols}, gw, gb)
                                          : rms_norm(gx, {c.cols}, gw, 1e-6);
      std::vector<double> want = reference(op, hx, hm, hw, hb, c.rows, c.cols);
      // Softmax values are small (about 1 / cols): relative tolerance, a tiny absolute one.
      bool sm = op != "layer_norm" && op != "rms_norm";
      lt::Tol t = f32 ? lt::Tol{1e-4, sm ? 1e-9 : 1e-5} : lt::Tol{2e-2, sm ? 1e-6 : 2e-2};
      lt::check_close(y, want, t);
    }
  }
}

}  // namespace

// The reference and tolerances themselves, on the CPU device (the reference semantics).
TEST_CASE("gpu: row kernel references agree with the CPU device") {
  check_rows(Device{DeviceKind::CPU, 0}, {{300, 1001, DType::Float32},
                                          {300, 1000, DType::BFloat16},
                                          {200, 1001, DType::BFloat16, 3},
                                          {200, 1001, DType::Float16}});
}

TEST_CASE("gpu: row kernels over many rows match float64 references") {
  if (!backend_available(DeviceKind::CUDA)) {
    MESSAGE("CUDA unavailable, skipping GPU row kernel tests");
    return;
  }
  // [100000, 128]: 32 rows a block; [5000, 4096] and [9000, 1001]: 1-2 rows a block, all over
  // 2112 row blocks; [600, 32768]: 1024 lanes a row holding 4 (bf16) or 8 (f32) chunks each,
  // over 528 blocks.
  check_rows(kGPU, {{100000, 128, DType::Float32},
                    {5000, 4096, DType::Float32},
                    {9000, 1001, DType::Float32},
                    {100000, 128, DType::BFloat16},
                    {5000, 4096, DType::BFloat16},
                    {9000, 1001, DType::BFloat16},
                    {600, 32768, DType::BFloat16},
                    {600, 32768, DType::Float32}});
}

// Rows whose 16-byte grid moves from row to row (odd lengths: peeled chunks, LOOM_CUDA_ROW_PEEL),
// an odd number of them (the storage's end is not 16-byte aligned), short rows (67 columns: 9-10
// chunks, both ends partial), and views offset by 1, 2 and 3 elements (the input 1-3 elements past
// its output's 16-byte grid on every row: realigned vectors; with 1001 columns the grid also moves
// from row to row).
TEST_CASE("gpu: misaligned rows (odd lengths, offset views) match float64 references") {
  if (!backend_available(DeviceKind::CUDA)) {
    MESSAGE("CUDA unavailable, skipping GPU row kernel tests");
    return;
  }
  check_rows(kGPU, {{9001, 1001, DType::BFloat16},
                    {4099, 67, DType::BFloat16},
                    {3001, 4095, DType::BFloat16},
                    {600, 32767, DType::BFloat16},
                    {3000, 4096, DType::BFloat16, 1},
                    {3000, 4096, DType::BFloat16, 2},
                    {3000, 4096, DType::BFloat16, 3},
                    {3001, 1001, DType::BFloat16, 1},
                    {3000, 4096, DType::Float32, 1},
                    {3001, 1001, DType::Float16},
                    {3000, 4096, DType::Float16, 1},
                    {3000, 4096, DType::BFloat16, 1, true},
                    {3001, 1001, DType::BFloat16, 3, true},
                    {3000, 4096, DType::Float32, 1, true}});
}
