// A load the same along every reduced dim (a norm's saved mean and rstd read [R, 1] over
// [R, C]) runs as a row value, one a row (cpu/program.cpp row_loads), not a tile filled with
// copies of it: short rows (spread), long rows (a call a row), rows walked in chunks, two kept
// dims; against float64 references and fusion-off. Loads a reduction or an output reads stay
// tiles. The tile program must list the load among its row nodes (LOOM_CPU_ROW_LOADS=0 fails).
#include "../helpers.h"

using namespace loom;

namespace {

// The %id of the group's load whose strides (as explain() prints them) are `strides`.
std::string load_id(const std::string& text, const std::string& strides) {
  for (size_t at = text.find("= load."); at != std::string::npos;
       at = text.find("= load.", at + 1)) {
    const size_t bol = text.rfind('\n', at) + 1, eol = text.find('\n', at);
    const std::string line = text.substr(bol, eol - bol);
    if (line.find("strides[" + strides + "]") != std::string::npos)
      return line.substr(line.find('%'), line.find(' ', line.find('%')) - line.find('%'));
  }
  return "";
}

// Whether the tile program evaluates node `id` as a row value (a "rows:" list of a pass).
bool row_node(const std::string& text, const std::string& id) {
  for (size_t at = text.find(" rows: "); at != std::string::npos;
       at = text.find(" rows: ", at + 1)) {
    const std::string line = text.substr(at, text.find('|', at) - at) + " ";
    if (line.find(id + " ") != std::string::npos) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("cpu row loads: a value the same along the row is read once a row") {
  uint32_t seed = 41000;
  for (Shape s : {Shape{300, 96}, Shape{64, 1000}, Shape{7, 20003}, Shape{2, 5, 33}}) {
    CAPTURE(shape_str(s));
    Shape ks = s;
    ks.back() = 1;
    const int64_t C = s.back(), R = numel(s) / C;
    Tensor x = lt::random(s, DType::Float32, ++seed, -2, 2);
    Tensor m = lt::random(ks, DType::Float32, ++seed, -1, 1);
    Tensor r = lt::random(ks, DType::Float32, ++seed, 0.5, 2);
    Tensor w = lt::random({C}, DType::Float32, ++seed, -1, 1);
    // A norm's output from its saved statistics, and a row sum of it (the rows kernel).
    auto f = [&] {
      Tensor y = (x - m) * r * w + 0.5;
      return y + y.sum({-1}, true) * 0.01;
    };
    std::vector<double> hx = lt::host(x), hm = lt::host(m), hr = lt::host(r), hw = lt::host(w);
    std::vector<double> want(hx.size());
    for (int64_t i = 0; i < R; ++i) {
      double rs = 0;
      for (int64_t j = 0; j < C; ++j)
        rs += (hx[size_t(i * C + j)] - hm[size_t(i)]) * hr[size_t(i)] * hw[size_t(j)] + 0.5;
      for (int64_t j = 0; j < C; ++j)
        want[size_t(i * C + j)] =
            (hx[size_t(i * C + j)] - hm[size_t(i)]) * hr[size_t(i)] * hw[size_t(j)] + 0.5 +
            rs * 0.01;
    }
    lt::check_close(f(), want, lt::Tol{1e-4, 1e-3});
    lt::check_fused_matches_unfused(f, lt::Tol{1e-5, 1e-4});
    const std::string text = explain(f());
    const std::string id = load_id(text, "1, 0");  // (the kept dims collapse into one)
    CAPTURE(text);
    REQUIRE(!id.empty());
    CHECK(row_node(text, id));
    // Read by a reduction too (the sum of m over the rows' elements), and written out as a
    // tile (a broadcast copy): a tile load still, and right.
    auto g = [&] { return (x * m).sum({-1}, true) + m.expand(s).sum({-1}, true); };
    std::vector<double> want_g(static_cast<size_t>(R));
    for (int64_t i = 0; i < R; ++i) {
      double a = 0;
      for (int64_t j = 0; j < C; ++j) a += hx[size_t(i * C + j)] * hm[size_t(i)] + hm[size_t(i)];
      want_g[size_t(i)] = a;
    }
    lt::check_close(g(), want_g, lt::Tol{1e-4, 1e-3});
    lt::check_fused_matches_unfused(g, lt::Tol{1e-5, 1e-4});
    auto copy = [&] { return m.expand(s) * 1.0 + x * 0.0; };
    std::vector<double> want_c(hx.size());
    for (int64_t i = 0; i < R; ++i)
      for (int64_t j = 0; j < C; ++j) want_c[size_t(i * C + j)] = hm[size_t(i)];
    lt::check_close(copy(), want_c, lt::Tol{0, 0});
  }
}
