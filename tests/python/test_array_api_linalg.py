"""loom.array_api.linalg (the standard's non-decomposition functions) against numpy."""
import math

import numpy as np
import pytest

import loom.array_api as xp
from helpers import check

la = xp.linalg
F64 = dict(rtol=1e-12, atol=1e-12)


def f64(a):
    return xp.asarray(a, dtype=xp.float64)


def test_namespace_has_the_functions():
    for name in ("matmul", "matrix_transpose", "vecdot", "tensordot", "outer", "trace",
                 "diagonal", "vector_norm", "matrix_norm", "cross"):
        assert callable(getattr(la, name)), name
    for name in ("matmul", "matrix_transpose", "vecdot", "tensordot"):
        assert getattr(xp, name) is getattr(la, name), name


def test_matmul_and_transpose(rng):
    a, b = rng.normal(size=(3, 1, 2, 4)), rng.normal(size=(5, 4, 3))
    check(la.matmul(f64(a), f64(b)), a @ b, **F64)
    check(la.matmul(f64(a[0, 0, 0]), f64(b)), a[0, 0, 0] @ b, **F64)  # 1-D on the left
    check(la.matrix_transpose(f64(b)), np.swapaxes(b, -1, -2))
    with pytest.raises(ValueError):
        la.matrix_transpose(f64(a[0, 0, 0]))


@pytest.mark.parametrize("axis", [-1, -2, 0])
def test_vecdot(rng, axis):
    if axis == -1:  # broadcast batch dims
        a, b = rng.normal(size=(4, 3)), rng.normal(size=(2, 1, 3))
    else:
        a, b = rng.normal(size=(3, 4)), rng.normal(size=(3, 4))
    want = np.sum(np.broadcast_to(a, np.broadcast_shapes(a.shape, b.shape)) * b, axis=axis)
    check(la.vecdot(f64(a), f64(b), axis=axis), want, **F64)


def test_vecdot_integers_keep_the_promoted_dtype(rng):
    a, b = rng.integers(-9, 9, (2, 5)), rng.integers(-9, 9, (5,))
    check(xp.vecdot(xp.asarray(a, dtype=xp.int8), xp.asarray(b, dtype=xp.int32)),
          a @ b, dtype=xp.int32)
    with pytest.raises(ValueError):
        xp.vecdot(xp.ones((2, 5)), xp.ones((2, 1)))


def test_tensordot(rng):
    a, b, c = rng.normal(size=(2, 3, 4)), rng.normal(size=(3, 4, 5)), rng.normal(size=(4, 2))
    check(la.tensordot(f64(a), f64(b)), np.tensordot(a, b), **F64)
    check(la.tensordot(f64(a), f64(c), axes=1), np.tensordot(a, c, 1), **F64)
    check(la.tensordot(f64(a), f64(c), axes=0), np.tensordot(a, c, 0), **F64)
    check(la.tensordot(f64(a), f64(c), axes=([0, 2], [1, 0])),
          np.tensordot(a, c, ([0, 2], [1, 0])), **F64)
    check(la.tensordot(f64(a), f64(c), axes=([-1], [0])), np.tensordot(a, c, ([2], [0])), **F64)
    i = rng.integers(-5, 5, (3, 4))
    check(xp.tensordot(xp.asarray(i, dtype=xp.int8), xp.asarray(i.T, dtype=xp.int64), axes=1),
          i @ i.T, dtype=xp.int64)
    with pytest.raises(ValueError):
        la.tensordot(f64(a), f64(c), axes=([0], [0]))


def test_outer(rng):
    a, b = rng.normal(size=4), rng.normal(size=3)
    check(la.outer(f64(a), f64(b)), np.outer(a, b), **F64)
    check(la.outer(xp.asarray([1, 2], dtype=xp.int8), xp.asarray([3], dtype=xp.int32)),
          [[3], [6]], dtype=xp.int32)
    with pytest.raises(ValueError):
        la.outer(f64(np.ones((2, 2))), f64(b))


@pytest.mark.parametrize("offset", [0, 1, 3, -1, -2, 7, -7])
def test_diagonal_and_trace(rng, offset):
    a = rng.normal(size=(2, 3, 4))
    want = np.diagonal(a, offset, axis1=-2, axis2=-1)
    check(la.diagonal(f64(a), offset=offset), want)
    check(la.diagonal(f64(a).mT, offset=offset), np.diagonal(np.swapaxes(a, -1, -2), offset,
                                                             axis1=-2, axis2=-1))
    check(la.trace(f64(a), offset=offset), np.trace(a, offset, axis1=-2, axis2=-1), **F64)
    i = rng.integers(-100, 100, (3, 4)).astype(np.int8)
    check(la.trace(xp.asarray(i), offset=offset), np.trace(i.astype(np.int64), offset),
          dtype=xp.int64)
    check(la.trace(xp.asarray(i), offset=offset, dtype=xp.float64),
          np.trace(i.astype(np.float64), offset), dtype=xp.float64)


