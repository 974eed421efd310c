"""Indexing by integer tensors: gather, index_select, take_along_dim, embedding, scatter_add and
index_add against numpy references always, and against torch where it is importable; their
gradients, the deferred range check (IndexError at the next sync point) and the errors at the
call."""
import numpy as np
import pytest

import loom
from helpers import check

try:
    import torch
except ImportError:
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")


def np_gather(x, dim, idx):
    """out[c] = x[c with c[dim] = idx[c]] over idx's shape (numpy reference)."""
    xs = x[tuple(slice(0, n) if d != dim else slice(None) for d, n in enumerate(idx.shape))]
    return np.take_along_axis(xs, idx, dim)


def np_scatter_add(self, dim, idx, src):
    out = self.astype(np.float64).copy()
    for c in np.ndindex(*idx.shape):
        t = list(c)
        t[dim] = idx[c]
        out[tuple(t)] += src[c]
    return out


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
@pytest.mark.parametrize("itype", [np.int64, np.int32])
def test_gather_every_dim(fusion, rng, dim, itype):
    x = rng.standard_normal((4, 5, 6))
    shape = [3, 4, 5]
    shape[dim] = 9
    idx = rng.integers(0, x.shape[dim], shape).astype(itype)
    got = loom.gather(loom.tensor(x), dim, loom.tensor(idx))
    check(got, np_gather(x, dim % 3, idx.astype(np.int64)), rtol=0, atol=0)
    check(loom.tensor(x).gather(dim=dim, index=loom.tensor(idx)),
          np_gather(x, dim % 3, idx.astype(np.int64)), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "uint8", "bool"])
def test_gather_dtypes_transposed(rng, dtype):
    x = (rng.standard_normal((6, 5)) * 40).astype(dtype)
    idx = rng.integers(0, 6, (8, 5))  # transposed: [5, 8], indices along x.T's 6 columns
    got = loom.gather(loom.tensor(x).t(), 1, loom.tensor(idx).t())
    check(got, np_gather(x.T, 1, idx.T), rtol=0, atol=0)


def test_index_select_embedding_take_along_dim(fusion, rng):
    x = rng.standard_normal((5, 4, 3)).astype(np.float32)
    for dim in range(3):
        idx = rng.integers(0, x.shape[dim], 7)
        check(loom.index_select(loom.tensor(x), dim, loom.tensor(idx)),
              np.take(x, idx, axis=dim), rtol=0, atol=0)
        check(loom.tensor(x).index_select(dim, loom.tensor(idx.astype(np.int32))),
              np.take(x, idx, axis=dim), rtol=0, atol=0)
    w = rng.standard_normal((10, 4))
    ids = rng.integers(0, 10, (2, 3))
    check(loom.embedding(loom.tensor(ids), loom.tensor(w)), w[ids], rtol=0, atol=0)
    check(loom.nn.functional.embedding(loom.tensor(ids), loom.tensor(w)), w[ids], rtol=0, atol=0)
    t = rng.standard_normal((4, 6))
    ti = rng.integers(0, 6, (1, 3))
    check(loom.take_along_dim(loom.tensor(t), loom.tensor(ti), dim=1),
          np.take_along_axis(t, np.broadcast_to(ti, (4, 3)), 1), rtol=0, atol=0)
    tf = rng.integers(0, 24, 5)
    check(loom.take_along_dim(loom.tensor(t), loom.tensor(tf)), t.reshape(-1)[tf], rtol=0, atol=0)


