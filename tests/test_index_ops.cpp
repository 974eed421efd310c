// Indexing by integer tensors (gather, scatter_add and what is built on them) against float64
// references written here, over random data and random indices with duplicates: every dim,
// non-contiguous operands, empty indices, int32 and int64 indices, float and integer dtypes;
// fused against fusion off, determinism of duplicate accumulation, gradients, the deferred
// range check and the errors at the call. The masked formulation that devices without a gather
// kernel record is checked against the CPU kernels too.
#include <cstring>

#include "gradcheck.h"
#include "helpers.h"
#include "ops/index_prims.h"

using namespace loom;
using V = std::vector<Tensor>;
using Vec = std::vector<double>;

namespace {

// Row-major coordinates of flat index `i` in `s`, and back (with `s`'s own extents).
std::vector<int64_t> coords(int64_t i, const Shape& s) {
  std::vector<int64_t> c(s.size());
  for (int d = int(s.size()) - 1; d >= 0; --d) {
    c[size_t(d)] = i % s[d];
    i /= s[d];
  }
  return c;
}
int64_t flat(const std::vector<int64_t>& c, const Shape& s) {
  int64_t f = 0;
  for (size_t d = 0; d < c.size(); ++d) f = f * s[d] + c[d];
  return f;
}

// out[c] = x[c with c[d] = index[c]], over index's shape.
Vec ref_gather(const Vec& x, const Shape& xs, int d, const Vec& idx, const Shape& is) {
  Vec out(idx.size());
  for (size_t i = 0; i < idx.size(); ++i) {
    auto c = coords(int64_t(i), is);
    c[size_t(d)] = int64_t(idx[i]);
    out[i] = x[size_t(flat(c, xs))];
  }
  return out;
}

// self with src[c] added at c with c[d] = index[c], over index's shape.
Vec ref_scatter_add(Vec self, const Shape& ss, int d, const Vec& idx, const Shape& is,
                    const Vec& src, const Shape& srcs) {
  for (size_t i = 0; i < idx.size(); ++i) {
    auto c = coords(int64_t(i), is);
    double v = src[size_t(flat(c, srcs))];
    c[size_t(d)] = int64_t(idx[i]);
    self[size_t(flat(c, ss))] += v;
  }
  return self;
}

// A random index in [0, len) with duplicates.
Tensor rand_index(const Shape& s, int64_t len, uint32_t seed, DType dt = DType::Int64) {
  return lt::make(lt::uniform_int(numel(s), 0, len - 1, seed, true), s, dt);
}

const DType kDataTypes[] = {DType::Float32, DType::Float64, DType::BFloat16, DType::Float16,
                            DType::Int32,   DType::Int64,   DType::UInt8,    DType::Bool};

// `sync_point` raises an IndexError-kind loom::Error naming every one of `parts`.
void check_raises(const std::function<void()>& sync_point,
                  std::initializer_list<std::string> parts) {
  bool threw = false;
  try {
    sync_point();
  } catch (const Error& e) {
    threw = true;
    CHECK(e.kind() == ErrorKind::Index);
    std::string msg = e.what();
    INFO("message: " << msg);
    for (auto& p : parts) CHECK_MESSAGE(msg.find(p) != std::string::npos, "missing '" << p << "'");
  }
  CHECK_MESSAGE(threw, "the sync point did not raise");
  CHECK(pending_checks() == 0);
}

}  // namespace

TEST_CASE("index: gather along every dim, every data dtype, int64 and int32 indices") {
  const Shape xs{4, 5, 6};
  for (DType dt : kDataTypes) {
    Tensor x = lt::random(xs, dt, 11, -50, 50);
    Vec xv = lt::host(x);
    for (int d = 0; d < 3; ++d) {
      // The index: smaller than x in the other dims, longer than x along d (duplicates).
      Shape is{3, 4, 5};
      is[d] = 9;
      for (DType it : {DType::Int64, DType::Int32}) {
        INFO(dtype_name(dt) << " dim " << d << " index " << dtype_name(it));
        Tensor idx = rand_index(is, xs[d], 100 + uint32_t(d), it);
        Tensor g = gather(x, d, idx);
        CHECK(g.dtype() == dt);
        CHECK(g.shape() == is);
        lt::check_equal(g, ref_gather(xv, xs, d, lt::host(idx), is));
        lt::check_equal(x.gather(d - 3, idx), ref_gather(xv, xs, d, lt::host(idx), is));
      }
    }
  }
}

