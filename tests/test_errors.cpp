// Bad input raises loom::Error at the call (never at a later sync point), naming the op, the
// shapes and the reason; earlier tensors stay valid afterwards.
#include <limits>

#include "helpers.h"

using namespace loom;
using lt::check_close;
using lt::host;

namespace {

ErrorKind kind_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.kind();
  }
  FAIL("no loom::Error was thrown");
  return ErrorKind::Runtime;
}

}  // namespace

TEST_CASE("errors: mismatched broadcast shapes") {
  Tensor a = zeros({2, 3}), b = zeros({4});
  LT_CHECK_ERROR(a + b, "add", "[2, 3]", "[4]", "broadcast");
  LT_CHECK_ERROR(mul(zeros({3, 1, 4}), zeros({5, 2})), "mul", "[3, 1, 4]", "[5, 2]");
  LT_CHECK_ERROR(where(zeros({2}, DType::Bool), a, b), "where", "[2]");
  LT_CHECK_ERROR(a.expand({3, 4}), "expand", "[2, 3]", "[3, 4]");
  LT_CHECK_ERROR(a.expand({3}), "expand", "[2, 3]");
  LT_CHECK_ERROR(Tensor(a).add_(zeros({4, 2, 3})), "add_", "[2, 3]", "[4, 2, 3]");
  LT_CHECK_ERROR(Tensor(a).copy_(zeros({3, 2})), "copy_", "[2, 3]", "[3, 2]");
  LT_CHECK_ERROR(a.index_put({Slice::at(0)}, zeros({2})), "[3]", "[2]");
  CHECK(kind_of([&] { (void)(a + b); }) == ErrorKind::Value);
}

TEST_CASE("errors: dims out of range") {
  // each names the op, the dim, the shape it was checked against and the rank
  Tensor x = zeros({2, 3});
  LT_CHECK_ERROR(sum(x, {2}), "sum", "dim 2", "shape [2, 3]", "rank 2");
  LT_CHECK_ERROR(sum(x, {-3}), "sum", "dim -3", "[2, 3]");
  LT_CHECK_ERROR(sum(x, {0, 0}), "sum", "dim 0", "[2, 3]", "multiple");  // repeated
  LT_CHECK_ERROR(mean(x, {3}), "mean", "dim 3", "[2, 3]");
  LT_CHECK_ERROR(prod(x, {2}), "prod", "dim 2", "[2, 3]");
  LT_CHECK_ERROR(amax(x, {5}), "amax", "dim 5", "[2, 3]");
  LT_CHECK_ERROR(amin(x, {-4}), "amin", "dim -4", "[2, 3]");
  LT_CHECK_ERROR(var(x, {2}), "var", "dim 2", "[2, 3]");
  LT_CHECK_ERROR(logsumexp(x, {2}), "logsumexp", "dim 2", "[2, 3]");
  LT_CHECK_ERROR(norm(x, 2, {2}), "norm", "dim 2", "[2, 3]");
  LT_CHECK_ERROR(all(x, {2}), "all", "dim 2", "[2, 3]");
  LT_CHECK_ERROR(any(x, {2}), "any", "dim 2", "[2, 3]");
  LT_CHECK_ERROR(argmax(x, 2), "argmax", "dim 2", "[2, 3]");
  LT_CHECK_ERROR(argmin(x, -3), "argmin", "dim -3", "[2, 3]");
  LT_CHECK_ERROR(softmax(x, 2), "softmax", "dim 2", "[2, 3]");
  LT_CHECK_ERROR(log_softmax(x, -3), "log_softmax", "dim -3", "[2, 3]");
  LT_CHECK_ERROR(cumsum(x, 4), "cumsum", "dim 4", "[2, 3]", "rank 2");
  LT_CHECK_ERROR(x.transpose(0, 2), "transpose", "dim 2", "[2, 3]");
  LT_CHECK_ERROR(x.unsqueeze(4), "unsqueeze", "dim 4", "[2, 3]", "[-3, 2]");
  LT_CHECK_ERROR(x.squeeze(2), "squeeze", "dim 2", "[2, 3]");
  LT_CHECK_ERROR(x.flatten(0, 3), "flatten", "dim 3", "[2, 3]");
  LT_CHECK_ERROR(zeros({2, 3, 4}).flatten(2, 1), "flatten", "[2, 3, 4]");
  LT_CHECK_ERROR(x.permute({0, 2}), "permute", "dim 2", "[2, 3]");
  LT_CHECK_ERROR(x.permute({0, 0}), "permute", "repeats", "[2, 3]");
  LT_CHECK_ERROR(x.permute({0}), "permute", "[2, 3]");
  LT_CHECK_ERROR(x.select(2, 0), "select", "dim 2", "[2, 3]");
  LT_CHECK_ERROR(x.narrow(-3, 0, 1), "narrow", "dim -3", "[2, 3]");
  LT_CHECK_ERROR(x.slice(2, 0, 1), "slice", "dim 2", "[2, 3]");
  LT_CHECK_ERROR(x.split(1, 2), "split", "dim 2", "[2, 3]");
  LT_CHECK_ERROR(x.chunk(2, 3), "chunk", "dim 3", "[2, 3]");
  LT_CHECK_ERROR(cat({x, x}, 2), "cat", "dim 2", "[2, 3]");
  LT_CHECK_ERROR(stack({x, x}, 4), "stack", "dim 4", "[2, 3]");
  LT_CHECK_ERROR(x.size(2), "size", "dim 2", "[2, 3]");
  LT_CHECK_ERROR(full({}, 1.0).unsqueeze(2), "unsqueeze", "dim 2", "[]");
  CHECK(kind_of([&] { (void)sum(x, {2}); }) == ErrorKind::Index);
}

