"""The math library from Python: shift operators, isclose / allclose, nan_to_num, clamp with
tensor bounds and the special values torch documents (checked against torch 2.x by hand)."""
import math

import numpy as np
import pytest

import loom


def test_shift_operators_and_out_of_range_counts(fusion):
    a = loom.tensor(np.array([5, -3, 5, -3], dtype=np.int32))
    b = loom.tensor(np.array([1, 1, 32, 40], dtype=np.int32))
    # torch: << by >= width gives 0; >> fills with the sign bit
    assert (a << b).numpy().tolist() == [10, -6, 0, 0]
    assert (a >> b).numpy().tolist() == [2, -2, 0, -1]
    assert (a << 2).numpy().tolist() == [20, -12, 20, -12]
    assert (1 << b[:2]).numpy().tolist() == [2, 2]
    c = a.clone()
    c <<= 1
    c >>= loom.tensor(np.array([2], dtype=np.int32))
    assert c.numpy().tolist() == [2, -2, 2, -2]
    with pytest.raises(TypeError, match="bitwise_left_shift"):
        loom.tensor(np.ones(2, dtype=np.float32)) << 1
    with pytest.raises(TypeError, match="bitwise_right_shift"):
        loom.bitwise_right_shift(loom.tensor(np.array([True])), loom.tensor(np.array([True])))


def test_isclose_allclose_defaults(fusion):
    a = loom.tensor(np.array([1.0, 1.0, np.inf, np.nan, 1e-9]))
    b = loom.tensor(np.array([1 + 1e-6, 1.1, np.inf, np.nan, 0.0]))
    assert loom.isclose(a, b).numpy().tolist() == [True, False, True, False, True]
    assert loom.isclose(a, b, equal_nan=True).numpy().tolist() == [True, False, True, True, True]
    assert a.isclose(b, rtol=0, atol=0).numpy().tolist() == [False, False, True, False, False]
    assert not loom.allclose(a, b)
    assert loom.allclose(a, a, equal_nan=True)
    with pytest.raises(TypeError, match="isclose"):
        loom.isclose(a, b.float())


def test_nan_to_num_and_clamp_with_tensors(fusion):
    x = loom.tensor(np.array([np.nan, np.inf, -np.inf, 2.0], dtype=np.float32))
    f = np.finfo(np.float32)
    assert loom.nan_to_num(x).numpy().tolist() == [0.0, float(f.max), float(f.min), 2.0]
    assert x.nan_to_num(1.0, posinf=2.0, neginf=-2.0).numpy().tolist() == [1, 2, -2, 2]
    v = loom.tensor(np.array([[-2.0, 0.0, 2.0], [5.0, -5.0, 1.0]]))
    lo = loom.tensor(np.array([-1.0, 1.0, -1.0]))
    hi = loom.tensor(np.array([1.0]))
    want = np.clip(v.numpy(), lo.numpy(), hi.numpy())
    assert np.array_equal(loom.clamp(v, lo, hi).numpy(), want)
    assert np.array_equal(loom.clip(v, min=lo).numpy(), np.maximum(v.numpy(), lo.numpy()))
    v.clamp_(lo, hi)
    assert np.array_equal(v.numpy(), want)


def test_special_values(fusion):
    t = lambda *v: loom.tensor(np.array(v, dtype=np.float64))
    assert np.signbit(loom.abs(t(-0.0)).numpy()[0]) == False  # noqa: E712
    r = loom.asinh(t(np.inf, -np.inf, -0.0)).numpy()
    assert r[0] == np.inf and r[1] == -np.inf and r[2] == 0 and np.signbit(r[2])
    assert np.isnan(loom.acosh(t(0.5)).numpy()[0])
    assert loom.signbit(t(-np.nan, np.nan, -0.0)).numpy().tolist() == [True, False, True]
    assert loom.xlogy(t(0, 0), t(np.nan, np.inf)).numpy()[1] == 0
    assert np.isnan(loom.xlogy(t(0), t(np.nan)).numpy()[0])
    assert math.isclose(loom.log(loom.tensor(np.array([1e-45], np.float32))).item(), -103.2789,
                        rel_tol=1e-5)
    assert loom.fmod(t(-5.5), 2).item() == -1.5
    assert loom.log10(loom.tensor(np.array([10]))).dtype == loom.float32
    assert loom.copysign(loom.tensor(np.array([1])), loom.tensor(np.array([-1]))).dtype == \
        loom.float32
    with pytest.raises(TypeError, match="frac"):
        loom.frac(loom.tensor(np.array([1])))
