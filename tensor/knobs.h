#pragma once
// Every LOOM_* environment variable the library reads: one row each, and the only place a knob's
// name, type, default and meaning are written. Code reads a knob through the accessors below,
// never the environment by name (tests/test_knobs.cpp fails on a read elsewhere and on a
// README.md whose knob table differs from this one).
//
// Rows: X(Id, "LOOM_NAME", Type, "default", Read, "what it does")
//   Type     Flag: "0", "false" and "off" are false, any other text true (tensor/env.h).
//            Int:  a whole number as std::atoll reads it (its leading digits; 0 where none);
//                  a row's text says its range where values outside it are clamped.
//            Str:  the text.
//   default  what an unset or empty variable means, as the text one would set; a flag's
//            "avx512" is 1 where the library is built with AVX-512, else 0.
//   Read     Once:   at its first use; later changes to the environment are not seen.
//            Each:   at every use (setenv between two uses takes effect).
//            Device: when each CUDA device is set up.
#include <cstdint>
#include <string>
#include <vector>

// clang-format off
#define LOOM_KNOBS(X)                                                                              \
  /* fusion, tracing and the caches (fusion/) */                                                   \
  X(Fusion, "LOOM_FUSION", Flag, "1", Once,                                                        \
    "0: fusion off, one kernel per primitive (the oracle the tests compare against); "             \
    "loom::set_fusion() changes it later")                                                         \
  X(Log, "LOOM_LOG", Str, "", Each,                                                                \
    "words naming what to print to stderr: fusion (each flush's groups, signatures, cache hits "   \
    "and compile times; taken at the first flush, loom::set_log_fusion() changes it later), "      \
    "cache (disk cache failures)")                                                                 \
  X(MaxTrace, "LOOM_MAX_TRACE", Int, "4096", Once,                                                 \
    "ops a stream's trace records before it flushes")                                              \
  X(MaxPendingBytes, "LOOM_MAX_PENDING_BYTES", Int, "0", Once,                                     \
    "bytes of inputs a stream's pending work may hold before it flushes; 0 or less: a quarter "    \
    "of the device's memory")                                                                      \
  X(MaxGroupNodes, "LOOM_MAX_GROUP_NODES", Int, "128", Once,                                       \
    "ops a kernel at most (loads and scalar operands not counted); below 1: the default")          \
  X(Recompute, "LOOM_RECOMPUTE", Flag, "1", Once,                                                  \
    "0: a reduction group writes every value a later group reads, also where that group could "   \
    "compute it again from fewer bytes (attention's probabilities, a norm's xhat)")                \
  X(ColumnSums, "LOOM_COLUMN_SUMS", Flag, "1", Once,                                               \
    "0: a sum over the rows of a row kernel's values (a norm's weight and bias gradients) runs "   \
    "as a column reduction of its own, which reads its inputs again")                              \
  X(PlanCache, "LOOM_PLAN_CACHE", Flag, "1", Once,                                                 \
    "0: every flush is planned afresh (no reuse of an earlier flush's groups)")                    \
  X(Segments, "LOOM_SEGMENTS", Flag, "1", Once,                                                   \
    "0: no horizontal fusion (consecutive groups of one signature over disjoint memory, an "       \
    "optimizer's per-parameter updates, one kernel each; the CPU's); set_segments() changes it")   \
  X(KernelCacheMax, "LOOM_KERNEL_CACHE_MAX", Int, "4096", Once,                                    \
    "compiled kernels kept in memory, least recently used out first (at least 1); "                \
    "loom::set_kernel_cache_limit() changes it later")                                             \
  X(DumpKernels, "LOOM_DUMP_KERNELS", Str, "", Once,                                               \
    "a directory: every lowered kernel's source (CUDA C++, the CPU tile program) is written "      \
    "there, named by a hash of its text (scripts/dump_kernels.sh)")                                \
  /* the CPU backend (cpu/) */                                                                     \
  X(CpuBlas, "LOOM_CPU_BLAS", Str, "auto", Once,                                                   \
    "the float matmuls' BLAS: auto (Intel MKL where it loads, else OpenBLAS), mkl (an error "      \
    "where it does not load) or openblas")                                                         \
  X(Mkl, "LOOM_MKL", Str, "", Once,                                                                \
    "where MKL's libmkl_rt is: the file or its folder; empty: the loader's path, "                 \
    "$VIRTUAL_ENV/lib, $CONDA_PREFIX/lib, /usr/local/lib, ~/.local/lib")                           \
  X(CpuCacheBytes, "LOOM_CPU_CACHE_BYTES", Int, "1073741824", Once,                                \
    "freed host memory kept resident for reuse (bytes); past it free ranges go back to the system")\
  X(CpuPrefetch, "LOOM_CPU_PREFETCH", Int, "1", Once,                                              \
    "software prefetch of the next tile of short rows between a tile's instructions: 0 none, "     \
    "1 into L1 (prefetcht0), 2 into L2 (prefetcht1)")                                              \
  X(CpuVmath, "LOOM_CPU_VMATH", Flag, "avx512", Once,                                              \
    "float32 exp, tanh and sigmoid by loom's own vector kernels (cpu/vmath.h) instead of "         \
    "Eigen's; without them the tile program folds none of these into other ops")                   \
  X(CpuPipe, "LOOM_CPU_PIPE", Flag, "1", Once,                                                     \
    "AVX-512 builds: the loops of a pair with a folded exp/tanh/sigmoid run software-pipelined")   \
  X(CpuPfAhead, "LOOM_CPU_PF_AHEAD", Int, "2048", Once,                                            \
    "AVX-512 builds: floats ahead the pipelined loops prefetch their operands; 0 or less: none")   \
  X(CpuStreamDirect, "LOOM_CPU_STREAM_DIRECT", Flag, "1", Once,                                    \
    "an output too large for the caches is written by its own instruction with non-temporal "      \
    "stores (0: computed into a register and copied out)")                                         \
  X(CpuUnaryFold, "LOOM_CPU_UNARY_FOLD", Flag, "1", Once,                                          \
    "an exp/tanh/sigmoid only one op reads is computed in that op's loop (needs "                  \
    "LOOM_CPU_VMATH)")                                                                             \
  X(CpuTailFold, "LOOM_CPU_TAIL_FOLD", Flag, "1", Once,                                            \
    "an add/sub/mul (and relu) of a folded exp/tanh/sigmoid's result is applied in its loop")      \
  X(CpuPreFold, "LOOM_CPU_PRE_FOLD", Flag, "1", Once,                                              \
    "up to three add/sub/mul of a folded function's operand by a constant (tanh(x * 1.5 + 0.5)) "  \
    "are applied in its loop")                                                                     \
  X(CpuCols, "LOOM_CPU_COLS", Flag, "1", Once,                                                     \
    "a reduction whose data is contiguous along the kept dims (a column sum) runs in the column "  \
    "layout: blocks of kept rows read one column at a time, each row's accumulator a lane")        \
  X(CpuRowLoads, "LOOM_CPU_ROW_LOADS", Flag, "1", Once,                                           \
    "a load the same along the reduced dims (a saved mean or rstd read over the row) is read "    \
    "once a row, as a row value, rather than spread over the tile")                               \
  X(CpuPairs, "LOOM_CPU_PAIRS", Flag, "1", Once,                                                   \
    "a float add/sub/mul only one add/sub/mul reads is folded into it (x * 1.5 + 0.5: one pass)")  \
  X(CpuMatmulEpilogue, "LOOM_CPU_MATMUL_EPILOGUE", Flag, "1", Each,                                \
    "a matmul's pointwise consumers (bias, activation, residual, cast) run as its epilogue, on "   \
    "each block of rows of the result while it is in cache (0: a kernel of their own)")           \
  X(CpuEpilogueSplit, "LOOM_CPU_EPILOGUE_SPLIT", Str, "auto", Each,                                \
    "how a matmul with an epilogue is run: rows (blocks of rows over oneTBB, one-thread GEMMs), "   \
    "after (the whole GEMM on BLAS's threads, then the epilogue), auto (chosen by the shape)")     \
  /* the CUDA backend (cuda/) */                                                                   \
  X(DisableCuda, "LOOM_DISABLE_CUDA", Flag, "0", Once,                                             \
    "1: CUDA is reported unavailable without opening the driver")                                  \
  X(CudaCallTimes, "LOOM_CUDA_CALL_TIMES", Flag, "0", Once,                                        \
    "1: calls of and time in the hot driver entry points (launches, allocations, syncs), "         \
    "printed to stderr at exit")                                                                   \
  X(CudaPeer, "LOOM_CUDA_PEER", Flag, "1", Once,                                                   \
    "0: copies between GPUs go through host memory even where the GPUs can reach each other")      \
  X(CudaBlockCache, "LOOM_CUDA_BLOCK_CACHE", Int, "2147483648", Device,                            \
    "bytes of freed device blocks a device keeps for reuse (blocks up to 1/16 of it; all go "      \
    "back when an allocation runs out); 0: every block goes back to the driver's pool")            \
  X(CudaLaunchMemo, "LOOM_CUDA_LAUNCH_MEMO", Flag, "1", Once,                                      \
    "0: every launch chooses its variant and grid afresh (no per-kernel memo)")                    \
  X(CudaRowGather, "LOOM_CUDA_ROW_GATHER", Flag, "1", Once,                                        \
    "0: a gather of one element a row (cross entropy's target logit) runs as its own kernel "      \
    "rather than inside the row kernel of the reduction that loads the same tensor")               \
  X(CudaGemmCopy, "LOOM_CUDA_GEMM_COPY", Flag, "1", Once,                                          \
    "0: a batched matmul whose operand's batch dims do not collapse into one stride loops a "      \
    "cuBLASLt launch per leftover batch index instead of copying that operand contiguous")         \
  X(DisableCublas, "LOOM_DISABLE_CUBLAS", Flag, "0", Device,                                       \
    "1: matmul by loom's generated kernel, not cuBLASLt")                                          \
  X(NvrtcPath, "LOOM_NVRTC_PATH", Str, "", Once,                                                   \
    "a libnvrtc to open before the loader's search path and the toolkit found at build time")      \
  X(NvrtcWarmup, "LOOM_NVRTC_WARMUP", Flag, "0", Device,                                           \
    "1: the first device set up starts NVRTC (a compile) on another thread; a process exiting "    \
    "while it runs can crash in NVRTC")                                                            \
  X(CudaCompileThreads, "LOOM_CUDA_COMPILE_THREADS", Int, "0", Once,                              \
    "threads compiling a flush's new kernels with NVRTC together before its first launch; 0: "   \
    "one a core; 1: each kernel compiled when the flush first reaches it")                         \
  X(StrictWarnings, "LOOM_STRICT_WARNINGS", Flag, "0", Once,                                       \
    "1: any warning in an NVRTC compile log is an error; set_strict_warnings() changes it later")  \
  X(CacheDir, "LOOM_CACHE_DIR", Str, "", Each,                                                     \
    "the on-disk kernel cache's directory; unset: $XDG_CACHE_HOME/loom, else "                     \
    "$HOME/.cache/loom")                                                                           \
  X(DiskCache, "LOOM_DISK_CACHE", Flag, "1", Each, "0: no on-disk kernel cache")                   \
  /* CUDA kernel tuning, for A/B runs on a GPU (cuda/launch_rows.cpp and the row kernels' */      \
  /* generator, cuda/codegen_rows.cpp, say why each default is what it is) */                      \
  X(CudaPwUnroll, "LOOM_CUDA_PW_UNROLL", Str, "auto", Once,                                        \
    "pointwise vector loops: vectors a thread an iteration, 1, 2 or 4; auto: 4, 2 or 1 for 1, 2 "  \
    "or more arrays read as vectors, 1 when the lanes roll")                                       \
  X(CudaPwGrid, "LOOM_CUDA_PW_GRID", Str, "full", Once,                                            \
    "pointwise vector loops: full (a block per 256 x unroll vectors, the grid covers the tensor) " \
    "or stride (at most 8 blocks an SM in a grid-stride loop)")                                    \
  X(CudaPwRoll, "LOOM_CUDA_PW_ROLL", Str, "auto", Once,                                            \
    "the lane loop of a pointwise vector kernel: 0 unrolled, 1 rolled; auto: rolled when the "     \
    "body is big (compile time)")                                                                  \
  X(CudaRowTpr, "LOOM_CUDA_ROW_TPR", Int, "0", Once,                                               \
    "threads a row for every row variant (1 to 1024, to a power of two); 0: chosen per row")       \
  X(CudaRowRpb, "LOOM_CUDA_ROW_RPB", Int, "0", Once,                                               \
    "rows a block (0 to 1024); 0: 256 / threads a row, at least 1")                                \
  X(CudaRowChunks, "LOOM_CUDA_ROW_CHUNKS", Int, "4", Once,                                         \
    "target 16-byte chunks a lane of a vector row (1 to 16, to a power of two)")                   \
  X(CudaRowMinb, "LOOM_CUDA_ROW_MINB", Int, "-1", Once,                                            \
    "min blocks an SM in the launch bounds of persistent rows (0 to 32; 0 none); unset (-1): "     \
    "chosen per kernel")                                                                           \
  X(CudaRowRemat, "LOOM_CUDA_ROW_REMAT", Int, "-1", Once,                                          \
    "what a later pass of a row recomputes (0 to 2): 0 nothing (every value it reads cached), 1 "  \
    "casts and add/sub/mul from the held input vectors, 2 exp too; unset (-1): 2 for rows of "     \
    "4-byte and wider types, else 1 (LOOM_CUDA_ROW_PEEL_REMAT for peeled rows with an exp)")       \
  X(CudaRowGrid, "LOOM_CUDA_ROW_GRID", Str, "auto", Once,                                          \
    "grid of (not split) row and column kernels: rows (a block a row group) or stride (at most "   \
    "2 waves in a grid-stride loop); auto: rows for row kernels, stride for a thread a row")       \
  X(CudaRowSync, "LOOM_CUDA_ROW_SYNC", Int, "2", Once,                                             \
    "block-wide combines (over 32 threads a row, not split; 1 to 2): 2 a barrier after the "       \
    "writes and after the reads, 1 parity-buffered slots and none after the reads")                \
  X(CudaRowPrefetch, "LOOM_CUDA_ROW_PREFETCH", Int, "-1", Once,                                    \
    "persistent rows holding their inputs load the block's next row early (0 to 2): 0 no, 1 into " \
    "the same registers once the last pass read them, 2 into a second set at the top of the "      \
    "row; unset (-1): 1 on rows of 4-byte types, 0 on narrow ones")                                \
  X(CudaRowFastexp, "LOOM_CUDA_ROW_FASTEXP", Int, "-1", Once,                                      \
    "float32 exp in row kernels as ex2.approx of x log2 e (0 to 1); unset (-1): on where every "   \
    "output is narrow (bf16, f16)")                                                                \
  X(CudaRowPeel, "LOOM_CUDA_ROW_PEEL", Int, "2", Once,                                             \
    "narrow rows whose chunks cannot all be 16-byte vectors (0 to 2): 0 element loads, 1 chunks "  \
    "on the 16-byte grid with the partial first and last element by element, 2 also inputs "       \
    "offset from that grid, realigned in registers")                                               \
  X(CudaRowPeelRemat, "LOOM_CUDA_ROW_PEEL_REMAT", Int, "2", Once,                                  \
    "LOOM_CUDA_ROW_REMAT of peeled narrow rows with an exp (1 to 2)")                              \
  X(CudaRowStage, "LOOM_CUDA_ROW_STAGE", Int, "1", Once,                                           \
    "1: row groups read strided along the reduced dim (softmax over the last dim of x.t()) are "   \
    "staged through shared memory with coalesced loads; 0 no (0 to 1)")                            \
  X(CudaRowStageRows, "LOOM_CUDA_ROW_STAGE_ROWS", Int, "0", Once,                                  \
    "rows of a staged tile (1 to 128, to a power of two); 0: chosen per kernel")                   \
  X(CudaRowStageBlock, "LOOM_CUDA_ROW_STAGE_BLOCK", Int, "1024", Once,                             \
    "threads a staged block (64 to 1024, to a power of two)")                                      \
  X(CudaRowPtx, "LOOM_CUDA_ROW_PTX", Flag, "1", Once,                                              \
    "row kernels use sm_80+ PTX where it saves instructions (NaN-propagating max/min, packed "     \
    "f32 to bf16/f16 stores); 0: the portable helpers")                                            \
  X(CudaRowNarrow, "LOOM_CUDA_ROW_NARROW", Flag, "1", Once,                                        \
    "unit-stride bf16 row elements are held as 32-bit words (0: 16-bit vectors)")                  \
  X(CudaRowConst, "LOOM_CUDA_ROW_CONST", Flag, "1", Once,                                          \
    "a leaf with one value a row (a norm's saved mean or rstd) is read once a row, not held a "    \
    "column (0: loaded every element, cached where a later pass reads it)")                        \
  X(CudaColUnroll, "LOOM_CUDA_COL_UNROLL", Int, "0", Once,                                         \
    "column reductions: rows a thread loads a step (1 to 16, to a power of two); 0: 8 where a "    \
    "thread walks at least 256 rows, else 1")                                                      \
  X(CudaColCombine, "LOOM_CUDA_COL_COMBINE", Int, "8", Once,                                       \
    "split column reductions: partials the last block's threads load at once (0 to 32); 0: a "     \
    "loop over row-major partials")                                                                \
  X(CudaColPairs, "LOOM_CUDA_COL_PAIRS", Int, "1", Once,                                           \
    "column reductions of 2-byte columns: 1 two adjacent columns a thread (one 4-byte load), 0 "   \
    "one (0 to 1)")                                                                                \
  X(CudaColBlock, "LOOM_CUDA_COL_BLOCK", Int, "256", Once,                                         \
    "threads a column block with slices (256 to 1024, to a power of two)")                         \
  X(CudaColSlices, "LOOM_CUDA_COL_SLICES", Int, "4", Once,                                         \
    "column reductions: slices of interleaved rows a block walks its columns in (1 to 32, to a "   \
    "power of two; at most the block / 32)")                                                       \
  X(CudaColsumBlock, "LOOM_CUDA_COLSUM_BLOCK", Int, "1024", Once,                                   \
    "threads a block of a row kernel with column sums (256 to 1024, to a power of two); fewer, "   \
    "bigger blocks leave fewer partial rows")
