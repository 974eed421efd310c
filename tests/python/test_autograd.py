"""loom.autograd from Python: torch's API (requires_grad, .grad, backward, no_grad, grad,
hooks) and, where torch is importable, gradients against torch's on random data."""
import numpy as np
import pytest

import loom

try:
    import torch
except ImportError:  # CI has no torch: the comparisons skip
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")


def test_leaf_grad_backward_accumulates(fusion):
    x = loom.tensor([1.0, 2.0, 3.0], requires_grad=True)
    assert x.requires_grad and x.is_leaf and x.grad is None
    y = (x * x).sum()
    assert y.grad_fn.name() == "SumBackward0"
    assert not y.is_leaf
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), [2, 4, 6])
    (x * 2).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [4, 6, 8])
    x.grad = None
    assert x.grad is None


def test_creation_keyword_and_flag():
    for t in (loom.zeros(2, 3, requires_grad=True), loom.ones((2,), requires_grad=True),
              loom.randn(4, requires_grad=True), loom.full((2,), 1.5, requires_grad=True),
              loom.zeros_like(loom.ones(3), requires_grad=True),
              loom.arange(0.0, 3.0, requires_grad=True),
              loom.linspace(0, 1, 5, requires_grad=True), loom.eye(3, requires_grad=True)):
        assert t.requires_grad and t.is_leaf
    w = loom.ones(3)
    w.requires_grad = True
    assert w.requires_grad
    assert w.requires_grad_(False) is w
    assert not w.requires_grad
    with pytest.raises(RuntimeError, match="floating point"):
        loom.tensor([1, 2], requires_grad=True)


def test_no_grad_enable_grad_set_grad_enabled():
    x = loom.ones(2, requires_grad=True)
    with loom.no_grad():
        assert not loom.is_grad_enabled()
        assert not (x * 2).requires_grad
        with loom.enable_grad():
            assert (x * 2).requires_grad
        x.mul_(3)  # an optimizer-style update of a leaf
    assert loom.is_grad_enabled()

    @loom.no_grad()
    def f(t):
        return t * 2

    assert not f(x).requires_grad
    with loom.inference_mode():
        assert not (x * 2).requires_grad
    assert repr(x * 2).endswith("grad_fn=<MulBackward0>)")
    with loom.set_grad_enabled(False):
        assert not (x * 2).requires_grad
    assert (x * 2).requires_grad
    loom.set_grad_enabled(False)
    assert not loom.is_grad_enabled()
    loom.set_grad_enabled(True)


def test_autograd_grad_hooks_retain_grad_detach():
    x = loom.tensor([1.0, 2.0], requires_grad=True)
    h = x * 3
    h.retain_grad()
    seen = []
    handle = x.register_hook(lambda g: seen.append(g.numpy().copy()) or g * 2)
    y = (h * h).sum()
    (gx,) = loom.autograd.grad(y, x, retain_graph=True)
    np.testing.assert_allclose(gx.numpy(), [36, 72])  # the hook doubled d/dx = 18 x
    assert len(seen) == 1
    y.backward()
    # retain_grad keeps h's gradient from both calls, as torch's does
    np.testing.assert_allclose(h.grad.numpy(), [12, 24])
    np.testing.assert_allclose(x.grad.numpy(), [36, 72])
    assert len(seen) == 2
    handle.remove()
    d = h.detach()
    assert not d.requires_grad and d.grad_fn is None
    (g2,) = loom.autograd.grad((x ** 3).sum(), x, create_graph=True)
    (gg,) = loom.autograd.grad(g2.sum(), x)
    np.testing.assert_allclose(gg.numpy(), [6, 12])


def test_errors_name_the_op_and_shapes():
    x = loom.tensor([1.0, 2.0, 3.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="scalar outputs"):
        (x * 2).backward()
    with pytest.raises(RuntimeError, match=r"shape \[2\] for output 0 of shape \[3\]"):
        (x * 2).backward(loom.ones(2))
    y = (x * x).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="second time"):
        y.backward()
    a = x * 1
    b = (a * a).sum()
    a.add_(1)
    with pytest.raises(RuntimeError, match="in-place"):
        b.backward()
    with pytest.raises(RuntimeError, match="leaf"):
        x.add_(1)


def test_backward_is_lazy_one_flush_per_step():
    w = loom.randn(32, 8, requires_grad=True)
    x = loom.randn(16, 32)
    loom.sync()
    loom.reset_counters()
    loss = ((x @ w).tanh() ** 2).mean()
    loss.backward()
    with loom.no_grad():
        w -= 0.1 * w.grad
    assert loom.counters()["flushes"] == 0
    loss.item()
    assert loom.counters()["flushes"] == 1


def _pair(rng, *shapes):
    arrays = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    return ([loom.tensor(a, requires_grad=True) for a in arrays],
            [torch.tensor(a, requires_grad=True) for a in arrays])


def _layer_norm(m):
    return torch.nn.functional.layer_norm if m is torch else loom.layer_norm


CASES = {
    "mlp": (lambda m, x, w, b: (m.tanh(x @ w + b) ** 2).mean(), [(8, 5), (5, 3), (3,)]),
    "softmax": (lambda m, x, w, b: (m.softmax(x @ w, dim=-1) * b).sum(), [(8, 5), (5, 3), (3,)]),
    "layer_norm": (lambda m, x, w, b: (_layer_norm(m)(x, (5,), w, b) ** 2).sum(),
                   [(4, 5), (5,), (5,)]),
    "views": (lambda m, x, w, b: (x.t()[1:, :].reshape(-1) * w.reshape(-1)[:16]).sum() + b.sum(),
              [(4, 5), (4, 4), (2,)]),
    "reductions": (lambda m, x, w, b: x.amax(dim=1).sum() + (w.exp().mean(dim=0) * b).sum()
                   + x.var() + x.logsumexp(dim=0).sum(), [(4, 5), (3, 2), (2,)]),
}


