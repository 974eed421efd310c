// The differential fuzzer in the suite (tests/fuzz/): a fixed-seed batch of random programs
// run fused, fusion-off and in float64; every saved regression; the text form; the shrinker.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "fuzz/exec.h"
#include "fuzz/patterns.h"
#include "fuzz/program.h"
#include "fuzz/shrink.h"
#include "helpers.h"

using namespace loom::fuzz;
using loom::DType;
using loom::Shape;

namespace {

constexpr uint64_t kBatchSeed = 20240601;

// LOOM_FUZZ_COUNT overrides the batch size (e.g. 200 for a quick local run).
int batch_size() {
  const char* v = std::getenv("LOOM_FUZZ_COUNT");
  return v ? std::atoi(v) : 16000;
}

// LOOM_FUZZ_SHARD=k/n: only the k-th of n equal slices of the batch (same seeds as the whole
// batch), so that ctest runs the slices on separate cores (tests/CMakeLists.txt).
std::pair<int, int> shard(int n) {
  const char* v = std::getenv("LOOM_FUZZ_SHARD");
  int k = 0, m = 1;
  if (!v || std::sscanf(v, "%d/%d", &k, &m) != 2 || m < 1 || k < 0 || k >= m) return {0, n};
  return {int(int64_t(n) * k / m), int(int64_t(n) * (k + 1) / m)};
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream f(p);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

TEST_CASE("fuzz: a fixed-seed batch of random programs: fused == fusion-off == float64") {
  auto [first, end] = shard(batch_size());
  int n = end - first, bad = 0, f64 = 0;
  for (int i = first; i < end && bad < 3; ++i) {
    if (i % 2000 == 1999) loom::clear_kernel_cache();  // distinct signatures pile up
    Program p = generate(kBatchSeed + uint64_t(i));
    Verdict v = check(p);
    f64 += !has_discontinuous(p);
    if (v.kind == Verdict::Kind::Pass) continue;
    ++bad;
    Program s = v.kind == Verdict::Kind::Mismatch ? shrink(p, same_failure(v.what), 500) : p;
    FAIL_CHECK(report(p, v) << "shrunk (save it under tests/fuzz/regressions/):\n" << to_text(s));
  }
  MESSAGE(n << " programs, " << f64 << " also compared to float64");
  CHECK(bad == 0);
}

// The same programs differentiated: the gradients of their weighted outputs with respect to
// every input, fused against fusion-off and (continuous programs) against float64.
TEST_CASE("fuzz: gradients of random programs: fused == fusion-off == float64") {
  int n =
      std::atoi(std::getenv("LOOM_FUZZ_GRAD_COUNT") ? std::getenv("LOOM_FUZZ_GRAD_COUNT") : "3000");
  RunOptions ro;
  ro.grads = true;
  int bad = 0, valid = 0, f64 = 0;
  for (int i = 0; i < n && bad < 3; ++i) {
    // Two in three without in-place families (most writes go through views, which raise).
    GenOptions go;
    go.inplace = i % 3 == 0;
    Program p = generate(kBatchSeed + 500000 + uint64_t(i), go);
    Verdict v = check(p, ro);
    if (v.kind == Verdict::Kind::Invalid) continue;
    ++valid;
    f64 += !has_discontinuous(p);
    if (v.kind == Verdict::Kind::Pass) continue;
    ++bad;
    Program s = shrink(p, same_failure(v.what, ro), 300);
    FAIL_CHECK(report(p, v) << "shrunk:\n" << to_text(s));
  }
  MESSAGE(n << " programs, " << valid << " differentiated, " << f64 << " also against float64");
  CHECK(valid * 2 >= n);  // the programs without in-place updates differentiate
  CHECK(bad == 0);
}

TEST_CASE("fuzz: every saved regression program passes") {
  std::vector<std::filesystem::path> files;
  for (auto& e : std::filesystem::directory_iterator(LOOM_FUZZ_REGRESSIONS_DIR))
    if (e.path().extension() == ".txt") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  CHECK(!files.empty());
  for (auto& f : files) {
    INFO(f.filename().string());
    Program p = parse(read_file(f));
    REQUIRE(!p.code.empty());
    Verdict v = check(p);
    CHECK_MESSAGE(v.kind == Verdict::Kind::Pass, report(p, v));
  }
}

TEST_CASE("fuzz: programs read back from their text unchanged") {
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    std::string t = to_text(generate(seed));
    Program p = parse(t);
    CHECK(p.seed == seed);
    CHECK(to_text(p) == t);
    CHECK(to_text(generate(seed)) == t);  // deterministic per seed
  }
  Program p =
      parse("%0 = input dtype=f32 shape=2,3 seed=1\n%1 = mul %0 2\n%2 = add 0.5 %1\nout %2");
  REQUIRE(p.code.size() == 3);
  CHECK(p.code[1].args[1].is_int);
  CHECK(!p.code[2].args[0].is_int);
  CHECK(p.code[2].args[0].num == 0.5);
  CHECK_THROWS(parse("%0 = add %x 1"));
}

TEST_CASE("fuzz: many programs read a buffer between two writes of it in one flush") {
  int n = 0, hits = 0;
  for (uint64_t seed = 1; seed <= 300; ++seed, ++n) hits += reads_between_writes(generate(seed));
  MESSAGE(hits << " of " << n << " programs");
  CHECK(hits * 10 >= n);
  CHECK(reads_between_writes(
      parse("%0 = input dtype=f64 shape=2 seed=1\n%1 = mul %0 2\n%2 = permute %0 order=0\n"
            "add_ %2 1\nmul_ %1 %0\nout %0 %1")));
  CHECK(!reads_between_writes(parse(  // a sync point between the read and the write
      "%0 = input dtype=f64 shape=2 seed=1\n%1 = mul %0 2\nsync\nadd_ %0 1\nmul_ %1 %0\n"
      "out %0 %1")));
}

TEST_CASE("fuzz: the comparison flags NaN positions, integer differences and shapes") {
  Program p = parse("%0 = input dtype=f32 shape=3 seed=1\nout %0");
  auto res = [](DType t, std::vector<double> v) {
    RunResult r;
    Shape s{int64_t(v.size())};
    r.outs.push_back(Output{"%0", t, s, std::move(v), 1});
    return r;
  };
  auto kind = [&](const RunResult& f, const RunResult& u, const RunResult& r) {
    return compare(p, f, u, r).kind;
  };
  using K = Verdict::Kind;
  RunResult ref = res(DType::Float64, {1, NAN, 3});
  CHECK(kind(res(DType::Float32, {1, NAN, 3}), res(DType::Float32, {1, NAN, 3}), ref) == K::Pass);
  CHECK(kind(res(DType::Float32, {1, 2, 3}), res(DType::Float32, {1, NAN, 3}), ref) == K::Mismatch);
  CHECK(kind(res(DType::Float32, {1, NAN, 3.0001}), res(DType::Float32, {1, NAN, 3}), ref) ==
        K::Mismatch);
  RunResult iref = res(DType::Int32, {1, 2, 3});
  CHECK(kind(res(DType::Int32, {1, 2, 4}), res(DType::Int32, {1, 2, 3}), iref) == K::Mismatch);
  CHECK(kind(res(DType::Float32, {1, 2}), res(DType::Float32, {1, 2, 3}), ref) == K::Mismatch);
  // Versus float64: 1e-3 relative.
  CHECK(kind(res(DType::Float32, {1, NAN, 3.01}), res(DType::Float32, {1, NAN, 3.01}), ref) ==
        K::Mismatch);
}

TEST_CASE("fuzz: the shrinker reduces an injected wrong op to a short program") {
  RunOptions ro;
  ro.fault = "exp";  // fused exp results are scaled by 1.001
  Program bad;
  Verdict v;
  for (uint64_t seed = 1; seed < 2000; ++seed) {
    Program p = generate(seed);
    if (std::none_of(p.code.begin(), p.code.end(), [](auto& in) { return in.op == "exp"; }))
      continue;
    v = check(p, ro);
    if (v.kind == Verdict::Kind::Mismatch) {
      bad = p;
      break;
    }
  }
  REQUIRE(!bad.code.empty());
  CHECK(check(bad).kind == Verdict::Kind::Pass);  // only the injected fault fails
  ShrinkStats st;
  Program s = shrink(bad, same_failure(v.what, ro), 3000, &st);
  INFO("from " << bad.code.size() << " instructions:\n" << to_text(bad) << "to:\n" << to_text(s));
  CHECK(s.code.size() <= 3);  // an input, exp, and at most one more
  CHECK(s.code.size() < bad.code.size());
  CHECK(std::any_of(s.code.begin(), s.code.end(), [](auto& in) { return in.op == "exp"; }));
  CHECK(check(s, ro).kind == Verdict::Kind::Mismatch);
  CHECK(check(s).kind == Verdict::Kind::Pass);
  CHECK(st.accepted > 0);
}
