"""loom.array_api's array type: a loom.Tensor whose operators follow the standard.

``Array`` subclasses ``loom.Tensor`` and shares its buffer (``Array(t)`` copies a handle, not
data), so every loom function takes it. What differs is the standard's behaviour where torch's
differs:

* type promotion: two arrays promote by their dtypes alone, 0-d or not (torch lets a 0-d
  tensor promote a dimensioned one only across categories); Python scalars stay weak;
* ``x[mask]`` and ``x[mask] = v`` with a boolean array (the shape is data-dependent: a sync
  point; the read runs on the host through numpy);
* ``__complex__``, shifts (``<<``, ``>>``), views (``mT``, ``T``, ``to_device``) that keep
  the type, and ``size`` as the standard's attribute (the number of elements), not torch's
  method.

Namespace functions return Arrays; loom's own functions and Tensor methods return Tensors.
"""
from __future__ import annotations

import builtins

from . import _loom as _l
from ._loom import Tensor

_scalars = (builtins.bool, builtins.int, builtins.float)


def as_array(r):
    """r with every loom.Tensor in it (itself, or items of a tuple or list) made an Array."""
    if type(r) is Tensor:
        return Array(r)
    if isinstance(r, tuple):
        items = [as_array(v) for v in r]
        return type(r)(*items) if hasattr(r, "_fields") else tuple(items)
    if isinstance(r, list):
        return [as_array(v) for v in r]
    return r


def returning_arrays(fn):
    """fn with its results made Arrays (for the namespaces' public functions)."""
    if getattr(fn, "_returns_arrays", False):
        return fn

    def f(*args, **kwargs):
        return as_array(fn(*args, **kwargs))

    f.__name__ = f.__qualname__ = getattr(fn, "__name__", "f")
    f.__doc__ = fn.__doc__
    f.__wrapped__ = fn
    f._returns_arrays = True
    return f


def promote(a, b):
    """a and b converted to the dtype the standard promotes two arrays to; a Python scalar
    is left as it is (loom converts it to the array's dtype, as the standard says)."""
    if isinstance(a, Tensor) and isinstance(b, Tensor) and a.dtype != b.dtype:
        dt = _l.promote_types(a.dtype, b.dtype)
        a = a if a.dtype == dt else a.to(dt)
        b = b if b.dtype == dt else b.to(dt)
    return a, b


def _shift_fn(name):
    fn = getattr(_l, name, None)
    if fn is None:
        raise NotImplementedError(f"{name}: this build of loom has no shift primitive "
                                  f"(loom.{name})")
    return fn


def shift(name, a, b):
    """loom's bitwise_left_shift / bitwise_right_shift on two arrays or an array and an int."""
    fn = _shift_fn(name)
    like = a if isinstance(a, Tensor) else b
    if not isinstance(a, Tensor):
        a = _l.full((), a, dtype=like.dtype, device=like.device)
    if not isinstance(b, Tensor):
        b = _l.full((), b, dtype=like.dtype, device=like.device)
    a, b = promote(a, b)
    return fn(a, b)


def zero_safe(fn, x1, x2):
    """fn(x1, x2), an integer division (floor_divide, remainder), with 0 where the divisor x2
    is 0: numpy's value (the standard leaves it implementation-defined), where loom's
    torch-style functions raise at the next sync point. Either side may be a Python scalar."""
    like = x2 if isinstance(x2, Tensor) else x1
    if like.is_floating_point() or isinstance(x1, float) or isinstance(x2, float):
        return fn(x1, x2)
    if not isinstance(x2, Tensor):
        if x2 != 0:
            return fn(x1, x2)
        x2 = _l.full((), 0, dtype=like.dtype, device=like.device)
    zero = _l.eq(x2, 0)
    return _l.where(zero, 0, fn(x1, _l.where(zero, 1, x2)))


_int_divisions = ("__floordiv__", "__mod__")


def _binary(name, rname):
    base = getattr(Tensor, name)
    rbase = getattr(Tensor, rname) if rname else None
    divides = name in _int_divisions

    def op(self, other):
        if not isinstance(other, (Tensor,) + _scalars):
            return NotImplemented
        a, b = promote(self, other)
        return as_array(zero_safe(base, a, b) if divides else base(a, b))

    def rop(self, other):
        if isinstance(other, Tensor):
            b, a = promote(other, self)
            return as_array(zero_safe(base, b, a) if divides else base(b, a))
        if not isinstance(other, _scalars):
            return NotImplemented
        if divides:
            return as_array(zero_safe(lambda n, d: rbase(d, n), other, self))
        return as_array(rbase(self, other))

    op.__name__, op.__doc__ = name, base.__doc__
    if rname:
        rop.__name__, rop.__doc__ = rname, rbase.__doc__
    return op, (rop if rname else None)


def _mask_of(key):
    """The boolean array of an index that is one (alone or as a 1-tuple), else None."""
    if isinstance(key, tuple) and len(key) == 1:
        key = key[0]
    if isinstance(key, Tensor) and key.dtype == _l.bool_:
        return key
    if isinstance(key, tuple) and builtins.any(isinstance(k, Tensor) and k.dtype == _l.bool_
                                               for k in key):
        raise IndexError("a boolean array index must be the only index")
    return None


