"""A gather of one element a row (cross entropy's target logit) read inside the kernel of a
reduction over those rows (BackendCaps::row_gather on the CPU): the picked values exactly, over
offset, strided and transposed views, 16-bit tensors, int32 indices, ignored targets past either
end of the row, rows over several kept dims and over the first dim, an index computed in the
same flush or by the group itself, and a tensor the reduction computes itself (then the gather
stays a kernel of its own)."""
import numpy as np
import pytest

import loom


def _lse_minus_pick(x, t, dim):
    """(lse(x), lse(x) - x.gather(dim, t)) in one flush, and its plan: the pick's reader is a
    row value of the lse's kernel."""
    lse = loom.logsumexp(x.float(), dim, keepdim=True)
    y = lse - x.gather(dim, t).float()
    plan = loom.explain(y)
    loom.sync()
    return lse.numpy(), y.numpy(), plan


def _check(x, t, dim, fused_pick=True):
    """y is lse - the picked value exactly (float32 rounding of one subtraction), the lse near
    float64's, and the pick in the lse's kernel where it can be."""
    lse, y, plan = _lse_minus_pick(x, t, dim)
    xn = x.float().numpy()
    n = xn.shape[dim]
    picked = np.take_along_axis(xn, np.clip(t.numpy().astype(np.int64), 0, n - 1), dim)
    np.testing.assert_array_equal(y, lse - picked)
    want = np.log(np.exp(xn.astype(np.float64)).sum(dim, keepdims=True))
    np.testing.assert_allclose(lse, want, rtol=1e-5)
    assert ("row_gather" in plan) == fused_pick, plan


CASES = ["plain", "offset", "strided", "transposed", "bfloat16", "int32", "dim0"]


