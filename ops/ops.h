#pragma once
// loom's op API: free functions with PyTorch's names and semantics.
// (Included by ops/tensor.h; user code includes "loom.h".)
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace loom {

class Tensor;

// ---- creation -------------------------------------------------------------------------
struct Options {
  DType dtype = DType::Float32;
  Device device = kCPU;
  Options() = default;
  Options(DType t) : dtype(t) {}  // NOLINT: `zeros({2}, DType::Int64)` reads naturally
  Options(DType t, Device d) : dtype(t), device(d) {}
  Options(Device d) : device(d) {}  // NOLINT
};

// From host values (converted to opts.dtype). numel(shape) must equal data size.
template <typename T>
Tensor tensor(const std::vector<T>& data, const Shape& shape, Options opts);
template <typename T>
Tensor tensor(const std::vector<T>& data, const Shape& shape);  // dtype from T
Tensor from_blob(const void* data, const Shape& shape, DType dtype, Device device = kCPU);
// Zero-copy view of foreign memory (numpy, DLPack): a ready tensor over `data` with the given
// shape and strides (in elements, may be negative). loom never frees `data`; `deleter` runs
// when the last tensor using it goes away. In-place ops may write into it.
Tensor from_external(void* data, const Shape& shape, const Strides& strides, DType dtype,
                     Device device, std::function<void()> deleter);
Tensor scalar_tensor(Scalar s, Options opts);

Tensor empty(const Shape& shape, Options opts = {});
Tensor zeros(const Shape& shape, Options opts = {});
Tensor ones(const Shape& shape, Options opts = {});
Tensor full(const Shape& shape, Scalar value, Options opts = {});
Tensor arange(Scalar end, Options opts = {DType::Int64});
Tensor arange(Scalar start, Scalar end, Scalar step = 1, std::optional<DType> dtype = {},
              Device device = kCPU);
Tensor linspace(double start, double end, int64_t steps, Options opts = {});
Tensor eye(int64_t n, std::optional<int64_t> m = {}, Options opts = {});
Tensor empty_like(const Tensor& t, std::optional<DType> dtype = {});
Tensor zeros_like(const Tensor& t, std::optional<DType> dtype = {});
Tensor ones_like(const Tensor& t, std::optional<DType> dtype = {});
Tensor full_like(const Tensor& t, Scalar value, std::optional<DType> dtype = {});

// Random numbers from a counter-based generator (Philox-4x32-10): one seed gives the
// same numbers on every device and with fusion on or off.
void manual_seed(uint64_t seed);
Tensor rand(const Shape& shape, Options opts = {});
Tensor randn(const Shape& shape, Options opts = {});
Tensor randint(int64_t low, int64_t high, const Shape& shape, Options opts = {DType::Int64});
Tensor rand_like(const Tensor& t);
Tensor randn_like(const Tensor& t);

// ---- pointwise --------------------------------------------------------------------------
#define LOOM_X(name, api, kind) Tensor api(const Tensor& x);
LOOM_UNARY_OPS(LOOM_X)
#undef LOOM_X
// Integer pow follows torch: a negative integer *scalar* exponent of an integer tensor is an
// Error at the call; negative elements of an integer *tensor* exponent give 1 for base 1,
// +-1 for base -1 (by the exponent's parity) and 0 for every other base, 0 included.
#define LOOM_X(name, api, kind)                 \
  Tensor api(const Tensor& a, const Tensor& b); \
  Tensor api(const Tensor& a, Scalar b);        \
  Tensor api(Scalar a, const Tensor& b);
LOOM_BINARY_OPS(LOOM_X)
#undef LOOM_X
Tensor gelu(const Tensor& x, const std::string& approximate);  // "none" | "tanh"
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, Scalar a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, Scalar b);
Tensor where(const Tensor& cond, Scalar a, Scalar b);
Tensor clamp(const Tensor& x, std::optional<Scalar> lo, std::optional<Scalar> hi);
Tensor clamp(const Tensor& x, const std::optional<Tensor>& lo, const std::optional<Tensor>& hi);
Tensor lerp(const Tensor& a, const Tensor& b, Scalar w);
Tensor lerp(const Tensor& a, const Tensor& b, const Tensor& w);
Tensor addcmul(const Tensor& x, const Tensor& a, const Tensor& b, Scalar value = 1);
Tensor addcdiv(const Tensor& x, const Tensor& a, const Tensor& b, Scalar value = 1);
Tensor cast(const Tensor& x, DType t);
Tensor rsub(const Tensor& a, Scalar b);
// torch's isclose / allclose (allclose is a sync point) and nan_to_num (ops/closeness.cpp).
Tensor isclose(const Tensor& a, const Tensor& b, double rtol = 1e-05, double atol = 1e-08,
               bool equal_nan = false);
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-05, double atol = 1e-08,
              bool equal_nan = false);
