// Registers and occupancy of loom's row kernels (softmax, layer_norm without and with f32
// weight and bias, rms_norm; f32 and bf16)
// on an H200-sized GPU, without a GPU: each group is planned on the CPU device, lowered for the
// variant the launcher picks at 132 SMs (the LOOM_CUDA_ROW_* knobs of cuda/launch.cpp apply),
// and compiled by NVRTC for sm_90 with ptxas -v. Per case it prints the variant, registers and
// spill bytes a thread, the blocks an SM that fit (registers, threads, 32 blocks), and the rows
// and input bytes an SM then holds in flight: what a row kernel at the memory wall lives on.
//
// Last, column means (mean over dim 0; the suite's is [65536, 4096] f32) of f32 and bf16.
// LOOM_ROW_REGS_SRC=1 prints each generated source too (to read what a knob changed).
// LOOM_ROW_REGS_OFFSET=d takes the row kernels' input as a view offset by d columns.
// LOOM_ROW_REGS_TRANS=1 takes it as x.t() of a contiguous [cols, 8192] x (staged tiles,
// LOOM_CUDA_ROW_STAGE; the blocks an SM then count the tile's dynamic shared memory too).
//
//   loom_row_regs [cols...]   (default 128 1000 4096 8192 32768)
#include <cstdio>
#include <cstdlib>
#include <regex>
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

int main(int argc, char** argv) {
  if (!lc::nvrtc_available()) {
    std::printf("NVRTC unavailable: %s\n", lc::nvrtc_unavailable_reason().c_str());
    return 1;
  }
  std::vector<int64_t> cols_list;
  for (int i = 1; i < argc; ++i) cols_list.push_back(std::atoll(argv[i]));
  if (cols_list.empty()) cols_list = {128, 1000, 4096, 8192, 32768};
  std::printf("%-24s %-26s %5s %6s %7s %8s %10s\n", "case", "variant", "regs", "spill", "blk/SM",
              "rows/SM", "KB/SM");
  const std::regex regs_re("Used ([0-9]+) registers"), spill_re("([0-9]+) bytes spill stores");
  const char* show = std::getenv("LOOM_ROW_REGS_SRC");
  const bool src = show && std::string(show) == "1";
  const char* offs = std::getenv("LOOM_ROW_REGS_OFFSET");
  const int64_t off = offs ? std::atoll(offs) : 0;
  const char* trs = std::getenv("LOOM_ROW_REGS_TRANS");
  const bool trans = trs && std::string(trs) == "1";
  // layer_norm_wb: with float32 weight and bias (a transformer's norm; under bf16 autocast its
  // input stays float32 and its weights too).
  for (const char* op : {"softmax", "layer_norm", "layer_norm_wb", "rms_norm"})
    for (DType dt : {DType::Float32, DType::BFloat16})
      for (int64_t cols : cols_list) {
        manual_seed(1);
        // LOOM_ROW_REGS_OFFSET=d: the input is a view offset by d columns into rows of cols + 8
        // (peeled rows, realigned by d; LOOM_CUDA_ROW_PEEL), read directly (no copy).
        Tensor x =
            trans ? cast(rand({cols, 8192}), dt) : cast(rand({1024, cols + (off ? 8 : 0)}), dt);
        loom::sync();
        Tensor xc = trans ? x.t() : off ? x.slice(1, off, off + cols) : x.clone();
        std::string o = op;
        Tensor w = rand({cols}) + 0.5, b = rand({cols});
        loom::sync();
        Tensor y = o == "softmax"         ? softmax(xc, 1)
                   : o == "layer_norm"    ? layer_norm(xc, {cols})
                   : o == "layer_norm_wb" ? layer_norm(xc, {cols}, w, b)
                                          : rms_norm(xc, {cols}, std::nullopt, 1e-6);
        std::vector<Group> gs = plan_storage(y.storage());
        if (gs.size() != 1) continue;
        const Group& g = gs[0];
        lc::Variant v = lc::choose_variant(g, 132);
        lc::Generated k = lc::generate(g, v);
        lc::CompileResult r = lc::compile(k.source, "row_regs", 9, 0, {"--ptxas-options=-v"});
        std::smatch m;
        int regs = std::regex_search(r.log, m, regs_re) ? std::stoi(m[1]) : -1;
        int spill = std::regex_search(r.log, m, spill_re) ? std::stoi(m[1]) : 0;
        // Registers are allocated a warp at a time in units of 256 (8 a thread).
        int block = v.block(), per_thread = (std::max(regs, 1) + 7) / 8 * 8;
        int blocks = std::min({32, 2048 / block, 65536 / (per_thread * block)});
        const int64_t smem = lc::launch_config(g, v, 132).smem;
        if (smem > 0) blocks = std::min<int>(blocks, int(228 * 1024 / (smem + 1024)));
        int64_t rows = int64_t(blocks) * v.rpb;
        // Input bytes in flight: a persistent row loads all of itself before its first reduce;
        // a looping one 4 chunks a lane (2 at 1024 threads) a step.
        int64_t isz = int64_t(itemsize(dt));
        int64_t row_bytes = v.k > 0 || v.stage > 0
                                ? cols * isz
                                : std::min<int64_t>(cols * isz, int64_t(v.tpr) * v.vw * isz *
                                                                    (block >= 1024 ? 2 : 4));
        char name[64];
        std::snprintf(name, sizeof name, "%s %s %lld", op, dtype_name(dt), (long long)cols);
        std::printf("%-24s %-26s %5d %6d %7d %8lld %10.1f\n", name, v.key().c_str(), regs, spill,
                    blocks, (long long)rows, double(rows * row_bytes) / 1024.0);
        if (src) std::printf("%s\n", k.source.c_str());
      }
  // Column means (mean over dim 0): a thread a column; registers of each kernel (split: one per
  // pass).
  struct ColCase {
    DType dt;
    int64_t rows, cols;
  };
  for (ColCase c : {ColCase{DType::Float32, 65536, 4096}, ColCase{DType::Float32, 16384, 1000},
                    ColCase{DType::BFloat16, 16384, 4096}, ColCase{DType::BFloat16, 16384, 1000},
                    ColCase{DType::BFloat16, 16384, 1001}}) {
    manual_seed(1);
    Tensor x = cast(rand({c.rows, c.cols}), c.dt);
    loom::sync();
    Tensor y = mean(x.clone(), Dims{0}, false);
    std::vector<Group> gs = plan_storage(y.storage());
    if (gs.size() != 1) continue;
    lc::Variant v = lc::choose_variant(gs[0], 132);
    lc::Generated k = lc::generate(gs[0], v);
    lc::CompileResult r = lc::compile(k.source, "col_regs", 9, 0, {"--ptxas-options=-v"});
    std::string regs;
    for (std::sregex_iterator it(r.log.begin(), r.log.end(), regs_re), end; it != end; ++it)
      regs += (regs.empty() ? "" : ",") + (*it)[1].str();
    char name[64];
    std::snprintf(name, sizeof name, "col mean %s %lldx%lld", dtype_name(c.dt), (long long)c.rows,
                  (long long)c.cols);
    std::printf("%-28s %-30s %5s\n", name, v.key().c_str(), regs.c_str());
    if (src) std::printf("%s\n", k.source.c_str());
  }
  return 0;
}