@pytest.mark.parametrize("dim", [0, 1, 2])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_scatter_add_and_index_add(fusion, rng, dim, dtype):
    self = (rng.standard_normal((4, 5, 6)) * 10).astype(dtype)
    shape = [3, 4, 5]
    shape[dim] = 9
    idx = rng.integers(0, self.shape[dim], shape)
    src = (rng.standard_normal(shape) * 10).astype(dtype)
    got = loom.scatter_add(loom.tensor(self), dim, loom.tensor(idx), loom.tensor(src))
    check(got, np_scatter_add(self, dim, idx, src).astype(dtype), rtol=1e-5, atol=1e-4)
    t = loom.tensor(self)
    t.scatter_add_(dim, loom.tensor(idx), loom.tensor(src))
    check(t, np_scatter_add(self, dim, idx, src).astype(dtype), rtol=1e-5, atol=1e-4)
    i1 = rng.integers(0, self.shape[dim], 7)
    sshape = list(self.shape)
    sshape[dim] = 7
    source = (rng.standard_normal(sshape) * 10).astype(dtype)
    want = self.astype(np.float64).copy()
    alpha = 3 if dtype == "int64" else 0.5
    for j, p in enumerate(i1):
        sel = [slice(None)] * 3
        sel[dim] = p
        take = [slice(None)] * 3
        take[dim] = j
        want[tuple(sel)] += alpha * source[tuple(take)]
    got = loom.index_add(loom.tensor(self), dim, loom.tensor(i1), loom.tensor(source), alpha=alpha)
    check(got, want.astype(dtype), rtol=1e-5, atol=1e-4)
    t = loom.tensor(self)
    t.index_add_(dim, loom.tensor(i1), loom.tensor(source), alpha=alpha)
    check(t, want.astype(dtype), rtol=1e-5, atol=1e-4)


def test_scatter_add_is_deterministic(rng):
    src = (rng.standard_normal((100000, 2)) * np.exp(rng.uniform(-8, 8, (100000, 1))))
    src = src.astype(np.float32)
    idx = rng.integers(0, 3, 100000)
    runs = [loom.index_add(loom.zeros((3, 2)), 0, loom.tensor(idx), loom.tensor(src)).numpy()
            for _ in range(2)]
    assert runs[0].tobytes() == runs[1].tobytes()
    seq = np.zeros((3, 2), np.float32)
    for j in range(0, 100000):  # float32 adds in increasing position
        seq[idx[j]] += src[j]
    assert runs[0].tobytes() == seq.tobytes()


def test_gradients(rng):
    x = loom.tensor(rng.standard_normal((4, 5))).requires_grad_()
    idx = rng.integers(0, 5, (3, 6))
    w = rng.standard_normal((3, 6))
    (loom.gather(x, 1, loom.tensor(idx)) * loom.tensor(w)).sum().backward()
    want = np.zeros((4, 5))
    for c in np.ndindex(3, 6):
        want[c[0], idx[c]] += w[c]
    check(x.grad, want, rtol=1e-12, atol=1e-12)
    s = loom.tensor(rng.standard_normal((3, 6))).requires_grad_()
    base = loom.tensor(rng.standard_normal((4, 5))).requires_grad_()
    g = rng.standard_normal((4, 5))
    (loom.scatter_add(base, 1, loom.tensor(idx), s) * loom.tensor(g)).sum().backward()
    check(base.grad, g, rtol=0, atol=0)
    check(s.grad, np.take_along_axis(g[:3], idx, 1), rtol=0, atol=0)
    emb = loom.tensor(rng.standard_normal((6, 2))).requires_grad_()
    ids = np.array([[1, 1, 4], [0, 1, 5]])
    (loom.embedding(loom.tensor(ids), emb) ** 2).sum().backward()
    want = np.zeros((6, 2))
    np.add.at(want, ids.reshape(-1), 2 * emb.detach().numpy()[ids.reshape(-1)])
    check(emb.grad, want, rtol=1e-12, atol=1e-12)