Tensor nan_to_num(const Tensor& x, double nan = 0.0, std::optional<double> posinf = {},
                  std::optional<double> neginf = {});

// ---- reductions (dims empty = all dims) ---------------------------------------------------
Tensor sum(const Tensor& x, const Dims& dims = {}, bool keepdim = false,
           std::optional<DType> dtype = {});
Tensor mean(const Tensor& x, const Dims& dims = {}, bool keepdim = false);
Tensor prod(const Tensor& x, const Dims& dims = {}, bool keepdim = false);
Tensor amax(const Tensor& x, const Dims& dims = {}, bool keepdim = false);
Tensor amin(const Tensor& x, const Dims& dims = {}, bool keepdim = false);
Tensor argmax(const Tensor& x, std::optional<int64_t> dim = {}, bool keepdim = false);
Tensor argmin(const Tensor& x, std::optional<int64_t> dim = {}, bool keepdim = false);
Tensor var(const Tensor& x, const Dims& dims = {}, double correction = 1, bool keepdim = false);
Tensor std(const Tensor& x, const Dims& dims = {}, double correction = 1, bool keepdim = false);
Tensor logsumexp(const Tensor& x, const Dims& dims, bool keepdim = false);
Tensor norm(const Tensor& x, double p = 2, const Dims& dims = {}, bool keepdim = false);
Tensor all(const Tensor& x, const Dims& dims = {}, bool keepdim = false);
Tensor any(const Tensor& x, const Dims& dims = {}, bool keepdim = false);
// Inclusive prefix sum along `dim`: integers and bool give int64; a scan primitive (not
// fused) on the CPU, floats accumulated in double.
Tensor cumsum(const Tensor& x, int64_t dim);

// ---- indexing by integer tensors (ops/index_ops.cpp) --------------------------------------
// An index is int64 or int32. An index outside [0, size along dim) (negative ones too) raises
// an IndexError-kind loom::Error at the next sync point after the work ran, naming the op and
// the shapes; the kernels clamp it meanwhile and never read or write out of bounds.
// torch.gather: out[i][j][k] = input[i][index[i][j][k]][k] for dim 1. index: input's rank, no
// larger than input in the other dims; the result has index's shape.
Tensor gather(const Tensor& input, int64_t dim, const Tensor& index);
// input's slices at the 1-d index's positions along dim.
Tensor index_select(const Tensor& input, int64_t dim, const Tensor& index);
// gather with input and indices broadcast in the dims other than dim; without dim, of the
// flattened input and indices.
Tensor take_along_dim(const Tensor& input, const Tensor& indices, std::optional<int64_t> dim = {});
// Rows of weight [num_embeddings, dim] at input's indices: input's shape + [dim].
Tensor embedding(const Tensor& input, const Tensor& weight);
// torch.scatter_add: input with src[i][j][k] added at [i][index[i][j][k]][k] for dim 1 (src, same
// dtype, no smaller than index; input no smaller than index but along dim). Duplicate indices
// accumulate in increasing position of the index, so every run gives the same bits.
Tensor scatter_add(const Tensor& input, int64_t dim, const Tensor& index, const Tensor& src);
// input with alpha * source's slices added at the 1-d index's positions along dim.
Tensor index_add(const Tensor& input, int64_t dim, const Tensor& index, const Tensor& source,
                 Scalar alpha = 1);

// ---- composites (decomposed into primitives; the fuser makes each one group) -------------
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);
Tensor layer_norm(const Tensor& x, const Dims& normalized_shape,
                  const std::optional<Tensor>& weight = {}, const std::optional<Tensor>& bias = {},
                  double eps = 1e-5);
Tensor rms_norm(const Tensor& x, const Dims& normalized_shape,
                const std::optional<Tensor>& weight = {}, std::optional<double> eps = {});
Tensor dropout(const Tensor& x, double p, bool training = true);
// torch.nn.functional.scaled_dot_product_attention: softmax(q @ k^T * scale + mask) @ v over
// the last two dims (batch dims broadcast). attn_mask: bool (True takes part) or added floats.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const std::optional<Tensor>& attn_mask = {},
                                    double dropout_p = 0, bool is_causal = false,
                                    std::optional<double> scale = {});

// torch.multinomial: num_samples category indices per row of probs ([V] or [B, V]; weights,
// not necessarily normalized), drawn from loom's generator; an invalid row raises at the next
// sync point.
Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement = false);

// Sorting along a dim (ops/sort.cpp): (values, int64 indices), stable, NaN largest; by ranks
// (quadratic in the dim's length). topk: the k largest (or smallest), in order.
std::pair<Tensor, Tensor> sort(const Tensor& x, int64_t dim = -1, bool descending = false,
                               bool stable = false);
Tensor argsort(const Tensor& x, int64_t dim = -1, bool descending = false, bool stable = false);
std::pair<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim = -1, bool largest = true,
                               bool sorted = true);

