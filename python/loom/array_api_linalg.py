"""loom.array_api.linalg: the array API standard's (2023.12) linear algebra extension, the
functions that need no matrix decomposition, and svdvals, over loom tensors.

matmul, matrix_transpose, tensordot and vecdot are also in the main namespace (the standard
has them in both). Operands are promoted as the standard says (0-d arrays too). The
decompositions (cholesky, inv, svd, ...) are not here; the singular values are (svdvals, and
matrix_norm's ord=2, -2 and 'nuc').
"""
from __future__ import annotations

import builtins
import math

from . import _loom as _l
from ._array_object import promote, returning_arrays

_int_like = (_l.bool_, _l.int8, _l.int16, _l.int32, _l.int64,
             _l.uint8, _l.uint16, _l.uint32, _l.uint64)


def _floating(x, op):
    if x.dtype in _int_like:
        raise TypeError(f"{op}: needs a floating-point array, got {x.dtype.name}")
    return x


def _shape_of_broadcast(a, b):
    n = builtins.max(a.ndim, b.ndim)
    sa = (1,) * (n - a.ndim) + tuple(a.shape)
    sb = (1,) * (n - b.ndim) + tuple(b.shape)
    out = []
    for p, q in zip(sa, sb):
        if p != q and 1 not in (p, q):
            raise ValueError(f"shapes {tuple(a.shape)} and {tuple(b.shape)} don't broadcast")
        out.append(q if p == 1 else p)
    return tuple(out)


def _size_along(x, k):
    """Size of x along the dim k < 0 counts from the end (1 where x has fewer dims)."""
    return x.shape[k] if x.ndim >= -k else 1


def _axis(axis, ndim, op):
    if not -ndim <= axis < ndim:
        raise IndexError(f"{op}: axis {axis} out of range for {ndim} dims")
    return axis + ndim if axis < 0 else axis


def matmul(x1, x2, /):
    """Matrix product with broadcast batch dims (1-D operands as in the standard)."""
    return _l.matmul(*promote(x1, x2))


def matrix_transpose(x, /):
    """x with its last two dims swapped (a view)."""
    if x.ndim < 2:
        raise ValueError("matrix_transpose: needs an array of at least 2 dims")
    return x.mT


def tensordot(x1, x2, /, *, axes=2):
    """Sum of products over the given axes: an int n (x1's last n against x2's first n) or a
    pair of sequences of axes."""
    x1, x2 = promote(x1, x2)
    if isinstance(axes, builtins.int):
        if axes < 0 or axes > builtins.min(x1.ndim, x2.ndim):
            raise ValueError(f"tensordot: axes={axes} out of range")
        a1, a2 = list(range(x1.ndim - axes, x1.ndim)), list(range(axes))
    else:
        a1 = [_axis(a, x1.ndim, "tensordot") for a in axes[0]]
        a2 = [_axis(a, x2.ndim, "tensordot") for a in axes[1]]
    if len(a1) != len(a2) or builtins.any(x1.shape[p] != x2.shape[q] for p, q in zip(a1, a2)):
        raise ValueError("tensordot: the contracted axes must pair up with equal sizes")
    f1 = [d for d in range(x1.ndim) if d not in a1]
    f2 = [d for d in range(x2.ndim) if d not in a2]
    k = math.prod(x1.shape[a] for a in a1)
    m1 = x1.permute(*(f1 + a1)).reshape(math.prod(x1.shape[d] for d in f1), k)
    m2 = x2.permute(*(a2 + f2)).reshape(k, math.prod(x2.shape[d] for d in f2))
    r = _l.matmul(m1, m2)
    return r.reshape([x1.shape[d] for d in f1] + [x2.shape[d] for d in f2])


def vecdot(x1, x2, /, *, axis=-1):
    """Dot products of the vectors along axis (of the broadcast shape); the other dims
    broadcast. Keeps the promoted dtype (integers too)."""
    x1, x2 = promote(x1, x2)
    shape = _shape_of_broadcast(x1, x2)
    ax = _axis(axis, len(shape), "vecdot")
    k = ax - len(shape)
    if _size_along(x1, k) != _size_along(x2, k):
        raise ValueError("vecdot: x1 and x2 differ in size along the contracted axis")
    r = _l.sum(_l.mul(x1, x2), dim=ax)
    return r if r.dtype == x1.dtype else r.to(x1.dtype)


