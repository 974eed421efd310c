"""int16, uint16, uint32 and uint64 against numpy: ops on random data with each type's extremes
(fused and with fusion off), promotion of every pair of integer dtypes, round trips through
numpy and DLPack, Python ints past 2^63, iinfo and the array API's dtype lists."""
import itertools

import numpy as np
import pytest

import loom
import loom.array_api as xp
from helpers import check

NEW = ["int16", "uint16", "uint32", "uint64"]
INTS = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]


def data(name, rng, n=300, zeros=False):
    """Random values over the whole range of `name`, the extremes first, a third of them small."""
    info = np.iinfo(name)
    v = rng.integers(info.min, info.max, n, dtype=name, endpoint=True)
    v[::3] = rng.integers(0 if info.min == 0 else -5, 6, len(v[::3]))
    ext = [0, 1, info.max, info.min, info.max - 1, info.max // 2 + 1, 3]
    v[: len(ext)] = np.array(ext, dtype=object).astype(name)
    if zeros:
        v[5::7] = 0
    return v


def divided(t, divisor):
    """t, an integer division by numpy's `divisor`: a zero element raises at the next sync
    point (torch's rule), and the quotient holds numpy's 0 there."""
    if (divisor == 0).any():
        with pytest.raises(ValueError, match="integer division by zero"):
            loom.sync()
    return t


@pytest.mark.parametrize("name", NEW)
def test_ops_match_numpy(name, rng, fusion):
    a, b, c = data(name, rng), data(name, rng, zeros=True), data(name, rng)
    ta, tb, tc = loom.tensor(a), loom.tensor(b), loom.tensor(c)
    dt = getattr(loom, name)
    assert ta.dtype == dt
    with np.errstate(all="ignore"):  # numpy warns where a divisor is 0 (and gives 0, as loom)
        check(ta + tb, a + b, dtype=dt)  # wraps, as numpy
        check(ta - tb, a - b, dtype=dt)
        check(ta * tb, a * b, dtype=dt)
        check(divided(loom.floor_divide(ta, tb), b), np.floor_divide(a, b), dtype=dt)
        check(divided(loom.remainder(ta, tb), b), np.remainder(a, b), dtype=dt)
        check(divided(loom.fmod(ta, tb), b), np.fmod(a, b), dtype=dt)
        # a wrapped value in a fused kernel
        check(divided((ta + tb) // tc, c), (a + b) // c, dtype=dt)
    check((ta * tb) > tc, (a * b) > c)
    for op in ["eq", "ne", "lt", "le", "gt", "ge"]:
        check(getattr(loom, op)(ta, tb), getattr(np, {"eq": "equal", "ne": "not_equal",
                                                       "lt": "less", "le": "less_equal",
                                                       "gt": "greater", "ge": "greater_equal"}[op])(a, b))
    check(ta & tb, a & b, dtype=dt)
    check(ta | tb, a | b, dtype=dt)
    check(ta ^ tb, a ^ b, dtype=dt)
    check(~ta, ~a, dtype=dt)
    check(loom.maximum(ta, tb), np.maximum(a, b), dtype=dt)
    check(loom.minimum(ta, tb), np.minimum(a, b), dtype=dt)
    check(loom.where(ta > tb, ta, tc), np.where(a > b, a, c), dtype=dt)
    bits = np.iinfo(name).bits
    k = (np.arange(a.size) % bits).astype(name)  # counts below the width (numpy's defined range)
    check(ta << loom.tensor(k), a << k, dtype=dt)
    check(ta >> loom.tensor(k), a >> k, dtype=dt)  # logical for unsigned types
    big = np.full(a.shape, bits + 3, dtype=name)  # torch's out-of-range counts: 0 (or the sign)
    check(ta << loom.tensor(big), np.zeros_like(a), dtype=dt)
    check(ta >> loom.tensor(big), np.where(a < 0, -1, 0).astype(name), dtype=dt)
    m = a.reshape(10, 30)
    tm = loom.tensor(m)
    check(tm.amax(1), m.max(1), dtype=dt)
    check(tm.amin(0), m.min(0), dtype=dt)
    check(tm.argmax(1), m.argmax(1))
    check(tm.argmin(0), m.argmin(0))
    acc = "uint64" if name == "uint64" else "int64"  # torch: integers sum to int64
    check(tm.sum(1), m.astype(acc).sum(1), dtype=getattr(loom, acc))
    check(tm.cumsum(1), np.cumsum(m.astype(acc), 1), dtype=getattr(loom, acc))
    check(tm.prod(1), m.astype(acc).prod(1), dtype=getattr(loom, acc))


@pytest.mark.parametrize("src,dst", list(itertools.product(INTS + ["bool", "float32", "float64"],
                                                           NEW)) +
                         list(itertools.product(NEW, INTS + ["bool", "float16", "float32",
                                                             "float64"])))
def test_casts_match_numpy(src, dst, rng, fusion):
    """Integer casts wrap (mod 2^bits); floats cast in range truncate toward zero."""
    if src in INTS:
        v = data(src, rng)
    elif src == "bool":
        v = rng.integers(0, 2, 50).astype(bool)
    else:  # values every integer type holds after truncation, and fractions
        lo = max(np.iinfo(dst).min, -30000) if dst in INTS else -30000
        v = rng.uniform(lo, 30000, 200).astype(src) if dst in INTS else rng.uniform(-9, 9, 9)
        if dst in INTS and np.iinfo(dst).min == 0:
            v = np.abs(v)
    t = loom.tensor(v)
    with np.errstate(all="ignore"):
        want = v.astype(dst)
    check(t.to(getattr(loom, dst)), want, dtype=getattr(loom, dst), rtol=1e-3)
    check((t * 1 if src != "bool" else t).to(getattr(loom, dst)), want, rtol=1e-3)


def test_promotion_of_every_integer_pair_matches_numpy():
    """numpy's lattice (the array API's) for every pair; uint64 with a signed type, where numpy
    picks float64, raises instead, naming both."""
    for a, b in itertools.product(INTS, INTS):
        la, lb = getattr(loom, a), getattr(loom, b)
        want = np.promote_types(a, b)
        if want.kind == "f":
            assert {a, b} & {"uint64"}
            with pytest.raises(TypeError, match=f"(?=.*{a})(?=.*{b})"):
                loom.promote_types(la, lb)
            with pytest.raises(TypeError, match="add"):
                loom.ones(2, dtype=la) + loom.ones(2, dtype=lb)
            with pytest.raises(TypeError):
                xp.result_type(la, lb)
            continue
        assert loom.promote_types(la, lb).name == want.name, (a, b)
        assert (loom.ones(2, dtype=la) + loom.ones(2, dtype=lb)).dtype.name == want.name
        assert xp.result_type(la, lb).name == want.name
        assert xp.can_cast(la, lb) == np.can_cast(a, b), (a, b)


@pytest.mark.parametrize("name", NEW)
def test_numpy_and_dlpack_round_trips(name, rng):
    v = data(name, rng, n=40).reshape(4, 10)
    t = loom.tensor(v)
    assert t.dtype == getattr(loom, name)
    out = np.asarray(t)
    assert out.dtype == np.dtype(name)
    np.testing.assert_array_equal(out, v)
    np.testing.assert_array_equal(t.numpy(), v)
    np.testing.assert_array_equal(np.from_dlpack(t), v)
    w = loom.from_numpy(v)
    assert w.dtype == t.dtype
    np.testing.assert_array_equal(w.numpy(), v)
    np.testing.assert_array_equal(loom.from_dlpack(v).numpy(), v)
    assert t.tolist() == v.tolist()
    assert t[0, 2].item() == int(v[0, 2])
    assert loom.tensor(v[:, ::3]).tolist() == v[:, ::3].tolist()


def test_names_aliases_and_flags():
    assert loom.short is loom.int16
    assert loom.ones(2).short().dtype == loom.int16
    assert loom.ones(2, dtype="uint32").dtype == loom.uint32
    assert loom.ones(2, dtype=np.uint16).dtype == loom.uint16
    for n in NEW:
        d = getattr(loom, n)
        assert repr(d) == f"loom.{n}"
        assert d.itemsize == np.dtype(n).itemsize
        assert d.is_signed == (n == "int16")
        assert not d.is_floating_point


def test_uint64_past_2_63():
    top, half = 2**64 - 1, 2**63
    t = loom.tensor([top, half, 5, 0], dtype=loom.uint64)
    assert t.tolist() == [top, half, 5, 0]
    assert t[0].item() == top
    assert str(top) in repr(t) and str(half) in repr(t)
    assert t.max().item() == top and t.min().item() == 0 and t.argmax().item() == 0
    assert (t + 1).tolist() == [0, half + 1, 6, 1]
    assert (t // 3).tolist() == [top // 3, half // 3, 1, 0]
    assert (t >> 63).tolist() == [1, 1, 0, 0]
    assert (t > half).tolist() == [True, False, False, False]
    assert (t == top).tolist() == [True, False, False, False]
    assert t.sum().item() == (top + half + 5) % 2**64
    np.testing.assert_array_equal(t.double().numpy(), np.array([top, half, 5, 0], np.uint64)
                                  .astype(np.float64))
    assert loom.tensor(half).dtype == loom.uint64  # a Python int past int64
    assert loom.tensor([1, half]).dtype == loom.uint64
    assert loom.full((2,), top).tolist() == [top, top]
    assert loom.full((2,), top).dtype == loom.uint64
    assert loom.tensor(np.uint64(top)).item() == top
    with pytest.raises(ValueError, match="out of range"):
        loom.ones(2, dtype=loom.int64) + half
    with pytest.raises((TypeError, OverflowError, ValueError)):
        loom.tensor(2**64)


def test_int16_and_narrow_values_in_text():
    t = loom.tensor([-32768, 32767], dtype=loom.int16)
    assert repr(t) == "tensor([-32768,  32767], dtype=int16)"
    assert repr(loom.tensor([65535], dtype=loom.uint16)) == "tensor([65535], dtype=uint16)"
    assert repr(loom.tensor([4294967295], dtype=loom.uint32)) == \
        "tensor([4294967295], dtype=uint32)"


def test_array_api_dtypes_iinfo_and_sums():
    info = xp.__array_namespace_info__()
    names = set(info.dtypes())
    assert set(INTS) <= names
    assert set(info.dtypes(kind="unsigned integer")) == {"uint8", "uint16", "uint32", "uint64"}
    assert set(info.dtypes(kind="signed integer")) == {"int8", "int16", "int32", "int64"}
    for n in INTS:
        i, w = xp.iinfo(getattr(xp, n)), np.iinfo(n)
        assert (i.bits, i.max, i.min) == (w.bits, w.max, w.min), n
        assert xp.isdtype(getattr(xp, n), "integral")
    assert xp.sum(xp.asarray([1, 2], dtype=xp.uint8)).dtype == xp.uint64
    assert xp.sum(xp.asarray([1, 2], dtype=xp.int16)).dtype == xp.int64
    x = xp.asarray([2**64 - 1, 1], dtype=xp.uint64)
    assert int(xp.max(x)) == 2**64 - 1
    assert (xp.asarray([1], dtype=xp.uint8) + xp.asarray([1], dtype=xp.int8)).dtype == xp.int16
