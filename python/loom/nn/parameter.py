"""Parameter: the tensor type a Module registers as learnable state."""
from .. import _loom

__all__ = ["Parameter"]


class Parameter(_loom.Tensor):
    """A leaf tensor that a Module registers when it is assigned as an attribute.

    ``Parameter(data)`` shares ``data``'s memory (no copy) but is cut from any graph
    ``data`` belongs to, so it is always a leaf; ``requires_grad`` is set as asked.
    Ops on a Parameter return plain tensors, so only the Parameter itself is learnable.
    ``Parameter()`` holds an empty float32 tensor.
    """

    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            data = _loom.empty(0)
        return super().__new__(cls, data)

    def __init__(self, data=None, requires_grad=True):
        if data is None:
            data = _loom.empty(0)
        if not isinstance(data, _loom.Tensor):
            raise TypeError(
                f"Parameter: data must be a loom.Tensor, got {type(data).__name__}")
        super().__init__(data.detach())
        self.requires_grad_(requires_grad)

    def __repr__(self):
        return "Parameter containing:\n" + super().__repr__()

    __str__ = __repr__

    def __deepcopy__(self, memo):
        """A new Parameter on a copy of the data (the gradient is not copied), so
        copy.deepcopy of a module without tensor buffers gives an independent model."""
        if id(self) in memo:
            return memo[id(self)]
        result = type(self)(self.detach().clone(), self.requires_grad)
        memo[id(self)] = result
        return result
