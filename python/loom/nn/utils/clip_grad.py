"""Gradient clipping that stays lazy: no host sync unless error_if_nonfinite is set.

The total norm is a 0-d loom tensor and the scale min(1, max_norm / (total + 1e-6))
is applied to every gradient in place as a tensor, so clipping records into the same
fused graph as the optimizer step instead of flushing to read the norm."""
import functools
import math
import operator

from ... import _loom
from ...autograd import no_grad

__all__ = ["clip_grad_norm_", "clip_grad_value_", "get_total_norm", "clip_grads_with_norm_"]


def _as_list(tensors):
    if isinstance(tensors, _loom.Tensor):
        return [tensors]
    return list(tensors)


def _grads(parameters):
    return [p.grad for p in _as_list(parameters) if p.grad is not None]


def get_total_norm(tensors, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """The norm_type-norm of all tensors taken together (as if concatenated), as a 0-d
    tensor. error_if_nonfinite=True reads the result back (a sync) to raise on nan/inf."""
    tensors = _as_list(tensors)
    norm_type = float(norm_type)
    if not tensors:
        return _loom.tensor(0.0)
    dtype = functools.reduce(_loom.promote_types, [t.dtype for t in tensors])
    wide = _loom.float64 if dtype == _loom.float64 else _loom.float32
    # Each tensor's part (its max, or its sum of |x|^p) combined by a chain of 0-d ops: one
    # fused kernel (a few past the kernel's inputs), where stacking the per-tensor norms
    # copied each into the stack with a kernel of its own. The p-th root is taken once.
    parts = []
    for t in tensors:
        a = t.to(dtype=wide).abs()
        parts.append((a.amax() if norm_type > 0 else a.amin()) if math.isinf(norm_type)
                     else (a != 0).to(dtype=wide).sum() if norm_type == 0
                     else a.sum() if norm_type == 1
                     else (a * a).sum() if norm_type == 2
                     else a.pow(norm_type).sum())
    if math.isinf(norm_type):
        total = functools.reduce(_loom.maximum if norm_type > 0 else _loom.minimum, parts)
    else:
        total = functools.reduce(operator.add, parts)
        if norm_type == 2:
            total = total.sqrt()
        elif norm_type not in (0.0, 1.0):
            total = total.pow(1.0 / norm_type)
    total = total.to(dtype=dtype)
    if error_if_nonfinite and not bool(total.isfinite().item()):
        raise RuntimeError(
            f"The total norm of order {norm_type} for gradients from `parameters` is "
            "non-finite, so it cannot be clipped. To disable this error and scale the "
            "gradients by the non-finite norm anyway, set `error_if_nonfinite=False`")
    return total


def clip_grads_with_norm_(parameters, max_norm, total_norm, foreach=None):
    """Scales every gradient in place by min(1, max_norm / (total_norm + 1e-6))."""
    grads = _grads(parameters)
    if not grads:
        return
    with no_grad():
        scale = (float(max_norm) / (total_norm + 1e-6)).clamp(max=1.0)
        for g in grads:
            g.mul_(scale.to(dtype=g.dtype))


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False,
                    foreach=None):
    """Rescales the parameters' gradients in place so their combined norm_type-norm is
    at most max_norm; returns the norm before clipping as a 0-d tensor (not read back)."""
    parameters = _as_list(parameters)
    grads = _grads(parameters)
    with no_grad():
        total = get_total_norm(grads, norm_type, error_if_nonfinite, foreach)
    clip_grads_with_norm_(parameters, max_norm, total, foreach)
    return total


def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamps every gradient in place to [-clip_value, clip_value]."""
    clip_value = float(clip_value)
    with no_grad():
        for g in _grads(parameters):
            g.clamp_(min=-clip_value, max=clip_value)
