// Creation (from host vectors, constants, ranges, eye, *_like), random numbers and printing.
#include <set>

#include "helpers.h"

using namespace loom;
using lt::check_close;
using lt::check_equal;
using lt::host;

TEST_CASE("creation: tensor() from vectors of each element type") {
  CHECK(tensor<float>({1.5f, -2}, {2}).dtype() == DType::Float32);
  CHECK(tensor<double>({1.5, -2}, {2}).dtype() == DType::Float64);
  CHECK(tensor<int32_t>({1, -2}, {2}).dtype() == DType::Int32);
  CHECK(tensor<int64_t>({1, -2}, {2}).dtype() == DType::Int64);
  CHECK(tensor<uint8_t>({1, 250}, {2}).dtype() == DType::UInt8);
  CHECK(tensor<int8_t>({1, -2}, {2}).dtype() == DType::Int8);
  CHECK(tensor<bool>({true, false}, {2}).dtype() == DType::Bool);
  check_equal(tensor<float>({1.5f, -2}, {2}), {1.5, -2});
  check_equal(tensor<uint8_t>({1, 250}, {2}), {1, 250});
  check_equal(tensor<int8_t>({1, -2}, {2}), {1, -2});
  check_equal(tensor<bool>({true, false, true}, {3}), {1, 0, 1});
  CHECK(tensor<int64_t>({int64_t(1) << 62}, {1}).item<int64_t>() == int64_t(1) << 62);
  // conversion through Options, shapes, 0-dim
  Tensor t = tensor<double>({1.25, 2.75, -3.5, 4, 5, 6}, {2, 3}, Options(DType::Int32));
  CHECK(t.dtype() == DType::Int32);
  CHECK(t.shape() == Shape{2, 3});
  check_equal(t, {1, 2, -3, 4, 5, 6});
  Tensor h = tensor<double>({1.0 / 3}, {}, Options(DType::Float16));
  CHECK(h.dim() == 0);
  CHECK(h.item<double>() == doctest::Approx(1.0 / 3).epsilon(1e-3));
  CHECK(h.item<double>() != 1.0 / 3);  // rounded to float16
  Tensor bf = tensor<float>({1.0f + 1.0f / 256}, {1}, Options(DType::BFloat16));
  CHECK(bf.item<float>() == 1.0f);  // bfloat16 keeps 8 bits of mantissa
  std::vector<float> raw{1, 2, 3, 4};
  Tensor fb = from_blob(raw.data(), {2, 2}, DType::Float32);
  raw[0] = 100;  // from_blob copies
  check_equal(fb, {1, 2, 3, 4});
  CHECK(tensor<float>({}, {0, 3}).shape() == Shape{0, 3});
}

TEST_CASE("creation: zeros ones full empty and *_like") {
  CHECK(zeros({2, 3}).dtype() == DType::Float32);
  check_equal(zeros({2, 3}), std::vector<double>(6, 0));
  check_equal(ones({4}, DType::Int32), {1, 1, 1, 1});
  CHECK(ones({4}, DType::Int32).dtype() == DType::Int32);
  check_equal(full({2, 2}, 3.5, DType::Float64), {3.5, 3.5, 3.5, 3.5});
  check_equal(full({3}, true, DType::Bool), {1, 1, 1});
  CHECK(full({}, 7, DType::Int64).item<int64_t>() == 7);
  Tensor e = empty({3, 0, 2});
  CHECK(e.shape() == Shape{3, 0, 2});
  CHECK(e.numel() == 0);
  CHECK(empty({5}, DType::Int8).dtype() == DType::Int8);
  CHECK(empty({5}).numel() == 5);
  CHECK(scalar_tensor(2.5, DType::Float64).dim() == 0);

  Tensor x = lt::random({2, 5}, DType::Float64, 121);
  CHECK(zeros_like(x).dtype() == DType::Float64);
  CHECK(zeros_like(x).shape() == x.shape());
  check_equal(ones_like(x, DType::Int32), std::vector<double>(10, 1));
  CHECK(ones_like(x, DType::Int32).dtype() == DType::Int32);
  check_equal(full_like(x, -2), std::vector<double>(10, -2));
  CHECK(empty_like(x).shape() == x.shape());
  CHECK(empty_like(x, DType::Float16).dtype() == DType::Float16);
  CHECK(rand_like(x).dtype() == DType::Float64);
  CHECK(randn_like(x.to(DType::Float16)).dtype() == DType::Float16);
}

