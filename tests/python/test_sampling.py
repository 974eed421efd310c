"""multinomial: frequencies against the distribution (a chi-square bound), without
replacement drawing distinct categories, zero-weight categories never drawn, invalid rows
raising at the next sync point, seeds reproducing draws."""
import numpy as np
import pytest

import loom


def chi2_ok(counts, probs):
    n = counts.sum()
    expected = n * probs
    stat = ((counts - expected) ** 2 / np.maximum(expected, 1e-12)).sum()
    dof = len(probs) - 1
    return stat < dof + 6 * np.sqrt(2 * dof)  # about 4 sigma above the mean


def test_frequencies_follow_the_weights(fusion):
    w = np.array([0.5, 0.0, 2.0, 1.0, 0.25, 4.0, 0.0, 1.25])
    loom.manual_seed(3)
    draws = loom.multinomial(loom.tensor(w).unsqueeze(0), 20000, replacement=True).numpy()[0]
    assert draws.dtype == np.int64 and draws.min() >= 0 and draws.max() < len(w)
    counts = np.bincount(draws, minlength=len(w))
    assert counts[1] == 0 and counts[6] == 0  # zero weight: never drawn
    assert chi2_ok(counts, w / w.sum())


def test_rows_are_independent_and_seeded():
    p = loom.tensor([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, 1.0, 0.0]])
    np.testing.assert_array_equal(loom.multinomial(p, 1).numpy(), [[0], [2], [1]])
    q = loom.rand(4, 50)
    loom.manual_seed(11)
    a = q.multinomial(5, replacement=True).numpy()
    loom.manual_seed(11)
    b = q.multinomial(5, replacement=True).numpy()
    np.testing.assert_array_equal(a, b)


def test_without_replacement_draws_distinct_categories(rng):
    w = loom.tensor(rng.random((6, 10)) + 0.01)
    out = loom.multinomial(w, 10).numpy()  # every category, each once
    for row in out:
        assert sorted(row) == list(range(10))
    one = loom.multinomial(loom.tensor([0.0, 3.0, 0.0, 1.0]), 2).numpy()
    assert sorted(one) == [1, 3]
    with pytest.raises(ValueError, match="without replacement"):
        loom.multinomial(w, 11)


def test_invalid_distributions_raise_at_the_sync():
    bad = loom.multinomial(loom.tensor([[0.5, -1.0, 1.0]]), 1)
    with pytest.raises(ValueError, match="multinomial: invalid distribution"):
        bad.numpy()
    zero = loom.multinomial(loom.zeros(2, 4), 1)
    with pytest.raises(ValueError, match="multinomial: invalid distribution"):
        zero.numpy()
    with pytest.raises(ValueError, match="multinomial"):
        loom.multinomial(loom.ones(2, 2, 2), 1)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int32"])
def test_sort_argsort_topk_match_numpy(fusion, rng, dtype):
    x = rng.integers(-5, 5, (3, 7, 9)).astype(dtype)  # many ties: stability shows
    if dtype.startswith("float"):
        x[0, 1, 2] = np.nan
        x[2, 3, 4] = np.nan
    for dim in (-1, 1, 0):
        for desc in (False, True):
            # numpy's stable argsort with NaN last; descending as torch: NaN first, ties in
            # index order (a stable sort of the negated keys, NaN mapped to -inf).
            if desc:
                key = -np.where(np.isnan(x), np.inf, x) if dtype.startswith("float") else -x
                want_i = np.argsort(key, axis=dim, kind="stable")
            else:
                want_i = np.argsort(x, axis=dim, kind="stable")
            v, i = loom.sort(loom.tensor(x), dim=dim, descending=desc)
            np.testing.assert_array_equal(i.numpy(), want_i)
            np.testing.assert_array_equal(v.numpy(), np.take_along_axis(x, want_i, dim))
            np.testing.assert_array_equal(
                loom.argsort(loom.tensor(x), dim=dim, descending=desc).numpy(), want_i)
            k = 4 if x.shape[dim] >= 4 else 1
            tv, ti = loom.tensor(x).topk(k, dim=dim, largest=desc)
            np.testing.assert_array_equal(ti.numpy(), np.take(want_i, range(k), axis=dim))


def test_topk_gradient_and_errors(rng):
    x = loom.tensor(rng.standard_normal((4, 6)), requires_grad=True)
    v, i = loom.topk(x, 3)
    (v * loom.tensor(np.arange(3.0))).sum().backward()
    want = np.zeros((4, 6))
    np.put_along_axis(want, i.numpy(), np.arange(3.0)[None].repeat(4, 0), axis=1)
    np.testing.assert_array_equal(x.grad.numpy(), want)
    with pytest.raises(ValueError, match=r"topk: k 7 out of range for dim 1 of size 6"):
        loom.topk(x, 7)
    assert list(loom.topk(x, 0).values.shape) == [4, 0]