@needs_torch
@pytest.mark.parametrize("name", sorted(CASES))
def test_gradients_match_torch(name, rng, fusion):
    f, shapes = CASES[name]
    lx, tx = _pair(rng, *shapes)
    f(loom, *lx).backward()
    f(torch, *tx).backward()
    for a, b in zip(lx, tx):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-3, atol=1e-4)


@needs_torch
def test_cross_entropy_and_gelu_match_torch(rng):
    (lx,), (tx,) = _pair(rng, (6, 10))
    target = rng.integers(0, 10, 6)
    lt = loom.tensor(target)
    loss = loom.cross_entropy(loom.gelu(lx, approximate="tanh"), lt)
    loss.backward()
    tl = torch.nn.functional.cross_entropy(
        torch.nn.functional.gelu(tx, approximate="tanh"), torch.tensor(target))
    tl.backward()
    np.testing.assert_allclose(loss.item(), tl.item(), rtol=1e-5)
    np.testing.assert_allclose(lx.grad.numpy(), tx.grad.numpy(), rtol=1e-3, atol=1e-4)


def _mlp(m, x, w1, b1, w2, target, ln_w):
    ln = torch.nn.functional.layer_norm if m is torch else loom.layer_norm
    ce = torch.nn.functional.cross_entropy if m is torch else loom.cross_entropy
    h = ln(x, (x.shape[-1],), ln_w, None)
    h = (torch.nn.functional.gelu if m is torch else loom.gelu)(h @ w1 + b1, approximate="tanh")
    return ce(h @ w2, target)


@needs_torch
def test_saved_bytes_at_most_torchs(rng):
    arrays = [rng.standard_normal(s).astype(np.float32)
              for s in [(64, 128), (128, 256), (256,), (256, 10), (128,)]]
    target = rng.integers(0, 10, 64)
    lt = [loom.tensor(a, requires_grad=True) for a in arrays]
    tt = [torch.tensor(a, requires_grad=True) for a in arrays]
    loom.sync()
    loom.reset_counters()
    base = loom.counters()["saved_bytes"]
    ll = _mlp(loom, lt[0], lt[1], lt[2], lt[3], loom.tensor(target), lt[4])
    loom_saved = loom.counters()["saved_bytes"] - base
    torch_saved = []
    with torch.autograd.graph.saved_tensors_hooks(
            lambda t: torch_saved.append(t.numel() * t.element_size()) or t, lambda t: t):
        tl = _mlp(torch, tt[0], tt[1], tt[2], tt[3], torch.tensor(target), tt[4])
    assert 0 < loom_saved <= sum(torch_saved), (loom_saved, sum(torch_saved))
    ll.backward()
    tl.backward()
    assert loom.counters()["saved_bytes"] == base  # freed by the backward
    for a, b in zip(lt, tt):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("op", ["gelu", "silu", "tanh", "sigmoid", "exp"])
def test_16bit_unary_gradients_round_once(rng, dtype, op):
    # The derivative of a 16-bit op is evaluated in float32 and rounded once, as torch's
    # backward kernels do: with fusion off (eager), within one rounding of the rule's formula
    # in float64 (over what it reads: x, and the forward's rounded result y where it reads y),
    # measured against the sum of its terms' magnitudes (GELU's derivative crosses zero).
    # Fused kernels keep a 16-bit intermediate such as y unrounded in registers: not compared.
    before = loom.fusion_enabled()
    loom.set_fusion(False)
    try:
        check_16bit_unary_gradient(rng, dtype, op)
    finally:
        loom.set_fusion(before)


def check_16bit_unary_gradient(rng, dtype, op):
    from math import erf, pi, sqrt
    lt = getattr(loom, dtype)
    x = loom.tensor((rng.standard_normal(4096) * 2.5).astype(np.float32)).to(lt).requires_grad_()
    dy = loom.tensor(rng.standard_normal(4096).astype(np.float32)).to(lt)
    y = getattr(loom, op)(x)
    y.backward(dy)
    assert x.grad.dtype == lt
    xd, dyd, yd = (t.detach().float().numpy().astype(np.float64) for t in (x, dy, y))
    sg = 1 / (1 + np.exp(-xd))
    if op == "gelu":  # Phi(x) as y / x, as the rule does (the series near 0)
        cdf = np.where(np.abs(xd) < 1e-3, 0.5 + xd / sqrt(2 * pi), yd / np.where(xd == 0, 1, xd))
        t = (cdf, xd * np.exp(-xd * xd / 2) / sqrt(2 * pi))
    else:
        t = {"silu": (sg, sg * xd * (1 - sg)), "tanh": (np.ones_like(yd), -yd * yd),
             "sigmoid": (yd, -yd * yd), "exp": (yd,)}[op]
    want = sum(t) * dyd
    scale = sum(np.abs(v) for v in t) * np.abs(dyd)
    u = 2.0 ** (-8 if dtype == "bfloat16" else -11)  # one rounding's relative error at most
    err = np.abs(x.grad.float().numpy() - want)
    tiny = 2.0 ** -24 if dtype == "float16" else 1e-38  # the subnormals' spacing
    assert (err <= 1.05 * u * scale + tiny).all(), (err / (u * scale + tiny)).max()
