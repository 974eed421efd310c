// Autograd: Tensor.requires_grad / grad / grad_fn / backward / detach / hooks, and the
// module functions that loom.autograd (python/loom/autograd.py) builds on.
#include <nanobind/stl/function.h>
#include <nanobind/stl/shared_ptr.h>

#include "bindings/common.h"
#include "ops/grad_node.h"

namespace loom::py {
namespace {

// The handle register_hook returns (torch's RemovableHandle).
struct HookHandle {
  Tensor t;
  int id;
  void remove() { t.remove_hook(id); }
};

std::vector<Tensor> tensors_of(nb::handle h) {
  std::vector<Tensor> v;
  if (h.is_none()) return v;
  if (nb::isinstance<Tensor>(h)) return {nb::cast<Tensor>(h)};
  for (nb::handle x : h) v.push_back(x.is_none() ? Tensor() : nb::cast<Tensor>(x));
  return v;
}

nb::object grad_or_none(const Tensor& g) { return g.defined() ? nb::cast(g) : nb::none(); }

}  // namespace

void init_autograd(nb::module_& m) {
  nb::class_<GradNode>(m, "GradFn", "The backward node of the op that made a tensor (grad_fn).")
      .def(
          "name", [](const GradNode& n) { return n.name; }, "The node's name: MulBackward0, ...")
      .def_prop_ro(
          "next_functions",
          [](const GradNode& n) {
            nb::list l;
            for (const Edge& e : n.next)
              l.append(nb::make_tuple(e.fn ? nb::cast(e.fn) : nb::none(), 0));
            return nb::tuple(l);
          },
          "The nodes of the inputs' gradients (None for a leaf or an input without one).")
      .def("__repr__", [](const GradNode& n) { return "<" + n.name + " object>"; });
  nb::class_<HookHandle>(m, "RemovableHandle", "Removes the hook register_hook added.")
      .def("remove", &HookHandle::remove);

  auto t = nb::borrow<nb::class_<Tensor>>(nb::type<Tensor>());
  t.def_prop_rw(
       "requires_grad", &Tensor::requires_grad, [](Tensor& x, bool on) { x.requires_grad_(on); },
       "Whether ops on this tensor record their backward (settable on a leaf).")
      .def(
          "requires_grad_", [](Tensor& x, bool on) -> Tensor& { return x.requires_grad_(on); },
          "requires_grad"_a = true, nb::rv_policy::reference,
          "Sets requires_grad in place; returns self.")
      .def_prop_rw(
          "grad", [](const Tensor& x) { return grad_or_none(x.grad()); },
          [](Tensor& x, std::optional<Tensor> g) { x.set_grad(g ? *g : Tensor()); },
          nb::arg("grad").none(),
          "The gradient accumulated by backward() (None until then); assign None to clear it.")
      .def_prop_ro("is_leaf", &Tensor::is_leaf,
                   "True unless the tensor was made by an op that records its backward.")
      .def_prop_ro(
          "grad_fn",
          [](const Tensor& x) -> nb::object {
            return x.grad_fn() ? nb::cast(x.grad_fn()) : nb::none();
          },
          "The backward node that made this tensor (None for a leaf).")
      .def_prop_ro("retains_grad", &Tensor::retains_grad,
                   "Whether backward() keeps this non-leaf's gradient in .grad.")
      .def_prop_ro("_version", &Tensor::version, "In-place writes to the buffer so far.")
      .def(
          "backward",
          [](const Tensor& x, nb::object gradient, std::optional<bool> retain_graph,
             bool create_graph, nb::object inputs) {
            Tensor g = gradient.is_none() ? Tensor() : nb::cast<Tensor>(gradient);
            autograd::backward({x}, {g}, retain_graph, create_graph, tensors_of(inputs));
          },
          "gradient"_a = nb::none(), "retain_graph"_a = nb::none(), "create_graph"_a = false,
          "inputs"_a = nb::none(),
          "Computes the gradients of this tensor with respect to the leaves it depends on and "
          "accumulates them into their .grad. Records the work: it runs at the next sync point.")
      .def("detach", &Tensor::detach, "The same data, outside the autograd graph.")
      .def_prop_rw(
          "data", &Tensor::detach, [](Tensor& x, const Tensor& d) { x.set_data(d); },
          "The same data outside the graph; assigning replaces this tensor's data (memory, "
          "shape, dtype, device) and keeps its place in the graph (requires_grad, grad).")
      .def(
          "detach_", [](Tensor& x) -> Tensor& { return x.detach_(); }, nb::rv_policy::reference,
          "Takes this tensor out of the autograd graph; returns self.")
      .def("retain_grad", &Tensor::retain_grad,
           "Keeps this non-leaf's gradient in .grad after backward().")
      .def(
          "register_hook",
          [](const Tensor& x, nb::callable hook) {
            int id = x.register_hook([hook](const Tensor& g) {
              nb::gil_scoped_acquire gil;
              nb::object r = hook(g);
              return r.is_none() ? Tensor() : nb::cast<Tensor>(r);
            });
            return HookHandle{x, id};
          },
          "hook"_a,
          "hook(grad) runs when this tensor's gradient is computed; a tensor it returns replaces "
          "the gradient.");

  m.def("is_grad_enabled", &is_grad_enabled, "Whether ops record their backward (this thread).");
  m.def("_set_grad_enabled", &set_grad_enabled, "on"_a);
  m.def(
      "_backward",
      [](nb::object outputs, nb::object grads, std::optional<bool> retain_graph, bool create_graph,
         nb::object inputs) {
        autograd::backward(tensors_of(outputs), tensors_of(grads), retain_graph, create_graph,
                           tensors_of(inputs));
      },
      "tensors"_a, "grad_tensors"_a = nb::none(), "retain_graph"_a = nb::none(),
      "create_graph"_a = false, "inputs"_a = nb::none());
  m.def(
      "_grad",
      [](nb::object outputs, nb::object inputs, nb::object grad_outputs,
         std::optional<bool> retain_graph, bool create_graph, bool allow_unused) {
        auto r = autograd::grad(tensors_of(outputs), tensors_of(inputs), tensors_of(grad_outputs),
                                retain_graph, create_graph, allow_unused);
        nb::list l;
        for (auto& g : r) l.append(grad_or_none(g));
        return nb::tuple(l);
      },
      "outputs"_a, "inputs"_a, "grad_outputs"_a = nb::none(), "retain_graph"_a = nb::none(),
      "create_graph"_a = false, "allow_unused"_a = false);
}

}  // namespace loom::py
