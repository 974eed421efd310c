// Views and movement: shapes, strides, shared storage, indexing and copies (cat/stack/split).
#include "helpers.h"

using namespace loom;
using lt::check_close;
using lt::check_equal;
using lt::host;
using Vec = std::vector<double>;

namespace {

// x[i, j, k] = 100 i + 10 j + k over [3, 4, 5]: every element names its own index.
Tensor cube() {
  Vec v;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 5; ++k) v.push_back(100 * i + 10 * j + k);
  return lt::make(v, {3, 4, 5}, DType::Float64);
}

// Expected values of cube() at the index lists (row-major over the result).
Vec cube_at(const std::vector<int>& is, const std::vector<int>& js, const std::vector<int>& ks) {
  Vec v;
  for (int i : is)
    for (int j : js)
      for (int k : ks) v.push_back(100 * i + 10 * j + k);
  return v;
}

}  // namespace

TEST_CASE("views: reshape and view share storage; view refuses a copy") {
  Tensor x = cube();
  Tensor r = x.reshape({12, 5});
  CHECK(r.same_buffer(x));
  CHECK(r.shape() == Shape{12, 5});
  CHECK(x.view({-1}).shape() == Shape{60});
  CHECK(x.view({3, -1, 2}).shape() == Shape{3, 10, 2});
  CHECK(x.reshape({-1, 4, 5}).shape() == Shape{3, 4, 5});
  check_equal(r.select(0, 7), cube_at({1}, {3}, {0, 1, 2, 3, 4}));
  // a transposed tensor cannot be flattened without a copy
  Tensor t = x.transpose(1, 2);  // [3, 5, 4]
  LT_CHECK_ERROR(t.view({60}), "view", "[60]", "[3, 5, 4]");
  Tensor rt = t.reshape({60});
  CHECK_FALSE(rt.same_buffer(x));
  Vec want;
  for (int i = 0; i < 3; ++i)
    for (int k = 0; k < 5; ++k)
      for (int j = 0; j < 4; ++j) want.push_back(100 * i + 10 * j + k);
  check_equal(rt, want);
  // splitting a dim of a transposed tensor is still a view
  Tensor split_view = t.view({3, 5, 2, 2});
  CHECK(split_view.same_buffer(x));
  check_equal(split_view.reshape({-1}), want);
}

TEST_CASE("views: flatten squeeze unsqueeze permute transpose t expand broadcast_to") {
  Tensor x = cube();
  CHECK(x.flatten().shape() == Shape{60});
  CHECK(x.flatten(1).shape() == Shape{3, 20});
  CHECK(x.flatten(0, 1).shape() == Shape{12, 5});
  CHECK(x.flatten(-2, -1).shape() == Shape{3, 20});
  check_equal(x.flatten(1).select(1, 7), cube_at({0, 1, 2}, {1}, {2}));

  Tensor u = x.unsqueeze(1).unsqueeze(-1);  // [3, 1, 4, 5, 1]
  CHECK(u.shape() == Shape{3, 1, 4, 5, 1});
  CHECK(u.squeeze().shape() == Shape{3, 4, 5});
  CHECK(u.squeeze(1).shape() == Shape{3, 4, 5, 1});
  CHECK(u.squeeze(0).shape() == u.shape());  // not size 1: unchanged
  CHECK(u.squeeze(-1).shape() == Shape{3, 1, 4, 5});
  CHECK(u.same_buffer(x));
  check_equal(u.squeeze(), host(x));

  Tensor p = x.permute({2, 0, 1});  // [5, 3, 4]
  CHECK(p.shape() == Shape{5, 3, 4});
  CHECK(p.same_buffer(x));
  CHECK_FALSE(p.is_contiguous());
  Vec pw;
  for (int k = 0; k < 5; ++k)
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 4; ++j) pw.push_back(100 * i + 10 * j + k);
  check_equal(p, pw);
  check_equal(x.permute({-1, -3, -2}), pw);
  check_equal(x.transpose(0, 2).transpose(1, 2), pw);

  Tensor m = lt::make({1, 2, 3, 4, 5, 6}, {2, 3});
  CHECK(m.t().shape() == Shape{3, 2});
  check_equal(m.t(), {1, 4, 2, 5, 3, 6});
  CHECK(lt::make({1, 2}, {2}).t().shape() == Shape{2});

  Tensor col = lt::make({1, 2, 3}, {3, 1});
  Tensor e = col.expand({2, 3, 4});
  CHECK(e.shape() == Shape{2, 3, 4});
  CHECK(e.strides()[0] == 0);
  CHECK(e.strides()[2] == 0);
  CHECK(e.same_buffer(col));
  check_equal(e.sum({0, 2}), {8, 16, 24});
  CHECK(col.expand({-1, 5}).shape() == Shape{3, 5});
  check_equal(col.broadcast_to({3, 2}), {1, 1, 2, 2, 3, 3});
}