TEST_CASE("errors: dtypes an op does not take") {
  Tensor f = zeros({2, 2}), i = zeros({2, 2}, DType::Int32), b = zeros({2, 2}, DType::Bool);
  LT_CHECK_ERROR(bitwise_and(f, f), "bitwise_and", "float32", "[2, 2]");
  LT_CHECK_ERROR(f | 1, "bitwise_or", "float32");
  LT_CHECK_ERROR(bitwise_not(f), "bitwise_not", "float32");
  LT_CHECK_ERROR(~zeros({3}, DType::Float64), "bitwise_not", "float64");
  LT_CHECK_ERROR(mean(i), "mean", "int32", "[2, 2]");
  LT_CHECK_ERROR(var(i), "var", "int32");
  LT_CHECK_ERROR(loom::std(i), "std", "int32");
  LT_CHECK_ERROR(norm(i), "norm", "int32");
  LT_CHECK_ERROR(softmax(i, 0), "softmax", "int32");
  LT_CHECK_ERROR(layer_norm(i, {2}), "layer_norm", "int32");
  LT_CHECK_ERROR(rms_norm(i, {2}), "rms_norm", "int32");
  LT_CHECK_ERROR(b - b, "sub", "bool");
  LT_CHECK_ERROR(-b, "neg", "bool");
  LT_CHECK_ERROR(argmax(b), "argmax", "bool");
  LT_CHECK_ERROR(where(f, f, f), "where", "float32", "[2, 2]");
  LT_CHECK_ERROR(rand({2}, DType::Int32), "rand", "int32");
  LT_CHECK_ERROR(randn({2}, DType::Int64), "randn", "int64");
  LT_CHECK_ERROR(Tensor(i).add_(f), "add_", "float32", "int32");
  LT_CHECK_ERROR(Tensor(i).mul_(2.5), "mul_", "float32", "int32");
  LT_CHECK_ERROR(matmul(b, b), "matmul", "bool");
  LT_CHECK_ERROR(cross_entropy(f, zeros({2})), "cross_entropy", "float32");
  CHECK(kind_of([&] { (void)mean(i); }) == ErrorKind::Type);
}

TEST_CASE("errors: negative and overflowing sizes") {
  LT_CHECK_ERROR(zeros({2, -1}), "negative size -1", "[2, -1]");
  LT_CHECK_ERROR(empty({-3}), "empty", "-3");
  LT_CHECK_ERROR(ones({-1}), "-1");
  LT_CHECK_ERROR(full({4, -2}, 1.0), "full", "[4, -2]");
  LT_CHECK_ERROR(rand({-5}), "rand", "-5");
  LT_CHECK_ERROR(randn({2, -5}), "randn", "-5");
  LT_CHECK_ERROR(randint(0, 5, {-5}), "-5");
  LT_CHECK_ERROR(eye(-2), "eye", "-2");
  LT_CHECK_ERROR(linspace(0, 1, -1), "linspace", "-1");
  LT_CHECK_ERROR(tensor<float>({1, 2, 3}, {-1, -3}), "tensor", "-1");
  int64_t big = int64_t(1) << 40;
  LT_CHECK_ERROR(zeros({big, big}), "zeros", "int64");
  LT_CHECK_ERROR(empty({std::numeric_limits<int64_t>::max(), 2}), "empty", "int64");
  LT_CHECK_ERROR(rand({big, big, big}), "rand", "int64");
  LT_CHECK_ERROR(zeros({3}).reshape({-1, -1}), "reshape", "-1");
  LT_CHECK_ERROR(zeros({3}).reshape({-2, 3}), "reshape", "-2");
  LT_CHECK_ERROR(zeros({6}).expand({-1, 6}), "expand");
}

