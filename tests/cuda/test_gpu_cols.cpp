// GPU column reductions (mean over dim 0 and friends) against float64 references and the CPU
// device: one kept column a thread (a warp's loads of a row adjacent), or a row kernel where no
// access walks the columns at unit stride.
// Split kernels (tall columns: segments combined by the last block) and loop kernels (short or
// many columns), odd and strided columns, offset views, keepdim, two-pass reductions (var),
// max and argmax. Skips itself where CUDA is unavailable.
// The column knobs of cuda/launch_rows.cpp take other kernels over the same cases; run the file again
// under each (knobs are read once a process): LOOM_CUDA_COL_COMBINE=0 (the split's serial
// row-major combine), =3 (batches of 3 and a tail), LOOM_CUDA_COL_SLICES=4 (64 columns x 4
// slices), LOOM_CUDA_COL_SLICES=4 LOOM_CUDA_COL_BLOCK=1024 (256 x 4), LOOM_CUDA_COL_SLICES=8,
// LOOM_CUDA_COL_PAIRS=1 (2 bf16 columns a thread where the columns are even and aligned: the
// bf16 cases but 1001 and offset 1), LOOM_CUDA_COL_PAIRS=1 LOOM_CUDA_COL_SLICES=4.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "../helpers.h"
#include "loom.h"

using namespace loom;

namespace {

const Device kGPU{DeviceKind::CUDA, 0};

bool skip() {
  if (backend_available(DeviceKind::CUDA)) return false;
  MESSAGE("CUDA unavailable, skipping GPU column reduction tests");
  return true;
}

// Column statistics in double of host values x (rows x cols, row-major).
std::vector<double> col_ref(const std::string& op, const std::vector<double>& x, int64_t rows,
                            int64_t cols) {
  std::vector<double> out(size_t(cols), 0.0);
  for (int64_t c = 0; c < cols; ++c) {
    double s = 0, q = 0, mx = -INFINITY;
    for (int64_t r = 0; r < rows; ++r) {
      const double v = x[size_t(r * cols + c)];
      s += v, q += v * v, mx = std::max(mx, v);
    }
    const double m = s / double(rows);
    double dev = 0;
    if (op == "var")
      for (int64_t r = 0; r < rows; ++r) {
        const double v = x[size_t(r * cols + c)] - m;
        dev += v * v;
      }
    out[size_t(c)] = op == "mean"  ? m
                     : op == "sum" ? s
                     : op == "max" ? mx
                     : op == "var" ? dev / double(rows - 1)
                                   : 0.5 * q;  // "sumsq/2"
  }
  return out;
}

// How the input of a case is laid out: contiguous, a view offset by `offset` columns into rows
// of cols + 8, every other column of rows twice as long, or every other row.
enum class Form { Contiguous, Offset, EveryOther, EveryOtherRow };

struct Case {
  int64_t rows, cols;
  DType dt;
  Form form = Form::Contiguous;
  int64_t offset = 0;
};

// The input on the CPU (x, values rounded to dt) and the same layout on `dev`.
std::pair<Tensor, Tensor> inputs(const Case& c, uint32_t seed, const Device& dev) {
  switch (c.form) {
    case Form::Contiguous: {
      Tensor x = lt::random({c.rows, c.cols}, c.dt, seed);
      return {x, x.to(dev)};
    }
    case Form::Offset: {
      Tensor b = lt::random({c.rows, c.cols + 8}, c.dt, seed);
      return {b.slice(1, c.offset, c.offset + c.cols),
              b.to(dev).slice(1, c.offset, c.offset + c.cols)};
    }
    case Form::EveryOther: {
      Tensor b = lt::random({c.rows, 2 * c.cols}, c.dt, seed);
      return {b.slice(1, 0, 2 * c.cols, 2), b.to(dev).slice(1, 0, 2 * c.cols, 2)};
    }
    case Form::EveryOtherRow: {
      Tensor b = lt::random({2 * c.rows, c.cols}, c.dt, seed);
      return {b.slice(0, 0, 2 * c.rows, 2), b.to(dev).slice(0, 0, 2 * c.rows, 2)};
    }
  }
  return {};
}

// Every op on `dev` against the float64 reference (argmax: against the CPU device).
void check_cols(const Device& dev, const std::vector<Case>& cases) {
  uint32_t seed = 70;
  for (const Case& c : cases) {
    auto [x, gx] = inputs(c, ++seed, dev);
    Tensor w = lt::random({c.cols}, c.dt, ++seed, 0.5, 1.5);
    Tensor gw = w.to(dev);
    const std::vector<double> hx = lt::host(x), hw = lt::host(w);
    loom::sync();
    const bool f32 = c.dt == DType::Float32;
    for (std::string op : {"mean", "mean keepdim", "sum", "max", "var", "sumsq/2 * w"}) {
      INFO(op << " " << dtype_name(c.dt) << " " << c.rows << "x" << c.cols << " form "
              << int(c.form) << " offset " << c.offset);
      // Each from a fresh pending copy of the GPU input, so it fuses into one column kernel.
      Tensor in = gx.clone();
      Tensor y = op == "mean"           ? mean(in, {0})
                 : op == "mean keepdim" ? mean(in, {0}, true)
                 : op == "sum"          ? sum(in, {0})
                 : op == "max"          ? amax(in, {0})
                 : op == "var"          ? var(in, {0})
                                        : sum(in * in, {0}) * 0.5 * gw;
      std::vector<double> want = col_ref(op == "mean keepdim"  ? "mean"
                                         : op == "sumsq/2 * w" ? "sumsq/2"
                                                               : op,
                                         hx, c.rows, c.cols);
      if (op == "sumsq/2 * w")
        for (size_t i = 0; i < want.size(); ++i) want[i] *= hw[i];
      CHECK(y.shape() == (op == "mean keepdim" ? Shape{1, c.cols} : Shape{c.cols}));
      // Sums of up to 20000 f32 values (|x| < 2) rounded in another order than the reference.
      const double scale = op == "sum" || op == "sumsq/2 * w" ? double(c.rows) : 1.0;
      lt::Tol t =
          f32 ? lt::Tol{1e-4, 2e-6 * scale} : lt::Tol{1e-2, (scale > 1 ? 2e-4 : 1e-3) * scale};
      if (op == "max") t = {0, 0};  // exact: a max only picks
      lt::check_close(y, want, t);
    }
    // argmax: the first index of the max, as on the CPU device.
    INFO("argmax " << dtype_name(c.dt) << " " << c.rows << "x" << c.cols);
    lt::check_close(argmax(gx.clone(), 0), lt::host(argmax(x, 0)), lt::Tol{0, 0});
  }
}

}  // namespace