TEST_CASE("views: slicing with start/stop/step, negative indices, newaxis and ellipsis") {
  Tensor x = cube();
  SUBCASE("ranges") {
    Tensor s = x.index({Slice::range(1, 3), Slice::range(std::nullopt, std::nullopt, 2),
                        Slice::range(-3, std::nullopt)});
    CHECK(s.shape() == Shape{2, 2, 3});
    CHECK(s.same_buffer(x));
    check_equal(s, cube_at({1, 2}, {0, 2}, {2, 3, 4}));
    Tensor s2 = x.index({Slice::all(), Slice::range(-3, -1), Slice::range(1, 5, 3)});
    check_equal(s2, cube_at({0, 1, 2}, {1, 2}, {1, 4}));
    // out-of-range bounds clamp, empty ranges give size 0
    CHECK(x.index({Slice::range(2, 100)}).shape() == Shape{1, 4, 5});
    CHECK(x.index({Slice::range(2, 1)}).shape() == Shape{0, 4, 5});
    CHECK(x.index({Slice::range(-100, 1)}).shape() == Shape{1, 4, 5});
  }
  SUBCASE("integers, negative integers") {
    check_equal(x.index({Slice::at(-1), Slice::at(2)}), cube_at({2}, {2}, {0, 1, 2, 3, 4}));
    CHECK(x.index({Slice::at(0), Slice::at(-1), Slice::at(-1)}).dim() == 0);
    CHECK(x.index({Slice::at(1), Slice::at(-2), Slice::at(3)}).item<double>() == 123);
    check_equal(x[2][1], cube_at({2}, {1}, {0, 1, 2, 3, 4}));
  }
  SUBCASE("newaxis and ellipsis") {
    Tensor n = x.index({Slice::newaxis(), Slice::at(1), Slice::newaxis()});
    CHECK(n.shape() == Shape{1, 1, 4, 5});
    check_equal(n, cube_at({1}, {0, 1, 2, 3}, {0, 1, 2, 3, 4}));
    Tensor e = x.index({Slice::ellipsis(), Slice::at(-1)});
    CHECK(e.shape() == Shape{3, 4});
    check_equal(e, cube_at({0, 1, 2}, {0, 1, 2, 3}, {4}));
    Tensor e2 = x.index({Slice::at(0), Slice::ellipsis(), Slice::range(0, 2), Slice::newaxis()});
    CHECK(e2.shape() == Shape{4, 2, 1});
    check_equal(e2, cube_at({0}, {0, 1, 2, 3}, {0, 1}));
    Tensor e3 = x.index({Slice::ellipsis()});
    CHECK(e3.shape() == x.shape());
  }
  SUBCASE("slices of slices of transposes") {
    Tensor t = x.transpose(0, 2).slice(0, 1, 5, 2).slice(2, -2, std::nullopt);  // [2, 4, 2]
    CHECK(t.shape() == Shape{2, 4, 2});
    Vec want;
    for (int k : {1, 3})
      for (int j = 0; j < 4; ++j)
        for (int i : {1, 2}) want.push_back(100 * i + 10 * j + k);
    check_equal(t, want);
    check_equal(t.contiguous(), want);
    check_equal(t * 2.0, lt::ref_unary(want, [](double v) { return 2 * v; }));
  }
}

