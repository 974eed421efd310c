"""Save or recompute (fusion/planner.cpp, mark_recompute): a value a reduction's kernel would
write only for one later kernel is computed again there when that reads fewer bytes (the same
values; sums over them may round in another order), and never where more than one later kernel
reads it."""
import os
import subprocess
import sys

import numpy as np

import loom

PROGRAM = r"""
import sys, numpy as np, loom
rng = np.random.default_rng(3)
R, C = 512, 384
x = loom.tensor(rng.standard_normal((R, C)).astype(np.float32))
loom.sync()
loom.reset_counters()
lse = loom.logsumexp(x, 1, keepdim=True)
# exp(x - lse) is made in lse's kernel; its only reader needs lse.mean(), which needs that
# kernel: it cannot join it, so the kernel writes the probabilities for it or it reads x again.
z = ((x - lse).exp() * lse.mean()).sum(1)
{second}
plan = loom.explain(z)
loom.sync()
c = loom.counters()
np.save(sys.argv[1], z.numpy())
print(c["bytes_moved"], c["kernels"], int("computed again" in plan))
"""
# A second reader of the probabilities in another kernel (a sum over the other dim): they are
# written either way.
TWO_READERS = """
p = (x - lse).exp()
z = (p * lse.mean()).sum(1).sum() + (p * lse.amax()).sum(0).sum()
del p
"""


def run(tmp_path, recompute, second=""):
    out = tmp_path / f"z{recompute}.npy"
    env = dict(os.environ, LOOM_RECOMPUTE=str(recompute))
    src = PROGRAM.replace("{second}", "")
    if second:
        src = src.replace(
            "z = ((x - lse).exp() * lse.mean()).sum(1)\n", second)
    r = subprocess.run([sys.executable, "-c", src, str(out)], env=env, capture_output=True,
                       text=True, check=True)
    moved, kernels, again = (int(v) for v in r.stdout.split())
    return moved, kernels, bool(again), np.load(out)


def test_recomputed_where_read_same_bits_fewer_bytes(tmp_path):
    m0, k0, a0, z0 = run(tmp_path, 0)
    m1, k1, a1, z1 = run(tmp_path, 1)
    assert (a0, a1) == (False, True)
    assert k1 == k0
    np.testing.assert_allclose(z1, z0, rtol=2e-6)
    n = 512 * 384 * 4  # the probabilities' bytes
    assert m0 - m1 >= 0.9 * n, (m0, m1)  # written and read back (2n) against x read again (n)
    # against float64
    rng = np.random.default_rng(3)
    x = rng.standard_normal((512, 384)).astype(np.float32).astype(np.float64)
    mx = x.max(1, keepdims=True)
    lse = mx + np.log(np.exp(x - mx).sum(1, keepdims=True))
    want = (np.exp(x - lse) * lse.mean()).sum(1)
    np.testing.assert_allclose(z1, want, rtol=1e-5)


def test_two_reading_kernels_keep_the_written_value(tmp_path):
    m0, k0, a0, z0 = run(tmp_path, 0, TWO_READERS)
    m1, k1, a1, z1 = run(tmp_path, 1, TWO_READERS)
    assert not a1 and (m1, k1) == (m0, k0)
    np.testing.assert_array_equal(z1, z0)


def test_plan_names_the_recomputed_value():
    xn = np.random.default_rng(5).standard_normal((64, 96)).astype(np.float32)
    x = loom.tensor(xn)
    lse = loom.logsumexp(x, 1, keepdim=True)
    z = ((x - lse).exp() * lse.mean()).sum(1)
    plan = loom.explain(z)
    assert "computed again where it is read" in plan, plan
    got = z.numpy()
    xn = xn.astype(np.float64)
    l64 = np.log(np.exp(xn).sum(1, keepdims=True))
    np.testing.assert_allclose(got, (np.exp(xn - l64) * l64.mean()).sum(1), rtol=1e-5)
