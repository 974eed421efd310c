"""Out of memory at a sync point (an allocation limit set through the testing hook): the failing
tensor raises MemoryError naming the op and shape, unrelated work goes on, and after the limit is
lifted or the failing tensors are dropped everything computes."""
import numpy as np
import pytest

import loom

LIMIT = 1 << 20  # allocations above 1 MiB fail
BIG = 1 << 20  # 4 MiB of float32


@pytest.fixture
def alloc_limit():
    loom._loom._testing_fail_allocs_above(LIMIT)
    yield lambda: loom._loom._testing_fail_allocs_above(0)
    loom._loom._testing_fail_allocs_above(0)


def test_failing_work_does_not_block_unrelated_sync_points(fusion, alloc_limit):
    a = loom.ones(1000)
    loom.sync()
    loom.manual_seed(7)
    x = loom.randn(BIG)
    y = x * 2
    with pytest.raises(MemoryError, match=r"for (randn|mul) of shape \[1048576\] float32"):
        loom.sync()
    assert float((a * 3).sum()) == 3000.0  # the reported line: computes, no error
    np.testing.assert_array_equal(a.numpy(), np.ones(1000, np.float32))
    assert "2." in str(a + 1)  # printing
    with pytest.raises(MemoryError, match=r"of shape \[1048576\] float32"):
        float(y.sum())
    with pytest.raises(MemoryError):
        loom.sync()
    alloc_limit()  # the limit lifted: the retry computes the same values as fusion off
    xs, ys = x.numpy(), y.numpy()
    np.testing.assert_array_equal(ys, 2 * xs)
    loom.set_fusion(False)
    loom.manual_seed(7)
    ref = loom.randn(BIG).numpy()
    loom.set_fusion(fusion)
    np.testing.assert_allclose(xs, ref, rtol=1e-6, atol=1e-6)


def test_dropping_the_failing_tensors_lets_sync_succeed(alloc_limit):
    rng = np.random.default_rng(3)
    an = rng.standard_normal((64, 64)).astype(np.float32)
    a = loom.tensor(an)
    x = loom.randn(BIG)
    y = x.exp()
    s = a.sum(dim=1)
    with pytest.raises(MemoryError):
        loom.sync()
    np.testing.assert_allclose(s.numpy(), an.astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-5)
    del x, y
    loom.sync()  # nothing that cannot run is left
