// Python operators on loom.Tensor: + - * / // % ** @, comparisons, & | ^ ~, unary - + abs,
// reflected forms with Python scalars on the left, and in-place forms (+= ...).
#include "bindings/common.h"

namespace loom::py {
namespace {

using BinT = Tensor (*)(const Tensor&, const Tensor&);
using BinS = Tensor (*)(const Tensor&, Scalar);
using BinR = Tensor (*)(Scalar, const Tensor&);

// Binds __name__ (tensor or scalar on the right) and, if given, __rname__ (scalar on the left).
template <BinT ft, BinS fs, BinR fr>
void binop(nb::class_<Tensor>& c, const char* name, const char* rname, const char* doc) {
  c.def(
      name, [](const Tensor& a, const Tensor& b) { return ft(a, b); }, nb::is_operator(), doc);
  c.def(
      name, [](const Tensor& a, Scalar b) { return fs(a, b); }, nb::is_operator(), doc);
  if (rname)
    c.def(
        rname, [](const Tensor& a, Scalar b) { return fr(b, a); }, nb::is_operator(), doc);
}

// In-place through the op's out-of-place result (torch's rule: the result must be castable
// to the target's dtype, and must not broadcast the target).
Tensor& assign(Tensor& t, const Tensor& v, const char* op) {
  LOOM_CHECK(
      dtype_category(v.dtype()) <= dtype_category(t.dtype()) || dtype_category(v.dtype()) == 0,
      Type, op, ": result type ", dtype_name(v.dtype()),
      " can't be cast to the desired output type ", dtype_name(t.dtype()));
  LOOM_CHECK(v.shape() == t.shape(), Value, op, ": output of shape ", shape_str(t.shape()),
             " does not match the broadcast shape ", shape_str(v.shape()));
  return t.copy_(v);
}

template <BinT ft, BinS fs>
void ibinop(nb::class_<Tensor>& c, const char* name, const char* doc) {
  auto ref = nb::rv_policy::reference;
  c.def(
      name, [name](Tensor& a, const Tensor& b) -> Tensor& { return assign(a, ft(a, b), name); },
      nb::is_operator(), ref, doc);
  c.def(
      name, [name](Tensor& a, Scalar b) -> Tensor& { return assign(a, fs(a, b), name); },
      nb::is_operator(), ref, doc);
}

#define LOOM_OVL(fn) \
  static_cast<BinT>(&loom::fn), static_cast<BinS>(&loom::fn), static_cast<BinR>(&loom::fn)

}  // namespace

void init_operators(nb::module_& m) {
  auto c = nb::borrow<nb::class_<Tensor>>(nb::type<Tensor>());
  binop<LOOM_OVL(add)>(c, "__add__", "__radd__", "self + other (loom.add).");
  binop<LOOM_OVL(sub)>(c, "__sub__", "__rsub__", "self - other (loom.sub).");
  binop<LOOM_OVL(mul)>(c, "__mul__", "__rmul__", "self * other (loom.mul).");
  binop<LOOM_OVL(div)>(c, "__truediv__", "__rtruediv__", "self / other (loom.div).");
  binop<LOOM_OVL(floor_divide)>(c, "__floordiv__", "__rfloordiv__",
                                "self // other (loom.floor_divide).");
  binop<LOOM_OVL(remainder)>(c, "__mod__", "__rmod__", "self % other (loom.remainder).");
  binop<LOOM_OVL(pow)>(c, "__pow__", "__rpow__", "self ** other (loom.pow).");
  binop<LOOM_OVL(bitwise_and)>(c, "__and__", "__rand__", "self & other (loom.bitwise_and).");
  binop<LOOM_OVL(bitwise_or)>(c, "__or__", "__ror__", "self | other (loom.bitwise_or).");
  binop<LOOM_OVL(bitwise_xor)>(c, "__xor__", "__rxor__", "self ^ other (loom.bitwise_xor).");
  binop<LOOM_OVL(bitwise_left_shift)>(c, "__lshift__", "__rlshift__",
                                      "self << other (loom.bitwise_left_shift).");
  binop<LOOM_OVL(bitwise_right_shift)>(c, "__rshift__", "__rrshift__",
                                       "self >> other (loom.bitwise_right_shift).");
  binop<LOOM_OVL(eq)>(c, "__eq__", nullptr, "self == other, elementwise (loom.eq).");
  binop<LOOM_OVL(ne)>(c, "__ne__", nullptr, "self != other, elementwise (loom.ne).");
  binop<LOOM_OVL(lt)>(c, "__lt__", nullptr, "self < other (loom.lt).");
  binop<LOOM_OVL(le)>(c, "__le__", nullptr, "self <= other (loom.le).");
  binop<LOOM_OVL(gt)>(c, "__gt__", nullptr, "self > other (loom.gt).");
  binop<LOOM_OVL(ge)>(c, "__ge__", nullptr, "self >= other (loom.ge).");
  c.def(
      "__matmul__", [](const Tensor& a, const Tensor& b) { return matmul(a, b); },
      nb::is_operator(), "self @ other (loom.matmul).");
  c.def(
      "__neg__", [](const Tensor& a) { return neg(a); }, "-self (loom.neg).");
  c.def(
      "__pos__", [](const Tensor& a) { return a; }, "+self (itself).");
  c.def(
      "__abs__", [](const Tensor& a) { return abs(a); }, "abs(self) (loom.abs).");
  c.def(
      "__invert__", [](const Tensor& a) { return bitwise_not(a); },
      "~self (loom.bitwise_not; logical not for bool).");
  c.def(
      "__round__", [](const Tensor& a, nb::handle) { return round(a); }, "ndigits"_a = nb::none(),
      "round(self), half to even (loom.round).");

  // In place: the four with native in-place kernels, then the rest through assign().
  auto ref = nb::rv_policy::reference;
  c.def(
      "__iadd__", [](Tensor& a, const Tensor& b) -> Tensor& { return a.add_(b); },
      nb::is_operator(), ref, "self += other (add_).");
  c.def(
      "__iadd__", [](Tensor& a, Scalar b) -> Tensor& { return a.add_(b); }, nb::is_operator(), ref,
      "self += other (add_).");
  c.def(
      "__isub__", [](Tensor& a, const Tensor& b) -> Tensor& { return a.sub_(b); },
      nb::is_operator(), ref, "self -= other (sub_).");
  c.def(
      "__isub__", [](Tensor& a, Scalar b) -> Tensor& { return a.sub_(b); }, nb::is_operator(), ref,
      "self -= other (sub_).");
  c.def(
      "__imul__", [](Tensor& a, const Tensor& b) -> Tensor& { return a.mul_(b); },
      nb::is_operator(), ref, "self *= other (mul_).");
  c.def(
      "__imul__", [](Tensor& a, Scalar b) -> Tensor& { return a.mul_(b); }, nb::is_operator(), ref,
      "self *= other (mul_).");
  c.def(
      "__itruediv__", [](Tensor& a, const Tensor& b) -> Tensor& { return a.div_(b); },
      nb::is_operator(), ref, "self /= other (div_).");
  c.def(
      "__itruediv__", [](Tensor& a, Scalar b) -> Tensor& { return a.div_(b); }, nb::is_operator(),
      ref, "self /= other (div_).");
  ibinop<static_cast<BinT>(&floor_divide), static_cast<BinS>(&floor_divide)>(c, "__ifloordiv__",
                                                                             "self //= other.");
  ibinop<static_cast<BinT>(&remainder), static_cast<BinS>(&remainder)>(c, "__imod__",
                                                                       "self %= other.");
  ibinop<static_cast<BinT>(&pow), static_cast<BinS>(&pow)>(c, "__ipow__", "self **= other.");
  ibinop<static_cast<BinT>(&bitwise_and), static_cast<BinS>(&bitwise_and)>(c, "__iand__",
                                                                           "self &= other.");
  ibinop<static_cast<BinT>(&bitwise_or), static_cast<BinS>(&bitwise_or)>(c, "__ior__",
                                                                         "self |= other.");
  ibinop<static_cast<BinT>(&bitwise_xor), static_cast<BinS>(&bitwise_xor)>(c, "__ixor__",
                                                                           "self ^= other.");
  ibinop<static_cast<BinT>(&bitwise_left_shift), static_cast<BinS>(&bitwise_left_shift)>(
      c, "__ilshift__", "self <<= other.");
  ibinop<static_cast<BinT>(&bitwise_right_shift), static_cast<BinS>(&bitwise_right_shift)>(
      c, "__irshift__", "self >>= other.");
}

Tensor& assign_result(Tensor& t, const Tensor& v, const char* op) { return assign(t, v, op); }

}  // namespace loom::py