def test_trace_keeps_float_dtypes():
    assert la.trace(xp.ones((3, 3), dtype=xp.float32)).dtype == xp.float32
    assert la.trace(xp.ones((3, 3), dtype=xp.uint8)).dtype == xp.int64


ORDS = [2, 1, math.inf, -math.inf, 0, 3, -1, 0.5]


@pytest.mark.parametrize("ord", ORDS)
@pytest.mark.parametrize("axis", [None, 1, -1, (0, 2), (2, 0, 1)])
@pytest.mark.parametrize("keepdims", [False, True])
def test_vector_norm(rng, ord, axis, keepdims):
    a = rng.normal(size=(3, 4, 5))
    a[0, 0, 0] = 0.0
    want = _np_vector_norm(a, ord, (0, 1, 2) if axis is None else axis, keepdims)
    check(la.vector_norm(f64(a), axis=axis, ord=ord, keepdims=keepdims), want, rtol=1e-10)


def _np_vector_norm(a, p, axis, keepdims):
    ax = (axis,) if isinstance(axis, int) else tuple(axis)
    v = np.abs(a)
    if p == math.inf:
        return v.max(ax, keepdims=keepdims)
    if p == -math.inf:
        return v.min(ax, keepdims=keepdims)
    if p == 0:
        return (v != 0).sum(ax, keepdims=keepdims).astype(a.dtype)
    with np.errstate(divide="ignore"):
        return (v**p).sum(ax, keepdims=keepdims) ** (1 / p)


def test_vector_norm_edges():
    x = f64([[3.0, -4.0], [0.0, 0.0]])
    check(la.vector_norm(x, axis=()), [[3.0, 4.0], [0.0, 0.0]])
    check(la.vector_norm(x, axis=(), ord=0), [[1.0, 1.0], [0.0, 0.0]])
    check(la.vector_norm(f64(-2.0)), 2.0)
    assert la.vector_norm(xp.ones(3, dtype=xp.float32)).dtype == xp.float32
    with pytest.raises(TypeError):
        la.vector_norm(xp.asarray([1, 2]))


@pytest.mark.parametrize("ord", ["fro", 1, -1, math.inf, -math.inf, 2, -2, "nuc"])
@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("shape", [(2, 3, 4), (2, 5, 3)])
def test_matrix_norm(rng, ord, keepdims, shape):
    a = rng.normal(size=shape)
    want = np.linalg.norm(a, ord, axis=(-2, -1), keepdims=keepdims)
    check(la.matrix_norm(f64(a), ord=ord, keepdims=keepdims), want, rtol=1e-12)
    check(la.matrix_norm(f64(a[0]), ord=ord), np.linalg.norm(a[0], ord), rtol=1e-12)


def test_svdvals(rng):
    a = rng.normal(size=(3, 4, 6))
    check(la.svdvals(f64(a)), np.linalg.svd(a, compute_uv=False), rtol=1e-12, atol=1e-13)
    with pytest.raises(TypeError, match="svdvals"):
        la.svdvals(xp.ones((2, 2), dtype=xp.int32))


def test_matrix_norm_bad_ord():
    with pytest.raises(ValueError):
        la.matrix_norm(xp.ones((2, 2)), ord=3)
    with pytest.raises(ValueError):
        la.matrix_norm(xp.ones(2))


def test_cross(rng):
    a, b = rng.normal(size=(4, 3)), rng.normal(size=(2, 1, 3))
    check(la.cross(f64(a), f64(b)), np.cross(a, b), **F64)
    c, d = rng.normal(size=(3, 5)), rng.normal(size=(3, 5))
    check(la.cross(f64(c), f64(d), axis=0), np.cross(c, d, axis=0), **F64)
    check(la.cross(f64(c), f64(d), axis=-2), np.cross(c, d, axis=0), **F64)
    i, j = rng.integers(-5, 5, 3), rng.integers(-5, 5, 3)
    check(la.cross(xp.asarray(i, dtype=xp.int8), xp.asarray(j, dtype=xp.int32)),
          np.cross(i, j), dtype=xp.int32)
    with pytest.raises(ValueError):
        la.cross(xp.ones(4), xp.ones(4))
