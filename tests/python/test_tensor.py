"""The Tensor object: attributes, indexing and slice assignment, Python protocols, operators,
views and movement, in-place ops, conversions and repr."""
import operator
import pickle

import numpy as np
import pytest

import loom
from helpers import check


@pytest.fixture
def arr(rng):
    return rng.normal(size=(4, 5, 6))


def test_attributes(arr):
    t = loom.tensor(arr)
    assert t.shape == (4, 5, 6) and isinstance(t.shape, tuple)
    assert t.size() == (4, 5, 6) and t.size(1) == 5 and t.size(-1) == 6
    assert t.dtype == loom.float64 and t.dtype is loom.float64
    assert t.device == loom.device("cpu") and t.device == "cpu"
    assert str(t.device) == "cpu" and repr(t.device) == "device(type='cpu')"
    assert t.ndim == 3 and t.dim() == 3 and t.numel() == 120 and len(t) == 4
    assert t.stride() == (30, 6, 1) and t.stride(0) == 30 and t.is_contiguous()
    assert t.element_size() == 8 and t.itemsize == 8 and t.nbytes == 960
    assert t.T.shape == (6, 5, 4) and t.mT.shape == (4, 6, 5)
    assert t.is_floating_point() and not loom.arange(3).is_floating_point()


def test_dtypes():
    names = ["bool", "uint8", "int8", "int32", "int64", "float16", "bfloat16", "float32",
             "float64"]
    for n in names:
        dt = getattr(loom, n)
        assert repr(dt) == f"loom.{n}" and dt.name == n
        assert pickle.loads(pickle.dumps(dt)) is dt
        assert loom.zeros(2, dtype=dt).dtype is dt
    assert loom.float is loom.float32 and loom.long is loom.int64 and loom.half is loom.float16
    assert loom.float64.itemsize == 8 and loom.float16.is_floating_point
    assert loom.zeros(2, dtype=float).dtype == loom.float64  # like torch: Python types
    assert loom.zeros(2, dtype=np.int32).dtype == loom.int32  # and numpy types


INDICES = [
    1, -1, slice(None), slice(1, 3), slice(None, None, 2), slice(-3, None), slice(1, -1, 3),
    (1, 2), (slice(None), 0), (Ellipsis, 1), (None, 1), (1, None, slice(2, 4)),
    (Ellipsis, None), (slice(None), None, slice(None, None, 2), -2), (-1, -1, -1),
    (slice(10, 20),), (slice(None, -10),), (0, Ellipsis, 0),
    slice(None, None, -1), (slice(None), slice(4, 0, -2)), (Ellipsis, slice(-2, None, -3)),
]


@pytest.mark.parametrize("idx", INDICES, ids=repr)
def test_getitem(arr, idx):
    t = loom.tensor(arr)
    check(t[idx], arr[idx])


@pytest.mark.parametrize("idx", INDICES[:14] + INDICES[-3:], ids=repr)
def test_setitem(arr, idx):
    t, a = loom.tensor(arr), arr.copy()
    t[idx] = 7.5
    a[idx] = 7.5
    check(t, a)
    v = np.arange(np.asarray(a[idx]).size, dtype=np.float64).reshape(np.shape(a[idx]))
    t[idx] = loom.tensor(v)
    a[idx] = v
    check(t, a)


def test_setitem_broadcast_list_and_views(arr):
    t, a = loom.tensor(arr), arr.copy()
    t[:, 1] = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]  # a list, broadcast over dim 0
    a[:, 1] = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    check(t, a)
    v = t[1:3]  # a view sees writes through its base, and the base sees writes through it
    v += 100
    a[1:3] += 100
    check(t, a)
    t[2, 2, 2] = -1
    a[2, 2, 2] = -1
    check(v, a[1:3])
    i = loom.tensor(2)
    check(t[i], a[2])


def test_index_errors(arr):
    t = loom.tensor(arr)
    with pytest.raises(IndexError, match="out of bounds"):
        t[4]
    with pytest.raises(IndexError, match="too many indices"):
        t[0, 0, 0, 0]
    with pytest.raises(IndexError):
        t[[0, 1]]
    with pytest.raises(IndexError):
        t[loom.tensor([0, 1])]
    with pytest.raises(ValueError):
        t[::0]
    with pytest.raises(TypeError):
        t["a"]


