"""CUDA tensors from Python and DLPack device type 2 (runs only where a GPU is found)."""
import numpy as np
import pytest

import loom
from helpers import check

pytestmark = pytest.mark.skipif(not loom.cuda.is_available(), reason="no CUDA device")


def test_cuda_tensors(rng):
    a = rng.normal(size=(64, 33)).astype(np.float32)
    t = loom.tensor(a, device="cuda")
    assert t.device == "cuda:0" and t.is_cuda and t.__dlpack_device__() == (2, 0)
    check(t.softmax(-1).cpu(), np.exp(a) / np.exp(a).sum(-1, keepdims=True), rtol=1e-5)
    check((t * 2 + 1).sum(0), (a.astype(np.float64) * 2 + 1).sum(0), rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(t.numpy(), a)  # numpy() copies to the host


def test_dlpack_to_torch_is_zero_copy(rng):
    torch = pytest.importorskip("torch")
    t = loom.tensor(rng.normal(size=(8, 5)).astype(np.float32), device="cuda") + 1
    x = torch.from_dlpack(t)
    assert x.device.type == "cuda" and x.data_ptr() == t.data_ptr()
    np.testing.assert_array_equal(x.cpu().numpy(), t.numpy())
    v = t[:, 1:4]
    np.testing.assert_array_equal(torch.from_dlpack(v).cpu().numpy(), t.numpy()[:, 1:4])


def test_dlpack_from_torch_is_zero_copy():
    torch = pytest.importorskip("torch")
    x = torch.randn(100, 7, device="cuda")
    torch.cuda.synchronize()
    t = loom.from_dlpack(x)
    assert t.device == "cuda:0" and t.data_ptr() == x.data_ptr()
    check((t * 3).sum(1), (x.double() * 3).sum(1).cpu().numpy(), rtol=1e-5, atol=1e-5)
    off = x[1:, 2:]  # an unaligned, strided view
    to = loom.from_dlpack(off)
    assert to.data_ptr() == off.data_ptr()
    check(to.exp() + 1, (off.double().exp() + 1).cpu().numpy(), rtol=1e-6)
    h = x.half()[3:]
    torch.cuda.synchronize()
    check(loom.from_dlpack(h).float(), h.float().cpu().numpy())


def test_dlpack_with_cupy():
    cp = pytest.importorskip("cupy")
    a = cp.arange(12, dtype=cp.float32).reshape(3, 4)
    cp.cuda.Device().synchronize()
    t = loom.from_dlpack(a)
    assert t.data_ptr() == a.data.ptr
    check(t * 2, np.arange(12.0).reshape(3, 4) * 2)
    b = cp.from_dlpack(t + 1)
    np.testing.assert_array_equal(cp.asnumpy(b), np.arange(12.0).reshape(3, 4) + 1)


def test_autocast_cuda_policy(rng):
    # CUDA's policy: products in float16 (the default) and the range ops lifted to float32.
    x = loom.tensor(rng.normal(size=(8, 16)).astype(np.float32), device="cuda")
    t = loom.tensor(rng.integers(0, 16, 8), device="cuda")
    with loom.autocast("cuda"):
        h = x @ x.T @ x
        assert h.dtype == loom.float16
        assert loom.nn.functional.linear(x, x, x[0]).dtype == loom.float16  # bias cast too
        for y in (loom.softmax(h, -1), loom.log_softmax(h, -1), loom.layer_norm(h, [16]),
                  loom.logsumexp(h, -1), loom.cross_entropy(h, t)):
            assert y.dtype == loom.float32
        with loom.autocast("cpu"):
            assert (x @ x.T).dtype == loom.float16  # the CPU's state is its own
    a = x.numpy().astype(np.float64)
    with loom.autocast("cuda", dtype=loom.bfloat16):
        got = (x @ x.T).float().numpy()
    np.testing.assert_allclose(got, a @ a.T, rtol=2e-2, atol=5e-2)