TEST_CASE("errors: out-of-range select, narrow, index and slice") {
  Tensor x = zeros({3, 4});
  LT_CHECK_ERROR(x.select(0, 3), "select", "index 3", "size 3", "[3, 4]");
  LT_CHECK_ERROR(x.select(1, -5), "select", "index -5", "[3, 4]");
  LT_CHECK_ERROR(x[7], "select", "index 7");
  LT_CHECK_ERROR(x.narrow(1, 2, 3), "narrow", "start 2", "length 3", "size 4");
  LT_CHECK_ERROR(x.narrow(0, -4, 1), "narrow", "size 3");
  LT_CHECK_ERROR(x.narrow(0, 0, -1), "narrow", "length -1");
  LT_CHECK_ERROR(x.index({Slice::at(0), Slice::at(0), Slice::at(0)}), "index", "[3, 4]");
  LT_CHECK_ERROR(x.index({Slice::ellipsis(), Slice::ellipsis()}), "index", "ellipsis");
  LT_CHECK_ERROR(x.index({Slice::at(1), Slice::at(4)}), "select", "index 4");
  LT_CHECK_ERROR(x.slice(0, 0, 2, 0), "slice", "step");
  LT_CHECK_ERROR(x.slice(0, 0, 2, -1), "slice", "step");
  LT_CHECK_ERROR(full({}, 1.0).select(0, 0), "select", "0-dim");
  LT_CHECK_ERROR(x.split(0), "split", "0", "[3, 4]");
  LT_CHECK_ERROR(x.chunk(0), "chunk", "0", "[3, 4]");
  LT_CHECK_ERROR(x.narrow(1, 3, 2), "narrow", "start 3", "[3, 4]");
  LT_CHECK_ERROR(x.slice(1, 0, 2, 0), "slice", "step", "[3, 4]");
  LT_CHECK_ERROR(x.index({Slice::ellipsis(), Slice::ellipsis()}), "index", "[3, 4]");
  LT_CHECK_ERROR(x.index({Slice::at(0), Slice::at(-5)}), "select", "index -5", "[4]");
  CHECK(kind_of([&] { (void)x.select(0, 3); }) == ErrorKind::Index);
}

TEST_CASE("errors: view incompatibility and bad reshapes") {
  Tensor x = zeros({4, 6});
  LT_CHECK_ERROR(x.t().view({24}), "view", "[24]", "[6, 4]");
  LT_CHECK_ERROR(x.view({7}), "view", "[7]", "[4, 6]");
  LT_CHECK_ERROR(x.reshape({5, -1}), "reshape", "[5, -1]", "[4, 6]");
  LT_CHECK_ERROR(x.reshape({25}), "reshape", "[25]", "[4, 6]");
  LT_CHECK_ERROR(x.reshape({-1, -1}), "reshape", "[-1, -1]", "[4, 6]");
  LT_CHECK_ERROR(x.view({-3, 8}), "view", "-3", "[4, 6]");
  LT_CHECK_ERROR(x.expand({-1, 4, 6}), "expand", "[4, 6]", "[-1, 4, 6]");
  LT_CHECK_ERROR(x.t().t().t().view({2, 12}), "view", "[2, 12]");
  CHECK(zeros({3, 3}).t().flatten(0, 1).view({9}).shape() == Shape{9});  // flatten copied
}

TEST_CASE("errors: item on a tensor of more than one element") {
  LT_CHECK_ERROR(zeros({2, 3}).item<float>(), "item", "6", "[2, 3]");
  LT_CHECK_ERROR(zeros({0}).item<float>(), "item", "0", "[0]");
  CHECK(zeros({1, 1}).item<float>() == 0.0f);
}