def test_python_protocols():
    t = loom.tensor([3, 1, 2])
    assert len(t) == 3
    assert [int(x) for x in t] == [3, 1, 2]
    assert [x.item() for x in loom.tensor([[1, 2], [3, 4]])[1]] == [3, 4]
    assert bool(loom.tensor(0.5)) and not bool(loom.tensor([0]))
    assert float(loom.tensor(2)) == 2.0 and int(loom.tensor(-2.7)) == -2
    assert isinstance(loom.tensor(2.5).item(), float)
    assert isinstance(loom.tensor(2).item(), int)
    assert loom.tensor(True).item() is True
    assert [10, 20, 30][loom.tensor(1)] == 20  # __index__
    assert loom.tensor([[1, 2], [3, 4]]).tolist() == [[1, 2], [3, 4]]
    assert loom.tensor([1.5]).tolist() == [1.5]
    with pytest.raises(TypeError):
        len(loom.tensor(1.0))
    with pytest.raises(TypeError):
        iter(loom.tensor(1.0))
    with pytest.raises(ValueError):
        bool(loom.ones(2))
    with pytest.raises(TypeError):
        [1][loom.tensor(0.0)]
    s = {loom.ones(1), loom.ones(1)}  # hashable by identity
    assert len(s) == 2


BINOPS = [operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv,
          operator.mod, operator.pow, operator.eq, operator.ne, operator.lt, operator.le,
          operator.gt, operator.ge]


@pytest.mark.parametrize("op", BINOPS, ids=lambda o: o.__name__)
def test_operators(fusion, rng, op):
    a, b = rng.uniform(0.5, 3, (3, 4)), rng.uniform(0.5, 3, (4,))
    ta, tb = loom.tensor(a), loom.tensor(b)
    check(op(ta, tb), op(a, b), rtol=1e-12)
    check(op(ta, 2), op(a, 2), rtol=1e-12)
    check(op(2.5, ta), op(2.5, a), rtol=1e-12)


def test_bit_and_unary_operators(rng):
    a, b = rng.integers(-9, 9, 10), rng.integers(-9, 9, 10)
    ta, tb = loom.tensor(a), loom.tensor(b)
    check(ta & tb, a & b)
    check(ta | 3, a | 3)
    check(5 ^ tb, 5 ^ b)
    check(~ta, ~a)
    check(-ta, -a)
    check(+ta, a)
    check(abs(ta), np.abs(a))
    m = loom.tensor(a > 0)
    check(~m, ~(a > 0))
    check(m & (tb > 0), (a > 0) & (b > 0))
    x = rng.normal(size=(3, 4))
    check(loom.tensor(x) @ loom.tensor(x.T), x @ x.T, rtol=1e-12)
    check(round(loom.tensor(np.array([0.5, 1.5, 2.5, -0.5]))), [0.0, 2.0, 2.0, -0.0])
    assert (loom.ones(2) == None) is False  # noqa: E711 (unsupported operand: identity)