// The references and tolerances themselves, on the CPU device (the reference semantics).
TEST_CASE("gpu: column reduction references agree with the CPU device") {
  const Device cpu{DeviceKind::CPU, 0};
  check_cols(cpu, {{2000, 1000, DType::Float32},
                   {2000, 1000, DType::BFloat16},
                   {300, 996, DType::BFloat16, Form::Offset, 2},
                   {300, 1000, DType::Float32, Form::EveryOther},
                   {300, 1000, DType::BFloat16, Form::EveryOtherRow}});
}

// Columns of every form: tall (split: [20000, n] and [3000, 4096]: 264 / 46 segments, the
// combine's batches of 8 and a tail of 6; [600, 4096]: 9 segments, one batch and a tail of 1;
// [200, 4096]: 3 segments, the tail alone), short (a loop kernel over 100 rows) and many (a
// loop kernel over 140000 columns), 1000 / 4096 / 1001 columns.
TEST_CASE("gpu: column reductions of contiguous columns match float64 references") {
  if (skip()) return;
  check_cols(kGPU, {{20000, 1000, DType::Float32},
                    {20000, 1000, DType::BFloat16},
                    {3000, 4096, DType::Float32},
                    {3000, 4096, DType::BFloat16},
                    {600, 4096, DType::Float32},
                    {200, 4096, DType::BFloat16},
                    {20000, 1001, DType::Float32},
                    {20000, 1001, DType::BFloat16},
                    {100, 4096, DType::BFloat16},
                    {100, 1000, DType::Float32},
                    {40, 140000, DType::Float32},
                    {40, 140000, DType::BFloat16}});
}

// Views: offset by 1, 2 and 4 columns (a base pointer off the 16-byte grid), every other column
// (no unit stride: a row kernel walks each column) and every other row (a column thread's walk
// at twice the stride).
TEST_CASE("gpu: column reductions of strided and offset columns match float64 references") {
  if (skip()) return;
  check_cols(kGPU, {{5000, 996, DType::Float32, Form::Offset, 2},
                    {5000, 996, DType::Float32, Form::Offset, 4},
                    {5000, 996, DType::BFloat16, Form::Offset, 2},
                    {5000, 996, DType::BFloat16, Form::Offset, 1},
                    {5000, 1000, DType::Float32, Form::EveryOther},
                    {5000, 1000, DType::BFloat16, Form::EveryOther},
                    {5000, 1000, DType::Float32, Form::EveryOtherRow},
                    {5000, 1000, DType::BFloat16, Form::EveryOtherRow}});
}
