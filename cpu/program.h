#pragma once
// The tile program of a group: which nodes each pass evaluates, in what order, in which
// register, and when reductions accumulate and outputs store. Built once per signature.
#include <array>
#include <string>
#include <vector>

#include "cpu/ctype.h"
#include "fusion/group.h"

namespace loom::cpu {

struct StepList {
  std::vector<int> nodes;  // Full nodes in evaluation order
  std::vector<int> reg;    // register slot of each step
  int slots = 0;
};

struct Program {
  std::vector<GNode> nodes;
  std::vector<CT> ct;         // compute type per node
  std::vector<int> reduces;   // reduce node ids
  std::vector<int> row_slot;  // per node: its slot among Row nodes, or -1
  std::vector<int> acc_slot;  // per node: its slot among reduce nodes, or -1
  // Per node: 1 for an Exp rewritten to read x and y of its input x - y (a Sub nothing else
  // reads), computed as one instruction; the Sub is left out of the steps.
  std::vector<uint8_t> exp_sub;
  // Per node: an Eq/Ne of an Iota nothing else reads (its value the position along the group's
  // one reduced dim, offset included) and a value that is the same across each row (a Row
  // node, or a load whose strides over the reduced dim are 0): the Iota's leaf, else -1. The
  // node's `a` is then that value and `b` none: a one-hot mask set a row at a time (each row
  // hits at most one column) instead of an index register and a compare per element.
  std::vector<int> idx_eq;
  // Per node: an Add/Sub/Mul whose argument was an Add/Sub/Mul nothing else reads, computed
  // as one instruction (one loop over the tile instead of two). Rewritten to a, c = the inner
  // op's arguments, b = this node's other argument; pair_op is the inner op (Op::Const where
  // none) and pair_first says whether the inner result was this op's first argument.
  std::vector<Op> pair_op;
  std::vector<uint8_t> pair_first;
  // Per node: a Relu folded onto the Add/Sub/Mul (folded pair or not) it alone read; the node
  // takes that op's arguments and pair fields (a plain op gets pair_op Copy: `a` as is).
  std::vector<uint8_t> pair_relu;
  // Per node: an Exp/Tanh/Sigmoid (float32) nothing else reads folded into the `b` operand of
  // this Add/Sub/Mul (pair or plain: a plain op becomes pair_op Copy); `b` is then that unary's
  // input and the instruction applies it in the same loop. Op::Const where none.
  std::vector<Op> pair_f;
  // Per node with pair_f: up to three Add/Sub/Mul of `b` by a float32 Const applied before f
  // (tanh(x * 1.5 + 0.5)): the op (or folded pair) nothing else read, in f's loop instead of
  // its own, and an exp_sub's - k; `b` is then the tensor operand. Op::Const where a step is
  // unused; k the Const node; k_first: the constant was the op's first argument.
  struct PreStep {
    Op op = Op::Const;
    int k = -1;
    bool k_first = false;
  };
  std::vector<std::array<PreStep, 3>> pre;
  // Per node: a float32 Add/Sub/Mul (relu'd or not) of a pair_f instruction nothing else reads
  // and another value w, folded into that instruction as a last step: the node takes its
  // fields, tail_op is the op (Op::Const where none), tail_arg w's node (-1 where none) and
  // tail_first whether the folded value was the first argument. pair_relu then applies after it.
  std::vector<Op> tail_op;
  std::vector<int> tail_arg;
  std::vector<uint8_t> tail_first;
  // Per node: 1 for a load of a leaf that an output overwrites (GOutput::overwrites) and that
  // a step after the output's store still reads (a fold moved the reader there): the load
  // copies the leaf's values at its own step instead of pointing into its memory.
  std::vector<uint8_t> load_copy;
  // Per node: 1 for a float32 value's Cast to float16 / bfloat16 that only outputs read: its
  // values are its input's, as the store rounds them (cpu/program.cpp mark_store_casts).
  std::vector<uint8_t> store_cast;
  int n_row = 0;
  int passes = 1;
  int last = 0;  // final pass
  // Rows short enough to stay in registers: every pass over one tile, each node once.
  StepList single;
  // Bytes of memory one element of such a tile touches: its registers, its loads and the
  // per-row values spread over it (cpu/interp_eval.cpp), at the widest compute type. The
  // interpreter sizes tiles by it to keep them in L1 (cpu/interp.cpp).
  int64_t tile_bytes = 4;
  // Long rows: each pass re-walks the row in chunks, recomputing what it needs.
  std::vector<StepList> per_pass;
  std::vector<std::vector<int>> row_nodes;  // Row nodes computed at the start of each pass
  std::string text() const;
};

Program build_program(const Group& g);

}  // namespace loom::cpu