TEST_CASE("errors: matmul, cat, stack and composite shape checks") {
  LT_CHECK_ERROR(matmul(zeros({2, 3}), zeros({4, 5})), "matmul", "[2, 3]", "[4, 5]");
  LT_CHECK_ERROR(matmul(zeros({3}), zeros({4})), "matmul", "[3]", "[4]");
  LT_CHECK_ERROR(cat({zeros({2, 3}), zeros({2, 4})}, 0), "cat", "[2, 3]", "[2, 4]");
  LT_CHECK_ERROR(cat({zeros({2, 3}), zeros({3})}, 0), "cat", "[2, 3]", "[3]");
  LT_CHECK_ERROR(cat({}, 0), "cat", "empty");
  LT_CHECK_ERROR(cat({full({}, 1.0)}, 0), "cat", "zero-dim", "[]");
  LT_CHECK_ERROR(cat({zeros({2}), full({}, 1.0)}, 0), "cat", "zero-dim", "tensor 1", "[]");
  LT_CHECK_ERROR(matmul(zeros({2, 3}), zeros({3, 2}, DType::Float64)), "matmul", "float32",
                 "[2, 3]", "float64", "[3, 2]");
  LT_CHECK_ERROR(bmm(zeros({2, 3, 4}), zeros({3, 4, 5})), "bmm", "[2, 3, 4]", "[3, 4, 5]");
  LT_CHECK_ERROR(stack({zeros({2}), zeros({3})}), "stack", "[2]", "[3]");
  Tensor x = zeros({4, 6});
  LT_CHECK_ERROR(layer_norm(x, {5}), "layer_norm", "[5]", "[4, 6]");
  LT_CHECK_ERROR(layer_norm(x, {4, 6, 1}), "layer_norm", "[4, 6, 1]");
  LT_CHECK_ERROR(layer_norm(x, {}), "layer_norm", "[4, 6]");
  LT_CHECK_ERROR(layer_norm(x, {6}, zeros({5})), "layer_norm", "weight", "[5]", "[6]");
  LT_CHECK_ERROR(layer_norm(x, {6}, std::nullopt, zeros({2, 3})), "layer_norm", "bias", "[2, 3]");
  LT_CHECK_ERROR(rms_norm(x, {4}), "rms_norm", "[4]", "[4, 6]");
  LT_CHECK_ERROR(rms_norm(x, {6}, zeros({7})), "rms_norm", "weight", "[7]");
  // (an out-of-range target class raises at the next sync point: test_deferred_checks.cpp)
  LT_CHECK_ERROR(cross_entropy(zeros({4, 10}), zeros({3}, DType::Int64)), "cross_entropy",
                 "[4, 10]", "[3]");
  LT_CHECK_ERROR(cross_entropy(zeros({10}), zeros({1}, DType::Int64)), "cross_entropy", "[10]");
}

TEST_CASE("errors: integers to negative integer scalar powers") {
  // torch: "Integers to negative integer powers are not allowed", raised at the call
  Tensor i = lt::random({2, 3}, DType::Int32, 190, 1, 9);
  LT_CHECK_ERROR(pow(i, -2), "pow", "negative integer powers", "int32", "[2, 3]", "-2");
  LT_CHECK_ERROR(pow(zeros({4}, DType::Int64), -1), "pow", "int64", "[4]");
  LT_CHECK_ERROR(pow(zeros({4}, DType::Bool), -1), "pow", "bool", "[4]");
  CHECK(kind_of([&] { (void)pow(i, -1); }) == ErrorKind::Value);
  // not errors: a float exponent or a float base promotes; 0 and positive powers are fine
  lt::check_close(pow(i, -2.0), lt::ref_unary(host(i), [](double v) { return std::pow(v, -2); }));
  lt::check_close(pow(cast(i, DType::Float32), -2),
                  lt::ref_unary(host(i), [](double v) { return std::pow(v, -2); }));
  lt::check_equal(pow(i, 0), std::vector<double>(6, 1));
  lt::check_equal(pow(i, 2), lt::ref_unary(host(i), [](double v) { return v * v; }));
}

