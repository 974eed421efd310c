// The tile program sets a one-hot mask eq(iota, t) / ne(iota, t) a row at a time where the iota
// runs along the row and t is the same across each row (cpu/program.cpp mark_index_compares,
// cross entropy's backward): both ops, both operand orders, t a loaded int64 or int32 index or
// a per-row value, hits, misses and out-of-range targets, short rows, long rows walked in
// chunks, two kept dims; against a host reference and fusion-off, and the program must use it.
#include "../helpers.h"
#include "ops/record.h"

using namespace loom;

namespace {

// y = where(mask, x - 1, x) * sum(x, -1): the row sum puts the mask in a row kernel.
Tensor program(const Tensor& x, const Tensor& t, bool ne_op, bool iota_first) {
  const Shape& s = x.shape();
  Tensor io = iota(s, int(s.size()) - 1, x.device());
  Tensor m = ne_op ? (iota_first ? ne(io, t) : ne(t, io)) : (iota_first ? eq(io, t) : eq(t, io));
  return where(m, x - 1.0, x) * x.sum({-1}, true);
}

}  // namespace

TEST_CASE("cpu index compare: a one-hot mask set a row at a time") {
  uint32_t seed = 31000;
  for (Shape s : {Shape{7, 37}, Shape{3, 20003}, Shape{300, 96}, Shape{2, 5, 33}})
    for (int kind = 0; kind < 3; ++kind)  // t: 0 int64 load, 1 int32 load, 2 a row max
      for (bool ne_op : {false, true})
        for (bool iota_first : {true, false}) {
          const int64_t C = s.back(), R = numel(s) / C;
          INFO("shape " << shape_str(s) << " t kind " << kind << " ne " << ne_op << " iota first "
                        << iota_first);
          Tensor x = lt::random(s, DType::Float32, ++seed);
          // Targets: in range, -1, C (just past the row) and far out; a row max of int64
          // values in [-3, C + 3).
          std::vector<double> tv(static_cast<size_t>(R));
          for (int64_t i = 0; i < R; ++i)
            tv[size_t(i)] = i % 5 == 3    ? -1.0
                            : i % 7 == 4  ? double(C)
                            : i % 11 == 6 ? 1e6
                                          : double((i * 7919) % C);
          Shape ts = s;
          ts.back() = 1;
          Tensor t;
          if (kind == 2) {
            Tensor vals = lt::random(s, DType::Float32, ++seed, -3, double(C) + 3).to(DType::Int64);
            t = vals.amax({-1}, true);
            std::vector<double> hv = lt::host(t);
            for (int64_t i = 0; i < R; ++i) tv[size_t(i)] = hv[size_t(i)];
          } else {
            t = lt::make(tv, ts, kind == 0 ? DType::Int64 : DType::Int32);
          }
          std::vector<double> hx = lt::host(x), want(hx.size());
          for (int64_t i = 0; i < R; ++i) {
            double rs = 0;
            for (int64_t j = 0; j < C; ++j) rs += hx[size_t(i * C + j)];
            for (int64_t j = 0; j < C; ++j) {
              bool hit = double(j) == tv[size_t(i)];
              double v = hx[size_t(i * C + j)];
              want[size_t(i * C + j)] = (hit != ne_op ? v - 1 : v) * rs;
            }
          }
          std::vector<double> got = lt::check_fused_matches_unfused(
              [&] { return program(x, t, ne_op, iota_first); }, lt::Tol{1e-4, 1e-4});
          lt::check_close(program(x, t, ne_op, iota_first), want, lt::Tol{1e-3, 1e-3});
          // the program takes the row-at-a-time mask
          CHECK(explain(program(x, t, ne_op, iota_first)).find("idx_eq") != std::string::npos);
        }
}

TEST_CASE("cpu index compare: the mask along a reduced leading dim (column kernels)") {
  uint32_t seed = 31500;
  for (Shape s : {Shape{4096, 8}, Shape{40, 300}, Shape{20000, 3}})
    for (bool ne_op : {false, true}) {
      const int64_t R = s[0], C = s[1];
      INFO("shape " << shape_str(s) << " ne " << ne_op);
      Tensor x = lt::random(s, DType::Float32, ++seed);
      std::vector<double> tv(static_cast<size_t>(C));
      for (int64_t j = 0; j < C; ++j)
        tv[size_t(j)] = j % 3 == 1 ? -2.0 : j % 4 == 2 ? double(R) : double((j * 7919) % R);
      Tensor t = lt::make(tv, {1, C}, DType::Int64);
      auto prog = [&] {
        Tensor io = iota(s, 0, x.device());
        return where(ne_op ? ne(io, t) : eq(io, t), x - 1.0, x) * x.sum({0}, true);
      };
      std::vector<double> hx = lt::host(x), want(hx.size());
      for (int64_t j = 0; j < C; ++j) {
        double cs = 0;
        for (int64_t i = 0; i < R; ++i) cs += hx[size_t(i * C + j)];
        for (int64_t i = 0; i < R; ++i) {
          double v = hx[size_t(i * C + j)];
          want[size_t(i * C + j)] = ((double(i) == tv[size_t(j)]) != ne_op ? v - 1 : v) * cs;
        }
      }
      lt::check_fused_matches_unfused(prog, lt::Tol{1e-3, 1e-3});
      lt::check_close(prog(), want, lt::Tol{1e-3, 1e-3});
      CHECK(explain(prog()).find("idx_eq") != std::string::npos);
    }
}
