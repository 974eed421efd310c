"""Losses (loom.cross_entropy / nll_loss / mse_loss / l1_loss /
binary_cross_entropy_with_logits and loom.nn.functional's) against float64 numpy references,
their gradients against central differences, and against torch when it is importable."""
import numpy as np
import pytest

import loom
import loom.nn.functional as F

try:
    import torch
except ImportError:  # CI has no torch: the comparisons skip
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")


def ref_cross_entropy(x, t, weight=None, ignore_index=-100, reduction="mean", smoothing=0.0):
    """float64 reference over rows x [M, C], targets t [M]."""
    C = x.shape[1]
    logp = x - np.log(np.exp(x - x.max(1, keepdims=True)).sum(1, keepdims=True)) - \
        x.max(1, keepdims=True)
    w = np.ones(C) if weight is None else weight
    valid = t != ignore_index
    tc = np.where(valid, t, 0)
    wt = w[tc] * valid
    nll = -logp[np.arange(len(t)), tc] * wt
    smooth = -(logp * w).sum(1) * valid
    per = (1 - smoothing) * nll + smoothing / C * smooth
    if reduction == "none":
        return per
    if reduction == "sum":
        return per.sum()
    return per.sum() / wt.sum()


CASES = [dict(), dict(reduction="sum"), dict(reduction="none"), dict(ignore_index=2),
         dict(smoothing=0.2), dict(weight=True), dict(weight=True, smoothing=0.1, ignore_index=0),
         dict(weight=True, reduction="none", smoothing=0.3)]


@pytest.mark.parametrize("case", CASES, ids=[str(c) for c in CASES])
def test_cross_entropy_options_match_float64(fusion, rng, case):
    M, C = 9, 5
    x = rng.standard_normal((M, C))
    t = rng.integers(0, C, M)
    t[[1, 4]] = case.get("ignore_index", 0)
    w = rng.uniform(0.5, 2.0, C) if case.get("weight") else None
    kw = dict(ignore_index=case.get("ignore_index", -100), reduction=case.get("reduction", "mean"),
              label_smoothing=case.get("smoothing", 0.0))
    want = ref_cross_entropy(x, t, w, kw["ignore_index"], kw["reduction"], kw["label_smoothing"])
    lx = loom.tensor(x, requires_grad=True)
    lw = None if w is None else loom.tensor(w)
    got = F.cross_entropy(lx, loom.tensor(t), weight=lw, **kw)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-10, atol=1e-12)
    # The gradient of sum(loss * v) against a central difference of the reference.
    v = rng.standard_normal(np.shape(want))
    (got * loom.tensor(v)).sum().backward()
    eps, num = 1e-6, np.zeros_like(x)
    for i in range(M):
        for j in range(C):
            xp, xm = x.copy(), x.copy()
            xp[i, j] += eps
            xm[i, j] -= eps
            fp = (ref_cross_entropy(xp, t, w, kw["ignore_index"], kw["reduction"],
                                    kw["label_smoothing"]) * v).sum()
            fm = (ref_cross_entropy(xm, t, w, kw["ignore_index"], kw["reduction"],
                                    kw["label_smoothing"]) * v).sum()
            num[i, j] = (fp - fm) / (2 * eps)
    np.testing.assert_allclose(lx.grad.numpy(), num, rtol=1e-5, atol=1e-7)


def test_cross_entropy_spatial_unbatched_and_probabilities(fusion, rng):
    x = rng.standard_normal((2, 4, 3, 5))  # [N, C, d1, d2]
    t = rng.integers(0, 4, (2, 3, 5))
    rows = x.transpose(0, 2, 3, 1).reshape(-1, 4)
    got = F.cross_entropy(loom.tensor(x), loom.tensor(t), reduction="none")
    assert list(got.shape) == [2, 3, 5]
    np.testing.assert_allclose(got.numpy(), ref_cross_entropy(rows, t.reshape(-1), reduction="none")
                               .reshape(2, 3, 5), rtol=1e-10)
    np.testing.assert_allclose(F.cross_entropy(loom.tensor(x), loom.tensor(t)).item(),
                               ref_cross_entropy(rows, t.reshape(-1)), rtol=1e-10)
    one = F.cross_entropy(loom.tensor(x[0, :, 0, 0]), loom.tensor(t[0, 0, 0]))
    assert one.shape == ()
    np.testing.assert_allclose(one.item(), ref_cross_entropy(x[:1, :, 0, 0], t[:1, 0, 0]),
                               rtol=1e-10)
    # Class probabilities (soft targets), with smoothing: -sum(y' * log p) / N.
    p = rng.dirichlet(np.ones(6), 7)
    z = rng.standard_normal((7, 6))
    logp = z - np.log(np.exp(z).sum(1, keepdims=True))
    ys = p * 0.9 + 0.1 / 6
    got = F.cross_entropy(loom.tensor(z), loom.tensor(p), label_smoothing=0.1)
    np.testing.assert_allclose(got.item(), -(ys * logp).sum(1).mean(), rtol=1e-10)


