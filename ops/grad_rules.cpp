// The vector-Jacobian rule of every primitive: a switch over the whole list per family, with
// no default, so a new row without a rule (or a stated "no gradient") fails the build. Each
// rule is written in loom ops, so the backward is recorded lazily and fuses like the forward,
// and with create_graph it is itself differentiable.
#include <cmath>
#include <numbers>

#include "ops/grad_node.h"
#include "ops/index_prims.h"
#include "ops/record.h"

namespace loom::autograd {
namespace {

using std::numbers::pi;
constexpr double kLn2 = std::numbers::ln2, kLn10 = std::numbers::ln10;

[[noreturn]] void not_differentiable(const char* op, const std::string& what) {
  throw Error(ErrorKind::Runtime,
              detail::cat("backward: the derivative of ", op, " is not implemented (", what, ")"));
}

// (y cos y - sin y) / y^3 from y^2, its Taylor series to y^18: for |y| < 1.
Tensor sinc_series(const Tensor& y2) {
  double c[9];
  double f = 6;  // (2n + 1)!
  for (int n = 1; n <= 9; ++n) {
    c[n - 1] = (n % 2 ? -2.0 : 2.0) * n / f;
    f *= (2 * n + 2) * (2 * n + 3);
  }
  Tensor s = y2 * c[8] + c[7];
  for (int k = 6; k >= 0; --k) s = s * y2 + c[k];
  return s;
}

// What a unary rule reads: its input, its result, or both.
struct Reads {
  bool x = false, y = false;
};

// The cases of the families a switch is not about: they never reach it.
#define LOOM_CASE(name, ...) case Op::name:

Reads unary_reads(Op op) {
  switch (op) {
    case Op::Neg:
    case Op::Sign:
    case Op::Floor:
    case Op::Ceil:
    case Op::Round:
    case Op::Trunc:
    case Op::BitwiseNot:
    case Op::IsNan:
    case Op::IsInf:
    case Op::IsFinite:
    case Op::LogicalNot:
    case Op::Signbit:
    case Op::Deg2rad:
    case Op::Rad2deg:
    case Op::Frac:
    case Op::Digamma:
      return {};
    case Op::Exp:
    case Op::Exp2:
    case Op::Expm1:
    case Op::Sqrt:
    case Op::Rsqrt:
    case Op::Reciprocal:
    case Op::Tan:
    case Op::Tanh:
    case Op::Sigmoid:
    case Op::Cbrt:
    case Op::Erfinv:
    case Op::Relu:
      return {false, true};
    case Op::Abs:
    case Op::Square:
    case Op::Log:
    case Op::Log2:
    case Op::Log1p:
    case Op::Sin:
    case Op::Cos:
    case Op::Asin:
    case Op::Acos:
    case Op::Atan:
    case Op::Sinh:
    case Op::Cosh:
    case Op::Erf:
    case Op::GeluTanh:
    case Op::Silu:
    case Op::Softplus:
    case Op::Log10:
    case Op::Asinh:
    case Op::Acosh:
    case Op::Atanh:
    case Op::Erfc:
    case Op::Lgamma:
    case Op::Sinc:
      return {true, false};
    case Op::Gelu:  // Phi(x) as y / x
      return {true, true};
      LOOM_BINARY_OPS(LOOM_CASE)
      LOOM_REDUCE_OPS(LOOM_CASE) LOOM_OTHER_PRIMS(LOOM_CASE) case Op::NumOps : break;
  }
  throw Error(ErrorKind::Runtime, "internal: unary_reads of a non-unary op");
}

// d/dx of op at x (result y), times g. An undefined result: no gradient (a zero one).
Tensor unary_grad(Op op, const Tensor& g, const Tensor& x, const Tensor& y,
                  const std::string& what) {
  switch (op) {
    case Op::Neg:
      return neg(g);
    case Op::Abs:
      return g * sign(x);
    case Op::Sign:
    case Op::Floor:
    case Op::Ceil:
    case Op::Round:
    case Op::Trunc:
      return zeros_like(g);  // torch: zero almost everywhere
    case Op::Square:
      return g * (x * 2.0);
    case Op::Relu:
      return where(gt(y, 0), g, 0.0);
    case Op::Exp:
      return g * y;
    case Op::Exp2:
      return g * (y * kLn2);
    case Op::Expm1:
      return g * (y + 1.0);
    case Op::Log:
      return g / x;
    case Op::Log2:
      return g / (x * kLn2);
    case Op::Log10:
      return g / (x * kLn10);
    case Op::Log1p:
      return g / (x + 1.0);
    case Op::Sqrt:
      return g / (y * 2.0);
    case Op::Rsqrt:
      return g * (y * y * y * -0.5);
    case Op::Reciprocal:
      return g * neg(y * y);
    case Op::Sin:
      return g * cos(x);
    case Op::Cos:
      return g * neg(sin(x));
    case Op::Tan:
      return g * (y * y + 1.0);
    case Op::Tanh:
      return g * (1.0 - y * y);
    case Op::Asin:
      return g * rsqrt(1.0 - x * x);
    case Op::Acos:
      return g * neg(rsqrt(1.0 - x * x));
    case Op::Atan:
      return g / (x * x + 1.0);
    case Op::Sinh:
      return g * cosh(x);
    case Op::Cosh:
      return g * sinh(x);
    case Op::Asinh:
      return g * rsqrt(x * x + 1.0);
    case Op::Acosh:
      return g * rsqrt((x - 1.0) * (x + 1.0));
    case Op::Atanh:
      return g / (1.0 - x * x);
    case Op::Erf:
      return g * (exp(neg(x * x)) * (2.0 / std::sqrt(pi)));
    case Op::Erfc:
      return g * (exp(neg(x * x)) * (-2.0 / std::sqrt(pi)));
    case Op::Erfinv:
      return g * (exp(y * y) * (std::sqrt(pi) / 2.0));
    case Op::Sigmoid:
      return g * (y * (1.0 - y));
    case Op::Gelu: {  // Phi(x) + x phi(x), with Phi(x) = y / x from the forward's result: no
      // second erfc, the chain's costliest op (bench/RESULTS.md). Near 0, where y
      // would be rounded or subnormal, Phi's series: its next term is 2e-10 relative there.
      Tensor cdf = where(lt(abs(x), 1e-3), x * (1.0 / std::sqrt(2.0 * pi)) + 0.5, y / x);
      Tensor pdf = exp(x * x * -0.5) * (1.0 / std::sqrt(2.0 * pi));
      return g * (cdf + x * pdf);
    }
    case Op::GeluTanh: {  // 0.5 (1 + t) + 0.5 x (1 - t^2) u'(x), t = tanh(u)
      const double k = std::sqrt(2.0 / pi), c = 0.044715;
      Tensor x2 = x * x;
      Tensor t = tanh((x + x2 * x * c) * k);
      Tensor du = (x2 * (3.0 * c) + 1.0) * k;
      return g * ((t + 1.0) * 0.5 + x * (1.0 - t * t) * du * 0.5);
    }
    case Op::Silu: {
      Tensor s = sigmoid(x);
      return g * (s * (x * (1.0 - s) + 1.0));
    }
    case Op::Softplus:
      return where(gt(x, 20.0), g, g * sigmoid(x));  // torch's threshold 20
    case Op::Cbrt:
      return g / (y * y * 3.0);
    case Op::Lgamma:
      return g * digamma(x);
    case Op::Sinc: {  // pi (y cos y - sin y) / y^2 with y = pi x
      // The quotient cancels for small y (its error grows as 1 / y^2): below |y| = 1 the
      // series sum_n (-1)^n 2n / (2n + 1)! y^(2n - 1), whose 10th term is 4e-19 relative.
      Tensor px = x * pi, y2 = px * px;
      Tensor series = sinc_series(y2);
      Tensor quot = (cos(px) * px - sin(px)) / y2;
      return g * (where(lt(abs(px), 1.0), px * series, quot) * pi);
    }
    case Op::Deg2rad:
      return g * (pi / 180.0);
    case Op::Rad2deg:
      return g * (180.0 / pi);
    case Op::Frac:
      return g;
    case Op::Digamma:
      not_differentiable("digamma (it needs polygamma)", what);
    case Op::BitwiseNot:
    case Op::IsNan:
    case Op::IsInf:
    case Op::IsFinite:
    case Op::LogicalNot:
    case Op::Signbit:
      return Tensor();  // integer or bool results: never recorded
      LOOM_BINARY_OPS(LOOM_CASE)
      LOOM_REDUCE_OPS(LOOM_CASE) LOOM_OTHER_PRIMS(LOOM_CASE) case Op::NumOps : break;
  }
  throw Error(ErrorKind::Runtime, "internal: unary_grad of a non-unary op");
}

// Whether a binary rule reads its result (the others read only the operands).
bool binary_reads_result(Op op) { return op == Op::Pow || op == Op::Hypot || op == Op::Copysign; }

// The operands' gradients at the result's (broadcast) shape, in the computation type.
std::pair<Tensor, Tensor> binary_grad(Op op, const Tensor& g, const Tensor& a, const Tensor& b,
                                      const Tensor& y, bool na, bool nb, const std::string& what) {
  switch (op) {
    case Op::Add:
      return {g, g};
    case Op::Sub:
      return {g, nb ? neg(g) : Tensor()};
    case Op::Mul:
      return {na ? g * b : Tensor(), nb ? g * a : Tensor()};
    case Op::Div:
      return {na ? g / b : Tensor(), nb ? neg(g) * (a / b / b) : Tensor()};
    case Op::FloorDiv:
      not_differentiable("floor_divide", what);
    case Op::Remainder:
      return {g, nb ? neg(g) * floor(a / b) : Tensor()};
    case Op::Fmod:
      return {g, nb ? neg(g) * trunc(a / b) : Tensor()};
    case Op::Pow: {
      Tensor ga, gb;
      if (na) ga = where(eq(b, 0), 0.0, g * (b * pow(a, b - 1.0)));
      if (nb) gb = where(logical_and(eq(a, 0), ge(b, 0)), 0.0, g * (y * log(a)));
      return {ga, gb};
    }
    case Op::Maximum:
    case Op::Minimum: {  // ties split the gradient, as torch
      Tensor half = where(eq(a, b), g * 0.5, g);
      bool mx = op == Op::Maximum;
      return {na ? where(mx ? lt(a, b) : gt(a, b), 0.0, half) : Tensor(),
              nb ? where(mx ? gt(a, b) : lt(a, b), 0.0, half) : Tensor()};
    }
    case Op::Atan2: {
      Tensor d = a * a + b * b;
      return {na ? g * (b / d) : Tensor(), nb ? g * (neg(a) / d) : Tensor()};
    }
    case Op::Hypot:
      return {na ? g * (a / y) : Tensor(), nb ? g * (b / y) : Tensor()};
    case Op::Copysign:
      return {na ? g * where(eq(a, 0), 0.0, y / a) : Tensor(), nb ? zeros_like(g) : Tensor()};
    case Op::Nextafter:  // a one ulp step from a: a's where they differ; at a == b the result
                         // is b (torch gives b nothing there: nextafter(x, x) would lose x's)
      return {na ? where(eq(a, b), 0.0, g) : Tensor(), nb ? where(eq(a, b), g, 0.0) : Tensor()};
    case Op::Logaddexp:
      return {na ? g / (exp(b - a) + 1.0) : Tensor(), nb ? g / (exp(a - b) + 1.0) : Tensor()};
    case Op::Logaddexp2:
      return {na ? g / (exp2(b - a) + 1.0) : Tensor(), nb ? g / (exp2(a - b) + 1.0) : Tensor()};
    case Op::Xlogy:
      return {na ? where(logical_and(eq(a, 0), le(b, 0)), 0.0, where(eq(g, 0), 0.0, g * log(b)))
                 : Tensor(),
              nb ? g * (a / b) : Tensor()};
    case Op::Eq:
    case Op::Ne:
    case Op::Lt:
    case Op::Le:
    case Op::Gt:
    case Op::Ge:
    case Op::LogicalAnd:
    case Op::LogicalOr:
    case Op::LogicalXor:
    case Op::BitwiseAnd:
    case Op::BitwiseOr:
    case Op::BitwiseXor:
    case Op::BitwiseLeftShift:
    case Op::BitwiseRightShift:
      return {};  // bool or integer results: never recorded
      LOOM_UNARY_OPS(LOOM_CASE)
      LOOM_REDUCE_OPS(LOOM_CASE) LOOM_OTHER_PRIMS(LOOM_CASE) case Op::NumOps : break;
  }
  throw Error(ErrorKind::Runtime, "internal: binary_grad of a non-binary op");
}

const char* binary_node_name(Op op, bool tensors) {
  switch (op) {
#define LOOM_NAME(name, api, kind) \
  case Op::name:                   \
    return tensors ? #name "Backward0" : #name "Backward1";
    LOOM_BINARY_OPS(LOOM_NAME)
#undef LOOM_NAME
    default:
      return "?";
  }
}

// x's gradient from y = reduce(x) over ax, g at y's kept shape.
Tensor reduce_grad(Op op, const Tensor& g, const Tensor& x, const Tensor& y,
                   const std::vector<int>& ax, const Shape& xs, const std::string& what) {
  switch (op) {
    case Op::Sum:
      return g.expand(Dims(xs.begin(), xs.end()));  // x itself is not saved
    case Op::Prod: {
      // y / x where the row has no zero; at a row's only zero the product of the others;
      // 0 elsewhere (two zeros or more make every partial product 0).
      Dims d(ax.begin(), ax.end());
      Tensor xf = cast(x, y.dtype());
      Tensor zero = eq(xf, 0);
      Tensor nz = sum(zero, d, true);
      Tensor others = prod(where(zero, 1.0, xf), d, true);
      Tensor r = where(eq(nz, 0), y / xf,
                       where(logical_and(zero, eq(nz, 1)), cast(others, y.dtype()), 0.0));
      return g * r;
    }
    case Op::Max:
    case Op::Min: {  // even among ties, as torch's amax
      Dims d(ax.begin(), ax.end());
      Tensor hit = eq(x, y);
      return g * cast(hit, g.dtype()) / cast(sum(hit, d, true), g.dtype());
    }
    case Op::ArgMax:
    case Op::ArgMin:
    case Op::Any:
    case Op::All:
      return Tensor();  // integer or bool results: never recorded
      LOOM_UNARY_OPS(LOOM_CASE)
      LOOM_BINARY_OPS(LOOM_CASE) LOOM_OTHER_PRIMS(LOOM_CASE) case Op::NumOps : break;
  }
  (void)what;
  throw Error(ErrorKind::Runtime, "internal: reduce_grad of a non-reduction op");
}

const char* reduce_node_name(Op op, bool all) {
  switch (op) {
    case Op::Sum:
      return all ? "SumBackward0" : "SumBackward1";
    case Op::Prod:
      return all ? "ProdBackward0" : "ProdBackward1";
    case Op::Max:
      return "AmaxBackward0";
    case Op::Min:
      return "AminBackward0";
    default:
      return "?";
  }
}

#undef LOOM_CASE

// torch's node names: gelu_tanh -> GeluTanhBackward0.
const char* unary_node_name(Op op) {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (int i = 0; i < kNumUnary; ++i) {
      std::string n, api = op_name(Op(i));
      for (size_t k = 0; k < api.size(); ++k)
        if (api[k] != '_') n += char(k == 0 || api[k - 1] == '_' ? std::toupper(api[k]) : api[k]);
      v.push_back(n + "Backward0");
    }
    return v;
  }();
  return names[size_t(op)].c_str();
}

}  // namespace