def test_inplace_operators(fusion, rng):
    a = rng.normal(size=(3, 4))
    t = loom.tensor(a)
    ident = id(t)
    t += 1
    t -= loom.tensor(a)
    t *= 3
    t /= 2
    assert id(t) == ident
    check(t, np.full((3, 4), 1.5), rtol=1e-12)
    i = loom.arange(6)
    i //= 2
    i %= 2
    i **= 2
    i |= 4
    i &= 5
    i ^= 1
    check(i, ((np.arange(6) // 2 % 2) ** 2 | 4) & 5 ^ 1)
    with pytest.raises(TypeError):
        j = loom.arange(3)
        j /= 2
    with pytest.raises(TypeError):
        j = loom.arange(3)
        j += 0.5
    with pytest.raises(ValueError):
        k = loom.ones(3)
        k += loom.ones(2, 3)


def test_inplace_methods(fusion, rng):
    a, b = rng.normal(size=(2, 5)), rng.normal(size=(2, 5))
    t, u = loom.tensor(a), loom.tensor(b)
    assert t.add_(u, alpha=2) is t
    check(t, a + 2 * b)
    t.copy_(u).mul_(2).sub_(1).div_(4)
    check(t, (b * 2 - 1) / 4)
    t.exp_()
    check(t, np.exp((b * 2 - 1) / 4))
    t.clamp_(max=1.1).lerp_(u, 0.5)
    ref = np.minimum(np.exp((b * 2 - 1) / 4), 1.1)
    check(t, ref + 0.5 * (b - ref))
    t.fill_(2).addcmul_(u, u, value=0.5).addcdiv_(u, u + 10)
    check(t, 2 + 0.5 * b * b + b / (b + 10))
    t.zero_().maximum_(u)
    check(t, np.maximum(0, b))
    t.pow_(2)
    check(t, np.maximum(0, b) ** 2)
    with pytest.raises(TypeError):
        loom.arange(3).exp_()


def test_views_and_movement(arr):
    t = loom.tensor(arr)
    check(t.reshape(20, 6), arr.reshape(20, 6))
    check(t.reshape((-1, 3)), arr.reshape(-1, 3))
    check(t.view(4, 30), arr.reshape(4, 30))
    check(t.permute(2, 0, 1), arr.transpose(2, 0, 1))
    check(t.permute((1, 2, 0)), arr.transpose(1, 2, 0))
    check(t.transpose(0, 2), arr.swapaxes(0, 2))
    check(t[0].t(), arr[0].T)
    check(t.unsqueeze(1), arr[:, None])
    check(t[:, :1].squeeze(), arr[:, 0])
    check(t[:, :1].squeeze(1), arr[:, 0])
    check(t.flatten(), arr.reshape(-1))
    check(t.flatten(1), arr.reshape(4, 30))
    check(t[:, :1].expand(4, 5, 6), np.broadcast_to(arr[:, :1], (4, 5, 6)))
    check(t[0, 0].expand(2, -1), np.broadcast_to(arr[0, 0], (2, 6)))
    check(t.transpose(0, 1).contiguous(), arr.swapaxes(0, 1))
    assert t.transpose(0, 1).contiguous().is_contiguous()
    check(t.clone(), arr)
    for got, want in zip(t.split(2, dim=2), np.split(arr, 3, axis=2)):
        check(got, want)
    for got, want in zip(t.split([1, 4], 1), np.split(arr, [1], axis=1)):
        check(got, want)
    for got, want in zip(t.chunk(2), np.split(arr, 2)):
        check(got, want)
    check(t.narrow(2, 1, 3), arr[:, :, 1:4])
    check(t.select(1, -1), arr[:, -1])
    assert len(t.unbind(1)) == 5
    check(t.as_strided((4, 6), (30, 1), 6), arr[:, 1])
    with pytest.raises(ValueError):
        t.transpose(0, 1).view(-1)
    with pytest.raises(IndexError):
        t.as_strided((200,), (1,))


def test_conversions():
    t = loom.tensor([1.7, -2.2])
    assert t.to(loom.int32).dtype == loom.int32 and t.int().tolist() == [1, -2]
    assert t.to("cpu") is not None and t.to("cpu", loom.float64).dtype == loom.float64
    assert t.to(dtype=loom.float16).dtype == loom.float16
    assert t.to(loom.ones(1, dtype=loom.int8)).dtype == loom.int8
    assert t.double().dtype == loom.float64 and t.half().dtype == loom.float16
    assert t.bfloat16().dtype == loom.bfloat16 and t.long().dtype == loom.int64
    assert t.bool().dtype == loom.bool and t.byte().dtype == loom.uint8
    assert t.char().dtype == loom.int8 and t.float().dtype == loom.float32
    assert t.type_as(loom.arange(2)).dtype == loom.int64
    assert t.cpu().device == "cpu"
    c = t.to(loom.float32, copy=True)
    c += 1
    assert t.tolist() != c.tolist()


def test_repr_like_torch():
    assert repr(loom.tensor([1.0, 2.5])) == "tensor([1.0000, 2.5000])"
    assert repr(loom.tensor([1, 2])) == "tensor([1, 2])"
    assert repr(loom.tensor([True, False])) == "tensor([ True, False])"
    assert repr(loom.tensor(3.0)) == "tensor(3.)"
    assert repr(loom.tensor([1.0, 2.0], dtype=loom.float64)) == "tensor([1., 2.], dtype=float64)"
    assert str(loom.zeros(2, 2)) == "tensor([[0., 0.],\n        [0., 0.]])"


def test_docstrings():
    """Every public function and Tensor method has a docstring."""
    missing = [n for n in dir(loom) if not n.startswith("_") and callable(getattr(loom, n))
               and not (getattr(loom, n).__doc__ or "").strip()]
    assert missing == []
    missing = [n for n in dir(loom.Tensor) if not n.startswith("__")
               and callable(getattr(loom.Tensor, n)) and not getattr(loom.Tensor, n).__doc__]
    assert missing == []