TEST_CASE("index: gather of non-contiguous input and index") {
  Tensor base = lt::random({7, 6}, DType::Float32, 3);
  Tensor x = base.t();  // [6, 7], transposed
  Vec xv = lt::host(x);
  Tensor ib = rand_index({7, 6}, 7, 4);
  Tensor idx = ib.t();  // [6, 7], transposed
  lt::check_equal(gather(x, 1, idx), ref_gather(xv, {6, 7}, 1, lt::host(idx), {6, 7}));
  // strided slices of both, and an index expanded over a dim (stride 0)
  Tensor xsl = lt::random({8, 12}, DType::Float64, 5).slice(1, 0, 12, 2);  // [8, 6]
  Tensor isl = rand_index({4, 10}, 8, 6).slice(1, 1, 10, 3);               // [4, 3]
  lt::check_equal(gather(xsl, 0, isl), ref_gather(lt::host(xsl), {8, 6}, 0, lt::host(isl), {4, 3}));
  Tensor iex = rand_index({1, 6}, 8, 7).expand({5, 6});
  lt::check_equal(gather(xsl, 0, iex), ref_gather(lt::host(xsl), {8, 6}, 0, lt::host(iex), {5, 6}));
  // a pending input (made in the same flush)
  Tensor p = x * 2.0 + 1.0;
  Tensor i0 = rand_index({6, 7}, 6, 8);
  lt::check_close(gather(p, 0, i0),
                  ref_gather(lt::host(x * 2.0 + 1.0), {6, 7}, 0, lt::host(i0), {6, 7}));
}

TEST_CASE("index: index_select, take_along_dim and embedding") {
  Tensor x = lt::random({5, 4, 3}, DType::Float32, 21);
  Vec xv = lt::host(x);
  for (int d = 0; d < 3; ++d) {
    for (DType it : {DType::Int64, DType::Int32}) {
      INFO("dim " << d << " " << dtype_name(it));
      Tensor i1 = rand_index({7}, x.shape()[d], 30 + uint32_t(d), it);
      Shape os = x.shape();
      os[d] = 7;
      // The reference: gather with the 1-d index spread over the other dims.
      Vec full(size_t(numel(os)));
      Vec iv = lt::host(i1);
      for (size_t k = 0; k < full.size(); ++k)
        full[k] = iv[size_t(coords(int64_t(k), os)[size_t(d)])];
      Tensor s = index_select(x, d, i1);
      CHECK(s.shape() == os);
      lt::check_equal(s, ref_gather(xv, x.shape(), d, full, os));
      lt::check_equal(x.index_select(d, i1), ref_gather(xv, x.shape(), d, full, os));
    }
  }
  // take_along_dim: the other dims broadcast; without dim, the flattened input.
  Tensor t = lt::random({4, 6}, DType::Float64, 22);
  Tensor ti = rand_index({1, 3}, 6, 23);
  Tensor ta = take_along_dim(t, ti, 1);
  CHECK(ta.shape() == Shape{4, 3});
  lt::check_equal(ta, ref_gather(lt::host(t), {4, 6}, 1, lt::host(ti.expand({4, 3})), {4, 3}));
  Tensor tf = rand_index({5}, 24, 24);
  lt::check_equal(take_along_dim(t, tf), ref_gather(lt::host(t), {24}, 0, lt::host(tf), {5}));
  Tensor tt = ti.t() % 4;
  lt::check_equal(t.take_along_dim(tt, 0),
                  ref_gather(lt::host(t), {4, 6}, 0, lt::host(tt.expand({3, 6})), {3, 6}));
  // embedding: rows of the weight, in the input's shape + [D]
  Tensor w = lt::random({10, 4}, DType::BFloat16, 25);
  Tensor ids = rand_index({2, 3}, 10, 26);
  Tensor e = embedding(ids, w);
  CHECK(e.shape() == Shape{2, 3, 4});
  CHECK(e.dtype() == DType::BFloat16);
  Vec want, wv = lt::host(w), idv = lt::host(ids);
  for (double r : idv)
    for (int k = 0; k < 4; ++k) want.push_back(wv[size_t(int64_t(r) * 4 + k)]);
  lt::check_equal(e, want);
  lt::check_equal(embedding(ids.t(), w).transpose(0, 1), want);
}

