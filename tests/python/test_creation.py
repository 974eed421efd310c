"""Creation functions with torch's names, keywords and default dtypes."""
import numpy as np
import pytest

import loom
from helpers import check


def test_tensor_from_python_values():
    check(loom.tensor([[1, 2], [3, 4]]), [[1, 2], [3, 4]], dtype=loom.int64)
    check(loom.tensor([1, 2.5]), [1, 2.5], dtype=loom.float32)
    check(loom.tensor([True, False]), [True, False], dtype=loom.bool)
    check(loom.tensor([True, 2]), [1, 2], dtype=loom.int64)
    check(loom.tensor(((1.0,), (2.0,))), [[1.0], [2.0]])
    check(loom.tensor(3), 3, dtype=loom.int64)
    check(loom.tensor(2.5), 2.5, dtype=loom.float32)
    check(loom.tensor([]), np.zeros(0), dtype=loom.float32)
    check(loom.tensor([[], []]), np.zeros((2, 0)))
    check(loom.tensor([1, 2], dtype=loom.float64), [1.0, 2.0], dtype=loom.float64)
    check(loom.tensor([2**40, -1]), [2**40, -1], dtype=loom.int64)
    check(loom.tensor([loom.tensor(1.5), 2]), [1.5, 2.0])
    check(loom.tensor([[1, 2], loom.tensor([3, 4])]), [[1, 2], [3, 4]])
    t = loom.ones(3)
    c = loom.tensor(t)  # copies
    c += 1
    assert t.tolist() == [1, 1, 1]
    assert loom.as_tensor(t) is not None and loom.as_tensor(t).data_ptr() == t.data_ptr()
    with pytest.raises(ValueError, match="rectangular"):
        loom.tensor([[1, 2], [3]])
    with pytest.raises(ValueError, match="rectangular"):
        loom.tensor([[1, 2], 3])
    with pytest.raises(TypeError):
        loom.tensor(["a"])
    with pytest.raises(TypeError):
        loom.tensor([2**70])


def test_sized_creators():
    for f, v in [(loom.zeros, 0), (loom.ones, 1)]:
        check(f(2, 3), np.full((2, 3), v), dtype=loom.float32)
        check(f((2, 3)), np.full((2, 3), v))
        check(f([4]), np.full(4, v))
        check(f(2, dtype=loom.int32), np.full(2, v), dtype=loom.int32)
        check(f(()), np.full((), v))
    assert loom.empty(3, 4).shape == (3, 4)
    check(loom.full((2, 2), 7), np.full((2, 2), 7), dtype=loom.int64)
    check(loom.full((2,), 1.5), [1.5, 1.5], dtype=loom.float32)
    check(loom.full([2], True), [True, True], dtype=loom.bool)
    check(loom.full((2,), 3, dtype=loom.float16), [3.0, 3.0], dtype=loom.float16)
    x = loom.ones(2, 3, dtype=loom.int8)
    for f in (loom.zeros_like, loom.ones_like, loom.empty_like):
        assert f(x).shape == (2, 3) and f(x).dtype == loom.int8
    assert loom.zeros_like(x, dtype=loom.float64).dtype == loom.float64
    check(loom.full_like(x, 5), np.full((2, 3), 5), dtype=loom.int8)
    check(loom.scalar_tensor(2), 2.0, dtype=loom.float32)


def test_ranges():
    check(loom.arange(5), np.arange(5), dtype=loom.int64)
    check(loom.arange(1, 10, 3), np.arange(1, 10, 3))
    check(loom.arange(0.0, 1.0, 0.25), np.arange(0, 1, 0.25), dtype=loom.float32)
    check(loom.arange(5, dtype=loom.float64), np.arange(5.0), dtype=loom.float64)
    check(loom.arange(10, 0, -3), np.arange(10, 0, -3))
    check(loom.arange(start=2, end=5), [2, 3, 4])
    check(loom.linspace(0, 1, 5), np.linspace(0, 1, 5), dtype=loom.float32)
    check(loom.linspace(-3, 7, steps=11, dtype=loom.float64), np.linspace(-3, 7, 11))
    check(loom.eye(3), np.eye(3))
    check(loom.eye(2, 4, dtype=loom.int32), np.eye(2, 4), dtype=loom.int32)
    with pytest.raises(ValueError):
        loom.arange(0, 5, 0)


def test_random():
    loom.manual_seed(3)
    a = loom.rand(1000).numpy()
    loom.manual_seed(3)
    b = loom.rand(1000).numpy()
    np.testing.assert_array_equal(a, b)  # same seed, same numbers
    assert 0 <= a.min() and a.max() < 1 and abs(a.mean() - 0.5) < 0.05
    n = loom.randn(4, 1000, dtype=loom.float64).numpy()
    assert n.shape == (4, 1000) and abs(n.mean()) < 0.1 and abs(n.std() - 1) < 0.1
    r = loom.randint(3, 7, (500,)).numpy()
    assert r.dtype == np.int64 and r.min() == 3 and r.max() == 6
    r = loom.randint(5, size=(2, 3))
    assert r.shape == (2, 3) and r.dtype == loom.int64
    x = loom.ones(2, 5, dtype=loom.float16)
    assert loom.rand_like(x).dtype == loom.float16 and loom.randn_like(x).shape == (2, 5)
    loom.manual_seed(1)
    c = loom.rand(10).numpy()
    assert not np.array_equal(a[:10], c)
    with pytest.raises(TypeError):
        loom.rand(3, dtype=loom.int32)


@pytest.mark.parametrize("src,dst", [("bfloat16", "float32"), ("float16", "float32"),
                                     ("float32", "float64"), ("bfloat16", "float16"),
                                     ("float64", "bfloat16")])
def test_cast_of_a_constant_is_the_value_the_constant_holds(src, dst):
    # A constant's cast is folded into a constant (no kernel): its value must be the source
    # dtype's rounding of the fill value, then the target's, as casting the filled tensor is.
    ml = {"bfloat16": None, "float16": np.float16, "float32": np.float32, "float64": np.float64}
    for v in [0.1, -3.3, 1e-3, 65504.0, 1.0 / 3]:
        c = loom.full((2, 3), v, dtype=getattr(loom, src))
        folded = c.to(getattr(loom, dst))
        loom.sync()
        eager = loom.full((2, 3), v, dtype=getattr(loom, src))
        loom.sync()  # memory: its cast is a kernel
        want = eager.to(getattr(loom, dst)).to(loom.float64).numpy()
        np.testing.assert_array_equal(folded.to(loom.float64).numpy(), want)
        if ml[src] is not None and ml[dst] is not None:
            np.testing.assert_array_equal(want, np.full((2, 3), v, ml[src]).astype(ml[dst]))
    loom.reset_counters()
    loom.full((5,), 0.1, dtype=getattr(loom, src)).to(getattr(loom, dst)).tolist()
    assert loom.counters()["kernels"] == 1  # the folded constant's fill alone