TEST_CASE("creation: arange, linspace and eye") {
  CHECK(arange(5).dtype() == DType::Int64);
  check_equal(arange(5), {0, 1, 2, 3, 4});
  check_equal(arange(2, 11, 3), {2, 5, 8});
  check_equal(arange(5, 0, -1), {5, 4, 3, 2, 1});
  check_equal(arange(-3, 3, 2), {-3, -1, 1});
  CHECK(arange(0, 5, 1, DType::Int32).dtype() == DType::Int32);
  CHECK(arange(3, 3).numel() == 0);
  CHECK(arange(3, 0).numel() == 0);  // wrong direction: empty
  Tensor f = arange(0, 1, 0.25);
  CHECK(f.dtype() == DType::Float32);
  check_close(f, {0, 0.25, 0.5, 0.75});
  check_close(arange(1.0, -1.0, -0.5), {1, 0.5, 0, -0.5});
  CHECK(arange(2.5).dtype() == DType::Float32);
  check_close(arange(2.5), {0, 1, 2});
  check_close(arange(0, 1, 0.1, DType::Float64), {0, .1, .2, .3, .4, .5, .6, .7, .8, .9},
              lt::Tol{0, 1e-15});
  CHECK(arange(0, 1, 0.1).numel() == 10);
  // large int64 ranges stay exact
  int64_t big = int64_t(1) << 55;
  CHECK(arange(big, big + 3).to_vector<int64_t>() == std::vector<int64_t>{big, big + 1, big + 2});

  check_close(linspace(0, 1, 5), {0, 0.25, 0.5, 0.75, 1});
  check_close(linspace(-1, 1, 1), {-1});
  CHECK(linspace(0, 1, 0).numel() == 0);
  check_close(linspace(10, -10, 3, DType::Float64), {10, 0, -10});
  Tensor l = linspace(0, 3, 7, DType::Float64);
  auto lv = host(l);
  CHECK(lv.front() == 0);
  CHECK(lv.back() == 3);  // both ends exact
  check_close(l, {0, 0.5, 1, 1.5, 2, 2.5, 3});
  check_equal(linspace(0, 4, 5, DType::Int64), {0, 1, 2, 3, 4});

  check_equal(eye(3), {1, 0, 0, 0, 1, 0, 0, 0, 1});
  Tensor r = eye(2, 4, DType::Int32);
  CHECK(r.shape() == Shape{2, 4});
  CHECK(r.dtype() == DType::Int32);
  check_equal(r, {1, 0, 0, 0, 0, 1, 0, 0});
  check_equal(eye(3, 1), {1, 0, 0});
  CHECK(eye(0).shape() == Shape{0, 0});
}

TEST_CASE("creation: rand, randn and randint") {
  const int64_t n = 100000;
  SUBCASE("same seed gives the same numbers; new draws differ") {
    manual_seed(42);
    auto a = host(rand({1000}));
    auto an = host(randn({1000}));
    manual_seed(42);
    auto b = host(rand({1000}));
    auto bn = host(randn({1000}));
    CHECK(a == b);
    CHECK(an == bn);
    CHECK(host(rand({1000})) != a);
    manual_seed(43);
    CHECK(host(rand({1000})) != a);
  }
  SUBCASE("fused equals fusion off bitwise") {
    // the generator itself is bitwise equal; math on it equal within rounding
    auto draw = [] {
      manual_seed(5);
      Tensor u = rand({300, 7});
      return cat({u, randn({300, 7}), rand({300, 7}, DType::Float64)});
    };
    lt::check_fused_matches_unfused(draw, std::nullopt, true);
    lt::check_fused_matches_unfused([&] { return draw().exp() * 2.0 + 1.0; });
    lt::check_fused_matches_unfused([] {
      manual_seed(6);
      return randint(-5, 5, {1000});
    });
  }
  SUBCASE("rand is uniform in [0, 1)") {
    manual_seed(1);
    Tensor u = rand({n});
    auto v = host(u);
    double lo = *std::min_element(v.begin(), v.end()), hi = *std::max_element(v.begin(), v.end());
    CHECK(lo >= 0);
    CHECK(hi < 1);
    CHECK(u.mean().item<double>() == doctest::Approx(0.5).epsilon(0.01));
    CHECK(u.var().item<double>() == doctest::Approx(1.0 / 12).epsilon(0.02));
    CHECK((u < 0.25).sum().item<int64_t>() == doctest::Approx(n / 4).epsilon(0.03));
    CHECK(rand({8}, DType::Float64).dtype() == DType::Float64);
  }
  SUBCASE("randn has mean 0 and std 1") {
    manual_seed(2);
    Tensor g = randn({n});
    CHECK(std::fabs(g.mean().item<double>()) < 0.02);
    CHECK(g.std().item<double>() == doctest::Approx(1.0).epsilon(0.02));
    // about 68% within one sigma
    double inside = double((g.abs() < 1.0).sum().item<int64_t>()) / double(n);
    CHECK(inside == doctest::Approx(0.6827).epsilon(0.02));
  }
  SUBCASE("randint stays in [low, high) and hits every value") {
    manual_seed(3);
    Tensor r = randint(-3, 4, {n});
    CHECK(r.dtype() == DType::Int64);
    auto v = r.to_vector<int64_t>();
    std::set<int64_t> seen(v.begin(), v.end());
    CHECK(seen == std::set<int64_t>{-3, -2, -1, 0, 1, 2, 3});
    CHECK(randint(0, 10, {5}, DType::Int32).dtype() == DType::Int32);
  }
}

