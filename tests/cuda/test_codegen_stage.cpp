// Staged row tiles (Variant::stage, LOOM_CUDA_ROW_STAGE, cuda/codegen_stage.cpp) without a GPU:
// which groups the launcher stages, the tile's rows and shared memory, the generated copy and
// reads, and NVRTC compiles for sm_90 with warnings as errors. Groups are planned on the CPU
// device (nothing runs). The knobs are read once: cases that assume the defaults skip
// themselves where a LOOM_CUDA_ROW_STAGE* variable is set.
#include <doctest/doctest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "cuda/codegen.h"
#include "cuda/launch.h"
#include "cuda/nvrtc.h"
#include "fusion/group.h"
#include "fusion/trace.h"
#include "loom.h"

using namespace loom;
namespace lc = loom::cuda;

namespace {

// The one reducing group of the plan that computes `t`.
Group one_group(const Tensor& t) {
  std::vector<Group> gs;
  for (const Group& g : plan_storage(t.storage()))
    if (g.has_reduce()) gs.push_back(g);
  REQUIRE(gs.size() == 1);
  return gs[0];
}

int occurrences(const std::string& s, const std::string& what) {
  int n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

// Ready [rows, cols] data of `dt` (made first: making data syncs).
Tensor ready(const Shape& s, DType dt) {
  manual_seed(3);
  Tensor x = cast(rand(s) * 4.0 - 2.0, dt);
  loom::sync();
  return x;
}

bool default_knobs() {
  for (Knob k : {Knob::CudaRowStage, Knob::CudaRowStageRows, Knob::CudaRowStageBlock})
    if (knob_set(k)) return false;
  return true;
}

Tensor row_op(const std::string& op, const Tensor& x, int64_t cols) {
  const int64_t d = int64_t(x.shape().size()) - 1;
  if (op == "softmax") return softmax(x, d);
  if (op == "log_softmax") return log_softmax(x, d);
  if (op == "layer_norm") {
    Tensor w = ready({cols}, x.dtype()), b = ready({cols}, x.dtype());
    return layer_norm(x, {cols}, w, b);
  }
  Tensor w = ready({cols}, x.dtype());
  return rms_norm(x, {cols}, w, 1e-6);
}

struct StrictWarnings {
  bool old = lc::strict_warnings();
  StrictWarnings() { lc::set_strict_warnings(true); }
  ~StrictWarnings() { lc::set_strict_warnings(old); }
};

}  // namespace

TEST_CASE("codegen: transposed row ops take staged tiles, contiguous rows do not") {
  if (!default_knobs()) return;
  const std::vector<std::string> ops = {"softmax", "log_softmax", "layer_norm", "rms_norm"};
  std::vector<std::string> srcs;
  struct Want {
    DType dt;
    int64_t cols;
    int rows, tpr, vw;  // tile rows, lanes a row (1024-thread blocks, at most a lane per 4
                        // chunks), columns a chunk (16 bytes of the output)
  };
  // Tiles: the most rows of 32-64 bytes a reduced index whose tile leaves two blocks an SM
  // (112 KiB), else for f32 32 bytes' worth in up to 160 KiB, else 16 bytes' worth: f32 4096
  // columns 8 rows (144 KiB, one block an SM), bf16 8 (72 KiB, two); 1000 f32 columns 16 rows
  // (66 KiB); 128 bf16 columns 32 rows; 8192 f32 columns 4 rows (160 KiB).
  for (Want w : {Want{DType::Float32, 4096, 8, 128, 4}, Want{DType::BFloat16, 4096, 8, 128, 8},
                 Want{DType::Float32, 1000, 16, 64, 4}, Want{DType::BFloat16, 128, 32, 4, 8},
                 Want{DType::Float32, 1001, 16, 64, 1}, Want{DType::Float32, 8192, 4, 256, 4}})
    for (const std::string& op : ops) {
      Tensor x = ready({w.cols, 8192}, w.dt);
      Group g = one_group(row_op(op, x.t(), w.cols));
      INFO(op << " " << dtype_name(w.dt) << " " << w.cols);
      lc::Variant v = lc::choose_variant(g, 132);
      CHECK(v.stage == w.rows);
      CHECK(v.rpb == w.rows);
      CHECK(v.tpr == w.tpr);
      CHECK(v.k == 0);
      CHECK(v.vw == w.vw);
      CHECK(v.key().find("_g" + std::to_string(w.rows)) != std::string::npos);
      const int pitch = w.rows + 1, isz = int(itemsize(w.dt));
      CHECK(lc::stage_col_bytes(g, w.rows) == pitch * isz);  // the one staged leaf: x
      lc::LaunchConfig c = lc::launch_config(g, v, 132);
      CHECK(c.smem == unsigned(w.cols * pitch * isz));
      CHECK(c.grid_x == unsigned((8192 + w.rows - 1) / w.rows));
      std::string src = lc::generate(g, v).source;
      INFO(src);
      CHECK(occurrences(src, "%%dynamic_smem_size") == 1);
      CHECK(occurrences(src, "extern __shared__") == 1);
      // Every pass reads chunk ch of its row as one vector of the tile.
      CHECK(occurrences(src, "((U)ch * " + std::to_string(pitch) + "u + grp) * " +
                                 std::to_string(w.vw) + "u)") >= 2);
      CHECK(occurrences(src, "__syncthreads();") >= 2);
      if (w.cols != 1000 && w.cols != 8192) srcs.push_back(src);
    }
  // Not staged: contiguous rows; rows too long for a tile (32768 f32); too few tiles for the
  // SMs; plain reductions of x.t() (column kernels: a thread a kept row, already coalesced).
  Tensor c = ready({4096, 4096}, DType::Float32);
  for (const std::string& op : ops)
    CHECK(lc::choose_variant(one_group(row_op(op, c.clone(), 4096)), 132).stage == 0);
  Tensor l = ready({32768, 1024}, DType::Float32);
  CHECK(lc::choose_variant(one_group(softmax(l.t(), 1)), 132).stage == 0);
  Tensor f = ready({4096, 400}, DType::Float32);  // 50 tiles of 8 rows: fewer than the SMs
  CHECK(lc::choose_variant(one_group(softmax(f.t(), 1)), 132).stage == 0);
  Group s = one_group(sum(c.t(), Dims{1}));
  CHECK(lc::layout_of(s) == lc::Layout::Columns);
  CHECK(lc::choose_variant(s, 132).stage == 0);
  // A contiguous weight and mask stay global loads: only x is staged.
  Tensor m = ready({8192, 4096}, DType::Float32);
  Group mg = one_group(softmax(c.t().slice(0, 0, 4096) * 0.5 + m.slice(0, 0, 4096), 1));
  lc::Variant mv = lc::choose_variant(mg, 132);
  CHECK(mv.stage == 8);
  CHECK(lc::stage_col_bytes(mg, 8) == 9 * 4);
  srcs.push_back(lc::generate(mg, mv).source);
  if (!lc::nvrtc_available()) return;
  StrictWarnings strict;
  for (const std::string& src : srcs) {
    INFO(src);
    CHECK_FALSE(lc::compile(src, "loom_stage", 9, 0).cubin.empty());
  }
}

TEST_CASE("codegen: staged tiles of a 3-D permuted view and of two transposed inputs") {
  if (!default_knobs()) return;
  // [3, 1000, 1501] permuted to [3, 1501, 1000]: two kept dims, the inner one unit-stride.
  Tensor b = ready({3, 1000, 1501}, DType::BFloat16);
  Group g = one_group(layer_norm(b.permute({0, 2, 1}), {1000}));
  lc::Variant v = lc::choose_variant(g, 132);
  CHECK(v.stage == 32);
  std::string src = lc::generate(g, v).source;
  // Two transposed inputs (x.t() + y.t()): both tiled, the wider first.
  Tensor x = ready({1000, 8192}, DType::Float32), y = ready({1000, 8192}, DType::BFloat16);
  Group g2 = one_group(softmax(x.t() + cast(y.t(), DType::Float32), 1));
  lc::Variant v2 = lc::choose_variant(g2, 132);
  CHECK(v2.stage == 16);  // narrowest element bf16: 32 rows (193 KiB) would not leave two blocks
  CHECK(lc::stage_col_bytes(g2, v2.stage) == 17 * 4 + 17 * 2);
  std::string src2 = lc::generate(g2, v2).source;
  CHECK(v2.vw == 4);                                           // 16 bytes of the f32 output
  CHECK(occurrences(src2, "((U)ch * 17u + grp) * 4u)") >= 4);  // both tiles, both passes
  // f64 (16 bytes: 2 columns a chunk, tiles of 2-8 rows) and f16 rows compile too.
  std::vector<std::string> more;
  for (DType dt : {DType::Float64, DType::Float16}) {
    Tensor z = ready({1000, 8192}, dt);
    Group gz = one_group(log_softmax(z.t(), 1));
    lc::Variant vz = lc::choose_variant(gz, 132);
    INFO(dtype_name(dt) << " " << vz.key());
    CHECK(vz.stage == (dt == DType::Float64 ? 8 : 32));
    CHECK(vz.vw == 16 / int(itemsize(dt)));
    more.push_back(lc::generate(gz, vz).source);
  }
  if (!lc::nvrtc_available()) return;
  StrictWarnings strict;
  for (const std::string& s : {src, src2, more[0], more[1]}) {
    INFO(s);
    CHECK_FALSE(lc::compile(s, "loom_stage", 9, 0).cubin.empty());
  }
}
