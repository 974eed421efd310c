#pragma once
// Reverse-mode autograd over the lazy graph. Every differentiable op records, beside its
// forward nodes, a backward node that says how the gradient of its result becomes gradients
// of its inputs; backward() walks those nodes and records the gradient ops into the trace like
// any other op, so the gradients are lazy tensors and forward + backward + the optimizer's
// update run as one flush at the step's sync point.
//
// A tensor's place in the graph (requires_grad, grad, grad_fn, hooks) is shared by its copies
// (like torch's TensorImpl); a view, a detach() or an op's result is a new place.
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace loom {

class Tensor;

// Whether ops record backward nodes: thread-local, on by default.
bool is_grad_enabled();
void set_grad_enabled(bool on);

// RAII: gradients off (or on, or as given) for a scope, restored at its end.
class GradModeGuard {
 public:
  explicit GradModeGuard(bool on) : prev_(is_grad_enabled()) { set_grad_enabled(on); }
  ~GradModeGuard() { set_grad_enabled(prev_); }
  GradModeGuard(const GradModeGuard&) = delete;
  GradModeGuard& operator=(const GradModeGuard&) = delete;

 private:
  bool prev_;
};
struct NoGradGuard : GradModeGuard {
  NoGradGuard() : GradModeGuard(false) {}
};
struct EnableGradGuard : GradModeGuard {
  EnableGradGuard() : GradModeGuard(true) {}
};

namespace autograd {

// torch.autograd.backward: accumulates into the .grad of the leaves the outputs depend on.
// `grads[i]` may be undefined for a one-element output (a gradient of ones). retain_graph
// defaults to create_graph.
void backward(const std::vector<Tensor>& outputs, const std::vector<Tensor>& grads = {},
              std::optional<bool> retain_graph = {}, bool create_graph = false,
              const std::vector<Tensor>& inputs = {});

// torch.autograd.grad: the gradients of `outputs` with respect to `inputs`, returned instead of
// accumulated. An input the outputs do not depend on is an error unless allow_unused (then
// its entry is an undefined Tensor).
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {},
                         std::optional<bool> retain_graph = {}, bool create_graph = false,
                         bool allow_unused = false);

}  // namespace autograd
}  // namespace loom