void record_unary(Op op, const Tensor& x, Tensor& y) {
  Reads r = unary_reads(op);
  std::vector<Tensor> saved{r.x ? x : Tensor(), r.y ? y : Tensor()};
  std::string what = describe({x});
  record(
      y, unary_node_name(op), {x}, std::move(saved),
      [op, what](const Tensor& g, const std::vector<Tensor>& s, const std::vector<bool>&) {
        // A 16-bit derivative in float32, rounded once (as torch's backward kernels): each op
        // of the formula rounded to bfloat16 lost bits, and kept in float32 the formula's
        // value is cheaper to compute again where dy is read than to write (mark_recompute).
        auto wide = [](const Tensor& t) { return t.defined() ? cast(t, acc_float(t.dtype())) : t; };
        if (!is_reduced_float(g.dtype()))
          return std::vector<Tensor>{unary_grad(op, g, s[0], s[1], what)};
        return std::vector<Tensor>{
            cast(unary_grad(op, wide(g), wide(s[0]), wide(s[1]), what), g.dtype())};
      },
      r.y ? 1 : -1);
}

void record_binary(Op op, const Tensor& a, const Tensor& b, Tensor& y) {
  bool ry = binary_reads_result(op);
  std::string what = describe({a, b});
  DType ct = y.dtype();
  // What the rule reads: Add and Sub nothing; Mul each operand for the other's gradient, Div a
  // only for b's (a scaled score matrix, `scores * scale`, keeps nothing); the others both.
  bool ra = op != Op::Add && op != Op::Sub, rb = ra;
  if (op == Op::Mul || op == Op::Div) ra = b.requires_grad();
  if (op == Op::Mul) rb = a.requires_grad();
  record(
      y, binary_node_name(op, true), {a, b},
      {ra ? a : Tensor(), rb ? b : Tensor(), ry ? y : Tensor()},
      [op, what, ct, as = a.shape(), bs = b.shape(), at = a.dtype(), bt = b.dtype()](
          const Tensor& g, const std::vector<Tensor>& s, const std::vector<bool>& need) {
        Tensor a = s[0].defined() ? cast(s[0], ct) : Tensor();
        Tensor b = s[1].defined() ? cast(s[1], ct) : Tensor();
        auto [ga, gb] = binary_grad(op, g, a, b, s[2], need[0], need[1], what);
        return std::vector<Tensor>{need[0] && ga.defined() ? sum_to(ga, as, at) : Tensor(),
                                   need[1] && gb.defined() ? sum_to(gb, bs, bt) : Tensor()};
      },
      ry ? 2 : -1);
}