TEST_CASE("index: scatter_add and index_add with duplicates against a float64 reference") {
  const Shape ss{4, 5, 6};
  for (DType dt : {DType::Float32, DType::Float64, DType::BFloat16, DType::Int32, DType::Int64,
                   DType::UInt8}) {
    Tensor self = lt::random(ss, dt, 41, 0, 20);
    for (int d = 0; d < 3; ++d) {
      Shape is{3, 4, 5}, srcs{4, 5, 6};
      is[d] = 9;
      srcs[d] = 10;  // src larger than index: the rest of it is not read
      for (DType it : {DType::Int64, DType::Int32}) {
        INFO(dtype_name(dt) << " dim " << d << " index " << dtype_name(it));
        Tensor idx = rand_index(is, ss[d], 50 + uint32_t(d), it);
        Tensor src = lt::random(srcs, dt, 60 + uint32_t(d), 0, 10);
        Tensor r = scatter_add(self, d, idx, src);
        CHECK(r.dtype() == dt);
        CHECK(r.shape() == ss);
        Vec want = ref_scatter_add(lt::host(self), ss, d, lt::host(idx), is, lt::host(src), srcs);
        // bfloat16 rounds after each add; the others hold these small sums exactly or nearly.
        lt::check_close(r, want, dt == DType::BFloat16 ? lt::Tol{3e-2, 0.5} : lt::tol(dt));
        lt::check_close(self.scatter_add(d, idx, src), want,
                        dt == DType::BFloat16 ? lt::Tol{3e-2, 0.5} : lt::tol(dt));
      }
    }
  }
  // index_add: a 1-d index, alpha, any dim, a transposed source
  Tensor in = lt::random({6, 5}, DType::Float64, 70);
  Tensor i1 = lt::make({2, 0, 2, 5, 2, 1, 0}, {7}, DType::Int32);
  Tensor srcT = lt::random({5, 7}, DType::Float64, 71).t();  // [7, 5]
  Vec want = lt::host(in), sv = lt::host(srcT);
  for (int j = 0; j < 7; ++j)
    for (int k = 0; k < 5; ++k)
      want[size_t(int64_t(lt::host(i1)[size_t(j)]) * 5 + k)] += 2.5 * sv[size_t(j * 5 + k)];
  lt::check_close(index_add(in, 0, i1, srcT, 2.5), want);
  lt::check_close(in.t().index_add(1, i1, srcT.t(), 2.5).t(), want);
  Tensor ii = lt::make({1, 1, 0}, {3}, DType::Int64);
  Tensor isrc = lt::random({2, 3}, DType::Int64, 72, 1, 9);
  Vec iw = {0, 0, 0, 0, 0, 0};
  Vec isv = lt::host(isrc);
  for (int r = 0; r < 2; ++r)
    for (int j = 0; j < 3; ++j) iw[size_t(r * 3 + (j < 2 ? 1 : 0))] += 3 * isv[size_t(r * 3 + j)];
  lt::check_equal(index_add(zeros({2, 3}, DType::Int64), 1, ii, isrc, 3), iw);
}

TEST_CASE("index: in-place scatter_add_ and index_add_, seen through views") {
  Tensor t = zeros({3, 4});
  Tensor view = t.slice(0, 1, 3);
  Tensor idx = lt::make({0, 3, 3, 0, 1, 1}, {2, 3}, DType::Int64);
  Tensor src = lt::make({1, 2, 3, 4, 5, 6}, {2, 3});
  t.scatter_add_(1, idx, src);
  lt::check_equal(t, {1, 0, 0, 5, 4, 11, 0, 0, 0, 0, 0, 0});
  lt::check_equal(view, {4, 11, 0, 0, 0, 0, 0, 0});
  t.index_add_(0, lt::make({2, 2}, {2}, DType::Int64), ones({2, 4}), -1);
  lt::check_equal(t, {1, 0, 0, 5, 4, 11, 0, 0, -2, -2, -2, -2});
}

