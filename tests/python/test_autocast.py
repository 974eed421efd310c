"""loom.autocast: which ops run in the low precision and which in float32, values against
float32 runs and the low-precision rounding of their inputs, gradients' dtypes, nesting,
threads, and torch's dtypes for the same ops when torch is importable."""
import threading

import numpy as np
import pytest

import loom
import loom.nn as nn
import loom.nn.functional as F

try:
    import torch
except ImportError:  # CI has no torch: the comparisons skip
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")


def bf16_round(a):
    """float32 -> bfloat16 -> float32, rounding to nearest even (as loom's casts)."""
    b = np.asarray(a, np.float32).view(np.uint32).astype(np.uint64)
    b = (b + 0x7FFF + ((b >> 16) & 1)) >> 16 << 16
    return b.astype(np.uint32).view(np.float32)


def test_policy_dtypes(rng):
    x = loom.tensor(rng.standard_normal((8, 16)).astype(np.float32))
    w = loom.tensor(rng.standard_normal((4, 16)).astype(np.float32))
    t = loom.tensor(rng.integers(0, 4, 8))
    with loom.autocast("cpu"):
        assert loom.is_autocast_enabled("cpu") and not loom.is_autocast_enabled("cuda")
        h = x @ w.T
        assert h.dtype == loom.bfloat16
        assert F.linear(x, w).dtype == loom.bfloat16
        b = loom.tensor(rng.standard_normal(4).astype(np.float32))
        assert F.linear(x, w, b).dtype == loom.bfloat16  # the bias is cast too
        # torch's CPU policy: these keep the low dtype (accumulated in float32 inside); on
        # CUDA they give float32 (tests/python/test_cuda.py).
        assert loom.softmax(h, -1).dtype == loom.bfloat16
        assert loom.log_softmax(h, -1).dtype == loom.bfloat16
        assert loom.layer_norm(h, [4], loom.ones(4), loom.zeros(4)).dtype == loom.bfloat16
        assert loom.rms_norm(h, [4]).dtype == loom.bfloat16
        assert loom.logsumexp(h, -1).dtype == loom.bfloat16
        assert F.cross_entropy(h, t).dtype == loom.float32
        assert F.mse_loss(h, h).dtype == loom.float32
        assert (h + 1).dtype == loom.bfloat16  # others follow promotion
        assert (h + x[:, :4]).dtype == loom.float32
        d = loom.ones(3, 3, dtype=loom.float64)
        assert (d @ d).dtype == loom.float64  # float64 is never cast
        with loom.autocast("cpu", enabled=False):
            assert (x @ w.T).dtype == loom.float32
        assert (x @ w.T).dtype == loom.bfloat16
        with loom.autocast("cpu", dtype=loom.float16):
            assert (x @ w.T).dtype == loom.float16
    assert not loom.is_autocast_enabled("cpu")
    assert (x @ w.T).dtype == loom.float32


def test_values_are_the_low_precision_products(rng):
    a = rng.standard_normal((16, 32)).astype(np.float32)
    b = rng.standard_normal((32, 8)).astype(np.float32)
    with loom.autocast("cpu"):
        got = (loom.tensor(a) @ loom.tensor(b)).float().numpy()
    # The product of the bfloat16-rounded operands, accumulated wide, then rounded once more.
    want = bf16_round(bf16_round(a).astype(np.float64) @ bf16_round(b).astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=2 ** -7, atol=1e-2)
    # ... and not the float32 product where rounding the inputs matters.
    exact = a.astype(np.float64) @ b
    assert np.abs(got - exact).max() > 1e-4


def test_linear_adds_a_low_precision_bias(rng):
    a = rng.standard_normal((16, 32)).astype(np.float32)
    w = rng.standard_normal((8, 32)).astype(np.float32)
    b = (rng.standard_normal(8) * 4).astype(np.float32)
    with loom.autocast("cpu"):
        y = F.linear(loom.tensor(a), loom.tensor(w), loom.tensor(b))
    assert y.dtype == loom.bfloat16
    prod = bf16_round(bf16_round(a).astype(np.float64) @ bf16_round(w).astype(np.float64).T)
    want = bf16_round(prod + bf16_round(b))
    np.testing.assert_allclose(y.float().numpy(), want, rtol=2 ** -7, atol=1e-2)
    # ... not the float32 bias added to the product
    assert np.abs(y.float().numpy() - (prod + b)).max() > 1e-3