// clang-format on

namespace loom {

enum class KnobType : uint8_t { Flag, Int, Str };
enum class KnobRead : uint8_t { Once, Each, Device };

enum class Knob : uint16_t {
#define LOOM_X(id, ...) id,
  LOOM_KNOBS(LOOM_X)
#undef LOOM_X
};

struct KnobInfo {
  const char* name;  // "LOOM_FUSION"
  KnobType type;
  const char* dflt;  // the default as text
  KnobRead read;
  const char* doc;
};

inline constexpr KnobInfo kKnobs[] = {
#define LOOM_X(id, name, type, dflt, read, doc) {name, KnobType::type, dflt, KnobRead::read, doc},
    LOOM_KNOBS(LOOM_X)
#undef LOOM_X
};
inline constexpr int kNumKnobs = int(sizeof kKnobs / sizeof kKnobs[0]);

constexpr const KnobInfo& knob_info(Knob k) { return kKnobs[int(k)]; }

// A knob of type T, checked when compiled: knob_flag(Knob::CudaRowTpr) does not build.
template <KnobType T>
struct KnobOf {
  Knob k;
  consteval KnobOf(Knob id) : k(id) {
    if (knob_info(id).type != T) throw "this knob is of another type";
  }
};

// The knob's value: the environment's text under the knob's type, or its default where the
// variable is unset or empty; a Once knob's text is read at its first use and kept.
bool knob_flag(KnobOf<KnobType::Flag> k);
long long knob_int(KnobOf<KnobType::Int> k);
std::string knob_str(KnobOf<KnobType::Str> k);
// Whether the environment sets the knob (not unset, not empty), under the same reading.
bool knob_set(Knob k);
// An Int knob's default as a number (for code that maps values out of range to it).
long long knob_default_int(KnobOf<KnobType::Int> k);

const char* knob_type_name(KnobType t);  // "flag", "int", "str"
const char* knob_read_name(KnobRead r);  // "once", "each", "device"

// Every row with the value in effect now, as text: a flag "1" or "0", an int its number, a str
// its text. A Once knob already read shows the value read then; one not yet read shows what the
// environment gives now, and listing it does not read it for good.
struct KnobState {
  Knob id;
  const KnobInfo* info;
  bool set;           // the environment sets it
  std::string value;  // in effect
};
std::vector<KnobState> knobs();

}  // namespace loom