TEST_CASE("creation: printing like torch") {
  CHECK(tensor<float>({1, 2, 3}, {3}).str() == "tensor([1., 2., 3.])");
  CHECK(tensor<float>({1.5f, 2.25f}, {2}).str() == "tensor([1.5000, 2.2500])");
  CHECK(tensor<float>({-1.5f, 2}, {2}).str() == "tensor([-1.5000,  2.0000])");
  CHECK(tensor<int64_t>({1, 2, 3}, {3}).str() == "tensor([1, 2, 3])");
  CHECK(tensor<int32_t>({1, 2, 3, 4}, {2, 2}).str() ==
        "tensor([[1, 2],\n        [3, 4]], dtype=int32)");
  CHECK(tensor<double>({1.5, 2.25}, {2}).str() == "tensor([1.5000, 2.2500], dtype=float64)");
  CHECK(tensor<bool>({true, false}, {2}).str() == "tensor([ True, False])");
  CHECK(full({}, 3.5).str() == "tensor(3.5000)");
  CHECK(zeros({2, 2}).str() == "tensor([[0., 0.],\n        [0., 0.]])");
  CHECK(tensor<float>({1e-5f, 1}, {2}).str() == "tensor([1.0000e-05, 1.0000e+00])");
  CHECK(arange(3).t().str() == "tensor([0, 1, 2])");
  // printing reads a strided view in its logical order
  CHECK(tensor<int64_t>({1, 2, 3, 4}, {2, 2}).t().str() == "tensor([[1, 3],\n        [2, 4]])");
  std::ostringstream os;
  os << ones({2}, DType::Int32);
  CHECK(os.str() == "tensor([1, 1], dtype=int32)");
  double nan = std::nan(""), inf = INFINITY;
  CHECK(lt::make({nan, inf, 1}, {3}).str() == "tensor([nan, inf, 1.])");
  CHECK(lt::make({1.5, nan}, {2}).str() == "tensor([1.5000,    nan])");
  CHECK(lt::make({-inf, 0.5}, {2}).str() == "tensor([  -inf, 0.5000])");
  CHECK(lt::make({0.1, 100}, {2}).str() == "tensor([  0.1000, 100.0000])");
  CHECK(lt::make({1000.5, 0.5}, {2}).str() == "tensor([1.0005e+03, 5.0000e-01])");
  CHECK(lt::make({-0.0}, {1}).str() == "tensor([-0.])");
  CHECK(full({}, true, DType::Bool).str() == "tensor(True)");
  CHECK(zeros({0}).str() == "tensor([])");
  CHECK(lt::make({0.5, 1}, {2}, DType::Float16).str() == "tensor([0.5000, 1.0000], dtype=float16)");
  // large tensors are summarised (torch: the innermost ellipsis is an element, " ...")
  std::string big = arange(2000).str();
  CHECK(big.rfind("tensor([   0,    1,    2,  ..., 1997, 1998, 1999]", 0) == 0);
  CHECK(big.find("...") != std::string::npos);
  CHECK(big.find("1999") != std::string::npos);
  CHECK(big.find("1000") == std::string::npos);
  CHECK(big.size() < 200);
  std::string big2 = zeros({100, 100}).str();
  CHECK(big2.find("...") != std::string::npos);
  CHECK(big2.size() < 1000);
}

TEST_CASE("creation: dtype conversion with to()") {
  Tensor f = lt::make({-2.7, -0.5, 0.5, 2.5, 3.9}, {5}, DType::Float64);
  check_equal(f.to(DType::Int32), {-2, 0, 0, 2, 3});  // truncates toward zero
  check_equal(f.to(DType::Int64), {-2, 0, 0, 2, 3});
  check_equal(f.to(DType::Bool), {1, 1, 1, 1, 1});
  check_equal(lt::make({0, -0.0, 1e-30}, {3}, DType::Float64).to(DType::Bool), {0, 0, 1});
  check_equal(lt::make({1, 0}, {2}, DType::Bool).to(DType::Float32), {1, 0});
  CHECK(f.to(DType::Float64).same_buffer(f));  // same dtype: no copy
  // narrow floats round to nearest even and overflow to inf
  check_close(lt::make({65504, 65520, 1e-8}, {3}, DType::Float64).to(DType::Float16),
              {65504, INFINITY, 0}, lt::Tol{0, 0});
  check_close(lt::make({1.00390625, 1.01171875}, {2}, DType::Float64).to(DType::BFloat16),
              {1.0, 1.015625}, lt::Tol{0, 0});
  // integer narrowing wraps like torch
  check_equal(lt::make({300, -129}, {2}, DType::Int32).to(DType::Int8), {44, 127});
  check_equal(lt::make({300, -1}, {2}, DType::Int64).to(DType::UInt8), {44, 255});
  CHECK(loom::tensor<int64_t>({(int64_t(1) << 40) + 7}, {1}).to(DType::Int32).item<int64_t>() == 7);
  // strided sources convert in logical order
  check_equal(lt::make({1, 2, 3, 4}, {2, 2}, DType::Float64).t().to(DType::Int32), {1, 3, 2, 4});
}
