// Gather and ScatterAdd kernels (cuda/index_kernels.h).
#include "cuda/index_kernels.h"

#include <algorithm>
#include <sstream>

#include "cuda/codegen_emit.h"
#include "tensor/error.h"
#include "tensor/view.h"

namespace loom::cuda {
namespace {

using ll = int64_t;  // the kernels' long long

// Sizes and strides of one op, in elements: what the kernels decompose an index over.
struct IndexParams {
  uint64_t x = 0, idx = 0, src = 0, out = 0;  // x: gather's input, scatter's self
  ll n = 0;                                   // threads' items (cols: output columns)
  ll len = 0;                                 // the indexed dim's length in x / the output
  ll j = 0;                                   // the index's length along the dim
  ll xoff = 0, ioff = 0, soff = 0;
  ll inner = 0, tiles = 0, xin = 0, sin = 0;  // rows kernel: columns, tiles, inner strides
  int rank = 0, dim = 0;
  ll shape[kIndexMaxRank] = {};   // gather: the index's (= output's); scatter: self's
  ll ishape[kIndexMaxRank] = {};  // scatter: the index's
  ll xstr[kIndexMaxRank] = {}, istr[kIndexMaxRank] = {}, sstr[kIndexMaxRank] = {};
  ll ostr[kIndexMaxRank] = {};  // scatter: the output's (contiguous in self's shape)
};

const char* kParams =
    "typedef long long ll;\n"
    "struct IP {\n  const void* x;\n  const void* idx;\n  const void* src;\n  void* out;\n"
    "  ll n, len, j, xoff, ioff, soff, inner, tiles, xin, sin;\n  int rank, dim;\n"
    "  ll shape[8], ishape[8], xstr[8], istr[8], sstr[8], ostr[8];\n};\n"
    "__device__ __forceinline__ ll lm_clamp(ll v, ll len) {\n"
    "  return v < 0 ? 0 : (v >= len ? len - 1 : v);\n}\n";

// An unsigned type of `t`'s size: gather moves elements, never computes on them.
const char* bits_type(DType t) {
  switch (itemsize(t)) {
    case 1:
      return "unsigned char";
    case 2:
      return "unsigned short";
    case 4:
      return "unsigned int";
    default:
      return "unsigned long long";
  }
}

const char* index_type(DType t) { return t == DType::Int32 ? "int" : "long long"; }

// The helpers (conversions) and the parameter struct, for a kernel of element type `t`.
std::string head(gen::Emitter& e) {
  std::string pre = e.prelude();
  return pre.substr(0, pre.find("struct P {")) + kParams;  // helpers, not a group's parameters
}

unsigned grid_for(ll items, int dev) {
  const ll sm = properties(dev).sm_count;
  return unsigned(std::clamp<ll>((items + 255) / 256, 1, sm * 16));
}

void fill_dims(IndexParams& p, const Shape& shape, const Strides* strides[], ll* out[], int k) {
  for (int d = 0; d < int(shape.size()); ++d) {
    p.shape[d] = shape[d];
    for (int i = 0; i < k; ++i) out[i][d] = (*strides[i])[d];
  }
}

}  // namespace

std::string gather_source(DType t, DType index) {
  Group g;
  gen::Emitter e(g);
  std::ostringstream os;
  os << head(e) << "typedef " << bits_type(t) << " LmElem;\ntypedef " << index_type(index)
     << " LmIdx;\n"
     << "extern \"C\" __global__ void __launch_bounds__(256) loom_gather(const IP p) {\n"
     << "  const LmElem* X = (const LmElem*)p.x;\n  const LmIdx* ID = (const LmIdx*)p.idx;\n  "
        "LmElem* O = (LmElem*)p.out;\n"
     << "  for (ll i = (ll)blockIdx.x * blockDim.x + threadIdx.x; i < p.n;\n"
     << "       i += (ll)blockDim.x * gridDim.x) {\n"
     << "    ll rest = i, xo = p.xoff, io = p.ioff;\n"
     << "    for (int d = p.rank - 1; d >= 0; --d) {\n"
     << "      const ll c = rest % p.shape[d];\n      rest /= p.shape[d];\n"
     << "      io += c * p.istr[d];\n      if (d != p.dim) xo += c * p.xstr[d];\n    }\n"
     << "    O[i] = X[xo + lm_clamp((ll)ID[io], p.len) * p.xstr[p.dim]];\n  }\n}\n";
  return os.str();
}

std::string scatter_add_source(DType t, DType index) {
  Group g;
  gen::Emitter e(g);
  const std::string st = gen::Emitter::storage_type(t);
  // a + b as the CPU adds (cpu/scatter.cpp): integers wrap, bool ors, low-precision floats
  // round after every addition
  std::string add;
  if (t == DType::Bool)
    add = "(unsigned char)(a != 0 || b != 0)";
  else if (!is_floating(t))
    add = "(LmSt)((unsigned long long)a + (unsigned long long)b)";
  else
    add = e.store(t, e.load(t, "a") + " + " + e.load(t, "b"));
  std::ostringstream os;
  os << head(e) << "typedef " << st << " LmSt;\ntypedef " << index_type(index) << " LmIdx;\n"
     << "__device__ __forceinline__ LmSt lm_add(LmSt a, LmSt b) { return " << add
     << "; }\n"
     // a block: one output row v of outer index o, 128 of its columns; the index is one value
     // across the columns, so 128 positions are tested at a time and the hits taken in order
     << "extern \"C\" __global__ void __launch_bounds__(128) loom_scatter_rows(const IP p) {\n"
     << "  __shared__ unsigned hits[4];\n"
     << "  const LmSt* S = (const LmSt*)p.x;\n  const LmIdx* ID = (const LmIdx*)p.idx;\n"
     << "  const LmSt* SRC = (const LmSt*)p.src;\n  LmSt* O = (LmSt*)p.out;\n"
     << "  ll b = blockIdx.x;\n  const ll tile = b % p.tiles;\n  b /= p.tiles;\n"
     << "  const ll v = b % p.len, o = b / p.len;\n"
     << "  ll so = p.xoff, io = p.ioff, sr = p.soff, rest = o;\n"
     << "  for (int d = p.dim - 1; d >= 0; --d) {\n"
     << "    const ll c = rest % p.shape[d];\n    rest /= p.shape[d];\n"
     << "    so += c * p.xstr[d];\n    io += c * p.istr[d];\n    sr += c * p.sstr[d];\n  }\n"
     << "  const ll k = tile * 128 + threadIdx.x;\n  const bool on = k < p.inner;\n"
     << "  LmSt acc = on ? S[so + v * p.xstr[p.dim] + k * p.xin] : (LmSt)0;\n"
     << "  for (ll j0 = 0; j0 < p.j; j0 += 128) {\n"
     << "    const ll j = j0 + threadIdx.x;\n"
     << "    const bool hit = j < p.j && lm_clamp((ll)ID[io + j * p.istr[p.dim]], p.len) == v;\n"
     << "    const unsigned w = __ballot_sync(0xffffffffu, hit);\n"
     << "    if ((threadIdx.x & 31) == 0) hits[threadIdx.x >> 5] = w;\n"
     << "    __syncthreads();\n"
     << "    if (on)\n"
     << "      for (int q = 0; q < 4; ++q)\n"
     << "        for (unsigned m = hits[q]; m; m &= m - 1) {\n"
     << "          const ll jj = j0 + q * 32 + (__ffs(m) - 1);\n"
     << "          acc = lm_add(acc, SRC[sr + jj * p.sstr[p.dim] + k * p.sin]);\n"
     << "        }\n"
     << "    __syncthreads();\n  }\n"
     << "  if (on) O[(o * p.len + v) * p.inner + k] = acc;\n}\n"
     // a thread: one column of the output (every position along the dim), j in order
     << "extern \"C\" __global__ void __launch_bounds__(256) loom_scatter_cols(const IP p) {\n"
     << "  const LmSt* S = (const LmSt*)p.x;\n  const LmIdx* ID = (const LmIdx*)p.idx;\n"
     << "  const LmSt* SRC = (const LmSt*)p.src;\n  LmSt* O = (LmSt*)p.out;\n"
     << "  for (ll it = (ll)blockIdx.x * blockDim.x + threadIdx.x; it < p.n;\n"
     << "       it += (ll)blockDim.x * gridDim.x) {\n"
     << "    ll rest = it, so = p.xoff, oo = 0, io = p.ioff, sr = p.soff;\n    bool in = true;\n"
     << "    for (int d = p.rank - 1; d >= 0; --d) {\n      if (d == p.dim) continue;\n"
     << "      const ll c = rest % p.shape[d];\n      rest /= p.shape[d];\n"
     << "      so += c * p.xstr[d];\n      oo += c * p.ostr[d];\n"
     << "      io += c * p.istr[d];\n      sr += c * p.sstr[d];\n"
     << "      in = in && c < p.ishape[d];\n    }\n"
     << "    for (ll l = 0; l < p.len; ++l) O[oo + l * p.ostr[p.dim]] = S[so + l * "
        "p.xstr[p.dim]];\n"
     << "    if (!in) continue;\n"
     << "    for (ll j = 0; j < p.j; ++j) {\n"
     << "      LmSt* e = O + oo + lm_clamp((ll)ID[io + j * p.istr[p.dim]], p.len) * "
        "p.ostr[p.dim];\n"
     << "      *e = lm_add(*e, SRC[sr + j * p.sstr[p.dim]]);\n    }\n  }\n}\n";
  return os.str();
}

namespace {

// The module the index kernel of opaque group `g` runs: its source, entries and tag. False
// where g is no Gather or ScatterAdd.
bool what(const Group& g, std::string* source, std::vector<std::string>* entries,
          std::string* tag) {
  const Node& n = *g.opaque;
  if (n.op != Op::Gather && n.op != Op::ScatterAdd) return false;
  const DType ix = n.in[1].dtype;
  if (n.op == Op::Gather) {
    *source = gather_source(n.dtype, ix);
    *entries = {"loom_gather"};
    *tag = std::string("gather_") + bits_type(n.dtype) + "_" + index_type(ix);
  } else {
    *source = scatter_add_source(n.dtype, ix);
    *entries = {"loom_scatter_rows", "loom_scatter_cols"};
    *tag = std::string("scatter_add_") + dtype_name(n.dtype) + "_" + index_type(ix);
  }
  return true;
}

}  // namespace

bool IndexKernels::needs(const Group& g, std::string* source, std::vector<std::string>* entries,
                         std::string* tag) const {
  return what(g, source, entries, tag) && !modules_.count(*tag);
}

const std::vector<Function>& IndexKernels::module(const std::string& source,
                                                  const std::vector<std::string>& entries,
                                                  const std::string& tag) {
  auto it = modules_.find(tag);
  if (it == modules_.end()) it = modules_.emplace(tag, compile_(source, entries, tag)).first;
  return *it->second;
}

void IndexKernels::gather(const Group& g, const Stream& stream) {
  const Node& n = *g.opaque;
  const Input &x = n.in[0], &ix = n.in[1];
  const int r = int(n.shape.size());
  LOOM_CHECK(r <= kIndexMaxRank, Value, "gather: at most ", kIndexMaxRank, " dims on CUDA");
  IndexParams p;
  p.n = numel(n.shape);
  if (p.n == 0) return;
  p.x = uint64_t(reinterpret_cast<uintptr_t>(x.st->data()));
  p.idx = uint64_t(reinterpret_cast<uintptr_t>(ix.st->data()));
  p.out = uint64_t(reinterpret_cast<uintptr_t>(g.outputs[0].st->data()));
  p.len = x.view.shape[n.dim], p.xoff = x.view.offset, p.ioff = ix.view.offset;
  p.rank = r, p.dim = n.dim;
  const Strides* from[] = {&x.view.strides, &ix.view.strides};
  ll* to[] = {p.xstr, p.istr};
  fill_dims(p, n.shape, from, to, 2);
  std::string source, tag;
  std::vector<std::string> entries;
  what(g, &source, &entries, &tag);
  const auto& f = module(source, entries, tag);
  void* args[] = {&p};
  launch(f[0], {grid_for(p.n, dev_), 1, 1}, {256, 1, 1}, 0, stream, args);
}

void IndexKernels::scatter_add(const Group& g, const Stream& stream) {
  const Node& n = *g.opaque;
  const Input &self = n.in[0], &ix = n.in[1], &src = n.in[2];
  const int r = int(n.shape.size()), d = n.dim;
  LOOM_CHECK(r <= kIndexMaxRank, Value, "scatter_add: at most ", kIndexMaxRank, " dims on CUDA");
  if (numel(n.shape) == 0) return;
  IndexParams p;
  p.x = uint64_t(reinterpret_cast<uintptr_t>(self.st->data()));
  p.idx = uint64_t(reinterpret_cast<uintptr_t>(ix.st->data()));
  p.src = uint64_t(reinterpret_cast<uintptr_t>(src.st->data()));
  p.out = uint64_t(reinterpret_cast<uintptr_t>(g.outputs[0].st->data()));
  p.len = n.shape[d], p.j = ix.view.shape[d];
  p.xoff = self.view.offset, p.ioff = ix.view.offset, p.soff = src.view.offset;
  p.rank = r, p.dim = d;
  const Strides ostr = contiguous_strides(n.shape);
  const Strides* from[] = {&self.view.strides, &ix.view.strides, &src.view.strides, &ostr};
  ll* to[] = {p.xstr, p.istr, p.sstr, p.ostr};
  fill_dims(p, n.shape, from, to, 4);
  bool same = true;  // the index spans the output in every dim but `d`
  for (int k = 0; k < r; ++k) {
    p.ishape[k] = ix.view.shape[k];
    same = same && (k == d || ix.view.shape[k] == n.shape[k]);
  }
  p.inner = 1;
  for (int k = d + 1; k < r; ++k) p.inner *= n.shape[k];
  ll outer = 1;
  for (int k = 0; k < d; ++k) outer *= n.shape[k];
  // The rows kernel: one index value across at least a warp of columns, and self's and src's
  // columns one stride each. (Along the last dim a block would own one element: the cols
  // kernel, a thread a row, does that.)
  ll istride = -1;
  bool rows = same && p.j > 0 && p.inner >= 32 && collapsed_stride(ix.view, d + 1, r, &istride) &&
              istride == 0 && collapsed_stride(self.view, d + 1, r, &p.xin) &&
              collapsed_stride(src.view, d + 1, r, &p.sin);
  p.tiles = (p.inner + 127) / 128;
  rows = rows && outer * p.len * p.tiles <= 0x7fffffffLL;
  std::string source, tag;
  std::vector<std::string> entries;
  what(g, &source, &entries, &tag);
  const auto& f = module(source, entries, tag);
  void* args[] = {&p};
  if (rows) {
    launch(f[0], {unsigned(outer * p.len * p.tiles), 1, 1}, {128, 1, 1}, 0, stream, args);
    return;
  }
  p.n = outer * p.inner;
  launch(f[1], {grid_for(p.n, dev_), 1, 1}, {256, 1, 1}, 0, stream, args);
}

}  // namespace loom::cuda