TEST_CASE("views: select narrow contiguous") {
  Tensor x = cube();
  check_equal(x.select(1, -1), cube_at({0, 1, 2}, {3}, {0, 1, 2, 3, 4}));
  check_equal(x.select(2, 0), cube_at({0, 1, 2}, {0, 1, 2, 3}, {0}));
  Tensor n = x.narrow(2, 1, 3);
  CHECK(n.shape() == Shape{3, 4, 3});
  CHECK(n.same_buffer(x));
  check_equal(n, cube_at({0, 1, 2}, {0, 1, 2, 3}, {1, 2, 3}));
  check_equal(x.narrow(0, -1, 1), cube_at({2}, {0, 1, 2, 3}, {0, 1, 2, 3, 4}));
  CHECK(x.narrow(1, 4, 0).shape() == Shape{3, 0, 5});

  CHECK(x.contiguous().same_buffer(x));  // already contiguous: no copy
  Tensor c = n.contiguous();
  CHECK(c.is_contiguous());
  CHECK_FALSE(c.same_buffer(x));
  check_equal(c, cube_at({0, 1, 2}, {0, 1, 2, 3}, {1, 2, 3}));
  Tensor cl = x.clone();
  CHECK_FALSE(cl.same_buffer(x));
  check_equal(cl, host(x));
}

