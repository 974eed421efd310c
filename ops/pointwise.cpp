// Pointwise ops: validation, type promotion, broadcasting, then one recorded node.
#include "ops/grad_node.h"
#include "ops/record.h"
#include "tensor/half.h"

namespace loom {
namespace {

Tensor unary_op(Op op, const char* name, const Tensor& x) {
  RuntimeLock lock;  // the records of this op: inner holds are a thread-local count
  LOOM_CHECK(x.defined(), Value, name, ": undefined tensor");
  UnaryKind k = unary_kind(op);
  DType in = x.dtype();
  if (op == Op::Neg)
    LOOM_CHECK(!is_bool(in), Type, name, ": not supported for bool tensors (shape ",
               shape_str(x.shape()), "); use logical_not");
  if (op == Op::BitwiseNot)
    LOOM_CHECK(!is_floating(in), Type, name, ": needs an integer or bool tensor, got ",
               dtype_name(in), " of shape ", shape_str(x.shape()));
  if (op == Op::Frac)  // torch: frac is not defined for integer tensors
    LOOM_CHECK(is_floating(in), Type, name, ": needs a floating tensor, got ", dtype_name(in),
               " of shape ", shape_str(x.shape()));
  Tensor src = x;
  DType out = in;
  if (k == UnaryKind::FloatOut && !is_floating(in)) {
    src = cast(x, kDefaultFloat);
    out = kDefaultFloat;
  }
  if (k == UnaryKind::BoolOut) out = DType::Bool;
  auto n = new_node(op, out, x.shape(), x.device());
  add_input(*n, src);
  Tensor y = record_node(std::move(n));
  if (autograd::needs_grad(x)) autograd::record_unary(op, x, y);
  return y;
}

struct BinaryTypes {
  DType ct, rt;  // computation and result dtypes
};

const Shape kRank0{};  // a scalar operand's shape

// Validates a binary op over operands of these shapes and dtypes; the result's types, and its
// shape into `out` (null: one side is rank 0, the result has the other's shape; a scalar op
// skips the copy).
BinaryTypes binary_types(Op op, const char* name, const Shape& sa, DType da, const Shape& sb,
                         DType db, DType pt, Shape* out) {
  BinaryKind k = binary_kind(op);
  if (k == BinaryKind::Bitwise)
    LOOM_CHECK(!is_floating(da) && !is_floating(db), Type, name,
               ": needs integer or bool tensors, got ", dtype_name(da), " ", shape_str(sa), " and ",
               dtype_name(db), " ", shape_str(sb));
  if (k == BinaryKind::Floating)
    LOOM_CHECK(is_floating(da) && is_floating(db), Type, name, ": needs floating tensors, got ",
               dtype_name(da), " ", shape_str(sa), " and ", dtype_name(db), " ", shape_str(sb));
  if (out) *out = broadcast_shapes(name, sa, sb);
  DType ct = pt;
  if (op == Op::BitwiseLeftShift || op == Op::BitwiseRightShift)
    LOOM_CHECK(!is_bool(ct), Type, name, ": needs integer tensors, got ", dtype_name(da), " ",
               shape_str(sa), " and ", dtype_name(db), " ", shape_str(sb));
  if (k == BinaryKind::TrueDiv && !is_floating(ct)) ct = kDefaultFloat;
  if ((op == Op::Sub) && is_bool(ct))
    throw Error(ErrorKind::Type, std::string(name) +
                                     ": subtraction of bool tensors is not supported (shapes " +
                                     shape_str(sa) + " and " + shape_str(sb) + ")");
  if ((op == Op::Pow || op == Op::FloorDiv || op == Op::Remainder || op == Op::Fmod) && is_bool(ct))
    ct = DType::Int64;
  DType rt = (k == BinaryKind::Compare || k == BinaryKind::Logical) ? DType::Bool : ct;
  return {ct, rt};
}

// result_type(a, b) for op `name`: a promotion with no result (uint64 with a signed integer)
// raises naming the op and the shapes too.
DType op_result_type(const char* name, const Tensor& a, const Tensor& b) {
  try {
    return result_type(a, b);
  } catch (const Error& e) {
    throw Error(e.kind(), std::string(name) + ": " + e.what() + " (shapes " + shape_str(a.shape()) +
                              " and " + shape_str(b.shape()) + ")");
  }
}

bool int_division(Op op, DType ct) {
  return (op == Op::FloorDiv || op == Op::Remainder || op == Op::Fmod) && !is_floating(ct);
}

// torch raises for an integer division by a zero element. The divisor's values are not known
// at the call, and reading them would sync mid-trace: the check is deferred to the next sync
// point (fusion/checks.h); the quotient's elements of a zero divisor hold 0 (prims.h).
void check_divisor_later(const char* name, const Tensor& divisor, const std::string& operands) {
  check_later(eq(divisor, 0), ErrorKind::Value,
              detail::cat(name, ": integer division by zero (", operands,
                          ": the divisor has a zero element)"));
}

Tensor binary_op(Op op, const char* name, const Tensor& a, const Tensor& b, DType pt) {
  RuntimeLock lock;  // the records of this op: inner holds are a thread-local count
  check_same_device(name, a, b);
  Shape out;
  BinaryTypes bt = binary_types(op, name, a.shape(), a.dtype(), b.shape(), b.dtype(), pt, &out);
  if (int_division(op, bt.ct) && numel(out) > 0)
    check_divisor_later(name, b,
                        detail::cat(dtype_name(a.dtype()), " ", shape_str(a.shape()), " by ",
                                    dtype_name(b.dtype()), " ", shape_str(b.shape())));
  auto n = new_node(op, bt.rt, out, a.device());
  add_operand(*n, a, bt.ct, n->shape);
  add_operand(*n, b, bt.ct, n->shape);
  Tensor y = record_node(std::move(n));
  if (autograd::needs_grad(a, b)) autograd::record_binary(op, a, b, y);
  return y;
}

// A tensor and a scalar (of dtype `t`; `scalar_first`: the scalar is the left operand). The
// scalar is an operand of the node itself (scalar_input): one recorded node, not two.
Tensor scalar_op(Op op, const char* name, const Tensor& a, Scalar s, DType t, bool scalar_first) {
  RuntimeLock lock;  // the records of this op: inner holds are a thread-local count
  // The result has a's shape (the scalar side is rank 0). A floating computation type (not a
  // bitwise op, which rejects it): binary_types' result without its checks, none of which can
  // fail then (a tensor-by-float op's every call).
  BinaryKind k = binary_kind(op);
  BinaryTypes bt;
  if (k != BinaryKind::Bitwise && is_floating(t))
    bt = {t, (k == BinaryKind::Compare || k == BinaryKind::Logical) ? DType::Bool : t};
  else
    bt = scalar_first ? binary_types(op, name, kRank0, t, a.shape(), a.dtype(), t, nullptr)
                      : binary_types(op, name, a.shape(), a.dtype(), kRank0, t, t, nullptr);
  // A Python int past int64's range (2^63 to 2^64) is a uint64's value only.
  LOOM_CHECK(!s.u64 || bt.ct == DType::UInt64 || is_floating(bt.ct), Value, name, ": the scalar ",
             uint64_t(s.i), " is out of range for ", dtype_name(bt.ct), " (tensor of shape ",
             shape_str(a.shape()), ")");
  if (bt.ct != t) {  // the scalar is cast first (integer true division): the general path
    Tensor c = const_tensor(s, t, a.device());
    return scalar_first ? binary_op(op, name, c, a, t) : binary_op(op, name, a, c, t);
  }
  if (scalar_first && int_division(op, bt.ct) && a.numel() > 0)
    check_divisor_later(
        name, a,
        detail::cat("the scalar ", s.i, " by ", dtype_name(a.dtype()), " ", shape_str(a.shape())));
  auto n = new_node(op, bt.rt, a.shape(), a.device());
  if (scalar_first) add_scalar(*n, s, t);
  add_operand(*n, a, bt.ct, n->shape);
  if (!scalar_first) add_scalar(*n, s, t);
  Tensor y = record_node(std::move(n));
  if (autograd::needs_grad(a)) {  // the scalar as a constant operand of the same rule
    Tensor c = const_tensor(s, t, a.device());
    if (scalar_first)
      autograd::record_binary(op, c, a, y);
    else
      autograd::record_binary(op, a, c, y);
  }
  return y;
}

// torch: an integer tensor to a negative integer scalar power is an error at the call
// ("Integers to negative integer powers are not allowed."). With a tensor exponent the
// values are not known at the call, and the result is defined elementwise instead, as in
// torch: 1 for base 1, +-1 for base -1 by the exponent's parity, 0 for any other base.
void check_scalar_rhs(Op op, const char* name, const Tensor& a, Scalar b, DType t) {
  // torch: an integer division by a zero scalar raises ZeroDivisionError at the call (a tensor
  // divisor's zero elements raise at the next sync point: check_divisor_later).
  if (int_division(op, t) && b.kind != Scalar::Kind::Float && b.i == 0)
    throw Error(ErrorKind::Value, std::string(name) + ": integer division by zero (" +
                                      dtype_name(a.dtype()) + " tensor of shape " +
                                      shape_str(a.shape()) + " by the scalar 0)");
  if (op != Op::Pow || is_floating(t) || b.kind == Scalar::Kind::Float || b.i >= 0) return;
  throw Error(ErrorKind::Value, std::string(name) + ": integers to negative integer powers are " +
                                    "not allowed (" + dtype_name(a.dtype()) + " tensor of shape " +
                                    shape_str(a.shape()) + " to the power " + std::to_string(b.i) +
                                    ")");
}

}  // namespace

namespace {

// v as a tensor of floating dtype `dt` holds it (rounded to its precision).
double held_as(DType dt, double v) {
  switch (dt) {
    case DType::Float32:
      return double(float(v));
    case DType::BFloat16:
      return double(bf16_to_f32(f32_to_bf16(float(v))));
    case DType::Float16:
      return double(f16_to_f32(f32_to_f16(float(v))));
    default:
      return v;
  }
}

}  // namespace

Tensor cast(const Tensor& x, DType t) {
  if (x.dtype() == t) return x;
  // A floating constant cast to another floating dtype is a constant of the value x holds: no
  // kernel of its own (a 16-bit loss's upstream gradient of ones, cast up by each rule). Under
  // the runtime's lock: another thread's flush of the same trace may make x ready meanwhile.
  if (is_floating(x.dtype()) && is_floating(t) && !autograd::needs_grad(x)) {
    std::lock_guard<std::recursive_mutex> lock(runtime_mutex());
    if (const std::shared_ptr<Storage>& st = x.buffer()->cur;
        st->pending() && st->node->op == Op::Const)
      return const_tensor(Scalar(held_as(t, held_as(x.dtype(), st->node->value.f))), t, x.device(),
                          x.shape());
  }
  auto n = new_node(Op::Cast, t, x.shape(), x.device());
  add_input(*n, x);
  Tensor y = record_node(std::move(n));
  if (autograd::needs_grad(x)) autograd::record_same("ToCopyBackward0", x, y);
  return y;
}

#define LOOM_X(name, api, kind) \
  Tensor api(const Tensor& x) { return unary_op(Op::name, #api, x); }
LOOM_UNARY_OPS(LOOM_X)
#undef LOOM_X

#define LOOM_X(name, api, kind)                                         \
  Tensor api(const Tensor& a, const Tensor& b) {                        \
    return binary_op(Op::name, #api, a, b, op_result_type(#api, a, b)); \
  }                                                                     \
  Tensor api(const Tensor& a, Scalar b) {                               \
    DType t = result_type(a, b);                                        \
    check_scalar_rhs(Op::name, #api, a, b, t);                          \
    return scalar_op(Op::name, #api, a, b, t, false);                   \
  }                                                                     \
  Tensor api(Scalar a, const Tensor& b) {                               \
    DType t = result_type(b, a);                                        \
    return scalar_op(Op::name, #api, b, a, t, true);                    \
  }
LOOM_BINARY_OPS(LOOM_X)
#undef LOOM_X

// Unary methods of Tensor, from the same table.
#define LOOM_X(name, api, kind) \
  Tensor Tensor::api() const { return loom::api(*this); }
LOOM_UNARY_OPS(LOOM_X)
#undef LOOM_X

Tensor operator-(const Tensor& x) { return neg(x); }
Tensor rsub(const Tensor& a, Scalar b) { return sub(b, a); }

Tensor gelu(const Tensor& x, const std::string& approximate) {
  if (approximate == "none") return gelu(x);
  LOOM_CHECK(approximate == "tanh", Value, "gelu: approximate must be 'none' or 'tanh', got '",
             approximate, "'");
  return gelu_tanh(x);
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  check_same_device("where", cond, a);
  check_same_device("where", a, b);
  LOOM_CHECK(is_bool(cond.dtype()), Type, "where: condition must be a bool tensor, got ",
             dtype_name(cond.dtype()), " of shape ", shape_str(cond.shape()));
  Shape out =
      broadcast_shapes("where", broadcast_shapes("where", cond.shape(), a.shape()), b.shape());
  DType t = op_result_type("where", a, b);
  auto n = new_node(Op::Where, t, out, a.device());
  {
    NoGradGuard operands;  // the node's own rule covers the casts
    n->in.push_back(as_input(expand_to(cond, out)));
    n->in.push_back(as_input(expand_to(cast(a, t), out)));
    n->in.push_back(as_input(expand_to(cast(b, t), out)));
  }
  Tensor y = record_node(std::move(n));
  if (autograd::needs_grad(a, b)) autograd::record_where(cond, a, b, y);
  return y;
}
Tensor where(const Tensor& c, Scalar a, const Tensor& b) {
  return where(c, const_tensor(a, result_type(b, a), b.device()), b);
}
Tensor where(const Tensor& c, const Tensor& a, Scalar b) {
  return where(c, a, const_tensor(b, result_type(a, b), a.device()));
}
Tensor where(const Tensor& c, Scalar a, Scalar b) {
  DType t = a.category() >= b.category() ? a.default_dtype() : b.default_dtype();
  return where(c, const_tensor(a, t, c.device()), const_tensor(b, t, c.device()));
}

Tensor clamp(const Tensor& x, std::optional<Scalar> lo, std::optional<Scalar> hi) {
  LOOM_CHECK(lo || hi, Value, "clamp: at least one of min and max must be given");
  Tensor y = x;
  if (lo) y = maximum(y, *lo);
  if (hi) y = minimum(y, *hi);
  return y;
}
Tensor clamp(const Tensor& x, const std::optional<Tensor>& lo, const std::optional<Tensor>& hi) {
  LOOM_CHECK(lo || hi, Value, "clamp: at least one of min and max must be given");
  Tensor y = x;
  if (lo) y = maximum(y, *lo);
  if (hi) y = minimum(y, *hi);
  return y;
}

Tensor lerp(const Tensor& a, const Tensor& b, Scalar w) { return a + (b - a) * w; }
Tensor lerp(const Tensor& a, const Tensor& b, const Tensor& w) { return a + w * (b - a); }
Tensor addcmul(const Tensor& x, const Tensor& a, const Tensor& b, Scalar v) {
  return x + a * b * v;
}
Tensor addcdiv(const Tensor& x, const Tensor& a, const Tensor& b, Scalar v) {
  return x + a / b * v;
}

}  // namespace loom
