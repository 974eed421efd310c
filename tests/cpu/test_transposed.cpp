// Row ops over a transposed view (each row strided, consecutive rows consecutive in memory):
// the CPU interpreter reads such tiles a column of 16 rows at a time (cpu/interp_tile.cpp
// load_transposed: 16x16 register transposes for float32, a run per column otherwise). Every
// dtype, row counts and lengths that leave remainders of both, and a 3-d view whose tiles
// cross the end of the innermost kept dim: against float64 and fusion-off.
#include <cmath>

#include "../helpers.h"

using namespace loom;

namespace {

// softmax, layer_norm and an affine map then row sum of the rows of v ([rows, cols] row-major).
std::vector<double> reference(const std::vector<double>& v, int64_t rows, int64_t cols, int op) {
  std::vector<double> out;
  for (int64_t r = 0; r < rows; ++r) {
    const double* x = v.data() + r * cols;
    if (op == 2) {
      double s = 0;
      for (int64_t j = 0; j < cols; ++j) s += x[j] * 2 - 1;
      out.push_back(s);
      continue;
    }
    double m = 0, s = 0;
    if (op == 0) {
      m = *std::max_element(x, x + cols);
      for (int64_t j = 0; j < cols; ++j) s += std::exp(x[j] - m);
      for (int64_t j = 0; j < cols; ++j) out.push_back(std::exp(x[j] - m) / s);
      continue;
    }
    for (int64_t j = 0; j < cols; ++j) m += x[j];
    m /= double(cols);
    for (int64_t j = 0; j < cols; ++j) s += (x[j] - m) * (x[j] - m);
    double rstd = 1 / std::sqrt(s / double(cols) + 1e-5);
    for (int64_t j = 0; j < cols; ++j) out.push_back((x[j] - m) * rstd);
  }
  return out;
}

Tensor apply(int op, const Tensor& x) {
  const int64_t last = x.dim() - 1;
  if (op == 0) return softmax(x, last);
  if (op == 1) return layer_norm(x, {x.shape().back()});
  return sum(x * 2.0 - 1.0, {last});
}

}  // namespace

TEST_CASE(
    "cpu transposed rows: softmax, layer_norm and sums of x.t() match float64 and fusion-off") {
  struct Case {
    Shape base;
    DType dt;
  };
  // [cols, rows] bases of at least 1 MiB (smaller inputs keep one-row tiles)
  const Case cases[] = {{{1000, 304}, DType::Float32},
                        {{517, 515}, DType::Float32},
                        {{300, 500}, DType::Float64},
                        {{1000, 531}, DType::BFloat16}};
  uint32_t seed = 9900;
  for (const Case& c : cases)
    for (int op : {0, 1, 2}) {
      INFO(dtype_name(c.dt) << " base " << c.base[0] << "x" << c.base[1] << ", op " << op);
      Tensor b = lt::random(c.base, c.dt, seed++);
      auto f = [&] { return apply(op, b.t()); };
      std::vector<double> got = lt::check_fused_matches_unfused(f);
      std::vector<double> hb = lt::host(b);
      const int64_t cols = c.base[0], rows = c.base[1];
      std::vector<double> rowmajor(hb.size());
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < cols; ++j)
          rowmajor[size_t(r * cols + j)] = hb[size_t(j * rows + r)];
      Shape out = op == 2 ? Shape{rows} : Shape{rows, cols};
      lt::check_close(lt::make(got, out, DType::Float64), reference(rowmajor, rows, cols, op),
                      lt::tol(c.dt));
    }
}

TEST_CASE("cpu transposed rows: a 3-d view whose tiles cross the innermost kept dim") {
  // x [4, 300, 260] permuted to [4, 260, 300]: rows (4 x 260) each strided by 260; a tile of
  // 16 rows crosses each run of 260 (260 = 16 * 16 + 4)
  Tensor x = lt::random({4, 300, 260}, DType::Float32, 9950);
  std::vector<double> hx = lt::host(x);
  for (int op : {0, 1, 2}) {
    INFO("op " << op);
    std::vector<double> got = lt::check_fused_matches_unfused([&] {
      return apply(op, x.permute({0, 2, 1}));
    });
    std::vector<double> rowmajor(hx.size());
    for (int64_t b = 0; b < 4; ++b)
      for (int64_t r = 0; r < 260; ++r)
        for (int64_t j = 0; j < 300; ++j)
          rowmajor[size_t((b * 260 + r) * 300 + j)] = hx[size_t((b * 300 + j) * 260 + r)];
    Shape out = op == 2 ? Shape{4, 260} : Shape{4, 260, 300};
    lt::check_close(lt::make(got, out, DType::Float64), reference(rowmajor, 4 * 260, 300, op),
                    lt::tol(DType::Float32));
  }
}