TEST_CASE("errors: other argument checks") {
  Tensor x = zeros({4});
  LT_CHECK_ERROR(dropout(x, 1.5), "dropout", "1.5");
  LT_CHECK_ERROR(dropout(x, -0.1), "dropout", "-0.1");
  LT_CHECK_ERROR(arange(0, 10, 0), "arange", "step");
  LT_CHECK_ERROR(randint(5, 5, {3}), "randint", "5");
  LT_CHECK_ERROR(clamp(x, std::optional<Scalar>(), std::optional<Scalar>()), "clamp");
  LT_CHECK_ERROR(gelu(x, "fast"), "gelu", "fast");
  LT_CHECK_ERROR(tensor<float>({1, 2, 3}, {2, 2}), "tensor", "3", "[2, 2]");
  LT_CHECK_ERROR(Tensor(x).clamp_(std::nullopt, std::nullopt), "clamp");
  Tensor e = zeros({3, 0});
  LT_CHECK_ERROR(norm(e, std::numeric_limits<double>::infinity(), {1}), "norm", "zero-size",
                 "[3, 0]");
  LT_CHECK_ERROR(norm(e, -std::numeric_limits<double>::infinity()), "norm", "zero-size", "[3, 0]");
  CHECK(norm(e, 2, {1}).to_vector<double>() == std::vector<double>{0, 0, 0});  // sums have one
}

TEST_CASE("errors: earlier tensors stay valid and the trace keeps working") {
  Tensor x = lt::random({8, 16}, DType::Float32, 181);
  Tensor pending = (x * 2.0).exp();  // recorded, not yet run
  Tensor ready = x + 1.0;
  ready.to_vector<float>();
  Tensor y = pending.clone();
  y.add_(1.0);  // an in-place update pending too
  auto try_all = [&] {
    try {
      (void)(x + zeros({3}));
    } catch (const Error&) {
    }
    try {
      (void)x.view({7});
    } catch (const Error&) {
    }
    try {
      (void)matmul(x, x);
    } catch (const Error&) {
    }
    try {
      Tensor(y).add_(zeros({3, 8, 16}));
    } catch (const Error&) {
    }
    bool deferred = false;  // raised at the next sync point (fusion/checks.h), which runs the rest
    try {
      (void)cross_entropy(x, lt::make({100, 0, 0, 0, 0, 0, 0, 0}, {8}, DType::Int64));
      loom::sync();
    } catch (const Error&) {
      deferred = true;
    }
    CHECK(deferred);
  };
  try_all();
  CHECK(pending.shape() == Shape{8, 16});
  auto vx = host(x);
  check_close(pending, lt::ref_unary(vx, [](double v) { return std::exp(2 * v); }));
  check_close(y, lt::ref_unary(vx, [](double v) { return std::exp(2 * v) + 1; }));
  check_close(ready, lt::ref_unary(vx, [](double v) { return v + 1; }));
  // and new work after the errors runs normally
  try_all();
  check_close(softmax(x, 1).sum({1}), std::vector<double>(8, 1.0));
}

TEST_CASE("errors: in-place writes torch refuses") {
  Tensor c = lt::make({1, 2}, {2, 1});
  LT_CHECK_ERROR(c.expand({2, 3}).add_(1), "add_", "[2, 3]", "single memory location");
  LT_CHECK_ERROR(c.expand({2, 3}).fill_(0), "fill_", "[2, 3]");
  LT_CHECK_ERROR(c.expand({4, 2, 1}).copy_(zeros({4, 2, 1})), "copy_", "[4, 2, 1]");
  LT_CHECK_ERROR(c.t().expand({5, 2}).mul_(2), "mul_", "[5, 2]");
  LT_CHECK_ERROR(c.expand({2, 3}).index_put({Slice::at(0)}, 1.0), "fill_", "[3]");
  LT_CHECK_ERROR(zeros({3}, DType::Int32).clamp_(0.5, 3.5), "clamp_", "float32", "int32");
  LT_CHECK_ERROR(zeros({3}, DType::Int64).div_(2), "div_", "float32", "int64");
  lt::check_equal(c, {1, 2});  // nothing was written
  // size-1 dims may have any stride; copy_ converts down a category
  c.expand({2, 1}).add_(1);
  c.unsqueeze(0).mul_(2);
  lt::check_equal(c, {4, 6});
  Tensor i = zeros({2}, DType::Int32);
  i.copy_(lt::make({1.9, -1.9}, {2}));
  lt::check_equal(i, {1, -1});
}