TEST_CASE("index: empty indices and empty dims") {
  Tensor x = lt::random({3, 4}, DType::Float32, 80);
  Tensor e = gather(x, 1, zeros({3, 0}, DType::Int64));
  CHECK(e.shape() == Shape{3, 0});
  CHECK(lt::host(e).empty());
  CHECK(index_select(x, 0, zeros({0}, DType::Int64)).shape() == Shape{0, 4});
  CHECK(embedding(zeros({0, 2}, DType::Int64), x).shape() == Shape{0, 2, 4});
  lt::check_equal(scatter_add(x, 0, zeros({0, 4}, DType::Int64), ones({2, 4})), lt::host(x));
  lt::check_equal(index_add(x, 1, zeros({0}, DType::Int32), ones({3, 0})), lt::host(x));
  CHECK(gather(zeros({0, 4}), 0, zeros({0, 4}, DType::Int64)).numel() == 0);
  CHECK(pending_checks() == 0);  // nothing to check in an empty index
  // 0-d input and index
  Tensor s = scalar_tensor(4.5, {DType::Float32});
  lt::check_equal(gather(s, 0, scalar_tensor(0, {DType::Int64})), {4.5});
  lt::check_equal(scatter_add(s, -1, scalar_tensor(0, {DType::Int64}), scalar_tensor(2.0, {})),
                  {6.5});
}

TEST_CASE("index: fused matches fusion off") {
  Tensor x = lt::random({16, 33}, DType::Float32, 90);
  Tensor idx = rand_index({16, 50}, 33, 91);
  Tensor src = lt::random({16, 50}, DType::Float32, 92);
  Tensor i1 = rand_index({40}, 16, 93);
  Tensor src2 = lt::random({40, 33}, DType::Float32, 94);
  // The primitive alone gives the same bits (one kernel either way).
  lt::check_fused_matches_unfused([&] { return gather(x * 2.0, 1, idx); }, {}, true);
  lt::check_fused_matches_unfused([&] { return scatter_add(x.sin(), 1, idx, src * 3.0); }, {},
                                  true);
  lt::check_fused_matches_unfused([&] { return index_add(x, 0, i1, src2); }, {}, true);
  // With producers and consumers around it.
  lt::check_fused_matches_unfused(
      [&] { return (gather(x.exp() + 1.0, 1, idx) * src).tanh().sum({1}); });
  lt::check_fused_matches_unfused([&] {
    Tensor s = scatter_add(zeros({16, 33}), 1, idx, src.relu());
    return softmax(s + x, 1) + index_select(x, 0, i1).sum({0});
  });
  // The masked formulation (devices without a gather kernel) fuses and keeps the oracle.
  lt::check_fused_matches_unfused([&] { return gather_masked(x * 2.0, 1, idx).exp(); });
  lt::check_fused_matches_unfused(
      [&] { return scatter_add_masked(x, 1, idx, src * 0.5).abs() + 1.0; });
}

TEST_CASE("index: scatter_add of many duplicates gives the same bits every run") {
  // 200000 float32 values of mixed magnitudes into 3 positions: any change of the order of the
  // adds changes the rounding.
  const int64_t n = 200000;
  Tensor src = lt::random({n, 4}, DType::Float32, 100, -1e4, 1e4) *
               exp(lt::random({n, 1}, DType::Float32, 101, -8, 8));
  Tensor idx = rand_index({n}, 3, 102);
  auto run = [&] {
    Tensor r = index_add(zeros({3, 4}), 0, idx, src);
    std::vector<float> v = r.to_vector<float>();
    return v;
  };
  std::vector<float> a = run(), b = run();
  std::vector<float> c;
  {
    lt::FusionOff off;
    c = run();
  }
  CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
  CHECK(std::memcmp(a.data(), c.data(), a.size() * sizeof(float)) == 0);
  // and the order is increasing position: the same bits as a sequential float32 loop
  std::vector<float> seq(12, 0.0f), sv = src.to_vector<float>();
  std::vector<int64_t> iv = idx.to_vector<int64_t>();
  for (int64_t j = 0; j < n; ++j)
    for (int k = 0; k < 4; ++k) seq[size_t(iv[size_t(j)] * 4 + k)] += sv[size_t(j * 4 + k)];
  CHECK(std::memcmp(a.data(), seq.data(), a.size() * sizeof(float)) == 0);
  // the masked formulation is deterministic too
  Tensor s2 = src.slice(0, 0, 3000), i2 = idx.slice(0, 0, 3000);
  Tensor full = i2.unsqueeze(1).expand({3000, 4});
  std::vector<float> m1 = scatter_add_masked(zeros({3, 4}), 0, full, s2).to_vector<float>();
  std::vector<float> m2 = scatter_add_masked(zeros({3, 4}), 0, full, s2).to_vector<float>();
  CHECK(std::memcmp(m1.data(), m2.data(), m1.size() * sizeof(float)) == 0);
}

