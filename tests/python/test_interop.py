"""numpy and DLPack interop: copies where promised, zero-copy (same data pointer) where not."""
import gc
import weakref

import numpy as np
import pytest

import loom
from helpers import check

DTYPES = ["bool", "uint8", "int8", "int32", "int64", "float16", "float32", "float64"]


def ptr(a):
    return a.__array_interface__["data"][0]


def sample(rng, dt, shape=(3, 5)):
    if dt == "bool":
        return rng.random(shape) < 0.5
    return (rng.normal(size=shape) * 10).astype(dt)


@pytest.mark.parametrize("dt", DTYPES)
def test_numpy_round_trip(rng, dt):
    a = sample(rng, dt)
    t = loom.tensor(a)  # copies
    assert t.dtype == getattr(loom, dt) and t.shape == a.shape
    assert t.data_ptr() != ptr(a)
    b = t.numpy()  # zero-copy view of loom's memory
    assert b.dtype == a.dtype and ptr(b) == t.data_ptr()
    np.testing.assert_array_equal(b, a)
    before = a.copy()
    a[...] = a[0, 0] if dt == "bool" else 0  # the copy is a snapshot
    np.testing.assert_array_equal(t.numpy(), before)


def test_tensor_copies_now_not_at_sync(rng):
    a = rng.normal(size=8)
    t = loom.tensor(a) * 2  # pending
    a[:] = 0
    check(t, np.zeros(8) + t.numpy())  # (t is what it was when recorded)
    assert np.all(t.numpy() != 0)


def test_numpy_view_keeps_memory_alive(rng):
    t = loom.tensor(rng.normal(size=1000)) + 1
    b = t.numpy()
    want = b.copy()
    del t
    gc.collect()
    loom.randn(10000).sum().item()  # churn the allocator
    np.testing.assert_array_equal(b, want)


def test_numpy_of_views_and_strides(rng):
    a = rng.normal(size=(4, 6))
    t = loom.tensor(a)
    v = t[:, 1::2].numpy()  # strided view, still zero-copy
    np.testing.assert_array_equal(v, a[:, 1::2])
    assert ptr(v) == t[:, 1::2].data_ptr()
    np.testing.assert_array_equal(t.T.numpy(), a.T)
    np.testing.assert_array_equal(np.asarray(t), a)
    np.testing.assert_array_equal(np.array(t, dtype=np.float32), a.astype(np.float32))
    c = t.numpy(force=True)
    assert ptr(c) != t.data_ptr()
    with pytest.raises(TypeError, match="bfloat16"):
        t.bfloat16().numpy()


def test_non_contiguous_and_odd_numpy_inputs(rng):
    a = rng.normal(size=(6, 8))
    check(loom.tensor(a[::2, 1::3]), a[::2, 1::3])
    check(loom.tensor(a.T), a.T)
    check(loom.tensor(np.asfortranarray(a)), a)
    check(loom.tensor(a[::-1]), a[::-1])
    i16 = np.arange(5, dtype=np.int16)
    check(loom.tensor(i16), i16, dtype=loom.int16)
    check(loom.tensor(np.arange(3, dtype=np.uint32)), [0, 1, 2], dtype=loom.uint32)
    check(loom.tensor(np.float32(2.5)), 2.5, dtype=loom.float32)
    check(loom.tensor(a, dtype=loom.float32), a.astype(np.float32))
    check(loom.tensor([np.float64(1), np.int64(2)]), [1.0, 2.0])
    check(loom.tensor([a[0], a[1]]), a[:2], dtype=loom.float32)
    with pytest.raises(TypeError):
        loom.tensor(np.array([1 + 2j]))


def test_from_dlpack_numpy_is_zero_copy(rng):
    a = rng.normal(size=(3, 4))
    t = loom.from_dlpack(a)
    assert t.data_ptr() == ptr(a) and t.dtype == loom.float64
    check(t * 2, a * 2)
    t2 = loom.from_numpy(a)
    assert t2.data_ptr() == ptr(a)
    # Strided and negative-stride numpy views wrap without a copy too.
    s = a[:, ::2]
    ts = loom.from_dlpack(s)
    assert ts.data_ptr() == ptr(s) and ts.stride() == (4, 2)
    check(ts + 0, s)
    r = a[::-1]
    check(loom.from_dlpack(r) + 0, r)
    # The wrapped memory lives as long as the tensor.
    a2 = rng.normal(size=100)
    want = a2.copy()
    t3 = loom.from_dlpack(a2)
    ref = weakref.ref(a2) if hasattr(a2, "__weakref__") else None
    del a2
    gc.collect()
    check(t3, want)
    del t3
    gc.collect()
    assert ref is None or ref() is None


def test_from_dlpack_shares_writes(rng):
    a = np.zeros(4)
    t = loom.from_dlpack(a)
    a[1] = 5  # numpy writes are visible to loom
    assert t.tolist() == [0, 5, 0, 0]
    b = t.numpy()  # and loom -> numpy is the same memory again
    assert ptr(b) == ptr(a)


def test_from_dlpack_readonly_and_copy(rng):
    a = rng.normal(size=5)
    a.flags.writeable = False
    t = loom.from_dlpack(a)  # read-only: copied (loom may write into what it wraps)
    assert t.data_ptr() != ptr(a)
    check(t, a)
    with pytest.raises(BufferError):
        loom.from_dlpack(a, copy=False)
    b = rng.normal(size=5)
    assert loom.from_dlpack(b, copy=True).data_ptr() != ptr(b)


def test_dlpack_to_numpy_is_zero_copy(rng):
    t = loom.tensor(rng.normal(size=(3, 7))).float() + 1  # pending: __dlpack__ syncs
    a = np.from_dlpack(t)
    assert ptr(a) == t.data_ptr() and a.dtype == np.float32
    np.testing.assert_array_equal(a, t.numpy())
    assert t.__dlpack_device__() == (1, 0)
    v = t[:, 2:5]
    np.testing.assert_array_equal(np.from_dlpack(v), t.numpy()[:, 2:5])
    cap = t.__dlpack__()
    assert type(cap).__name__ == "PyCapsule"
    assert type(t.__dlpack__(max_version=(1, 0))).__name__ == "PyCapsule"
    c = np.from_dlpack(t, copy=True)
    assert ptr(c) != t.data_ptr()


@pytest.mark.parametrize("dt", DTYPES)
def test_dlpack_round_trip_dtypes(rng, dt):
    a = sample(rng, dt)
    t = loom.from_dlpack(a)
    assert t.data_ptr() == ptr(a)
    b = np.from_dlpack(t)
    assert ptr(b) == ptr(a) and b.dtype == a.dtype
    u = loom.from_dlpack(t)  # loom -> loom: the same tensor
    assert u.data_ptr() == t.data_ptr()


def test_bfloat16_dlpack_export():
    t = loom.tensor([1.0, 2.0]).bfloat16()
    cap = t.__dlpack__()
    assert type(cap).__name__ == "PyCapsule"
    back = loom.from_dlpack(t)
    assert back.dtype == loom.bfloat16 and back.data_ptr() == t.data_ptr()


def test_inplace_on_wrapped_memory(rng):
    a = rng.normal(size=6)
    want = a + 1
    t = loom.from_dlpack(a)
    t += 1
    check(t, want)
    t[2:4] = 0
    want[2:4] = 0
    check(t, want)