// ---- masks (ops/masks.cpp) --------------------------------------------------------------
// The lower / upper triangle of the last two dims (j - i <= / >= diagonal), zeros elsewhere.
Tensor tril(const Tensor& x, int64_t diagonal = 0);
Tensor triu(const Tensor& x, int64_t diagonal = 0);
// value where mask (bool, broadcast to x's shape) is true, else x; x's dtype.
Tensor masked_fill(const Tensor& x, const Tensor& mask, Scalar value);
// int64 [..., num_classes] with a 1 at each class; num_classes < 0: the largest class + 1
// (read from the tensor: a sync point, as torch's).
Tensor one_hot(const Tensor& t, int64_t num_classes = -1);

// ---- losses (torch.nn.functional's; ops/loss.cpp) ----------------------------------------
enum class Reduction { None, Mean, Sum };
struct CrossEntropyOptions {
  std::optional<Tensor> weight;  // [C]: a weight per class
  int64_t ignore_index = -100;   // targets equal to it add nothing (class-index targets)
  Reduction reduction = Reduction::Mean;
  double label_smoothing = 0;  // in [0, 1]
};
// input [N, C], [C] or [N, C, d1, ...]; target class indices (int64 or int32) of input's shape
// without C, or class probabilities of input's shape. Mean: weighted by the targets' weights.
Tensor cross_entropy(const Tensor& input, const Tensor& target,
                     const CrossEntropyOptions& options = {});
struct NllLossOptions {
  std::optional<Tensor> weight;
  int64_t ignore_index = -100;
  Reduction reduction = Reduction::Mean;
};
// input: log-probabilities, shaped as cross_entropy's.
Tensor nll_loss(const Tensor& input, const Tensor& target, const NllLossOptions& options = {});
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);
Tensor l1_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::Mean);
// Stable for any logit: max(x, 0) - x * y + log1p(exp(-|x|)), pos_weight scaling the y term.
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const std::optional<Tensor>& weight = {},
                                        const std::optional<Tensor>& pos_weight = {},
                                        Reduction reduction = Reduction::Mean);

// ---- movement ---------------------------------------------------------------------------
Tensor cat(const std::vector<Tensor>& xs, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& xs, int64_t dim = 0);
Tensor matmul(const Tensor& a, const Tensor& b);
Tensor bmm(const Tensor& a, const Tensor& b);
// torch.nn.functional.linear: input @ weight^T (+ bias), weight [out_features, in_features],
// input [..., in_features]; the bias add fuses into the matmul's epilogue.
Tensor linear(const Tensor& input, const Tensor& weight,
              const std::optional<Tensor>& bias = std::nullopt);
// torch.linalg.svdvals: the singular values of the matrices in the last two dims, descending,
// [..., min(m, n)]; computed in float64 (on the host for a device without an SVD).
Tensor svdvals(const Tensor& x);

// ---- operators --------------------------------------------------------------------------
Tensor operator-(const Tensor& x);
#define LOOM_BINOP(sym, fn)                                                         \
  inline Tensor operator sym(const Tensor& a, const Tensor& b) { return fn(a, b); } \
  inline Tensor operator sym(const Tensor& a, Scalar b) { return fn(a, b); }        \
  inline Tensor operator sym(Scalar a, const Tensor& b) { return fn(a, b); }
LOOM_BINOP(+, add)
LOOM_BINOP(-, sub)
LOOM_BINOP(*, mul)
LOOM_BINOP(/, div)
LOOM_BINOP(%, remainder)
LOOM_BINOP(==, eq)
LOOM_BINOP(!=, ne)
LOOM_BINOP(<, lt)
LOOM_BINOP(<=, le)
LOOM_BINOP(>, gt)
LOOM_BINOP(>=, ge)
LOOM_BINOP(&, bitwise_and)
LOOM_BINOP(|, bitwise_or)
LOOM_BINOP(^, bitwise_xor)
LOOM_BINOP(<<, bitwise_left_shift)
LOOM_BINOP(>>, bitwise_right_shift)
#undef LOOM_BINOP
// In place into a (a.copy_ of the shifted values).
Tensor& operator<<=(Tensor& a, const Tensor& b);
Tensor& operator<<=(Tensor& a, Scalar b);
Tensor& operator>>=(Tensor& a, const Tensor& b);
Tensor& operator>>=(Tensor& a, Scalar b);
inline Tensor operator~(const Tensor& x) { return bitwise_not(x); }
std::ostream& operator<<(std::ostream& os, const Tensor& t);

// ---- runtime ----------------------------------------------------------------------------
void sync();               // flush every stream's trace and wait
void flush();              // flush every stream's trace (submit on a GPU), no waiting
void set_fusion(bool on);  // off: one kernel per primitive (the oracle)
bool fusion_enabled();
// The plan and kernel programs, without running; for a tensor with a grad_fn also its backward
// graph: each node's saved tensors and what it recomputes instead.
std::string explain(const Tensor& t);

}  // namespace loom
