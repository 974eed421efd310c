#include "ops/op_table.h"

namespace loom {

const char* op_name(Op op) {
  switch (op) {
#define LOOM_X(name, api, kind) \
  case Op::name: return #api;
    LOOM_UNARY_OPS(LOOM_X) LOOM_BINARY_OPS(LOOM_X) LOOM_REDUCE_OPS(LOOM_X)
#undef LOOM_X
    case Op::Where: return "where";
    case Op::Cast: return "cast";
    case Op::Copy: return "copy";
    case Op::Const: return "const";
    case Op::Iota: return "iota";
    case Op::Rand: return "rand";
    case Op::Randn: return "randn";
    case Op::Empty: return "empty";
    case Op::MatMul: return "matmul";
    case Op::CumSum: return "cumsum";
    case Op::NumOps: break;
  }
  return "?";
}

bool is_unary(Op op) {
  switch (op) {
#define LOOM_X(name, api, kind) case Op::name:
    LOOM_UNARY_OPS(LOOM_X)
#undef LOOM_X
    return true;
    default: return false;
  }
}

bool is_binary(Op op) {
  switch (op) {
#define LOOM_X(name, api, kind) case Op::name:
    LOOM_BINARY_OPS(LOOM_X)
#undef LOOM_X
    return true;
    default: return false;
  }
}

bool is_reduce(Op op) {
  switch (op) {
#define LOOM_X(name, api, kind) case Op::name:
    LOOM_REDUCE_OPS(LOOM_X)
#undef LOOM_X
    return true;
    default: return false;
  }
}

UnaryKind unary_kind(Op op) {
  switch (op) {
#define LOOM_X(name, api, kind) \
  case Op::name: return UnaryKind::kind;
    LOOM_UNARY_OPS(LOOM_X)
#undef LOOM_X
    default: return UnaryKind::Same;
  }
}

BinaryKind binary_kind(Op op) {
  switch (op) {
#define LOOM_X(name, api, kind) \
  case Op::name: return BinaryKind::kind;
    LOOM_BINARY_OPS(LOOM_X)
#undef LOOM_X
    default: return BinaryKind::Arith;
  }
}

ReduceKind reduce_kind(Op op) {
  switch (op) {
#define LOOM_X(name, api, kind) \
  case Op::name: return ReduceKind::kind;
    LOOM_REDUCE_OPS(LOOM_X)
#undef LOOM_X
    default: return ReduceKind::Keep;
  }
}

bool is_pointwise(Op op) {
  return is_unary(op) || is_binary(op) || op == Op::Where || op == Op::Cast || op == Op::Copy ||
         op == Op::Const || op == Op::Iota || op == Op::Rand || op == Op::Randn;
}

bool is_opaque(Op op) { return op == Op::MatMul || op == Op::CumSum; }

}  // namespace loom
