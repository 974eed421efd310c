"""CUDA streams and events from Python (the GPU parts run only where a GPU is found)."""
import numpy as np
import pytest

import loom
from helpers import check

gpu = pytest.mark.skipif(not loom.cuda.is_available(), reason="no CUDA device")


def test_api_without_gpu_says_why():
    if loom.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(RuntimeError, match="CUDA is unavailable"):
        loom.cuda.Stream()
    with pytest.raises(RuntimeError, match="CUDA is unavailable"):
        loom.cuda.Event(enable_timing=True)
    with pytest.raises(ValueError, match="expected a CUDA device"):
        loom.cuda.current_stream("cpu")


def test_stream_of_a_cpu_tensor_is_an_error():
    with pytest.raises(ValueError, match="the tensor is on cpu"):
        loom.cuda.stream_of(loom.ones(3))


@gpu
def test_current_stream_is_scoped():
    s = loom.cuda.Stream()
    d = loom.cuda.current_stream()
    assert d == loom.cuda.default_stream() and d.id == 0
    assert s.id != 0 and s != d
    with loom.cuda.stream(s):
        assert loom.cuda.current_stream() == s
        with loom.cuda.stream(None):
            assert loom.cuda.current_stream() == s
    assert loom.cuda.current_stream() == d


@gpu
def test_two_streams_with_cross_stream_dependencies_match_numpy(rng):
    a = rng.normal(size=(256, 1024)).astype(np.float32)
    b = rng.normal(size=(256, 1024)).astype(np.float32)
    x, y = loom.tensor(a, device="cuda"), loom.tensor(b, device="cuda")
    xr, yr = a.astype(np.float64), b.astype(np.float64)
    s1, s2 = loom.cuda.Stream(), loom.cuda.Stream()
    for i in range(40):
        with loom.cuda.stream(s1):
            t = (x * 1.5 + y).tanh()
        with loom.cuda.stream(s2):
            y.mul_(0.5).add_(t)
        with loom.cuda.stream(s1):
            x.sub_(y * 0.01)
        tr = np.tanh(xr * 1.5 + yr)
        yr = yr * 0.5 + tr
        xr = xr - yr * 0.01
    assert loom.cuda.stream_of(x) == s1 and loom.cuda.stream_of(y) == s2
    check(x, xr, rtol=1e-4, atol=1e-4)
    check(y, yr, rtol=1e-4, atol=1e-4)


@gpu
def test_synchronize_flushes_only_its_stream(rng):
    s1, s2 = loom.cuda.Stream(), loom.cuda.Stream()
    base = loom.tensor(rng.normal(size=4096).astype(np.float32), device="cuda")
    with loom.cuda.stream(s1):
        p = base.exp()
    with loom.cuda.stream(s2):
        q = base.sin()
    assert not s1.query()
    s1.synchronize()
    assert s1.query()
    assert not s2.query()  # q is still pending on s2
    loom.cuda.synchronize()
    assert s2.query()
    check(p, np.exp(base.numpy().astype(np.float64)), rtol=1e-5)
    check(q, np.sin(base.numpy().astype(np.float64)), rtol=1e-5, atol=1e-6)


@gpu
def test_events_time_and_order(rng):
    start, end = loom.cuda.Event(enable_timing=True), loom.cuda.Event(enable_timing=True)
    x = loom.tensor(rng.normal(size=1 << 20).astype(np.float32), device="cuda")
    start.record()
    y = x
    for _ in range(10):
        y = (y * 0.999).sin()
    end.record()  # flushes the current stream's trace: the event follows the kernels
    end.synchronize()
    assert end.query()
    ms = start.elapsed_time(end)
    assert 0 < ms < 10000
    e = loom.cuda.Event()
    with pytest.raises(ValueError, match="timing"):
        e.elapsed_time(end)
    s = loom.cuda.Stream()
    with loom.cuda.stream(s):
        z = (x * 3).cos()
    ev = s.record_event()
    loom.cuda.current_stream().wait_event(ev)
    check(z + 1, np.cos(x.numpy().astype(np.float64) * 3) + 1, rtol=1e-5, atol=1e-6)


def test_device_count_and_missing_devices():
    n = loom.cuda.device_count()
    assert n >= 0 and (n > 0) == loom.cuda.is_available()
    if n == 0:
        with pytest.raises(RuntimeError, match="CUDA is unavailable"):
            loom.cuda.stream_priority_range()
        return
    with pytest.raises(IndexError, match=f"cuda:{n} does not exist.*{n} CUDA device"):
        loom.ones(3).to(f"cuda:{n}")
    with pytest.raises(IndexError, match=f"cuda:{n}"):
        loom.cuda.Stream(device=n)


@gpu
def test_stream_priorities(rng):
    least, greatest = loom.cuda.stream_priority_range()
    assert greatest <= least
    hi, lo = loom.cuda.Stream(priority=greatest), loom.cuda.Stream(priority=least)
    assert hi.priority == greatest and lo.priority == least
    assert loom.cuda.Stream().priority == 0
    assert loom.cuda.Stream(priority=greatest - 100).priority == greatest  # clamped
    a = rng.normal(size=(64, 512)).astype(np.float32)
    x = loom.tensor(a, device="cuda")
    with loom.cuda.stream(lo):
        y = x * 2
    with loom.cuda.stream(hi):
        z = (y + 1).exp()
    check(z, np.exp(a.astype(np.float64) * 2 + 1), rtol=1e-5, atol=1e-6)


@gpu
def test_two_devices(rng):
    if loom.cuda.device_count() < 2:
        pytest.skip("one CUDA device")
    a = rng.normal(size=(128, 300)).astype(np.float32)
    x0 = loom.tensor(a, device="cuda:0")
    x1 = (x0 * 2).to("cuda:1")
    assert x1.device == "cuda:1"
    s = loom.cuda.Stream(device="cuda:1")
    with loom.cuda.stream(s):
        y1 = (x1 + 1).tanh()
    assert loom.cuda.stream_of(y1) == s and loom.cuda.current_stream(1).id == 0
    check(y1.to("cuda:0"), np.tanh(a.astype(np.float64) * 2 + 1), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="cuda:0 and cuda:1"):
        x0 + x1
