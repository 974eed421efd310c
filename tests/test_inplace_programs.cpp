// Every in-place program of up to 4 statements on the CPU (tests/inplace_programs.h).
// LOOM_INPLACE_LEN sets the longest program (default 4); LOOM_INPLACE_SHARD=k/n runs every n-th
// program from the k-th (ctest splits the enumeration over the cores: tests/CMakeLists.txt).
#include "inplace_programs.h"

using loom::DType;
using loom::Tensor;
using namespace lt::inplace;

TEST_CASE("inplace programs: every short program, fused == fusion-off == eager model") {
  int len = env_int("LOOM_INPLACE_LEN", 4);
  // float32 over the full alphabet up to 3 statements and the short one at 4 (or the length
  // asked for); float64 and int32 over the short alphabet up to 3.
  loom::Device cpu = loom::kCPU;
  check_all({{DType::Float32, cpu, true, 1, std::min(len, 3)},
             {DType::Float32, cpu, false, 4, len},
             {DType::Float64, cpu, false, 1, std::min(len, 3)},
             {DType::Int32, cpu, false, 1, std::min(len, 3)}});
}

TEST_CASE("inplace programs: the reported cases") {
  // y = x * 2; x.add_(1); y.mul_(x) and its kin, fused and fusion-off, float32 and float64.
  for (DType dt : {DType::Float32, DType::Float64}) {
    auto run_both = [&](auto body) {
      std::vector<double> r[2];
      for (int fuse = 0; fuse < 2; ++fuse) {
        std::optional<lt::FusionOff> off;
        if (!fuse) off.emplace();
        Tensor x = lt::make({1, 2}, {2}, dt);
        loom::sync();
        r[fuse] = lt::host(body(x));
      }
      CHECK(r[0] == r[1]);
      return r[1];
    };
    CHECK(run_both([](Tensor x) {
            Tensor y = x * 2;
            x.add_(1);
            return y.mul_(x);
          }) == std::vector<double>{4, 12});
    CHECK(run_both([](Tensor x) {
            Tensor y = x * 2;
            x.add_(1);
            return y.add_(x);
          }) == std::vector<double>{4, 7});
    CHECK(run_both([](Tensor x) {
            Tensor y = x + 0;
            x.zero_();
            return y.add_(x);
          }) == std::vector<double>{1, 2});
    // written through x.permute(1, 0).permute(1, 0), a view equal to x itself: a*a/12
    auto r = run_both([](Tensor x) {
      Tensor x2 = x.reshape({1, 2});
      Tensor y = x2 * -0.25;
      x2.permute({1, 0}).permute({1, 0}).div_(-3);
      return y.mul_(x2).reshape({2});
    });
    CHECK(r[0] == doctest::Approx(1 / 12.0));
    CHECK(r[1] == doctest::Approx(4 / 12.0));
  }
}