void record_reduce(Op op, const Tensor& x, const std::vector<int>& ax, Tensor& y) {
  bool reads_y = op != Op::Sum;
  Shape keep = keep_shape(x.shape(), ax);
  std::string what = describe({x});
  record(
      y, reduce_node_name(op, int(ax.size()) == x.dim()), {x},
      {op == Op::Sum ? Tensor() : x, reads_y ? y : Tensor()},
      [op, ax, keep, what, xs = x.shape()](const Tensor& g, const std::vector<Tensor>& s,
                                           const std::vector<bool>&) {
        Dims k(keep.begin(), keep.end());
        Tensor gk = g.reshape(k);
        Tensor yk = s[1].defined() ? s[1].reshape(k) : Tensor();
        Tensor x = s[0].defined() ? s[0] : Tensor();
        return std::vector<Tensor>{reduce_grad(op, gk, x, yk, ax, xs, what)};
      },
      reads_y ? 1 : -1);
}

void record_where(const Tensor& cond, const Tensor& a, const Tensor& b, Tensor& y) {
  record(y, "WhereBackward0", {cond, a, b}, {cond},
         [as = a.shape(), bs = b.shape(), at = a.dtype(), bt = b.dtype()](
             const Tensor& g, const std::vector<Tensor>& s, const std::vector<bool>& need) {
           return std::vector<Tensor>{Tensor(),
                                      need[1] ? sum_to(where(s[0], g, 0.0), as, at) : Tensor(),
                                      need[2] ? sum_to(where(s[0], 0.0, g), bs, bt) : Tensor()};
         });
}

