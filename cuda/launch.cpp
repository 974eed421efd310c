#include "cuda/launch.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "tensor/error.h"

namespace loom::cuda {
namespace {

int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Pointwise launch policy, from the environment once (A/B runs on the GPU, issue 7):
//   LOOM_CUDA_PW_UNROLL=1|2|4     vectors a thread per iteration (default: 4 / 2 / 1 for
//                                 1 / 2 / more arrays read as vectors; 1 when the lanes roll)
//   LOOM_CUDA_PW_GRID=full|stride vector loops. full (default): one block per 256 * unroll
//                                 vectors, the grid covers the tensor; stride: at most 8
//                                 blocks an SM (the 2048-thread limit) walking the tensor in a
//                                 grid-stride loop (what scalar and strided loops always do)
//   LOOM_CUDA_PW_ROLL=auto|0|1    roll the lane loop of a vector kernel: auto when the body is
//                                 big (compile time; a 1-D big body takes the scalar loop)
struct PwPolicy {
  int unroll = 0;  // 0: by the number of vector inputs
  bool full = true;
  int roll = -1;  // -1 auto
};
const PwPolicy& pw_policy() {
  static const PwPolicy p = [] {
    PwPolicy p;
    auto env = [](const char* n) {
      const char* v = std::getenv(n);
      return std::string(v ? v : "");
    };
    std::string u = env("LOOM_CUDA_PW_UNROLL"), g = env("LOOM_CUDA_PW_GRID");
    std::string r = env("LOOM_CUDA_PW_ROLL");
    if (u == "1" || u == "2" || u == "4") p.unroll = u[0] - '0';
    if (g == "stride") p.full = false;
    if (r == "0" || r == "1") p.roll = r[0] - '0';
    return p;
  }();
  return p;
}

// Compile cost of one element of a pointwise body, in units of a simple op: math-library
// calls are inlined from libdevice, sin/cos/tan with their slow-path argument reduction (one
// sin in `sin(x) * 0.5 + x` took 4x a `neg` kernel's NVRTC time, 2026-11-29).
int body_weight(const Group& g) {
  int w = 0;
  for (const GNode& n : g.nodes) {
    switch (n.op) {
      case Op::Sin:
      case Op::Cos:
      case Op::Tan:
        w += 40;
        break;
      case Op::Exp:
      case Op::Exp2:
      case Op::Expm1:
      case Op::Log:
      case Op::Log2:
      case Op::Log1p:
      case Op::Tanh:
      case Op::Sigmoid:
      case Op::Asin:
      case Op::Acos:
      case Op::Atan:
      case Op::Sinh:
      case Op::Cosh:
      case Op::Erf:
      case Op::Gelu:
      case Op::GeluTanh:
      case Op::Silu:
      case Op::Softplus:
      case Op::Atan2:
      case Op::Remainder:
      case Op::Pow:
      case Op::Rand:
      case Op::Randn:
        w += 6;
        break;
      default:
        w += 1;
    }
  }
  return w;
}

// Past this V * body_weight the lanes roll: the suite's chain8 (about 100 at V = 4) stays
// unrolled; one sin or cos (40: `sin(x) * 0.5 + x` compiled 4x slower than `neg(x) * 0.5 + x`
// with 5 inlined copies) or several exp/tanh/sigmoid (6) roll it.
constexpr int kRollBudget = 160;

// Vector-loop shape of a pointwise variant with `V` lanes reading `nvec` arrays as vectors.
void pointwise_shape(const Group& g, int nvec, Variant& v) {
  const PwPolicy& p = pw_policy();
  // A big 1-D body takes the scalar loop (auto): it compiles once with no vector scaffolding
  // (the suite's 18-op sin chain: 59 ms against 80 rolled, 2026-11-29), and a body that big
  // is bound by arithmetic, not by 16-byte accesses.
  if (p.roll < 0 && g.space.size() == 1 && v.vec * body_weight(g) > kRollBudget) {
    v.vec = 1;
    return;
  }
  // The lane loop is unrolled V times: past a budget, roll it so the body compiles once.
  v.roll = p.roll >= 0 ? p.roll == 1 : v.vec * body_weight(g) > kRollBudget;
  // A rolled (big) body is compute-heavy enough to cover memory latency with one vector a
  // thread, and every unrolled vector costs compile time (the suite's 18-op sin chain: 1.3x
  // NVRTC time at 4 vectors than at 1, 2026-11-29).
  // Otherwise about 4 vector loads in flight a thread: a thread of a multi-input kernel (an
  // Adam step reads 4 arrays) has them at 1 vector, and each unrolled vector costs compile
  // time (the suite's chain8: 1.2x NVRTC time at 4 vectors than at 1; Adam 1.4x at 4).
  v.unroll = p.unroll > 0 ? p.unroll : v.roll || nvec > 2 ? 1 : nvec == 2 ? 2 : 4;
}

int64_t pow2ceil(int64_t x) {
  int64_t p = 1;
  while (p < x) p <<= 1;
  return p;
}

const Strides& access_strides(const Group& g, int a) {
  int L = int(g.leaves.size());
  return a < L ? g.leaves[a].strides : g.outputs[a - L].strides;
}

// Split rows when the row blocks cannot fill the machine and the rows are long enough to cut:
// segments enough for about 8 blocks of 256 threads an SM (a full wave; 2 an SM measured at
// 1.97 TB/s for a 64M-element sum on the H200, 2026-11-29). Partials stay small: rows times
// segments is about rpb * 8 * SMs.
int64_t split_segments(const Group& g, const Variant& v, int sm) {
  int64_t rows = g.rows(), cols = g.cols();
  int64_t blocks = cdiv(rows, v.rpb);
  int64_t min_seg = v.tpr == 1 ? 64 : 2048;
  if (blocks >= sm || cols < 2 * min_seg) return 1;
  return std::max<int64_t>(1, std::min(cdiv(8 * int64_t(sm), blocks), cols / min_seg));
}

// Columns a chunk of a rows group: 16 bytes of the narrowest unit-stride access when the one
// reduced dim is walked at unit stride, cols is a multiple of the width, and every unit-stride
// pointer, offset and kept-dim stride keeps each chunk aligned; else 1 (odd rows, views).
int row_vector_width(const Group& g) {
  int R = int(g.space.size()), K = g.n_kept, L = int(g.leaves.size());
  if (R - K != 1) return 1;
  auto unit = [&](int a) {
    if (a < L && (!g.leaves[a].st || g.leaves[a].space != Space::Full)) return false;
    return access_strides(g, a)[R - 1] == 1;
  };
  auto dtype = [&](int a) {
    return a < L ? g.leaves[a].dtype : g.nodes[g.outputs[a - L].node].dtype;
  };
  int n_acc = L + int(g.outputs.size());
  size_t min_isz = 16;
  for (int a = 0; a < n_acc; ++a)
    if (unit(a)) min_isz = std::min(min_isz, itemsize(dtype(a)));
  if (min_isz == 16) return 1;  // no unit-stride access
  int W = int(std::min<size_t>(8, 16 / min_isz));
  auto fits = [&](int W) {
    if (g.cols() % W != 0) return false;
    for (int a = 0; a < n_acc; ++a) {
      if (!unit(a)) continue;
      const Strides& st = access_strides(g, a);
      for (int d = 0; d < K; ++d)
        if (st[d] % W != 0) return false;
      const Storage* mem = a < L ? g.leaves[a].st.get() : g.outputs[a - L].st.get();
      int64_t off = a < L ? g.leaves[a].offset : g.outputs[a - L].offset;
      if (off % W != 0) return false;
      size_t align = std::min<size_t>(16, W * itemsize(dtype(a)));
      // Outputs not yet allocated count as aligned (allocations are 256-byte aligned).
      if (mem && mem->data() && uint64_t(reinterpret_cast<uintptr_t>(mem->data())) % align != 0)
        return false;
    }
    return true;
  };
  while (W > 1 && !fits(W)) W /= 2;
  return W;
}

// Threads per row and persistent chunks per lane for `nch` chunks of `vw` columns: about 16
// columns in vector chunks (8 single columns) a lane, more lanes while the cached values would pass
// the register budget (32 columns a lane, 16 scalar; cached words at most 48 and 3/8 of the
// registers a thread has at the block size: 24 at 1024 threads, where more spilled for a 32768
// f32 rms_norm); k = 0 (loop every pass) when even 1024 lanes cannot hold the row.
void row_geometry(const Group& g, int64_t nch, int vw, Variant& v) {
  const int64_t per_lane = vw > 1 ? 32 : 16, words = std::max(1, row_cache_words(g));
  v.tpr = int(std::clamp<int64_t>(pow2ceil(cdiv(nch * vw, vw > 1 ? 16 : 8)), 1, 1024));
  v.k = 0;
  for (int tpr = v.tpr; tpr <= 1024; tpr *= 2) {
    int64_t k = pow2ceil(std::max<int64_t>(1, cdiv(nch, tpr)));
    int64_t block = std::max(256, tpr), budget = std::min<int64_t>(48, 65536 / block * 3 / 8);
    if (k * vw <= per_lane && k * vw * words <= budget) {
      v.tpr = tpr, v.k = int(k);
      return;
    }
  }
}

// Vector width of an n-D pointwise group whose every memory access has unit or zero stride
// along the last dim (each output unit): 16 bytes of the narrowest unit-stride type, when the
// last dim is a multiple of it and every unit-stride offset, outer stride and pointer keeps the
// vectors aligned; 0 (the scalar n-D loop) otherwise.
int inner_vector_width(const Group& g) {
  int R = int(g.space.size()), L = int(g.leaves.size()), n_acc = L + int(g.outputs.size());
  if (R < 2) return 0;
  auto dtype = [&](int a) {
    return a < L ? g.leaves[a].dtype : g.nodes[g.outputs[a - L].node].dtype;
  };
  size_t min_isz = 16;
  for (int a = 0; a < n_acc; ++a) {
    if (a < L && !g.leaves[a].st) continue;
    int64_t s = access_strides(g, a)[R - 1];
    if (s != 1 && (a >= L || s != 0)) return 0;
    if (s == 1) min_isz = std::min(min_isz, itemsize(dtype(a)));
  }
  int V = int(std::min<size_t>(8, 16 / min_isz));
  auto fits = [&](int V) {
    if (g.space[R - 1] % V != 0) return false;
    for (int a = 0; a < n_acc; ++a) {
      if (a < L && !g.leaves[a].st) continue;
      const Strides& st = access_strides(g, a);
      if (st[R - 1] != 1) continue;
      for (int d = 0; d < R - 1; ++d)
        if (st[d] % V != 0) return false;
      const Storage* mem = a < L ? g.leaves[a].st.get() : g.outputs[a - L].st.get();
      int64_t off = a < L ? g.leaves[a].offset : g.outputs[a - L].offset;
      if (off % V != 0) return false;
      size_t align = std::min<size_t>(16, V * itemsize(dtype(a)));
      if (mem && mem->data() && uint64_t(reinterpret_cast<uintptr_t>(mem->data())) % align != 0)
        return false;
    }
    return true;
  };
  while (V > 1 && !fits(V)) V /= 2;
  return V > 1 ? V : 0;
}

}  // namespace

Variant choose_variant(const Group& g, int sm) {
  Variant v;
  Layout layout = layout_of(g);
  if (!g.has_reduce()) {
    // Arrays a vector loop reads as vectors: unit stride along the last dim.
    auto vector_inputs = [&] {
      int c = 0, R = int(g.space.size());
      for (const GLeaf& l : g.leaves) c += l.st && l.space == Space::Full && l.strides[R - 1] == 1;
      return c;
    };
    if (layout == Layout::Pointwise) {
      v.vec = inner_vector_width(g);
      if (v.vec > 1) pointwise_shape(g, vector_inputs(), v);
      return v;
    }
    // Contiguous: as many elements a thread as fill a 16-byte access of the narrowest type,
    // when every unit-stride pointer is aligned for it.
    v.vec = 1;
    if (g.space.size() != 1) return v;
    size_t min_isz = 16;
    int n_acc = int(g.leaves.size() + g.outputs.size()), L = int(g.leaves.size());
    for (int a = 0; a < n_acc; ++a) {
      if (a < L && !g.leaves[a].st) continue;
      int64_t s = access_strides(g, a)[0];
      if (a >= L && s != 1) return v;
      if (s != 1) continue;
      DType dt = a < L ? g.leaves[a].dtype : g.nodes[g.outputs[a - L].node].dtype;
      min_isz = std::min(min_isz, itemsize(dt));
    }
    int V = int(std::min<size_t>(8, 16 / min_isz));
    if (V <= 1 || g.space[0] < V) return v;
    for (int a = 0; a < n_acc; ++a) {
      if (a < L && !g.leaves[a].st) continue;
      if (access_strides(g, a)[0] != 1) continue;
      const Storage* st = a < L ? g.leaves[a].st.get() : g.outputs[a - L].st.get();
      DType dt = a < L ? g.leaves[a].dtype : g.nodes[g.outputs[a - L].node].dtype;
      int64_t off = a < L ? g.leaves[a].offset : g.outputs[a - L].offset;
      size_t align = std::min<size_t>(16, V * itemsize(dt));
      uint64_t addr = uint64_t(reinterpret_cast<uintptr_t>(st->data())) + off * itemsize(dt);
      if (st->data() && addr % align != 0) return v;  // outputs not yet allocated count as aligned
    }
    v.vec = V;
    pointwise_shape(g, vector_inputs(), v);
    return v;
  }
  v.reduce = true;
  int64_t cols = g.cols();
  if (layout == Layout::Columns) {
    v.tpr = 1, v.rpb = 256;
  } else {
    v.vw = row_vector_width(g);
    row_geometry(g, cols / v.vw, v.vw, v);
    v.rpb = std::max(1, 256 / v.tpr);
  }
  if (split_segments(g, v, sm) > 1) {
    Variant s = v;
    s.split = true, s.k = 0;
    if (layout != Layout::Columns) s.tpr = 256, s.rpb = 1;
    if (split_segments(g, s, sm) > 1) return s;
  }
  if (layout == Layout::Columns) {  // a thread a row: persistent for rows of up to 16 columns
    int64_t k = pow2ceil(std::max<int64_t>(1, cols));
    v.k = cols <= 16 && k * std::max(1, row_cache_words(g)) <= 48 ? int(k) : 0;
  }
  return v;
}

LaunchConfig launch_config(const Group& g, const Variant& v, int sm) {
  LaunchConfig lc;
  lc.block = unsigned(v.block());
  if (!v.reduce) {
    int64_t n = numel(g.space);
    lc.empty = n == 0;
    // Threads' work items: vectors (with the 1-D masked last one) or elements.
    int64_t work = v.vec > 1 ? cdiv(n, v.vec) : n;
    int64_t per_block = int64_t(lc.block) * (v.vec > 1 ? std::max(1, v.unroll) : 1);
    // The scalar and strided loops keep the grid-stride launch of 8 blocks an SM they had.
    int64_t cap = pw_policy().full && v.vec > 1 ? (int64_t(1) << 31) - 1 : int64_t(sm) * 8;
    lc.grid_x = unsigned(std::clamp<int64_t>(cdiv(work, per_block), 1, cap));
    return lc;
  }
  int64_t rows = g.rows(), cols = g.cols();
  lc.empty = rows == 0;
  int64_t blocks = cdiv(rows, v.rpb);
  if (v.split) {
    LOOM_CHECK(blocks < (int64_t(1) << 31), Runtime, "cuda: too many rows for a split launch");
    int64_t S = split_segments(g, v, sm);
    lc.grid_x = unsigned(std::max<int64_t>(1, blocks));
    lc.seglen = std::max<int64_t>(1, cdiv(cols, S));
    lc.seglen = cdiv(lc.seglen, v.vw) * v.vw;  // whole chunks a segment
    lc.grid_y = unsigned(std::max<int64_t>(1, cdiv(cols, lc.seglen)));
  } else {
    int64_t cap = int64_t(sm) * std::max(1, 2048 / v.block()) * 2;
    lc.grid_x = unsigned(std::clamp<int64_t>(blocks, 1, cap));
  }
  return lc;
}

SplitScratch split_scratch(const Group& g, const Generated& k, const LaunchConfig& lc) {
  SplitScratch s;
  size_t rows = size_t(g.rows()), nr = size_t(std::max(1, k.reduces));
  s.partial_bytes = rows * lc.grid_y * nr * 16;
  s.final_bytes = rows * nr * 16;
  s.counter_bytes = size_t(lc.grid_x) * 4;
  return s;
}

std::vector<char> pack_params(const Group& g, const ParamSpec& spec, const LaunchConfig& lc,
                              const uint64_t scratch[3]) {
  std::vector<char> b(spec.bytes(), 0);
  int L = int(g.leaves.size());
  for (size_t i = 0; i < spec.ptrs.size(); ++i) {
    int a = spec.ptrs[i];
    uint64_t p;
    if (a == kPartials)
      p = scratch[0];
    else if (a == kFinals)
      p = scratch[1];
    else if (a == kCounters)
      p = scratch[2];
    else if (a < L)
      p = uint64_t(reinterpret_cast<uintptr_t>(g.leaves[a].st->data()));
    else
      p = uint64_t(reinterpret_cast<uintptr_t>(g.outputs[a - L].st->data()));
    std::memcpy(b.data() + 8 * i, &p, 8);
  }
  for (int s = 0; s < spec.scalars; ++s) {
    const Scalar& sc = g.scalars[s];
    char* dst = b.data() + 8 * (spec.ptrs.size() + s);
    if (sc.kind == Scalar::Kind::Float)
      std::memcpy(dst, &sc.f, 8);
    else
      std::memcpy(dst, &sc.i, 8);
  }
  for (size_t i = 0; i < spec.values.size(); ++i) {
    const ValueSlot& vs = spec.values[i];
    int64_t x = 0;
    switch (vs.kind) {
      case ValueSlot::N:
        x = numel(g.space);
        break;
      case ValueSlot::Rows:
        x = g.rows();
        break;
      case ValueSlot::Cols:
        x = g.cols();
        break;
      case ValueSlot::Size:
        x = g.space[vs.dim];
        break;
      case ValueSlot::Stride:
        x = access_strides(g, vs.access)[vs.dim];
        break;
      case ValueSlot::Offset:
        x = vs.access < L ? g.leaves[vs.access].offset : g.outputs[vs.access - L].offset;
        break;
      case ValueSlot::SegLen:
        x = lc.seglen;
        break;
    }
    char* dst = b.data() + spec.values_offset() + i * (spec.index64 ? 8 : 4);
    if (spec.index64) {
      std::memcpy(dst, &x, 8);
    } else {
      int32_t y = int32_t(x);
      std::memcpy(dst, &y, 4);
    }
  }
  return b;
}

}  // namespace loom::cuda