TEST_CASE("index: the masked formulation matches the kernels") {
  for (DType dt : {DType::Float32, DType::Float64, DType::Int32, DType::BFloat16}) {
    INFO(dtype_name(dt));
    Tensor x = lt::random({5, 7, 3}, dt, 110, -20, 20);
    for (int d = 0; d < 3; ++d) {
      Shape is{4, 6, 2};
      is[d] = 8;
      Tensor idx = rand_index(is, x.shape()[d], 111 + uint32_t(d));
      Tensor xs = x;
      for (int k = 0; k < 3; ++k)
        if (k != d) xs = xs.narrow(k, 0, is[k]);
      lt::check_equal(gather_masked(xs, d, idx), lt::host(gather(x, d, idx)));
      Tensor src = lt::random(is, dt, 120 + uint32_t(d), -20, 20);
      Vec want = ref_scatter_add(lt::host(x), x.shape(), d, lt::host(idx), is, lt::host(src), is);
      lt::check_close(scatter_add_masked(x, d, idx, src), want,
                      dt == DType::BFloat16 ? lt::Tol{3e-2, 0.5} : lt::tol(dt));
    }
  }
}

TEST_CASE("index: gradients against finite differences") {
  using lt::grad_input;
  using lt::gradcheck;
  using lt::near;
  Tensor idx = lt::make({0, 2, 2, 1, 3, 3, 3, 0, 1, 1, 0, 2}, {3, 4}, DType::Int64);
  gradcheck("gather dim 1", [=](const V& v) { return gather(v[0], 1, near(idx, v[0])); },
            {grad_input({4, 5}, 1)});
  gradcheck("gather dim 0 (duplicates)",
            [=](const V& v) { return gather(v[0], 0, near(idx, v[0])); }, {grad_input({4, 6}, 2)});
  gradcheck(
      "gather of a transpose, int32 index",
      [=](const V& v) { return gather(v[0].t(), 1, cast(near(idx, v[0]), DType::Int32)).exp(); },
      {grad_input({5, 3}, 3)});
  gradcheck("scatter_add (input and a larger src)",
            [=](const V& v) { return scatter_add(v[0], 1, near(idx, v[0]), v[1]) * v[0]; },
            {grad_input({3, 5}, 4), grad_input({4, 6}, 5)});
  Tensor i1 = lt::make({3, 0, 3, 1, 3}, {5}, DType::Int64);
  gradcheck("index_select", [=](const V& v) { return index_select(v[0], 1, near(i1, v[0])).sin(); },
            {grad_input({3, 4}, 6)});
  gradcheck("index_add with alpha",
            [=](const V& v) { return index_add(v[0], 0, near(i1, v[0]), v[1], -1.5).square(); },
            {grad_input({4, 3}, 7), grad_input({5, 3}, 8)});
  gradcheck("embedding", [=](const V& v) { return embedding(near(idx, v[0]), v[0]); },
            {grad_input({4, 3}, 9)});
  gradcheck("take_along_dim (broadcast)",
            [=](const V& v) { return take_along_dim(v[0], near(idx, v[0]).slice(0, 0, 1), 0); },
            {grad_input({4, 4}, 10)});
  lt::gradgradcheck("gather", [=](const V& v) { return gather(v[0], 1, near(idx, v[0])).square(); },
                    {grad_input({3, 5}, 11)});
  lt::gradgradcheck(
      "scatter_add",
      [=](const V& v) { return (scatter_add(v[0], 0, near(idx, v[0]), v[1]) * v[0]).sum(); },
      {grad_input({4, 4}, 12), grad_input({3, 4}, 13)});
  // The index gets no gradient; a graph through the in-place form reaches the source.
  Tensor w = lt::make({1, 2, 3, 4}, {2, 2}, DType::Float64).requires_grad_();
  Tensor t = zeros({3, 2}, DType::Float64) * 1.0;
  t.index_add_(0, lt::make({2, 2}, {2}, DType::Int64), w);
  CHECK(t.grad_fn_name() != "");
  (t * t).sum().backward();
  lt::check_equal(w.grad(), {8, 12, 8, 12});
  CHECK(gather(w, 0, idx.slice(0, 0, 2).slice(1, 0, 2) % 2).grad_fn_name() == "GatherBackward0");
}

