"""tril / triu, masked_fill, one_hot and scaled_dot_product_attention against numpy (float64),
with gradients against central differences, and against torch when it is importable."""
import numpy as np
import pytest

import loom
import loom.nn.functional as F

try:
    import torch
except ImportError:  # CI has no torch: the comparisons skip
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")


def test_triangles_and_masked_fill(fusion, rng):
    x = rng.standard_normal((2, 4, 5))
    for d in (-2, -1, 0, 1, 3):
        np.testing.assert_array_equal(loom.tril(loom.tensor(x), d).numpy(), np.tril(x, d))
        np.testing.assert_array_equal(loom.tensor(x).triu(diagonal=d).numpy(), np.triu(x, d))
    m = rng.random((4, 1)) < 0.5
    np.testing.assert_array_equal(loom.tensor(x).masked_fill(loom.tensor(m), -7.0).numpy(),
                                  np.where(m, -7.0, x))
    i = loom.tensor(np.arange(6, dtype=np.int32).reshape(2, 3))
    got = i.masked_fill(loom.tensor([True, False, True]), 9)
    assert got.dtype == loom.int32
    np.testing.assert_array_equal(got.numpy(), [[9, 1, 9], [9, 4, 9]])
    t = loom.tensor(x.copy())
    t.masked_fill_(loom.tensor(m), 0.5)
    np.testing.assert_array_equal(t.numpy(), np.where(m, 0.5, x))
    with pytest.raises(TypeError, match="masked_fill: mask must be bool"):
        loom.tensor(x).masked_fill(loom.ones(4, 1), 0.0)
    with pytest.raises(ValueError, match="tril: needs at least 2 dims"):
        loom.tril(loom.ones(3))


def test_one_hot(rng):
    t = rng.integers(0, 5, (3, 4))
    got = loom.one_hot(loom.tensor(t), 6)
    assert got.dtype == loom.int64 and list(got.shape) == [3, 4, 6]
    np.testing.assert_array_equal(got.numpy(), np.eye(6, dtype=np.int64)[t])
    np.testing.assert_array_equal(loom.one_hot(loom.tensor(t)).numpy(),
                                  np.eye(t.max() + 1, dtype=np.int64)[t])
    bad = loom.one_hot(loom.tensor([1, 6]), 4)
    with pytest.raises(IndexError, match="one_hot.*out of range"):
        bad.numpy()


def ref_sdpa(q, k, v, mask=None, causal=False, scale=None):
    s = (q @ np.swapaxes(k, -1, -2)) * (scale if scale is not None else 1 / np.sqrt(q.shape[-1]))
    L, S = s.shape[-2:]
    if causal:
        s = np.where(np.tril(np.ones((L, S), bool)), s, -np.inf)
    elif mask is not None:
        s = np.where(mask, s, -np.inf) if mask.dtype == bool else s + mask
    s = s - s.max(-1, keepdims=True)
    p = np.exp(s)
    p /= p.sum(-1, keepdims=True)
    return p @ v


@pytest.mark.parametrize("kind", ["plain", "causal", "bool", "float", "scale", "cross"])
def test_sdpa_matches_float64_with_gradients(fusion, rng, kind):
    B, H, L, E = 2, 3, 5, 4
    S = 7 if kind == "cross" else L
    q = rng.standard_normal((B, H, L, E))
    k = rng.standard_normal((B, H, S, E))
    v = rng.standard_normal((B, H, S, 6))
    mask = None
    if kind == "bool":
        mask = rng.random((L, S)) < 0.7
        mask[:, 0] = True  # every row sees something
    elif kind == "float":
        mask = rng.standard_normal((B, 1, L, S))
    kw = dict(causal=kind == "causal", scale=0.3 if kind == "scale" else None)
    want = ref_sdpa(q, k, v, mask, **kw)
    lq, lk, lv = (loom.tensor(a, requires_grad=True) for a in (q, k, v))
    got = F.scaled_dot_product_attention(
        lq, lk, lv, attn_mask=None if mask is None else loom.tensor(mask),
        is_causal=kw["causal"], scale=kw["scale"])
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-10, atol=1e-12)
    w = rng.standard_normal(want.shape)
    (got * loom.tensor(w)).sum().backward()
    for arr, leaf, which in ((q, lq, 0), (k, lk, 1), (v, lv, 2)):
        num = np.zeros_like(arr)
        it = np.nditer(arr, flags=["multi_index"])
        for _ in it:
            idx = it.multi_index
            args = [q, k, v]
            plus, minus = arr.copy(), arr.copy()
            plus[idx] += 1e-6
            minus[idx] -= 1e-6
            args[which] = plus
            fp = (ref_sdpa(*args, mask, **kw) * w).sum()
            args[which] = minus
            fm = (ref_sdpa(*args, mask, **kw) * w).sum()
            num[idx] = (fp - fm) / 2e-6
        np.testing.assert_allclose(leaf.grad.numpy(), num, rtol=1e-5, atol=1e-7)


