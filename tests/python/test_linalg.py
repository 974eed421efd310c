"""loom.linalg against numpy.linalg (LAPACK: an independent SVD) on random matrices."""
import math

import numpy as np
import pytest

import loom


@pytest.mark.parametrize("shape", [(5, 4), (4, 5), (1, 1), (3, 6, 6), (2, 3, 8, 5), (40, 7)])
@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_svdvals(rng, shape, dt):
    a = rng.normal(size=shape).astype(dt)
    got = loom.linalg.svdvals(loom.tensor(a))
    assert got.dtype == getattr(loom, dt)
    want = np.linalg.svd(a.astype(np.float64), compute_uv=False)
    tol = 1e-12 if dt == "float64" else 2e-6
    np.testing.assert_allclose(np.asarray(got), want, rtol=tol, atol=tol * want.max())


def test_svdvals_views_and_fusion(rng):
    a = rng.normal(size=(3, 7, 5))
    t = loom.tensor(a)
    want = np.linalg.svd(np.swapaxes(a, -1, -2), compute_uv=False)
    np.testing.assert_allclose(np.asarray(loom.linalg.svdvals(t.transpose(-1, -2))), want,
                               rtol=1e-12)
    # between recorded pointwise ops (one flush): the same as numpy on the same values
    got = loom.linalg.svdvals(t * 2 + 1) * 3
    want = np.linalg.svd(a * 2 + 1, compute_uv=False) * 3
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12)


def test_svdvals_errors_and_specials():
    with pytest.raises(ValueError, match="svdvals"):
        loom.linalg.svdvals(loom.ones(3))
    with pytest.raises(TypeError, match="svdvals"):
        loom.linalg.svdvals(loom.ones(3, 3, dtype=loom.int64))
    x = np.ones((2, 2, 2))
    x[1, 0, 0] = np.nan
    got = np.asarray(loom.linalg.svdvals(loom.tensor(x)))
    np.testing.assert_allclose(got[0], [2.0, 0.0], atol=1e-15)
    assert np.isnan(got[1]).all()
    assert tuple(loom.linalg.svdvals(loom.zeros(0, 3)).shape) == (0,)


@pytest.mark.parametrize("ord", ["fro", "nuc", 1, -1, 2, -2, math.inf, -math.inf])
@pytest.mark.parametrize("dim,keepdim", [((-2, -1), False), ((-1, -2), True), ((0, 2), False),
                                         ((2, 0), True)])
def test_matrix_norm(rng, ord, dim, keepdim):
    a = rng.normal(size=(3, 4, 5))
    got = loom.linalg.matrix_norm(loom.tensor(a), ord=ord, dim=dim, keepdim=keepdim)
    want = np.linalg.norm(a, ord, axis=dim, keepdims=keepdim)
    assert tuple(got.shape) == want.shape
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12)


def test_matrix_norm_errors():
    with pytest.raises(ValueError, match="ord"):
        loom.linalg.matrix_norm(loom.ones(2, 2), ord=3)
    with pytest.raises(ValueError, match="dims"):
        loom.linalg.matrix_norm(loom.ones(2))
    with pytest.raises(ValueError, match="dim"):
        loom.linalg.matrix_norm(loom.ones(2, 2), dim=(0, 0))
    with pytest.raises(TypeError, match="matrix_norm"):
        loom.linalg.matrix_norm(loom.ones(2, 2, dtype=loom.int32))