def _check_mask(x, mask):
    if mask.ndim > x.ndim or tuple(x.shape[: mask.ndim]) != tuple(mask.shape):
        raise IndexError(f"boolean index of shape {tuple(mask.shape)} does not match the "
                         f"leading dims of an array of shape {tuple(x.shape)}")


def _host(x):
    """x's values as a numpy array (from any device; bfloat16 through float32)."""
    x = x.cpu()
    return x.float().numpy() if x.dtype == _l.bfloat16 else x.numpy()


class Array(Tensor):
    """An array of loom.array_api (a loom.Tensor with the standard's operators)."""

    __slots__ = ()
    __hash__ = Tensor.__hash__

    (__add__, __radd__) = _binary("__add__", "__radd__")
    (__sub__, __rsub__) = _binary("__sub__", "__rsub__")
    (__mul__, __rmul__) = _binary("__mul__", "__rmul__")
    (__truediv__, __rtruediv__) = _binary("__truediv__", "__rtruediv__")
    (__floordiv__, __rfloordiv__) = _binary("__floordiv__", "__rfloordiv__")
    (__mod__, __rmod__) = _binary("__mod__", "__rmod__")
    (__pow__, __rpow__) = _binary("__pow__", "__rpow__")
    (__and__, __rand__) = _binary("__and__", "__rand__")
    (__or__, __ror__) = _binary("__or__", "__ror__")
    (__xor__, __rxor__) = _binary("__xor__", "__rxor__")
    __eq__ = _binary("__eq__", None)[0]
    __ne__ = _binary("__ne__", None)[0]
    __lt__ = _binary("__lt__", None)[0]
    __le__ = _binary("__le__", None)[0]
    __gt__ = _binary("__gt__", None)[0]
    __ge__ = _binary("__ge__", None)[0]

    def __matmul__(self, other):
        if not isinstance(other, Tensor):
            return NotImplemented
        return as_array(_l.matmul(*promote(self, other)))

    def __rmatmul__(self, other):
        if not isinstance(other, Tensor):
            return NotImplemented
        return as_array(_l.matmul(*promote(other, self)))

    def __lshift__(self, other):
        return as_array(shift("bitwise_left_shift", self, other))

    def __rlshift__(self, other):
        return as_array(shift("bitwise_left_shift", other, self))

    def __rshift__(self, other):
        return as_array(shift("bitwise_right_shift", self, other))

    def __rrshift__(self, other):
        return as_array(shift("bitwise_right_shift", other, self))

    def __ilshift__(self, other):
        self[...] = shift("bitwise_left_shift", self, other).to(self.dtype)
        return self

    def __irshift__(self, other):
        self[...] = shift("bitwise_right_shift", self, other).to(self.dtype)
        return self

    def __neg__(self):
        return Array(Tensor.__neg__(self))

    def __pos__(self):
        return Array(self)

    def __abs__(self):
        return Array(Tensor.__abs__(self))

    def __invert__(self):
        return Array(Tensor.__invert__(self))

    def __complex__(self):
        """The one element of a 0-d array as a Python complex (a sync point)."""
        if self.ndim != 0:
            raise TypeError(f"complex() needs a 0-d array, got shape {tuple(self.shape)}")
        return builtins.complex(self.item())

    @property
    def size(self):
        """The number of elements (the standard's attribute; loom.Tensor's is torch's method)."""
        return self.numel()

    @property
    def mT(self):  # noqa: N802
        """The last two dims swapped (a view)."""
        return Array(super().mT)

    @property
    def T(self):  # noqa: N802
        """All dims reversed (a view)."""
        return Array(super().T)

    def to_device(self, device, /, *, stream=None):
        """Moved to `device`."""
        return Array(self.to(device))

    def __getitem__(self, key):
        mask = _mask_of(key)
        if mask is None:
            return as_array(Tensor.__getitem__(self, key))
        _check_mask(self, mask)
        picked = _host(self)[_host(mask)]  # always >= 1-d: one dim for the mask's dims
        r = _l.tensor(picked.copy(), device=self.device)
        return Array(r if r.dtype == self.dtype else r.to(self.dtype))

    def __setitem__(self, key, value):
        mask = _mask_of(key)
        if mask is None:
            return Tensor.__setitem__(self, key, value)
        _check_mask(self, mask)
        if not isinstance(value, Tensor):
            value = _l.full((), value, dtype=self.dtype, device=self.device)
        if value.ndim == 0:  # lazily: where(mask, v, x), no sync
            m = mask.reshape(tuple(mask.shape) + (1,) * (self.ndim - mask.ndim))
            Tensor.__setitem__(self, Ellipsis, _l.where(m, value.to(self.dtype), self))
            return None
        a = _host(self).copy()  # values broadcast over the picked elements: on the host
        a[_host(mask)] = _host(value)
        Tensor.__setitem__(self, Ellipsis, _l.tensor(a, device=self.device).to(self.dtype))
        return None