def ref_sdpa_grads(q, k, v, dy, causal):
    """The float64 gradients of q, k and v of causal or plain attention, from its own rule."""
    sc = 1 / np.sqrt(q.shape[-1])
    s = (q @ np.swapaxes(k, -1, -2)) * sc
    if causal:
        s = np.where(np.tril(np.ones(s.shape[-2:], bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    dp = dy @ np.swapaxes(v, -1, -2)
    ds = p * (dp - (p * dp).sum(-1, keepdims=True)) * sc
    return ds @ k, np.swapaxes(ds, -1, -2) @ q, np.swapaxes(p, -1, -2) @ dy


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("causal", [True, False])
def test_sdpa_16bit_keeps_no_probabilities(fusion, rng, dtype, causal):
    # 16-bit attention takes the flash node too: q, k, v and a float32 logsumexp a row are
    # kept, and the gradients follow float64's from the same rounded inputs.
    B, H, L, E = 2, 3, 24, 8
    lt = getattr(loom, dtype)
    ins = [loom.tensor(rng.standard_normal((B, H, L, E)).astype(np.float32)).to(lt)
           for _ in range(3)]
    q, k, v = (x.detach().requires_grad_() for x in ins)
    loom.sync()
    base = loom.counters()["saved_bytes"]
    y = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    assert y.dtype == lt
    assert y.grad_fn.name() == "ScaledDotProductFlashAttentionBackward0"
    assert loom.counters()["saved_bytes"] - base == 3 * B * H * L * E * 2 + B * H * L * 4
    a64 = [x.float().numpy().astype(np.float64) for x in ins]
    dy = rng.standard_normal((B, H, L, E))
    np.testing.assert_allclose(y.float().numpy(), ref_sdpa(*a64, causal=causal), atol=3e-2)
    y.backward(loom.tensor(dy.astype(np.float32)).to(lt))
    for leaf, want in zip((q, k, v), ref_sdpa_grads(*a64, dy, causal)):
        assert leaf.grad.dtype == lt
        err = np.abs(leaf.grad.float().numpy() - want).max()
        assert err <= 3e-2 * np.abs(want).max(), (err, np.abs(want).max())


def test_sdpa_errors_and_dropout(rng):
    q = loom.randn(2, 4, 8)
    with pytest.raises(ValueError, match=r"scaled_dot_product_attention.*\[2, 4, 8\].*\[2, 4, 7\]"):
        F.scaled_dot_product_attention(q, loom.randn(2, 4, 7), loom.randn(2, 4, 8))
    with pytest.raises(ValueError, match="either attn_mask or is_causal"):
        F.scaled_dot_product_attention(q, q, q, attn_mask=loom.ones(4, 4, dtype=loom.bool),
                                       is_causal=True)
    # dropout_p: each row of the attention matrix keeps about (1 - p) of its entries, scaled.
    v = loom.eye(64).reshape(1, 64, 64)
    qq = loom.zeros(1, 64, 8)
    out = F.scaled_dot_product_attention(qq, loom.zeros(1, 64, 8), v, dropout_p=0.25).numpy()
    kept = (out != 0).mean()
    assert 0.65 < kept < 0.85
    np.testing.assert_allclose(out[out != 0], 1 / 64 / 0.75, rtol=1e-6)


@pytest.mark.parametrize("kind", ["plain", "causal", "float"])
def test_sdpa_dropout_gradients_match_the_composite(fusion, rng, kind):
    """With dropout the op keeps no probabilities: its backward draws the mask again. Against
    softmax -> dropout -> matmul written out (the same random range after the same seed), in
    float64: the outputs, and the gradients of q, k and v (and of a float mask)."""
    B, H, L, S, E = 2, 3, 6, 6, 4
    q, k, v = (rng.standard_normal(s) for s in ((B, H, L, E), (B, H, S, E), (B, H, S, 5)))
    fm = rng.standard_normal((1, H, L, S)) if kind == "float" else None
    w = rng.standard_normal((B, H, L, 5))
    p_drop = 0.4

    def leaves():
        return [loom.tensor(a, requires_grad=True) for a in (q, k, v)] + (
            [loom.tensor(fm, requires_grad=True)] if fm is not None else [])

    loom.manual_seed(7)
    a = leaves()
    got = F.scaled_dot_product_attention(a[0], a[1], a[2], attn_mask=a[3] if fm is not None
                                         else None, dropout_p=p_drop, is_causal=kind == "causal")
    (got * loom.tensor(w)).sum().backward()
    loom.manual_seed(7)
    b = leaves()
    sc = (b[0] @ b[1].transpose(-2, -1)) * (1 / np.sqrt(E))
    if kind == "causal":
        sc = sc.masked_fill(loom.tensor(~np.tril(np.ones((L, S), bool))), float("-inf"))
    elif fm is not None:
        sc = sc + b[3]
    want = F.dropout(F.softmax(sc, dim=-1), p_drop, training=True) @ b[2]
    (want * loom.tensor(w)).sum().backward()
    g, wv = got.numpy(), want.numpy()
    plain = ref_sdpa(q, k, v, fm, causal=kind == "causal")
    assert np.abs(g - plain).max() > 1e-3  # the dropout took effect
    np.testing.assert_allclose(g, wv, rtol=1e-10, atol=1e-12)
    for x, y in zip(a, b):
        np.testing.assert_allclose(x.grad.numpy(), y.grad.numpy(), rtol=1e-9, atol=1e-11)
    # Without gradients the op takes the composite path: the same draw, the same output.
    loom.manual_seed(7)
    nograd = F.scaled_dot_product_attention(
        loom.tensor(q), loom.tensor(k), loom.tensor(v),
        attn_mask=loom.tensor(fm) if fm is not None else None, dropout_p=p_drop,
        is_causal=kind == "causal")
    np.testing.assert_allclose(nograd.numpy(), g, rtol=1e-10, atol=1e-12)


@needs_torch
def test_sdpa_matches_torch(rng):
    q, k, v = (rng.standard_normal((2, 4, 16, 8)).astype(np.float32) for _ in range(3))
    lq, lk, lv = (loom.tensor(a, requires_grad=True) for a in (q, k, v))
    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    lo = F.scaled_dot_product_attention(lq, lk, lv, is_causal=True)
    to = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=True)
    np.testing.assert_allclose(lo.numpy(), to.detach().numpy(), rtol=1e-4, atol=1e-5)
    lo.square().sum().backward()
    to.square().sum().backward()
    for a, b in ((lq, tq), (lk, tk), (lv, tv)):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-3, atol=1e-4)