def test_nll_loss_matches_float64(fusion, rng):
    x = rng.standard_normal((8, 5))
    logp = x - np.log(np.exp(x).sum(1, keepdims=True))
    t = rng.integers(0, 5, 8)
    t[3] = 1
    w = rng.uniform(0.5, 2, 5)
    for kw in (dict(), dict(weight=w), dict(ignore_index=1, reduction="sum"),
               dict(weight=w, ignore_index=1)):
        ignore = kw.get("ignore_index", -100)
        valid = t != ignore
        ww = kw.get("weight", np.ones(5))
        per = -logp[np.arange(8), t] * ww[t] * valid
        want = per.sum() if kw.get("reduction") == "sum" else per.sum() / (ww[t] * valid).sum()
        lkw = dict(kw)
        if "weight" in lkw:
            lkw["weight"] = loom.tensor(w)
        np.testing.assert_allclose(F.nll_loss(loom.tensor(logp), loom.tensor(t), **lkw).item(),
                                   want, rtol=1e-10)


def test_regression_losses(fusion, rng):
    a, b = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    for red, fn in (("mean", np.mean), ("sum", np.sum), ("none", lambda v: v)):
        np.testing.assert_allclose(F.mse_loss(loom.tensor(a), loom.tensor(b), reduction=red)
                                   .numpy(), fn((a - b) ** 2), rtol=1e-12)
        np.testing.assert_allclose(F.l1_loss(loom.tensor(a), loom.tensor(b), reduction=red)
                                   .numpy(), fn(np.abs(a - b)), rtol=1e-12)
    x = np.array([-800.0, -30.0, -1.0, 0.0, 2.0, 40.0, 800.0])
    y = np.array([1.0, 0.0, 1.0, 0.5, 0.0, 1.0, 0.0])
    pw = 3.0
    # -(pw y log s(x) + (1 - y) log(1 - s(x))) with log s(x) = -logaddexp(0, -x).
    want = pw * y * np.logaddexp(0, -x) + (1 - y) * np.logaddexp(0, x)
    got = F.binary_cross_entropy_with_logits(loom.tensor(x), loom.tensor(y), reduction="none",
                                             pos_weight=loom.tensor(pw))
    # (|x| - |x| cancels in the formula: absolute rounding of |x|'s size is allowed)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-13)


def test_errors_name_the_loss():
    x = loom.zeros(4, 3)
    with pytest.raises(ValueError, match=r"cross_entropy.*\[4\].*\[4, 3\].*\[5\]"):
        F.cross_entropy(x, loom.zeros(5, dtype=loom.int64))
    with pytest.raises(ValueError, match="reduction"):
        F.cross_entropy(x, loom.zeros(4, dtype=loom.int64), reduction="avg")
    with pytest.raises(ValueError, match=r"weight of shape \[2\]"):
        F.cross_entropy(x, loom.zeros(4, dtype=loom.int64), weight=loom.ones(2))
    with pytest.raises(ValueError, match="label_smoothing"):
        F.cross_entropy(x, loom.zeros(4, dtype=loom.int64), label_smoothing=1.5)
    with pytest.raises(TypeError, match="int64"):
        F.cross_entropy(x, loom.zeros(4, dtype=loom.float32))
    # An out-of-range class raises at the next sync point; an ignored one does not.
    ok = F.cross_entropy(x, loom.tensor([0, -100, 2, 1]))
    assert np.isfinite(ok.item())
    bad = F.cross_entropy(x, loom.tensor([0, 7, 2, 1]))
    with pytest.raises(IndexError, match="cross_entropy.*out of range"):
        bad.item()


@needs_torch
@pytest.mark.parametrize("case", CASES, ids=[str(c) for c in CASES])
def test_cross_entropy_matches_torch(rng, case):
    x = rng.standard_normal((16, 7)).astype(np.float32)
    t = rng.integers(0, 7, 16)
    t[[0, 5]] = case.get("ignore_index", 0)
    w = rng.uniform(0.5, 2.0, 7).astype(np.float32) if case.get("weight") else None
    kw = dict(ignore_index=case.get("ignore_index", -100), reduction=case.get("reduction", "mean"),
              label_smoothing=case.get("smoothing", 0.0))
    lx = loom.tensor(x, requires_grad=True)
    tx = torch.tensor(x, requires_grad=True)
    lo = F.cross_entropy(lx, loom.tensor(t), weight=None if w is None else loom.tensor(w), **kw)
    to = torch.nn.functional.cross_entropy(tx, torch.tensor(t),
                                           weight=None if w is None else torch.tensor(w), **kw)
    np.testing.assert_allclose(lo.numpy(), to.detach().numpy(), rtol=1e-5, atol=1e-6)
    lo.sum().backward()
    to.sum().backward()
    np.testing.assert_allclose(lx.grad.numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-6)
