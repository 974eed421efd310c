"""Helpers shared by the Python tests (imported as `from helpers import check`)."""
import numpy as np

import loom


def np_dtype(dt):
    """numpy dtype of a loom dtype (bfloat16 has none: compared through float32)."""
    return np.dtype("float32" if dt == loom.bfloat16 else dt.name)


def check(t, ref, rtol=1e-6, atol=1e-6, dtype=None):
    """t (a loom tensor) matches the numpy reference in shape, dtype and values."""
    assert isinstance(t, loom.Tensor)
    ref = np.asarray(ref)
    assert t.shape == ref.shape, (t.shape, ref.shape)
    if dtype is not None:
        assert t.dtype == dtype, (t.dtype, dtype)
    got = (t.float() if t.dtype == loom.bfloat16 else t).numpy()
    if got.dtype.kind in "biu" and ref.dtype.kind in "biu":
        np.testing.assert_array_equal(got, ref)
    else:
        np.testing.assert_allclose(got.astype(np.float64), ref.astype(np.float64), rtol=rtol,
                                   atol=atol, equal_nan=True)