def outer(x1, x2, /):
    """Outer product of two 1-D arrays."""
    if x1.ndim != 1 or x2.ndim != 1:
        raise ValueError("outer: needs two 1-D arrays")
    x1, x2 = promote(x1, x2)
    return _l.mul(x1.reshape(-1, 1), x2.reshape(1, -1))


def diagonal(x, /, *, offset=0):
    """The offset-th diagonals of the last two dims (a view; offset > 0 above the main one)."""
    if x.ndim < 2:
        raise ValueError("diagonal: needs an array of at least 2 dims")
    rows, cols = x.shape[-2], x.shape[-1]
    sr, sc = x.stride()[-2], x.stride()[-1]
    start_r, start_c = (0, offset) if offset >= 0 else (-offset, 0)
    n = builtins.max(0, builtins.min(rows - start_r, cols - start_c))
    off = x.storage_offset() + (start_r * sr + start_c * sc if n else 0)
    return x.as_strided(list(x.shape[:-2]) + [n], list(x.stride()[:-2]) + [sr + sc], off)


def trace(x, /, *, offset=0, dtype=None):
    """Sum of the offset-th diagonals of the last two dims (integers and bool accumulate in
    int64, the default integer dtype, unless dtype says otherwise)."""
    if dtype is None:
        dtype = _l.int64 if x.dtype in _int_like else x.dtype
    d = diagonal(x, offset=offset).to(dtype)
    return _l.sum(d, dim=-1).to(dtype)


def vector_norm(x, /, *, axis=None, keepdims=False, ord=2):  # noqa: A002
    """The ord-norm of the vectors over axis (an int, a tuple, or None: all dims). ord is any
    real p, or inf / -inf (largest / smallest |x|), or 0 (count of nonzeros)."""
    x = _floating(x, "vector_norm")
    a = _l.abs(x)
    if axis is None:
        axes = tuple(range(x.ndim))
    else:
        axes = (axis,) if isinstance(axis, builtins.int) else tuple(axis)
        axes = tuple(_axis(v, x.ndim, "vector_norm") for v in axes)
    if not axes:  # each element its own vector (loom's dim=() would reduce everything)
        return (a != 0).to(x.dtype) if ord == 0 else a
    kw = {"dim": axes, "keepdim": keepdims}
    if ord == math.inf:
        return _l.amax(a, **kw)
    if ord == -math.inf:
        return _l.amin(a, **kw)
    if ord == 0:
        return _l.sum((a != 0).to(x.dtype), **kw)
    if ord == 1:
        return _l.sum(a, **kw)
    if ord == 2:
        return _l.sqrt(_l.sum(a * a, **kw))
    return _l.pow(_l.sum(_l.pow(a, ord), **kw), 1.0 / ord)


def matrix_norm(x, /, *, keepdims=False, ord="fro"):  # noqa: A002
    """The ord-norm of the matrices in the last two dims (loom.linalg.matrix_norm): 'fro',
    'nuc', 1, -1, 2, -2, inf or -inf."""
    from . import linalg

    x = _floating(x, "matrix_norm")
    if x.ndim < 2:
        raise ValueError("matrix_norm: needs an array of at least 2 dims")
    return linalg.matrix_norm(x, ord=ord, keepdim=keepdims)


def svdvals(x, /):
    """The singular values of the matrices in the last two dims, descending."""
    from . import linalg

    x = _floating(x, "svdvals")
    if x.ndim < 2:
        raise ValueError("svdvals: needs an array of at least 2 dims")
    return linalg.svdvals(x)


def cross(x1, x2, /, *, axis=-1):
    """Cross products of the 3-vectors along axis (of the broadcast shape)."""
    x1, x2 = promote(x1, x2)
    shape = _shape_of_broadcast(x1, x2)
    ax = _axis(axis, len(shape), "cross")
    k = ax - len(shape)
    if _size_along(x1, k) != 3 or _size_along(x2, k) != 3:
        raise ValueError("cross: both arrays need size 3 along axis")
    a, b = x1.expand(shape), x2.expand(shape)
    a0, a1, a2 = (a.select(ax, i) for i in range(3))
    b0, b1, b2 = (b.select(ax, i) for i in range(3))
    parts = [a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0]
    return _l.stack(parts, ax)


__all__ = ["cross", "diagonal", "matmul", "matrix_norm", "matrix_transpose", "outer",
           "svdvals", "tensordot", "trace", "vecdot", "vector_norm"]
for _name in __all__:
    globals()[_name] = returning_arrays(globals()[_name])
del _name
