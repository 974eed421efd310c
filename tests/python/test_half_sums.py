"""Sums of float16 and bfloat16 tensors, whole and along rows short and long (long ones the CPU
folds where they lie, widened in registers): small integers, exact in both types, so the
float32 sums are exact and compared for equality; the 16-bit result is that sum rounded.
Infinities and NaNs through them."""
import numpy as np
import pytest

import loom

SHAPES = [((1,), None), ((15,), None), ((4097,), None), ((100003,), None),
          (((1 << 20) + 5,), None), ((3, 70001), -1), ((20, 20000), -1), ((2, 3, 40000), -1),
          ((5, 300000), 1), ((70001, 3), 0), ((64, 4096), -1)]


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("shape,dim", SHAPES)
def test_half_sum_of_small_integers_is_exact(dtype, shape, dim):
    rng = np.random.default_rng(sum(shape) + len(dtype))
    a = rng.integers(-8, 9, shape)
    x = loom.tensor(a.astype(np.float32)).to(getattr(loom, dtype))
    want = a.sum() if dim is None else a.sum(dim)
    kw = {} if dim is None else {"dim": dim}
    got = x.sum(dtype=loom.float32, **kw).numpy()
    np.testing.assert_array_equal(np.asarray(got, np.float64), want)
    s = x.sum(**kw)
    loom.sync()  # stored in the input's type (a cast fused after it would see the float32 sum)
    rounded = s.float().numpy()
    back = loom.tensor(np.asarray(want, np.float32)).to(getattr(loom, dtype)).float().numpy()
    np.testing.assert_array_equal(rounded, back)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_sum_propagates_nan_and_inf(dtype):
    a = np.ones(50000, np.float32)
    a[31337] = np.inf
    x = loom.tensor(a).to(getattr(loom, dtype))
    assert x.sum().item() == np.inf
    a[777] = np.nan
    x = loom.tensor(a).to(getattr(loom, dtype))
    assert np.isnan(x.sum().item())


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("shape,dim", [s for s in SHAPES if s[1] is not None])
@pytest.mark.parametrize("op", ["amax", "amin"])
def test_half_extremes_along_rows(dtype, shape, dim, op):
    # Extremes of 16-bit rows short and long: exact, NaN wins, and the extreme at either end of
    # a row or in its last partial vector is found.
    rng = np.random.default_rng(sum(shape) + len(dtype) + len(op))
    a = rng.integers(-2000, 2000, shape).astype(np.float32) / 64  # (compared once rounded)
    flat = np.moveaxis(a, dim, -1).reshape(-1, a.shape[dim])
    big = 1024.0 if op == "amax" else -1024.0
    flat[0, 0] = big  # the first element of the first row
    flat[-1, -1] = big  # the last of the last row (a partial vector when the length is odd)
    if flat.shape[0] > 1:
        flat[1, flat.shape[1] // 2] = np.nan
    a = np.moveaxis(flat.reshape(np.moveaxis(a, dim, -1).shape), -1, dim)
    x = loom.tensor(a).to(getattr(loom, dtype))
    loom.sync()
    got = getattr(x, op)(dim=dim).float().numpy()
    want = getattr(np, op)(x.float().numpy(), axis=dim)  # (NaN propagates in numpy's too)
    assert np.all(np.isnan(want) | (np.abs(want) == 1024) | (np.abs(want) < 32))
    np.testing.assert_array_equal(got, want)