TEST_CASE("index: an out-of-range index raises at the next sync point, not at the call") {
  for (bool fused : {true, false}) {
    set_fusion(fused);
    INFO("fusion " << fused);
    Tensor x = lt::make({1, 2, 3, 4, 5, 6}, {2, 3});
    Tensor hi = lt::make({0, 3, 1, 2}, {2, 2}, DType::Int64);  // 3 is past [0, 3)
    Tensor g = lt::recorded_without_flush([&] { return gather(x, 1, hi); });
    Tensor y = x * 2.0;  // other work of the same flush
    check_raises([&] { (void)y.to_vector<double>(); },
                 {"gather", "out of range [0, 3)", "dim 1", "[2, 3]", "int64 of shape [2, 2]"});
    lt::check_equal(y, {2, 4, 6, 8, 10, 12});
    lt::check_equal(g, {1, 3, 5, 6});  // computed, the bad index clamped
    Tensor neg = lt::make({-1, 0}, {2}, DType::Int32);
    Tensor s = lt::recorded_without_flush([&] { return index_select(x, 0, neg); });
    check_raises([] { loom::sync(); }, {"index_select", "[0, 2)", "int32 of shape [2]"});
    lt::check_equal(s, {1, 2, 3, 1, 2, 3});
    Tensor a = lt::recorded_without_flush([&] { return scatter_add(x, 0, hi % 2 + 1, x); });
    check_raises([&] { (void)a.to_vector<double>(); }, {"scatter_add", "[0, 2)"});
    Tensor b = lt::recorded_without_flush([&] {
      return index_add(x, 1, lt::make({5}, {1}, DType::Int64), ones({2, 1}));
    });
    check_raises([] { flush(); }, {"index_add", "[0, 3)"});
    lt::check_equal(b, {1, 2, 4, 4, 5, 7});
    Tensor e = lt::recorded_without_flush([&] { return embedding(hi * 2, x.t()); });
    check_raises([] { loom::sync(); }, {"embedding", "[0, 3)", "[3, 2]"});
    // A good index afterwards raises nothing.
    lt::check_equal(gather(x, 1, hi % 3), {1, 1, 5, 6});
  }
  set_fusion(true);
}

TEST_CASE("index: bad arguments raise at the call") {
  Tensor x = zeros({3, 4});
  Tensor i = zeros({3, 2}, DType::Int64);
  LT_CHECK_ERROR(gather(x, 1, zeros({3, 2})), "gather", "int64 or int32", "float32", "[3, 2]");
  LT_CHECK_ERROR(gather(x, 1, zeros({3}, DType::Int64)), "gather", "[3]", "[3, 4]", "as many dims");
  LT_CHECK_ERROR(gather(x, 1, zeros({4, 2}, DType::Int64)), "gather", "[4, 2]", "[3, 4]", "dim 0");
  LT_CHECK_ERROR(gather(x, 2, i), "gather", "dim 2");
  LT_CHECK_ERROR(index_select(x, 0, i), "index_select", "1-d", "[3, 2]");
  LT_CHECK_ERROR(scatter_add(x, 1, i, zeros({3, 2}, DType::Float64)), "scatter_add", "float64",
                 "float32");
  LT_CHECK_ERROR(scatter_add(x, 1, i, zeros({3, 1})), "scatter_add", "[3, 2]", "[3, 1]");
  LT_CHECK_ERROR(scatter_add(zeros({3, 4}, DType::Bool), 1, i, zeros({3, 2}, DType::Bool)),
                 "scatter_add", "bool");
  LT_CHECK_ERROR(index_add(x, 0, zeros({2}, DType::Int64), zeros({2, 3})), "index_add", "[2, 3]",
                 "[3, 4]");
  LT_CHECK_ERROR(index_add(zeros({3}, DType::Int64), 0, zeros({1}, DType::Int64),
                           zeros({1}, DType::Int64), 0.5),
                 "index_add", "alpha");
  LT_CHECK_ERROR(embedding(i, zeros({4})), "embedding", "2-d", "[4]");
  LT_CHECK_ERROR(embedding(zeros({2}), x), "embedding", "int64 or int32");
  LT_CHECK_ERROR(take_along_dim(x, zeros({3}, DType::Int64), 0), "take_along_dim", "[3]");
  LT_CHECK_ERROR(take_along_dim(x, zeros({2, 2}, DType::Int64), 1), "take_along_dim");
}