@pytest.mark.parametrize("case", CASES)
def test_row_gather_equals_the_gather_kernel(case):
    rng = np.random.default_rng(CASES.index(case) + 7)
    R, C = 37, 1000
    big = loom.tensor(rng.standard_normal((R + 3, C + 9)).astype(np.float32))
    x = big[:R, :C]
    dim = 1
    if case == "offset":
        x = big[2:R + 2, 5:C + 5]
    elif case == "strided":
        x = big[:R, ::2][:, :C // 2]
    elif case == "transposed":
        x = loom.tensor(rng.standard_normal((C, R)).astype(np.float32)).t()
    elif case == "bfloat16":
        x = x.to(loom.bfloat16)
        loom.sync()  # memory the pick reads (a pending cast is a value of the lse's kernel)
    elif case == "dim0":
        x, dim = x.t(), 0
    n = x.shape[dim]
    tv = rng.integers(0, n, R)
    shape = (R, 1) if dim == 1 else (1, R)
    t = loom.tensor(tv.reshape(shape).astype(np.int32 if case == "int32" else np.int64))
    _check(x, t, dim)


@pytest.mark.parametrize("ignore", [-100, 1003])
def test_ignored_targets_outside_the_row(ignore):
    # An ignored target is picked clamped into its row (the last row's last element at most:
    # no read past the logits) and masked out of the loss.
    rng = np.random.default_rng(6)
    M, C = 40, 999
    xn = rng.standard_normal((M, C)).astype(np.float32)
    tn = rng.integers(0, C, M)
    tn[[0, M - 1]] = ignore
    x, t = loom.tensor(xn), loom.tensor(tn)
    plan = loom.explain(loom.cross_entropy(x, t, ignore_index=ignore))
    assert "row_gather" in plan
    got = loom.cross_entropy(x, t, ignore_index=ignore, reduction="none").numpy()
    x64 = xn.astype(np.float64)
    lse = np.log(np.exp(x64).sum(1))
    keep = tn != ignore
    want = np.where(keep, lse - x64[np.arange(M), np.clip(tn, 0, C - 1)], 0.0)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert got[0] == 0 and got[M - 1] == 0


def test_index_computed_in_the_same_flush():
    rng = np.random.default_rng(3)
    x = loom.tensor(rng.standard_normal((64, 300)).astype(np.float32))
    u = loom.tensor(rng.integers(0, 10**6, 64).astype(np.int64))
    _check(x, (u % 300).unsqueeze(1), 1)


def test_tensor_computed_by_the_reduction_stays_a_gather_kernel():
    # x * 3 is a value of the lse's kernel, not memory: the pick cannot read it there.
    rng = np.random.default_rng(4)
    a = loom.tensor(rng.standard_normal((16, 50)).astype(np.float32))
    t = loom.tensor(rng.integers(0, 50, (16, 1)).astype(np.int64))
    _check(a * 3.0, t, 1, fused_pick=False)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_cross_entropy_forward_and_backward_kernels(dtype):
    rng = np.random.default_rng(5)
    M, C = 128, 777
    xn = rng.standard_normal((M, C)).astype(np.float32)
    tn = rng.integers(0, C, M)
    tn[7] = -100
    t = loom.tensor(tn)

    def run():
        x = loom.tensor(xn).to(getattr(loom, dtype)).requires_grad_()
        loom.sync()
        loom.reset_counters()
        loss = loom.cross_entropy(x, t)
        loss.backward()
        loom.sync()
        kernels = loom.counters()["kernels"]
        return (loss.float().item(), x.grad.float().numpy()), kernels

    (lf, gf), kf = run()
    before = loom.fusion_enabled()
    loom.set_fusion(False)
    try:
        (lu, gu), _ = run()
    finally:
        loom.set_fusion(before)
    # the targets' count, the row kernel (log-sum-exp, the pick, dx), the mean (the gather
    # was a fourth); bfloat16 too (its loss's upstream gradient, a constant, is cast up as one)
    assert kf <= 3
    tol = 1e-6 if dtype == "float32" else 1e-2
    np.testing.assert_allclose(lf, lu, rtol=tol)
    np.testing.assert_allclose(gf, gu, rtol=tol, atol=tol * 1e-2)


def test_rows_over_several_kept_dims_and_an_index_the_group_computes():
    rng = np.random.default_rng(8)
    x = loom.tensor(rng.standard_normal((3, 17, 301)).astype(np.float32))
    _check(x.reshape(51, 301), loom.tensor(rng.integers(0, 301, (51, 1))), 1)
    t = loom.tensor(rng.integers(0, 301, (3, 17, 1)))
    lse = loom.logsumexp(x, -1, keepdim=True)
    y = lse - x.gather(-1, t)
    assert "row_gather" in loom.explain(y)
    loom.sync()
    picked = np.take_along_axis(x.numpy(), t.numpy(), -1)
    np.testing.assert_array_equal(y.numpy(), lse.numpy() - picked)
    # the index is the group's own argmax (a Row value of the same kernel): the pick is the max
    am = x.argmax(-1, keepdim=True)
    lse = loom.logsumexp(x, -1, keepdim=True)
    z = lse - x.gather(-1, am)
    assert "row_gather" in loom.explain(z)
    loom.sync()
    np.testing.assert_array_equal(z.numpy(), lse.numpy() - x.numpy().max(-1, keepdims=True))


def test_reduction_over_the_first_dim():
    # columns of a row-major tensor: the column layout's rows are consecutive
    rng = np.random.default_rng(9)
    w = loom.tensor(rng.standard_normal((50, 4, 6)).astype(np.float32))
    i0 = loom.tensor(rng.integers(0, 50, (1, 4, 6)))
    v = loom.amax(w, 0, keepdim=True) - w.gather(0, i0)
    assert "row_gather" in loom.explain(v)
    wn = w.numpy()
    want = wn.max(0, keepdims=True) - np.take_along_axis(wn, i0.numpy(), 0)
    np.testing.assert_array_equal(v.numpy(), want)
