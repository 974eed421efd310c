"""loom.autograd: gradients of lazy tensors, with torch.autograd's names.

``backward()`` records the gradient ops like any other op; they run, fused with the forward
and the optimizer's update, at the step's sync point (reading the loss).
"""
import functools

from . import _loom

__all__ = ["backward", "grad", "no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled",
           "inference_mode"]

is_grad_enabled = _loom.is_grad_enabled


class _GradMode:
    """Sets grad mode for a with-block or a decorated function, then restores it."""

    _on = True

    def __enter__(self):
        self._prev = _loom.is_grad_enabled()
        _loom._set_grad_enabled(self._on)
        return self

    def __exit__(self, *exc):
        _loom._set_grad_enabled(self._prev)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.__class__():
                return fn(*args, **kwargs)

        return wrapper


class no_grad(_GradMode):
    """Ops inside record no backward (an optimizer step, evaluation)."""

    _on = False


class inference_mode(no_grad):
    """As no_grad (loom has no separate inference tensors)."""


class enable_grad(_GradMode):
    """Ops inside record their backward, also within no_grad."""

    _on = True


class set_grad_enabled(_GradMode):
    """Grad mode on or off: at once (like torch, as a call), for a with-block, or a function."""

    def __init__(self, mode):
        self._on = bool(mode)
        self._prev = _loom.is_grad_enabled()
        _loom._set_grad_enabled(self._on)

    def __enter__(self):
        return self

    def __call__(self, fn):
        _loom._set_grad_enabled(self._prev)
        on = self._on

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            prev = _loom.is_grad_enabled()
            _loom._set_grad_enabled(on)
            try:
                return fn(*args, **kwargs)
            finally:
                _loom._set_grad_enabled(prev)

        return wrapper


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, inputs=None):
    """Accumulates the gradients of ``tensors`` into the .grad of the leaves they depend on."""
    _loom._backward(tensors, grad_tensors, retain_graph, create_graph, inputs)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         allow_unused=None, materialize_grads=False):
    """The gradients of ``outputs`` with respect to ``inputs`` (a tuple), not accumulated."""
    single = isinstance(inputs, _loom.Tensor)
    r = _loom._grad(outputs, [inputs] if single else list(inputs), grad_outputs, retain_graph,
                    create_graph, bool(allow_unused) or materialize_grads)
    if materialize_grads:
        ins = [inputs] if single else list(inputs)
        r = tuple(_loom.zeros_like(x) if g is None else g for g, x in zip(r, ins))
    return r
