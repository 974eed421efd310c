// explain()'s account of the backward graph: the saved tensors of each node and what its rule
// recomputes instead of saving (the save-vs-recompute policy of docs/ARCHITECTURE.md, seen
// on one step).
#include <algorithm>
#include <set>
#include <sstream>
#include <tuple>
#include <unordered_set>

#include "ops/grad_node.h"
#include "ops/ops.h"

namespace loom::autograd {

void note_recompute(const Tensor& result, std::string what) {
  if (const auto& fn = result.grad_fn()) fn->recomputes = std::move(what);
}

std::string explain_graph(const Tensor& t) {
  const std::shared_ptr<GradNode>& root = t.grad_fn();
  if (!root) return {};
  // Every node that reaches t, latest first (the order backward runs them in).
  std::vector<GradNode*> all;
  std::unordered_set<GradNode*> seen{root.get()};
  std::vector<GradNode*> stack{root.get()};
  while (!stack.empty()) {
    GradNode* n = stack.back();
    stack.pop_back();
    all.push_back(n);
    for (const Edge& e : n->next)
      if (e.fn && seen.insert(e.fn.get()).second) stack.push_back(e.fn.get());
  }
  std::sort(all.begin(), all.end(), [](GradNode* a, GradNode* b) { return a->seq > b->seq; });
  std::set<std::tuple<const void*, int64_t, int64_t>> counted;
  int64_t bytes = 0, tensors = 0, recomputing = 0;
  std::ostringstream body;
  for (GradNode* n : all) {
    body << "  " << n->name;
    if (n->released) body << " (freed by an earlier backward)";
    body << "\n";
    for (const SavedTensor& s : n->saved) {
      if (!s.data.defined()) continue;
      SavedKey k = saved_key(s.data);
      bool again = !counted.insert({k.buf, k.offset, k.bytes}).second;
      if (!again) bytes += k.bytes, ++tensors;
      body << "    saves " << (s.is_output ? "its result " : "") << dtype_name(s.data.dtype())
           << shape_str(s.data.shape()) << ", " << k.bytes << " bytes"
           << (again ? " (kept by a node above too)" : "") << "\n";
    }
    if (!n->recomputes.empty()) {
      body << "    recomputes " << n->recomputes << "\n";
      ++recomputing;
    }
  }
  std::ostringstream os;
  os << "backward graph: " << all.size() << " nodes; saved for backward " << tensors << " tensors, "
     << bytes << " bytes; " << recomputing << " nodes recompute\n"
     << body.str();
  return os.str();
}

}  // namespace loom::autograd
