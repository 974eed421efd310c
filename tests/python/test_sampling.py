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
