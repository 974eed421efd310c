"""loom.nn.init: in-place parameter initializers with torch's names and scaling rules.

Every initializer writes into its tensor without recording autograd and returns it.
Random values come from loom's generator, so loom.manual_seed makes them repeat.
"""
import math
import warnings

from .. import _loom
from ..autograd import no_grad

__all__ = [
    "calculate_gain", "uniform_", "normal_", "trunc_normal_", "constant_", "zeros_",
    "ones_", "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_",
]


def calculate_gain(nonlinearity, param=None):
    """The factor that keeps activations' variance stable through nonlinearity:
    1 for linear/conv/sigmoid, 5/3 for tanh, sqrt(2) for relu, sqrt(2/(1+slope^2)) for
    leaky_relu (slope param, default 0.01), 3/4 for selu."""
    linear_like = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
                   "conv_transpose2d", "conv_transpose3d")
    if nonlinearity in linear_like or nonlinearity == "sigmoid":
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif isinstance(param, (int, float)) and not isinstance(param, bool):
            slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor):
    """(fan_in, fan_out) of a weight [out, in, *kernel]: in and out times the receptive
    field (the product of the kernel dims)."""
    if tensor.ndim < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer "
                         f"than 2 dimensions (got shape {list(tensor.shape)})")
    receptive = 1
    for s in tensor.shape[2:]:
        receptive *= s
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _fan(tensor, mode):
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def _draw_dtype(tensor):
    # Draw in float64 for float64 tensors; float32 otherwise (copy_ converts).
    return _loom.float64 if tensor.dtype == _loom.float64 else _loom.float32


def _write(tensor, values):
    with no_grad():
        tensor.copy_(values)
    return tensor


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    """Fills tensor with values drawn uniformly from [a, b)."""
    _no_generator(generator)
    u = _loom.rand(*tensor.shape, dtype=_draw_dtype(tensor), device=tensor.device)
    return _write(tensor, u * (b - a) + a)


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    """Fills tensor with values drawn from N(mean, std^2)."""
    _no_generator(generator)
    z = _loom.randn(*tensor.shape, dtype=_draw_dtype(tensor), device=tensor.device)
    return _write(tensor, z * std + mean)


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Fills tensor from N(mean, std^2) restricted to [a, b], by inverting the normal
    CDF on a uniform draw between CDF(a) and CDF(b)."""
    _no_generator(generator)

    def cdf(x):
        return (1.0 + math.erf((x - mean) / (std * math.sqrt(2.0)))) / 2.0

    lo, hi = cdf(a), cdf(b)
    u = _loom.rand(*tensor.shape, dtype=_draw_dtype(tensor), device=tensor.device)
    u = u * (hi - lo) + lo
    x = _loom.erfinv(u * 2 - 1) * (std * math.sqrt(2.0)) + mean
    return _write(tensor, x.clamp(min=a, max=b))


def constant_(tensor, val):
    with no_grad():
        tensor.fill_(val)
    return tensor


def zeros_(tensor):
    return constant_(tensor, 0.0)


def ones_(tensor):
    return constant_(tensor, 1.0)


def xavier_uniform_(tensor, gain=1.0, generator=None):
    """Uniform on [-a, a] with a = gain * sqrt(6 / (fan_in + fan_out)) (Glorot)."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor, gain=1.0, generator=None):
    """N(0, std^2) with std = gain * sqrt(2 / (fan_in + fan_out)) (Glorot)."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return normal_(tensor, 0.0, std, generator)


def _kaiming_std(tensor, a, mode, nonlinearity):
    return calculate_gain(nonlinearity, a) / math.sqrt(_fan(tensor, mode))


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """Uniform on [-bound, bound] with bound = gain * sqrt(3 / fan) (He); a is the
    leaky_relu slope the gain is computed for."""
    if 0 in tensor.shape:
        warnings.warn("Initializing zero-element tensors is a no-op")
        return tensor
    bound = math.sqrt(3.0) * _kaiming_std(tensor, a, mode, nonlinearity)
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """N(0, std^2) with std = gain / sqrt(fan) (He)."""
    if 0 in tensor.shape:
        warnings.warn("Initializing zero-element tensors is a no-op")
        return tensor
    return normal_(tensor, 0.0, _kaiming_std(tensor, a, mode, nonlinearity), generator)


def _no_generator(generator):
    if generator is not None:
        raise NotImplementedError(
            "loom.nn.init: a separate generator is not supported; loom draws from its "
            "global generator (seed it with loom.manual_seed)")