TEST_CASE("views: cat, stack, split, chunk") {
  Tensor a = lt::make({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = lt::make({7, 8, 9}, {1, 3});
  Tensor c = cat({a, b});
  CHECK(c.shape() == Shape{3, 3});
  check_equal(c, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  Tensor d = cat({a, a.t().t(), a.slice(1, 0, 1)}, -1);
  CHECK(d.shape() == Shape{2, 7});
  check_equal(d, {1, 2, 3, 1, 2, 3, 1, 4, 5, 6, 4, 5, 6, 4});
  // dtypes promote; empty inputs contribute nothing
  Tensor ci = cat({lt::make({1, 2}, {2}, DType::Int32), lt::make({0.5}, {1}, DType::Float64),
                   zeros({0}, DType::Int64)});
  CHECK(ci.dtype() == DType::Float64);
  check_close(ci, {1, 2, 0.5});
  // non-contiguous pieces
  Tensor x = cube();
  Tensor xc = cat({x.transpose(1, 2), x.transpose(1, 2).slice(0, 0, 1)}, 0);
  CHECK(xc.shape() == Shape{4, 5, 4});
  check_equal(xc.select(0, 3), host(x.select(0, 0).t()));

  Tensor s = stack({a, a * 10.0, a * 100.0});
  CHECK(s.shape() == Shape{3, 2, 3});
  check_equal(s.select(0, 2), {100, 200, 300, 400, 500, 600});
  Tensor s1 = stack({a, a * 10.0}, 1);
  CHECK(s1.shape() == Shape{2, 2, 3});
  check_equal(s1, {1, 2, 3, 10, 20, 30, 4, 5, 6, 40, 50, 60});
  Tensor sl = stack({a, a}, -1);
  CHECK(sl.shape() == Shape{2, 3, 2});
  check_equal(sl.select(2, 1), host(a));

  auto parts = x.split(2, 1);
  REQUIRE(parts.size() == 2);
  CHECK(parts[0].shape() == Shape{3, 2, 5});
  CHECK(parts[1].same_buffer(x));
  check_equal(parts[1], cube_at({0, 1, 2}, {2, 3}, {0, 1, 2, 3, 4}));
  auto odd = x.split(2, -1);
  REQUIRE(odd.size() == 3);
  CHECK(odd[2].shape() == Shape{3, 4, 1});
  check_equal(odd[2], cube_at({0, 1, 2}, {0, 1, 2, 3}, {4}));
  auto ch = x.chunk(3, 2);  // 5 -> 2, 2, 1
  REQUIRE(ch.size() == 3);
  CHECK(ch[0].shape() == Shape{3, 4, 2});
  CHECK(ch[2].shape() == Shape{3, 4, 1});
  check_equal(cat(ch, 2), host(x));
  CHECK(x.chunk(2, 0).size() == 2);  // 3 -> 2, 1
  CHECK(x.chunk(2, 0)[1].shape() == Shape{1, 4, 5});
}

TEST_CASE("views: writes through one view are seen by the others") {
  Tensor x = zeros({3, 4}, DType::Float64);
  Tensor t = x.t();
  Tensor row = x[1];
  Tensor col = x.select(1, 2);
  t.index_put({Slice::at(0)}, 5.0);  // x[:, 0] = 5
  check_equal(x, {5, 0, 0, 0, 5, 0, 0, 0, 5, 0, 0, 0});
  row.add_(1.0);  // x[1] += 1
  check_equal(x, {5, 0, 0, 0, 6, 1, 1, 1, 5, 0, 0, 0});
  check_equal(col, {0, 1, 0});
  col.mul_(lt::make({2, 3, 4}, {3}, DType::Float64));
  check_equal(t, {5, 6, 5, 0, 1, 0, 0, 3, 0, 0, 1, 0});
  Tensor flat = x.view({12});
  flat.index_put({Slice::range(std::nullopt, std::nullopt, 5)}, -1.0);  // 0, 5, 10
  check_equal(x, {-1, 0, 0, 0, 6, -1, 3, 1, 5, 0, -1, 0});
  check_equal(row, {6, -1, 3, 1});
  // an expanded view reads the updated source
  Tensor src = lt::make({1, 2}, {2, 1}, DType::Float64);
  Tensor ex = src.expand({2, 3});
  src.fill_(9.0);
  check_equal(ex, {9, 9, 9, 9, 9, 9});
}

// A permuted view made contiguous is one kernel whose load gathers straight into the output
// (cpu/program.cpp loads_into_copies), with the output's chunks found as one run over several
// column dims (Job::one_run); a slice written into a larger tensor stores from the source.
// Every element is checked against its index arithmetic, over shapes whose chunks end inside
// a run, in the dtypes of four, two and eight bytes, and with the output overwriting the
// source (which must keep the copy through a tile).
TEST_CASE("views: permuted copies and slice writes, element by element") {
  for (DType dt : {DType::Float32, DType::BFloat16, DType::Int64}) {
    for (Shape s : {Shape{32, 4, 64, 32}, Shape{3, 37, 5, 7}, Shape{2, 1, 3, 1000}}) {
      INFO(dtype_name(dt) << " " << shape_str(s));
      Tensor x = lt::random(s, DType::Float32, 7, -50, 50).to(dt);
      Vec hx = host(x);
      Tensor y = x.transpose(1, 2).contiguous();
      Vec want;
      for (int64_t a = 0; a < s[0]; ++a)
        for (int64_t c = 0; c < s[2]; ++c)
          for (int64_t b = 0; b < s[1]; ++b)
            for (int64_t d = 0; d < s[3]; ++d)
              want.push_back(hx[size_t(((a * s[1] + b) * s[2] + c) * s[3] + d)]);
      CHECK(y.shape() == Shape{s[0], s[2], s[1], s[3]});
      check_equal(y, want);
      // the same values written into columns [2, 2 + s[3]) of a wider tensor
      Tensor w = zeros({s[0], s[2], s[1], s[3] + 5}, dt);
      w.slice(3, 2, 2 + s[3]).copy_(y);
      Vec hw = host(w);
      size_t k = 0, bad = 0;
      for (size_t r = 0; r < want.size() / size_t(s[3]); ++r)
        for (int64_t d = 0; d < s[3] + 5; ++d) {
          double v = hw[r * size_t(s[3] + 5) + size_t(d)];
          bad += d >= 2 && d < 2 + s[3] ? v != want[k++] : v != 0;
        }
      CHECK(bad == 0);
    }
  }
  // the output overwrites its source through another order: the old values are read first
  Tensor sq = lt::random({6, 6}, DType::Float32, 9, -5, 5);
  Vec hs = host(sq), want(36);
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 6; ++j) want[size_t(i * 6 + j)] = hs[size_t(j * 6 + i)];
  sq.copy_(sq.t());
  check_equal(sq, want);
  // a permuted copy of x and an in-place update of x in one flush: the copy has the old values
  Tensor x = lt::random({5, 7}, DType::Float32, 10, -5, 5);
  Vec hx = host(x), wt(35), wx(35);
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 7; ++j) wt[size_t(j * 5 + i)] = hx[size_t(i * 7 + j)];
  for (size_t k = 0; k < 35; ++k) wx[k] = double(float(hx[k]) + 1.0f);  // float32 sums
  Tensor xt = x.t().contiguous();
  x.add_(1.0);
  check_equal(xt, wt);
  check_equal(x, wx);
}
