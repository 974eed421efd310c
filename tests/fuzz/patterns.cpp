#include "patterns.h"

#include <vector>

#include "exec.h"

namespace loom::fuzz {

bool reads_between_writes(const Program& p) {
  Env env;
  env.shadow = true;
  struct Read {
    int root = -1, flush = -1;
    bool written = false;  // x was written after y read it, in the same flush
  };
  std::vector<Read> reads;
  int flush = 0;
  for (const Instr& in : p.code) {
    if (in.op == "sync" || in.op == "peek") ++flush;
    if (in.out >= 0) env.grow(in.out);
    exec(in, env);
    auto root = [&](const Operand& o) { return o.is_val ? env.root[size_t(o.val)] : -1; };
    if (in.out >= 0 && env.root[size_t(in.out)] == in.out) {
      reads.resize(size_t(in.out) + 1);
      for (auto& a : in.args)
        if (a.is_val) reads[size_t(in.out)] = {root(a), flush, false};
    }
    if (!is_inplace_op(in.op)) continue;
    int t = root(in.args[0]);
    for (size_t y = 0; y < reads.size(); ++y) {
      Read& r = reads[y];
      if (r.flush != flush) continue;
      if (int(y) == t && r.written)
        for (size_t i = 1; i < in.args.size(); ++i)
          if (root(in.args[i]) == r.root) return true;
      if (r.root == t && int(y) != t) r.written = true;
    }
  }
  return false;
}

bool updates_pending(const Program& p) {
  Env env;
  env.shadow = true;
  std::vector<int> made;  // the flush in which each fresh value was computed, -1 if none
  int flush = 0;
  for (const Instr& in : p.code) {
    if (in.op == "sync" || in.op == "peek") ++flush;
    if (in.out >= 0) env.grow(in.out);
    exec(in, env);
    if (in.out >= 0 && env.root[size_t(in.out)] == in.out && in.op != "input") {
      if (made.size() <= size_t(in.out)) made.resize(size_t(in.out) + 1, -1);
      made[size_t(in.out)] = flush;
    }
    if (!is_inplace_op(in.op) || !in.args[0].is_val) continue;
    int t = env.root[size_t(in.args[0].val)];
    if (t >= 0 && size_t(t) < made.size() && made[size_t(t)] == flush) return true;
  }
  return false;
}

}  // namespace loom::fuzz
