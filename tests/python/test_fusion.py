"""Runtime controls from Python: sync, fusion on/off, explain, counters, the kernel cache."""
import numpy as np
import pytest

import loom


def test_fusion_switch():
    assert loom.fusion_enabled()
    loom.set_fusion(False)
    assert not loom.fusion_enabled()
    loom.set_fusion(True)
    assert loom.fusion_enabled()


def test_softmax_runs_as_one_kernel():
    x = loom.randn(64, 256)
    loom.sync()
    loom.reset_counters()
    y = loom.softmax(x, dim=-1)
    assert y.is_pending
    assert loom.counters()["kernels"] == 0  # nothing ran yet
    loom.sync()
    c = loom.counters()
    assert c["flushes"] == 1 and c["kernels"] == 1, c
    assert not y.is_pending


def test_fusion_off_runs_one_kernel_per_primitive():
    loom.set_fusion(False)
    try:
        x = loom.randn(8, 16)
        loom.sync()
        loom.reset_counters()
        loom.softmax(x, -1).sum().item()
        assert loom.counters()["kernels"] >= 5
    finally:
        loom.set_fusion(True)


def test_explain_plans_without_running():
    x = loom.randn(4, 8)
    y = (x * 2).exp().sum(1)
    loom.reset_counters()
    text = loom.explain(y)
    assert "kernel" in text and "sum" in text
    assert loom.counters()["kernels"] == 0 and y.is_pending


def test_counters_dict_and_reset():
    c = loom.counters()
    for k in ["flushes", "groups", "kernels", "cache_hits", "cache_misses", "bytes_moved",
              "bytes_live", "bytes_peak", "nodes_recorded"]:
        assert isinstance(c[k], int)
    loom.reset_counters()
    assert loom.counters()["kernels"] == 0


def test_loop_hits_the_kernel_cache():
    """Invariant 5: same ops, other values and sizes -> one cached kernel."""
    for i, n in enumerate([1000, 1001, 1002, 1003]):
        x = loom.ones(n) * (0.5 + i)
        (x.exp() + 1).sum().item()
        if i == 0:
            size = loom.kernel_cache_size()
            loom.reset_counters()
    assert loom.kernel_cache_size() == size
    assert loom.counters()["cache_misses"] == 0


def test_kernel_cache_limit_evicts_least_recently_used():
    """Issue 6: ever-new signatures keep the cache at its limit; an evicted program is
    lowered again (a miss) and still right; a program used every iteration stays cached."""
    was = loom.kernel_cache_limit()
    x_np = np.linspace(-1, 1, 300, dtype=np.float32)
    x = loom.tensor(x_np)

    def chain(n):  # one fused kernel, a distinct signature per length
        y = x
        for _ in range(n):
            y = y * 0.75 + 0.125
        return y

    def chain_ref(n):
        y = x_np.astype(np.float64)
        for _ in range(n):
            y = y * 0.75 + 0.125
        return y

    try:
        loom.sync()
        loom.clear_kernel_cache()
        loom.set_kernel_cache_limit(4)
        assert loom.kernel_cache_limit() == 4
        loom.reset_counters()
        hot = (x.exp() - x).abs().numpy()
        for n in range(1, 11):
            np.testing.assert_allclose(chain(n).numpy(), chain_ref(n), rtol=1e-5, atol=1e-6)
            np.testing.assert_array_equal((x.exp() - x).abs().numpy(), hot)
            assert loom.kernel_cache_size() <= 4
        c = loom.counters()
        assert loom.kernel_cache_size() == 4
        assert c["cache_misses"] == 11 and c["kernel_evictions"] == 7, c
        np.testing.assert_allclose(chain(1).numpy(), chain_ref(1), rtol=1e-5, atol=1e-6)
        assert loom.counters()["cache_misses"] == 12
        with pytest.raises(ValueError, match="set_kernel_cache_limit"):
            loom.set_kernel_cache_limit(0)
    finally:
        loom.set_kernel_cache_limit(was)
        loom.clear_kernel_cache()


def test_flush_submits_without_a_sync_point():
    x = loom.ones(10) * 3
    assert x.is_pending
    loom.flush()
    assert not x.is_pending
    np.testing.assert_array_equal(x.numpy(), np.full(10, 3, np.float32))


def test_sync_runs_everything():
    xs = [loom.ones(10) * i for i in range(5)]
    assert all(x.is_pending for x in xs)
    loom.sync()
    assert not any(x.is_pending for x in xs)


def test_views_of_a_pending_producer_in_one_expression():
    """A consumer reading a pending value both directly and through another view (y * y.T)
    must not read the view as the value itself."""
    a = np.arange(9).reshape(3, 3)
    y = loom.arange(9).reshape(3, 3) * 1
    np.testing.assert_array_equal((y * y.T).numpy(), a * a.T)
    y = loom.arange(9).reshape(3, 3) * 1
    np.testing.assert_array_equal((y + y[::-1]).numpy(), a + a[::-1])
    y = loom.arange(10) * 2
    np.testing.assert_array_equal((y[1:] - y[:-1]).numpy(), np.full(9, 2))