def test_training_step_under_autocast(rng):
    loom.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.LayerNorm(32), nn.Linear(32, 4))
    opt = loom.optim.AdamW(model.parameters(), lr=1e-2)
    x = loom.tensor(rng.standard_normal((64, 16)).astype(np.float32))
    y = loom.tensor(rng.integers(0, 4, 64))
    losses = []
    for _ in range(30):
        with loom.autocast("cpu"):
            loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        for p in model.parameters():
            assert p.grad.dtype == loom.float32  # grads in the parameters' dtype
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]


@pytest.mark.parametrize("causal", [True, False])
def test_attention_backward_under_autocast(rng, causal):
    # q, k, v cast to bfloat16 as the policy says, forward and backward alike: the gradients
    # come back in float32 and follow the float32 run within bfloat16's rounding.
    shapes = [(2, 3, 16, 8), (2, 3, 16, 8), (2, 3, 16, 8)]
    data = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    dy = rng.standard_normal((2, 3, 16, 8)).astype(np.float32)

    def grads(amp):
        q, k, v = (loom.tensor(a).requires_grad_() for a in data)
        with loom.autocast("cpu", enabled=amp):
            y = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        assert y.dtype == (loom.bfloat16 if amp else loom.float32)
        (y.float() * loom.tensor(dy)).sum().backward()
        return [t.grad for t in (q, k, v)]

    low, full = grads(True), grads(False)
    for g, want in zip(low, full):
        assert g.dtype == loom.float32
        np.testing.assert_allclose(g.numpy(), want.numpy(), rtol=0.1, atol=0.1)
        assert np.abs(g.numpy() - want.numpy()).max() > 0  # the low precision did run


def test_decorator_and_threads():
    @loom.autocast("cpu")
    def f():
        return loom.is_autocast_enabled("cpu")

    assert f() and not loom.is_autocast_enabled("cpu")
    seen = []
    with loom.autocast("cpu"):
        th = threading.Thread(target=lambda: seen.append(loom.is_autocast_enabled("cpu")))
        th.start()
        th.join()
    assert seen == [False]  # per thread, as torch's
    with pytest.raises(ValueError, match="device_type"):
        loom.autocast("tpu")
    with pytest.raises(ValueError, match="dtype"):
        loom.autocast("cpu", dtype=loom.float32)


@needs_torch
def test_same_dtypes_as_torch(rng):
    a = rng.standard_normal((8, 8)).astype(np.float32)
    t_ = rng.integers(0, 8, 8)
    ops = {
        "matmul": lambda m, x: x @ x,
        "softmax": lambda m, x: m.softmax(x @ x, -1),
        "log_softmax": lambda m, x: m.log_softmax(x @ x, -1),
        "layer_norm": lambda m, x: (m.nn.functional.layer_norm if m is torch else F.layer_norm)(
            x @ x, [8], m.ones(8), m.zeros(8)),
        "mse_loss": lambda m, x: (m.nn.functional.mse_loss if m is torch else F.mse_loss)(
            x @ x, x @ x),
        "cross_entropy": lambda m, x: m.nn.functional.cross_entropy(
            x @ x, m.tensor(t_)) if m is torch else F.cross_entropy(x @ x, loom.tensor(t_)),
        "linear": lambda m, x: (m.nn.functional.linear if m is torch else F.linear)(
            x, x, x[0]),
        "add": lambda m, x: (x @ x) + 1,
        "add32": lambda m, x: (x @ x) + x,
    }
    for name, f in ops.items():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            td = f(torch, torch.tensor(a)).dtype
        with loom.autocast("cpu", dtype=loom.bfloat16):
            ld = f(loom, loom.tensor(a)).dtype
        assert str(ld).split(".")[-1] == str(td).split(".")[-1], name
