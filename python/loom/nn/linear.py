"""Linear and Identity layers."""
import math

from .. import _loom
from . import functional as F
from . import init
from .module import Module
from .parameter import Parameter

__all__ = ["Identity", "Linear"]


class Identity(Module):
    """Returns its input unchanged (a placeholder that keeps a model's structure)."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class Linear(Module):
    """y = x @ weight.T + bias, with weight [out_features, in_features].

    Initialized as torch does: weight ~ kaiming_uniform_(a=sqrt(5)), which is
    U(-1/sqrt(in_features), 1/sqrt(in_features)), and bias from the same range.
    """

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.weight = Parameter(_loom.empty(out_features, in_features, device=device,
                                            dtype=dtype))
        if bias:
            self.bias = Parameter(_loom.empty(out_features, device=device, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input):
        if input.ndim == 0 or input.shape[-1] != self.in_features:
            raise RuntimeError(
                f"Linear(in_features={self.in_features}, out_features={self.out_features}):"
                f" input shape {list(input.shape)} has last dim "
                f"{input.shape[-1] if input.ndim else '(none, 0-d)'}, expected "
                f"{self.in_features}")
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self):
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")