namespace {

// Whether t's last two dims are stored column-major (t is the transpose of a row-major
// matrix, as a linear layer's weight.T is).
bool column_major(const Tensor& t) {
  int r = t.dim();
  return r >= 2 && t.shape()[r - 2] > 1 && t.strides()[r - 2] == 1 &&
         t.strides()[r - 1] == t.shape()[r - 2];
}

// x @ y, computed as (y^T @ x^T)^T when `transposed`: the same values, with the product's
// memory in the order of a column-major operand, so its gradient reaches the row-major tensor
// behind it as a view instead of a transposing copy.
Tensor product(const Tensor& x, const Tensor& y, bool transposed) {
  if (!transposed) return matmul(x, y);
  return matmul(y.transpose(-1, -2), x.transpose(-1, -2)).transpose(-1, -2);
}

}  // namespace

void record_matmul(const Tensor& a, const Tensor& b, Tensor& y) {
  const char* name = a.dim() == 2 && b.dim() == 2 ? "MmBackward0" : "BmmBackward0";
  record(y, name, {a, b}, {a, b},
         [](const Tensor& g, const std::vector<Tensor>& s, const std::vector<bool>& need) {
           const Tensor &a = s[0], &b = s[1];
           Tensor ga, gb;
           if (need[0])
             ga = sum_to(product(g, b.transpose(-1, -2), column_major(a)), a.shape(), a.dtype());
           if (need[1])
             gb = sum_to(product(a.transpose(-1, -2), g, column_major(b)), b.shape(), b.dtype());
           return std::vector<Tensor>{ga, gb};
         });
}

