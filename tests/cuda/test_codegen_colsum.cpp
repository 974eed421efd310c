// Column sums inside CUDA row kernels (cuda/codegen_colsum.cpp), generated on machines without a
// GPU: the groups of a norm's backward (dx with its weight and bias gradients) and of a cross
// entropy (its mean), planned with column sums on; the launcher's pick keeps them in whole-row
// kernels, its grid one wave; every variant compiles with NVRTC for sm_90, warnings as errors.
// Their values are checked on the GPU (tests/cuda/test_gpu_colsum.cpp).
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "../helpers.h"
#include "cuda/codegen.h"
#include "cuda/launch.h"
#include "cuda/nvrtc.h"
#include "fusion/planner.h"
#include "fusion/trace.h"
#include "loom.h"

using namespace loom;
namespace lc = loom::cuda;

namespace {

bool has_sums(const Group& g) {
  return std::any_of(g.outputs.begin(), g.outputs.end(), [](auto& o) { return o.colsum; });
}

// The groups of the plan that computes `ts` that hold column sums (planned, not run).
std::vector<Group> sum_groups(const std::vector<Tensor>& ts) {
  const bool on = column_sums_on();
  set_column_sums(true);
  std::vector<std::shared_ptr<Storage>> roots;
  for (const Tensor& t : ts) roots.push_back(t.storage());
  std::vector<Group> all = plan_storages(roots), gs;
  set_column_sums(on);
  for (const Group& g : all)
    if (has_sums(g)) gs.push_back(g);
  return gs;
}

// A norm's gradients: dx, dw (and db).
std::vector<Tensor> norm_grads(bool layer, const Shape& s, DType t) {
  const int64_t C = s.back();
  Tensor x = lt::random(s, t, 1).requires_grad_(), w = lt::random({C}, t, 2).requires_grad_();
  Tensor b = lt::random({C}, t, 3).requires_grad_(), dy = lt::random(s, t, 4);
  Tensor y = layer ? layer_norm(x, {C}, w, b) : rms_norm(x, {C}, w);
  loom::sync();  // inputs and the forward's statistics in memory: the backward's plan alone
  y.backward(dy);
  std::vector<Tensor> g{x.grad(), w.grad()};
  if (layer) g.push_back(b.grad());
  return g;
}

struct StrictWarnings {
  bool old = lc::strict_warnings();
  StrictWarnings() { lc::set_strict_warnings(true); }
  ~StrictWarnings() { lc::set_strict_warnings(old); }
};

}  // namespace

TEST_CASE("codegen: column sums stay in whole-row kernels and compile for sm_90") {
  std::vector<std::pair<std::string, Group>> groups;
  for (bool layer : {true, false})
    for (DType t : {DType::Float32, DType::BFloat16})
      for (Shape s : {Shape{4096, 4096}, Shape{8, 4096}, Shape{333, 1001}, Shape{2, 50, 512}})
        for (const Group& g : sum_groups(norm_grads(layer, s, t)))
          groups.emplace_back(
              std::string(layer ? "layer_norm " : "rms_norm ") + dtype_name(t) + " " + shape_str(s),
              g);
  {  // a cross entropy's mean: a Row value summed over the rows
    Tensor x = lt::random({300, 1000}, DType::Float32, 5).requires_grad_();
    std::vector<double> tv(300);
    for (size_t i = 0; i < tv.size(); ++i) tv[i] = double((i * 7) % 1000);
    Tensor targets = lt::make(tv, {300}, DType::Int64);
    loom::sync();  // ready logits and targets, as a training step's
    Tensor loss = cross_entropy(x, targets);
    loss.backward();
    for (const Group& g : sum_groups({loss, x.grad()})) groups.emplace_back("cross_entropy", g);
  }
  // Every norm (f32: dgamma and dbeta; bf16 too, before their casts) and the loss.
  REQUIRE(groups.size() >= 17);
  std::vector<std::pair<std::string, std::string>> sources;
  for (auto& [what, g] : groups) {
    CAPTURE(what);
    const lc::Variant v = lc::choose_variant(g, 132);
    CAPTURE(v.key());
    // Whole rows: never split, staged, peeled, sliced or in column pairs ([8, 4096] would split
    // and [333, 1001] bf16 peel without the sums); blocks of 1024 threads, one wave of them.
    CHECK_FALSE(v.split);
    CHECK(v.stage == 0);
    CHECK(v.shift < 0);
    CHECK(v.cs == 1);
    CHECK(v.vec <= 1);
    if (lc::layout_of(g) == lc::Layout::Rows) CHECK(v.block() == 1024);
    const lc::LaunchConfig c = lc::launch_config(g, v, 132);
    CHECK(int64_t(c.grid_x) <= 132 * std::max(1, v.minb));
    std::vector<lc::Variant> vs{v};
    if (lc::layout_of(g) == lc::Layout::Rows) {
      lc::Variant p;  // persistent, 4-column chunks, recomputing from retained vectors
      p.reduce = true, p.tpr = 128, p.rpb = 8, p.k = 2, p.vw = 4, p.remat = 2, p.prefetch = 1;
      vs.push_back(p);
      lc::Variant loop;  // a row walked a pass at a time: each element added in memory
      loop.reduce = true, loop.tpr = 256, loop.rpb = 4;
      vs.push_back(loop);
      loop.rpb = 1;
      vs.push_back(loop);
    }
    // The saved mean and rstd ([rows, 1]) read once a row (LOOM_CUDA_ROW_CONST), so a lane
    // holds x, dy and the weight a column (12 bytes), not their products with rstd too.
    if (what.rfind("layer_norm float32", 0) == 0) {
      CHECK(lc::row_cache_bytes(g, 2, 4) == 12);
      const std::string src = lc::generate(g, v).source;
      CHECK(src.find("const float rl") != std::string::npos);
    }
    for (const lc::Variant& x : vs) {
      const lc::Generated k = lc::generate(g, x);
      REQUIRE(k.entries.size() == 2);
      CHECK(k.entries[1] == "loom_colsum");
      CHECK(k.colsum_cols + k.colsum_ones >= 1);
      CHECK(k.colsum_bytes == 4);
      sources.emplace_back(what + " [" + x.key() + "]", k.source);
    }
    {  // 64-bit indexing (more than 2^31 elements): the same kernels over `long long` indices
      Group g64 = g;
      g64.index64 = true;
      sources.emplace_back(what + " [" + v.key() + " index64]", lc::generate(g64, v).source);
    }
    lc::Variant split = v;
    split.split = true, split.k = 0;
    CHECK_THROWS_WITH_AS(lc::generate(g, split), doctest::Contains("column sums"), Error);
  }
  if (!lc::nvrtc_available()) {
    MESSAGE("NVRTC unavailable, compile skipped: " << lc::nvrtc_unavailable_reason());
    return;
  }
  StrictWarnings strict;
  for (auto& [what, src] : sources) {
    CAPTURE(what);
    CHECK_NOTHROW(lc::compile(src, "loom_colsum_test", 9, 0));
  }
}