@needs_torch
def test_against_torch(rng):
    x = rng.standard_normal((4, 7, 3)).astype(np.float32)
    idx = rng.integers(0, 7, (4, 9, 2))
    src = rng.standard_normal((4, 9, 3)).astype(np.float32)
    i1 = rng.integers(0, 7, 11)
    so = rng.standard_normal((4, 11, 3)).astype(np.float32)
    tx, tidx, tsrc = torch.tensor(x), torch.tensor(idx), torch.tensor(src)
    lx, lidx, lsrc = loom.tensor(x), loom.tensor(idx), loom.tensor(src)
    check(loom.gather(lx, 1, lidx), torch.gather(tx, 1, tidx).numpy(), rtol=0, atol=0)
    check(loom.scatter_add(lx, 1, lidx, lsrc), torch.scatter_add(tx, 1, tidx, tsrc).numpy(),
          rtol=1e-6, atol=1e-6)
    check(loom.index_select(lx, 1, loom.tensor(i1)),
          torch.index_select(tx, 1, torch.tensor(i1)).numpy(), rtol=0, atol=0)
    check(loom.index_add(lx, 1, loom.tensor(i1), loom.tensor(so), alpha=2.0),
          torch.index_add(tx, 1, torch.tensor(i1), torch.tensor(so), alpha=2.0).numpy(),
          rtol=1e-6, atol=1e-6)
    ti = rng.integers(0, 7, (1, 2, 3))
    check(loom.take_along_dim(lx, loom.tensor(ti), 1),
          torch.take_along_dim(tx, torch.tensor(ti), 1).numpy(), rtol=0, atol=0)
    w = rng.standard_normal((10, 4)).astype(np.float32)
    ids = rng.integers(0, 10, (3, 5))
    check(loom.embedding(loom.tensor(ids), loom.tensor(w)),
          torch.nn.functional.embedding(torch.tensor(ids), torch.tensor(w)).numpy(), rtol=0,
          atol=0)
    # gradients of gather w.r.t. the input
    txg = tx.clone().requires_grad_()
    torch.gather(txg, 1, tidx).pow(2).sum().backward()
    lxg = loom.tensor(x).requires_grad_()
    (loom.gather(lxg, 1, lidx) ** 2).sum().backward()
    check(lxg.grad, txg.grad.numpy(), rtol=1e-5, atol=1e-5)


def test_out_of_range_raises_at_the_next_sync_point(fusion):
    x = loom.tensor(np.arange(6.0).reshape(2, 3))
    g = loom.gather(x, 1, loom.tensor(np.array([[0, 3], [1, 2]])))  # no error yet
    y = x * 2
    with pytest.raises(IndexError, match=r"gather.*out of range \[0, 3\).*\[2, 3\]"):
        y.numpy()
    check(y, np.arange(6.0).reshape(2, 3) * 2)  # the other results are valid
    assert g.shape == (2, 2)
    s = loom.index_select(x, 0, loom.tensor(np.array([-1, 0])))
    with pytest.raises(IndexError, match="index_select"):
        loom.sync()
    check(s, np.array([[0.0, 1, 2], [0, 1, 2]]))  # the kernel clamped the index
    loom.scatter_add(x, 0, loom.tensor(np.array([[2, 0, 0]])), x[:1])
    with pytest.raises(IndexError, match="scatter_add"):
        loom.sync()
    loom.embedding(loom.tensor(np.array([7])), x)
    with pytest.raises(IndexError, match="embedding"):
        loom.sync()
    check(loom.gather(x, 1, loom.tensor(np.array([[2], [0]]))), np.array([[2.0], [3.0]]))


def test_errors_at_the_call():
    x = loom.zeros((3, 4))
    with pytest.raises(TypeError, match="int64 or int32"):
        loom.gather(x, 1, loom.zeros((3, 2)))
    with pytest.raises(ValueError, match=r"gather.*\[4, 2\].*\[3, 4\]"):
        loom.gather(x, 1, loom.zeros((4, 2), dtype=loom.int64))
    with pytest.raises(ValueError, match="index_select.*1-d"):
        loom.index_select(x, 0, loom.zeros((2, 2), dtype=loom.int64))
    with pytest.raises(TypeError, match="scatter_add.*float64"):
        loom.scatter_add(x, 1, loom.zeros((3, 2), dtype=loom.int64),
                         loom.zeros((3, 2), dtype=loom.float64))
    with pytest.raises(ValueError, match="index_add"):
        loom.index_add(x, 0, loom.zeros((2,), dtype=loom.int64), loom.zeros((2, 3)))
    with pytest.raises(ValueError, match="embedding.*2-d"):
        loom.embedding(loom.zeros((2,), dtype=loom.int64), loom.zeros((4,)))