void record_cumsum(const Tensor& x, int dim, Tensor& y) {
  record(y, "CumsumBackward0", {x}, {},
         [dim](const Tensor& g, const std::vector<Tensor>&, const std::vector<bool>&) {
           // The reversed prefix sum: the total minus the sum before each element.
           return std::vector<Tensor>{sum(g, {dim}, true) - cumsum(g, dim) + g};
         });
}

void record_gather(const Tensor& x, int dim, const Tensor& index, Tensor& y) {
  record(y, "GatherBackward0", {x}, {index},
         [dim, xs = x.shape()](const Tensor& g, const std::vector<Tensor>& s,
                               const std::vector<bool>&) {
           // Each input element gets the sum of the gradients of the outputs that read it.
           Tensor z = zeros(xs, {g.dtype(), g.device()});
           return std::vector<Tensor>{scatter_add_prim(z, dim, s[0], g)};
         });
}

void record_scatter_add(const Tensor& self, int dim, const Tensor& index, const Tensor& src,
                        Tensor& y) {
  record(y, "ScatterAddBackward0", {self, src}, {index},
         [dim, ss = src.shape()](const Tensor& g, const std::vector<Tensor>& s,
                                 const std::vector<bool>& need) {
           // self passes through; each src element reaches the one output its index names (src
           // elements past the index's shape reach none).
           Tensor gs = need[1] ? pad_zeros(gather_prim(g, dim, s[0]), ss) : Tensor();
           return std::vector<Tensor>{need[0] ? g : Tensor(), gs};
         });
}

void record_same(const char* name, const Tensor& x, Tensor& y) {
  record(y, name, {x}, {},
         [dev = x.device()](const Tensor& g, const std::vector<Tensor>&, const std::vector<bool>&) {
           return std::vector<Tensor>{g.device() == dev ? g : g.to(dev)};
         });
}

void record_view(Tensor& result, const char* name, const Tensor& x,
                 std::function<Tensor(const Tensor&)> back) {
  record(
      result, name, {x}, {},
      [back = std::move(back)](const Tensor& g, const std::vector<Tensor>&,
                               const std::vector<bool>&) { return std::vector<Tensor>{back(g)}; });
  mark_view(result);
}

}  // namespace loom::autograd
