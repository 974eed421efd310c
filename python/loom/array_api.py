"""loom.array_api: the Python array API standard (2023.12) over loom tensors.

Functions return ``Array`` objects (python/loom/_array_object.py): loom tensors whose
operators promote types as the standard says (0-d arrays take full part); any loom.Tensor is
accepted as an argument, and ``x.__array_namespace__()`` returns this module. Work stays lazy
and fused like the rest of loom. Known deviations:

* no complex dtypes (asking for one raises TypeError);
* on a plain loom.Tensor ``x.size`` stays torch's method (an Array has the attribute);
* integer-array indexing of ``x[...]`` is not supported (``take`` is);
* ``nonzero``, ``unique_*``, ``sort``, ``argsort`` and boolean-mask reads ``x[mask]`` run on
  the host through numpy (a sync point), since their results depend on the values.
"""
from __future__ import annotations

import builtins
import math
from collections import namedtuple
from typing import Optional, Sequence, Tuple, Union

from . import _loom as _l
from ._array_object import Array, as_array, promote, returning_arrays, shift, zero_safe
from ._loom import Tensor

__array_api_version__ = "2023.12"

# ---- data types and constants -------------------------------------------------------------
bool = _l.bool_  # noqa: A001
int8 = _l.int8
int16 = _l.int16
int32 = _l.int32
int64 = _l.int64
uint8 = _l.uint8
uint16 = _l.uint16
uint32 = _l.uint32
uint64 = _l.uint64
float16 = _l.float16
bfloat16 = _l.bfloat16
float32 = _l.float32
float64 = _l.float64

e = math.e
inf = math.inf
nan = math.nan
pi = math.pi
newaxis = None

_default_float = float32
_default_int = int64
_float_dtypes = (float16, bfloat16, float32, float64)
_signed_dtypes = (int8, int16, int32, int64)
_unsigned_dtypes = (uint8, uint16, uint32, uint64)
_int_dtypes = _signed_dtypes + _unsigned_dtypes
_all_dtypes = (bool,) + _int_dtypes + _float_dtypes
# The standard's real dtypes (float16 and bfloat16 are loom's extras).
_standard_dtypes = (bool,) + _int_dtypes + (float32, float64)
_cpu = _l.device("cpu")


def _is_float(dt):
    return dt in _float_dtypes


def _floating(x):
    """x itself when floating, else x as the default float dtype."""
    return x if _is_float(x.dtype) else x.to(_default_float)


def _axes(axis, ndim):
    if axis is None:
        return None
    t = (axis,) if isinstance(axis, builtins.int) else tuple(axis)
    return tuple(a + ndim if a < 0 else a for a in t)


# ---- inspection ----------------------------------------------------------------------------
class _Info:
    """What __array_namespace_info__() returns."""

    def capabilities(self):
        return {"boolean indexing": True, "data-dependent shapes": True}

    def default_device(self):
        return _cpu

    def default_dtypes(self, *, device=None):
        return {"real floating": _default_float, "complex floating": None,
                "integral": _default_int, "indexing": int64}

    def devices(self):
        """The CPU, then each CUDA device."""
        out = [_cpu]
        if _l.cuda_is_available():
            out += [_l.device("cuda", i) for i in range(_l._cuda_device_count())]
        return out

    def dtypes(self, *, device=None, kind=None):
        """The standard's dtypes (of `kind`, as isdtype reads it) that loom supports."""
        return {d.name: d for d in _standard_dtypes if kind is None or isdtype(d, kind)}


def __array_namespace_info__():
    """Inspection utilities: capabilities, default device and dtypes, devices, dtypes."""
    return _Info()


# ---- data type functions --------------------------------------------------------------------
def astype(x: Tensor, dtype, /, *, copy: builtins.bool = True, device=None) -> Tensor:
    """x converted to dtype (a new tensor unless copy=False and nothing changes)."""
    _check_dtype(dtype)
    y = x if device is None else x.to(device)
    if y.dtype != dtype:
        return y.to(dtype)
    return y.clone() if copy and y is x else y


_lattice = {
    bool: (bool,),
    uint8: (uint8, uint16, uint32, uint64, int16, int32, int64),
    uint16: (uint16, uint32, uint64, int32, int64),
    uint32: (uint32, uint64, int64),
    uint64: (uint64,),
    int8: (int8, int16, int32, int64),
    int16: (int16, int32, int64),
    int32: (int32, int64),
    int64: (int64,),
    float16: (float16, float32, float64),
    bfloat16: (bfloat16, float32, float64),
    float32: (float32, float64),
    float64: (float64,),
}


def can_cast(from_, to, /) -> builtins.bool:
    """True when from_ (a dtype or array) promotes to `to` within its kind."""
    if isinstance(from_, Tensor):
        from_ = from_.dtype
    return to in _lattice[from_]


class finfo_object(namedtuple("finfo_object", "bits eps max min smallest_normal dtype")):
    """Machine limits of a floating dtype."""


class iinfo_object(namedtuple("iinfo_object", "bits max min dtype")):
    """Machine limits of an integer dtype."""


_finfo = {
    float16: (16, 2.0**-10, 65504.0, 2.0**-14),
    bfloat16: (16, 2.0**-7, 3.3895313892515355e38, 2.0**-126),
    float32: (32, 2.0**-23, 3.4028234663852886e38, 2.0**-126),
    float64: (64, 2.0**-52, 1.7976931348623157e308, 2.0**-1022),
}
_iinfo = {t: (t.itemsize * 8, 2 ** (t.itemsize * 8 - 1) - 1, -(2 ** (t.itemsize * 8 - 1)))
          for t in _signed_dtypes}
_iinfo.update({t: (t.itemsize * 8, 2 ** (t.itemsize * 8) - 1, 0) for t in _unsigned_dtypes})


def finfo(type, /) -> finfo_object:
    """bits, eps, max, min, smallest_normal of a floating dtype (or array)."""
    dt = type.dtype if isinstance(type, Tensor) else type
    if dt not in _finfo:
        raise ValueError(f"finfo: {dt} is not a floating dtype")
    bits, eps, mx, sn = _finfo[dt]
    return finfo_object(bits, eps, mx, -mx, sn, dt)


def iinfo(type, /) -> iinfo_object:
    """bits, max, min of an integer dtype (or array)."""
    dt = type.dtype if isinstance(type, Tensor) else type
    if dt not in _iinfo:
        raise ValueError(f"iinfo: {dt} is not an integer dtype")
    bits, mx, mn = _iinfo[dt]
    return iinfo_object(bits, mx, mn, dt)


def isdtype(dtype, kind) -> builtins.bool:
    """Whether dtype is of kind: a dtype, a kind name ('bool', 'signed integer', 'unsigned
    integer', 'integral', 'real floating', 'complex floating', 'numeric') or a tuple of them."""
    if isinstance(kind, tuple):
        return builtins.any(isdtype(dtype, k) for k in kind)
    if not isinstance(kind, str):
        return dtype == kind
    table = {
        "bool": (bool,),
        "signed integer": _signed_dtypes,
        "unsigned integer": _unsigned_dtypes,
        "integral": _int_dtypes,
        "real floating": _float_dtypes,
        "complex floating": (),
        "numeric": _int_dtypes + _float_dtypes,
    }
    if kind not in table:
        raise ValueError(f"isdtype: unknown kind {kind!r}")
    return dtype in table[kind]


def result_type(*arrays_and_dtypes):
    """The dtype that promoting all arguments (arrays, dtypes, Python scalars) gives."""
    dts, scalars = [], []
    for a in arrays_and_dtypes:
        if isinstance(a, Tensor):
            dts.append(a.dtype)
        elif isinstance(a, (builtins.bool, builtins.int, builtins.float)):
            scalars.append(a)
        else:
            dts.append(a)
    if not dts:
        raise ValueError("result_type: at least one array or dtype is required")
    r = dts[0]
    for d in dts[1:]:
        r = _l.promote_types(r, d)
    for s in scalars:
        r = _l.result_type(_l.empty((1,), dtype=r), s)
    return r


# ---- creation --------------------------------------------------------------------------------
def _is_complex(v):
    if isinstance(v, builtins.complex):
        return True
    kind = getattr(getattr(v, "dtype", None), "kind", None)  # numpy arrays and scalars
    return kind == "c"


def _check_dtype(dtype):
    """TypeError for a complex dtype (a name, a numpy dtype or type, or builtins.complex)."""
    if dtype is None or isinstance(dtype, _l.dtype):
        return
    name = getattr(dtype, "__name__", None) or getattr(dtype, "name", None) or str(dtype)
    if dtype is builtins.complex or "complex" in builtins.str(name):
        raise TypeError(f"loom.array_api: complex dtypes are not supported (got {name})")


def _check_value(obj):
    """TypeError for complex values (a scalar, a numpy array, or one in nested sequences)."""
    stack = [obj]
    while stack:
        v = stack.pop()
        if _is_complex(v):
            raise TypeError("loom.array_api: complex values are not supported")
        if isinstance(v, (list, tuple)):
            stack.extend(v)


def _shape(shape):
    return (shape,) if isinstance(shape, builtins.int) else tuple(shape)


def arange(start, /, stop=None, step=1, *, dtype=None, device=None) -> Tensor:
    """Values from start (or 0) to stop, exclusive, by step."""
    _check_dtype(dtype)
    return _l.arange(start, stop, step, dtype=dtype, device=device)


def asarray(obj, /, *, dtype=None, device=None, copy=None) -> Tensor:
    """obj as a tensor: arrays are shared without a copy when possible (copy=None), always
    copied with copy=True, never copied with copy=False (ValueError if a copy is needed)."""
    _check_dtype(dtype)
    _check_value(obj)
    if isinstance(obj, Tensor):
        x = obj
        if device is not None and x.device != device:
            if copy is False:
                raise ValueError("asarray: moving devices needs a copy but copy=False")
            x = x.to(device)
        if dtype is not None and x.dtype != dtype:
            if copy is False:
                raise ValueError("asarray: converting dtype needs a copy but copy=False")
            return x.to(dtype)
        return x.clone() if copy and x is obj else x
    array_like = hasattr(obj, "__dlpack__") or hasattr(obj, "__array_interface__")
    if array_like and not copy:
        try:
            x = _l.from_dlpack(obj, copy=False)
        except (BufferError, TypeError, ValueError):
            if copy is False:
                raise ValueError("asarray: obj can't be shared without a copy") from None
            x = None
        if x is not None:
            if dtype is not None and x.dtype != dtype:
                if copy is False:
                    raise ValueError("asarray: converting dtype needs a copy but copy=False")
                x = x.to(dtype)
            return x if device is None else x.to(device)
    if copy is False:
        raise ValueError("asarray: a Python object can't be converted without a copy")
    return _l.tensor(obj, dtype=dtype, device=device)


def empty(shape, *, dtype=None, device=None) -> Tensor:
    """A tensor of the shape with unspecified values."""
    _check_dtype(dtype)
    return _l.empty(_shape(shape), dtype=dtype, device=device)


def empty_like(x, /, *, dtype=None, device=None) -> Tensor:
    """Like empty(), with x's shape, dtype and device."""
    _check_dtype(dtype)
    return _l.empty_like(x, dtype=dtype, device=device)


def _diag_mask(rows, cols, k, device, op):
    r = _l.arange(rows, device=device).reshape(rows, 1)
    c = _l.arange(cols, device=device).reshape(1, cols)
    return op(c - r, k)


def eye(n_rows, n_cols=None, /, *, k=0, dtype=None, device=None) -> Tensor:
    """Ones on the k-th diagonal, zeros elsewhere."""
    _check_dtype(dtype)
    m = _diag_mask(n_rows, n_rows if n_cols is None else n_cols, k, device, _l.eq)
    return m.to(dtype or _default_float)


def from_dlpack(x, /, *, device=None, copy=None) -> Tensor:
    """A tensor sharing x's memory (anything with __dlpack__)."""
    return _l.from_dlpack(x, device=device, copy=copy)


def full(shape, fill_value, *, dtype=None, device=None) -> Tensor:
    """A tensor of the shape filled with fill_value."""
    _check_dtype(dtype)
    _check_value(fill_value)
    return _l.full(_shape(shape), fill_value, dtype=dtype, device=device)


def full_like(x, /, fill_value, *, dtype=None, device=None) -> Tensor:
    """Like full(), with x's shape, dtype and device."""
    _check_dtype(dtype)
    return _l.full_like(x, fill_value, dtype=dtype, device=device)


def linspace(start, stop, /, num, *, dtype=None, device=None, endpoint=True) -> Tensor:
    """num evenly spaced values from start to stop (inclusive unless endpoint=False)."""
    _check_dtype(dtype)
    if endpoint:
        return _l.linspace(start, stop, num, dtype=dtype, device=device)
    return _l.linspace(start, stop, num + 1, dtype=dtype, device=device)[:num]


def meshgrid(*arrays, indexing="xy"):
    """Coordinate grids from 1-D arrays ('xy' or 'ij' indexing); broadcast views."""
    if indexing not in ("xy", "ij"):
        raise ValueError("meshgrid: indexing must be 'xy' or 'ij'")
    n = len(arrays)
    shape = [a.shape[0] for a in arrays]
    if indexing == "xy" and n > 1:
        shape[0], shape[1] = shape[1], shape[0]
    out = []
    for i, a in enumerate(arrays):
        ax = i
        if indexing == "xy" and n > 1 and i < 2:
            ax = 1 - i
        view = [1] * n
        view[ax] = a.shape[0]
        out.append(a.reshape(view).expand(shape))
    return out


def ones(shape, *, dtype=None, device=None) -> Tensor:
    """A tensor of the shape filled with 1."""
    _check_dtype(dtype)
    return _l.ones(_shape(shape), dtype=dtype, device=device)


def ones_like(x, /, *, dtype=None, device=None) -> Tensor:
    """Like ones(), with x's shape, dtype and device."""
    _check_dtype(dtype)
    return _l.ones_like(x, dtype=dtype, device=device)


def zeros(shape, *, dtype=None, device=None) -> Tensor:
    """A tensor of the shape filled with 0."""
    _check_dtype(dtype)
    return _l.zeros(_shape(shape), dtype=dtype, device=device)


def zeros_like(x, /, *, dtype=None, device=None) -> Tensor:
    """Like zeros(), with x's shape, dtype and device."""
    _check_dtype(dtype)
    return _l.zeros_like(x, dtype=dtype, device=device)


def tril(x, /, *, k=0) -> Tensor:
    """x with elements above the k-th diagonal (of the last two dims) zeroed."""
    m = _diag_mask(x.shape[-2], x.shape[-1], k, x.device, _l.le)
    return _l.where(m, x, _l.zeros((), dtype=x.dtype, device=x.device))


def triu(x, /, *, k=0) -> Tensor:
    """x with elements below the k-th diagonal (of the last two dims) zeroed."""
    m = _diag_mask(x.shape[-2], x.shape[-1], k, x.device, _l.ge)
    return _l.where(m, x, _l.zeros((), dtype=x.dtype, device=x.device))


# ---- elementwise -----------------------------------------------------------------------------
def _promoting(fn, name):
    """fn(x1, x2) on the dtype the standard promotes both arrays to (0-d ones included)."""

    def f(x1, x2, /):
        return fn(*promote(x1, x2))

    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"{name}(x1, x2): loom.{fn.__name__} after the standard's type promotion."
    return f


def _zero_safe(fn, name):
    """An integer division on the standard's promoted dtype: 0 where the divisor is 0."""

    def f(x1, x2, /):
        return zero_safe(fn, *promote(x1, x2))

    f.__name__ = f.__qualname__ = name
    f.__doc__ = (f"{name}(x1, x2): loom.{fn.__name__} after the standard's type promotion; an "
                 "integer zero divisor gives 0.")
    return f


add = _promoting(_l.add, "add")
atan2 = _promoting(_l.atan2, "atan2")
bitwise_and = _promoting(_l.bitwise_and, "bitwise_and")
bitwise_or = _promoting(_l.bitwise_or, "bitwise_or")
bitwise_xor = _promoting(_l.bitwise_xor, "bitwise_xor")
divide = _promoting(_l.div, "divide")
equal = _promoting(_l.eq, "equal")
floor_divide = _zero_safe(_l.floor_divide, "floor_divide")
greater = _promoting(_l.gt, "greater")
greater_equal = _promoting(_l.ge, "greater_equal")
less = _promoting(_l.lt, "less")
less_equal = _promoting(_l.le, "less_equal")
logical_and = _promoting(_l.logical_and, "logical_and")
logical_or = _promoting(_l.logical_or, "logical_or")
logical_xor = _promoting(_l.logical_xor, "logical_xor")
maximum = _promoting(_l.maximum, "maximum")
minimum = _promoting(_l.minimum, "minimum")
multiply = _promoting(_l.mul, "multiply")
not_equal = _promoting(_l.ne, "not_equal")
pow = _promoting(_l.pow, "pow")  # noqa: A001
remainder = _zero_safe(_l.remainder, "remainder")
subtract = _promoting(_l.sub, "subtract")
abs = _l.abs  # noqa: A001
acos = _l.acos
asin = _l.asin
atan = _l.atan
bitwise_invert = _l.bitwise_not
ceil = _l.ceil
cos = _l.cos
cosh = _l.cosh
exp = _l.exp
expm1 = _l.expm1
floor = _l.floor
isfinite = _l.isfinite
isinf = _l.isinf
isnan = _l.isnan
log = _l.log
log1p = _l.log1p
log2 = _l.log2
logical_not = _l.logical_not
negative = _l.neg
round = _l.round  # noqa: A001
sign = _l.sign
sin = _l.sin
sinh = _l.sinh
square = _l.square
sqrt = _l.sqrt
tan = _l.tan
tanh = _l.tanh
trunc = _l.trunc


def acosh(x, /):
    """Inverse hyperbolic cosine (loom.acosh)."""
    return _l.acosh(_floating(x))


def asinh(x, /):
    """Inverse hyperbolic sine (loom.asinh)."""
    return _l.asinh(_floating(x))


def atanh(x, /):
    """Inverse hyperbolic tangent (loom.atanh)."""
    return _l.atanh(_floating(x))


def bitwise_left_shift(x1, x2, /):
    """x1 << x2 for integers (loom.bitwise_left_shift; NotImplementedError without it)."""
    return shift("bitwise_left_shift", x1, x2)


def bitwise_right_shift(x1, x2, /):
    """x1 >> x2 for integers, arithmetic (loom.bitwise_right_shift; NotImplementedError
    without it)."""
    return shift("bitwise_right_shift", x1, x2)


def clip(x, /, min=None, max=None):  # noqa: A002
    """x limited to [min, max] (either may be None); keeps x's dtype."""
    if min is None and max is None:
        return x.clone()
    y = x
    if min is not None:
        y = _l.maximum(y, min)
    if max is not None:
        y = _l.minimum(y, max)
    return y if y.dtype == x.dtype else y.to(x.dtype)


def conj(x, /):
    """x (real dtypes only)."""
    return x


def real(x, /):
    """x (real dtypes only)."""
    return x


def imag(x, /):
    """Zeros (real dtypes only)."""
    return _l.zeros_like(x)


def copysign(x1, x2, /):
    """|x1| with the sign of x2, -0.0 and NaN's sign included (loom.copysign)."""
    return _l.copysign(*promote(x1, x2))


def hypot(x1, x2, /):
    """sqrt(x1**2 + x2**2) without undue overflow (loom.hypot; floating arrays)."""
    return _l.hypot(*promote(x1, x2))


def log10(x, /):
    """Base-10 logarithm (loom.log10)."""
    return _l.log10(_floating(x))


def logaddexp(x1, x2, /):
    """log(exp(x1) + exp(x2)) without overflow (loom.logaddexp; floating arrays)."""
    return _l.logaddexp(*promote(x1, x2))


def positive(x, /):
    """+x."""
    return x.clone()


def signbit(x, /):
    """True where the sign bit is set: x < 0, -0.0 and -NaN (loom.signbit)."""
    return _l.signbit(x)


# ---- indexing ----------------------------------------------------------------------------
def take(x, indices, /, *, axis=None):
    """Elements of x at integer `indices` along axis (computed as a one-hot reduction)."""
    if axis is None:
        if x.ndim != 1:
            raise ValueError("take: axis is required for arrays of more than one dim")
        axis = 0
    axis = axis + x.ndim if axis < 0 else axis
    n = x.shape[axis]
    idx = _l.where(indices < 0, indices + n, indices)
    xm = moveaxis(x, axis, -1).unsqueeze(-2)  # [..., 1, n]
    hot = idx.reshape(-1, 1) == _l.arange(n, device=x.device).reshape(1, n)  # [k, n]
    if x.dtype == bool:
        r = _l.any(hot & xm, dim=-1)
    else:
        r = _l.sum(_l.where(hot, xm, _l.zeros((), dtype=x.dtype, device=x.device)), dim=-1)
        r = r.to(x.dtype)
    return moveaxis(r, -1, axis)


# ---- linear algebra (python/loom/array_api_linalg.py; also in the linalg namespace) --------
from . import array_api_linalg as linalg  # noqa: E402
from .array_api_linalg import matmul, matrix_transpose, tensordot, vecdot  # noqa: E402,F401


# ---- manipulation --------------------------------------------------------------------------
def _broadcast_shapes(*shapes):
    n = builtins.max(len(s) for s in shapes)
    out = []
    for i in range(n):
        sizes = {s[i - n + len(s)] for s in shapes if i - n + len(s) >= 0} - {1}
        if len(sizes) > 1:
            raise ValueError(f"broadcast: shapes {shapes} are not compatible")
        out.append(sizes.pop() if sizes else 1)
    return tuple(out)


def broadcast_arrays(*arrays):
    """The arrays broadcast to one shape (views)."""
    shape = _broadcast_shapes(*(a.shape for a in arrays))
    return [a.expand(shape) for a in arrays]


def broadcast_to(x, /, shape):
    """x broadcast to shape (a view)."""
    return x.expand(_shape(shape))


def concat(arrays, /, *, axis=0):
    """Arrays joined along axis (flattened first when axis is None)."""
    if axis is None:
        return _l.cat([a.reshape(-1) for a in arrays], 0)
    return _l.cat(list(arrays), axis)


def expand_dims(x, /, axis=0):
    """x with a size-1 dim inserted at axis."""
    if not -x.ndim - 1 <= axis <= x.ndim:
        raise IndexError(f"expand_dims: axis {axis} out of range for {x.ndim} dims")
    return x.unsqueeze(axis)


def flip(x, /, *, axis=None):
    """x with the order of elements along the axes reversed (a view with negative strides)."""
    axes = _axes(axis, x.ndim)
    axes = range(x.ndim) if axes is None else axes
    size, stride, off = list(x.shape), list(x.stride()), x.storage_offset()
    if x.numel() == 0:
        return x.clone()
    for a in axes:
        off += (size[a] - 1) * stride[a]
        stride[a] = -stride[a]
    return x.as_strided(size, stride, off)


def moveaxis(x, source, destination, /):
    """x with the source axes moved to the destination positions."""
    src = _axes(source, x.ndim)
    dst = _axes(destination, x.ndim)
    if len(src) != len(dst):
        raise ValueError("moveaxis: source and destination need the same number of axes")
    order = [d for d in range(x.ndim) if d not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return x.permute(*order)


def permute_dims(x, /, axes):
    """x with its dims reordered."""
    return x.permute(*axes)


def repeat(x, repeats, /, *, axis=None):
    """Each element repeated `repeats` times along axis (flattened when axis is None)."""
    if axis is None:
        x, axis = x.reshape(-1), 0
    axis = axis + x.ndim if axis < 0 else axis
    if isinstance(repeats, builtins.int):
        shape = list(x.shape)
        y = x.unsqueeze(axis + 1)
        e = list(y.shape)
        e[axis + 1] = repeats
        shape[axis] *= repeats
        return y.expand(e).reshape(shape)
    reps = repeats.tolist() if isinstance(repeats, Tensor) else list(repeats)
    if len(reps) == 1:
        return repeat(x, reps[0], axis=axis)
    parts = [repeat(x.narrow(axis, i, 1), r, axis=axis) for i, r in enumerate(reps) if r > 0]
    if not parts:
        shape = list(x.shape)
        shape[axis] = 0
        return _l.empty(shape, dtype=x.dtype, device=x.device)
    return _l.cat(parts, axis)


def reshape(x, /, shape, *, copy=None):
    """x with a new shape (a view when possible; copy=True always copies, copy=False never)."""
    if copy:
        return x.clone().reshape(_shape(shape))
    if copy is False:
        try:
            return x.view(_shape(shape))
        except ValueError as err:
            raise ValueError(f"reshape: a copy is needed but copy=False ({err})") from None
    return x.reshape(_shape(shape))


def roll(x, /, shift, *, axis=None):
    """Elements shifted (cyclically) by shift along axis (flattened when axis is None)."""
    if axis is None:
        return roll(x.reshape(-1), shift, axis=0).reshape(x.shape)
    shifts = (shift,) if isinstance(shift, builtins.int) else tuple(shift)
    axes = _axes(axis, x.ndim)
    if len(shifts) == 1 and len(axes) > 1:
        shifts = shifts * len(axes)
    for s, a in zip(shifts, axes):
        n = x.shape[a]
        if n == 0:
            continue
        s %= n
        if s:
            x = _l.cat([x.narrow(a, n - s, s), x.narrow(a, 0, n - s)], a)
    return x


def squeeze(x, /, axis):
    """x without the size-1 axes given (ValueError if one is not size 1)."""
    axes = _axes(axis, x.ndim)
    for a in axes:
        if not 0 <= a < x.ndim:
            raise IndexError(f"squeeze: axis {a} out of range for {x.ndim} dims")
        if x.shape[a] != 1:
            raise ValueError(f"squeeze: axis {a} has size {x.shape[a]}, not 1")
    return x.squeeze(axes)


def stack(arrays, /, *, axis=0):
    """Arrays joined along a new axis."""
    return _l.stack(list(arrays), axis)


def tile(x, repetitions, /):
    """x repeated along each dim `repetitions` times."""
    reps = tuple(repetitions)
    n = builtins.max(len(reps), x.ndim)
    reps = (1,) * (n - len(reps)) + reps
    x = x.reshape((1,) * (n - x.ndim) + tuple(x.shape))
    inter, exp, out = [], [], []
    for r, s in zip(reps, x.shape):
        inter += [1, s]
        exp += [r, s]
        out.append(r * s)
    return x.reshape(inter).expand(exp).reshape(out)


def unstack(x, /, *, axis=0):
    """The slices of x along axis, as a tuple of views."""
    return tuple(x.unbind(axis))


# ---- searching -----------------------------------------------------------------------------
def argmax(x, /, *, axis=None, keepdims=False):
    """Index of the first maximum (of the flattened x when axis is None)."""
    r = _l.argmax(x, axis, keepdims)
    return r.reshape((1,) * x.ndim) if axis is None and keepdims else r


def argmin(x, /, *, axis=None, keepdims=False):
    """Index of the first minimum (of the flattened x when axis is None)."""
    r = _l.argmin(x, axis, keepdims)
    return r.reshape((1,) * x.ndim) if axis is None and keepdims else r


def count_nonzero(x, /, *, axis=None, keepdims=False):
    """Number of nonzero elements over axis."""
    if axis == ():
        return (x != 0).to(int64)
    return _l.sum(x != 0, dim=axis, keepdim=keepdims)


def _np():
    import numpy

    return numpy


def _host(x):
    return x.float().numpy() if x.dtype == bfloat16 else x.numpy()


def _back(a, like):
    # a copy, not ascontiguousarray: that makes a 0-d array 1-d
    return _l.tensor(_np().array(a, order="C"), device=like.device)


def nonzero(x, /):
    """Indices of nonzero elements, one int64 array per dim (host; a sync point)."""
    if x.ndim == 0:
        raise ValueError("nonzero: 0-d arrays are not supported")
    return tuple(_back(i.astype("int64"), x) for i in _np().nonzero(_host(x)))


def searchsorted(x1, x2, /, *, side="left", sorter=None):
    """Insertion indices of x2 into the sorted 1-D x1 (counted by comparison)."""
    if sorter is not None:
        x1 = take(x1, sorter)
    v = x2.unsqueeze(-1)
    hit = x1 < v if side == "left" else x1 <= v
    return _l.sum(hit, dim=-1)


def where(condition, x1, x2, /):
    """x1 where condition is true, else x2 (x1 and x2 promoted as the standard says)."""
    return _l.where(condition, *promote(x1, x2))


# ---- set functions (host) -------------------------------------------------------------------
UniqueAllResult = namedtuple("UniqueAllResult", "values indices inverse_indices counts")
UniqueCountsResult = namedtuple("UniqueCountsResult", "values counts")
UniqueInverseResult = namedtuple("UniqueInverseResult", "values inverse_indices")


def _unique(x, **kw):
    return _np().unique(_host(x).reshape(-1), equal_nan=False, **kw)


def unique_all(x, /):
    """Unique values, first indices, inverse indices and counts (host; a sync point)."""
    v, i, inv, c = _unique(x, return_index=True, return_inverse=True, return_counts=True)
    return UniqueAllResult(_back(v, x).to(x.dtype), _back(i.astype("int64"), x),
                           _back(inv.astype("int64").reshape(x.shape), x),
                           _back(c.astype("int64"), x))


def unique_counts(x, /):
    """Unique values and their counts (host; a sync point)."""
    v, c = _unique(x, return_counts=True)
    return UniqueCountsResult(_back(v, x).to(x.dtype), _back(c.astype("int64"), x))


def unique_inverse(x, /):
    """Unique values and inverse indices (host; a sync point)."""
    v, inv = _unique(x, return_inverse=True)
    return UniqueInverseResult(_back(v, x).to(x.dtype),
                               _back(inv.astype("int64").reshape(x.shape), x))


def unique_values(x, /):
    """Unique values (host; a sync point)."""
    return _back(_unique(x), x).to(x.dtype)


# ---- sorting (host) -------------------------------------------------------------------------
def argsort(x, /, *, axis=-1, descending=False, stable=True):
    """Indices that sort x along axis (host; a sync point)."""
    np = _np()
    a = _host(x)
    if not descending:
        return _back(np.argsort(a, axis=axis, kind="stable").astype("int64"), x)
    n = a.shape[axis]
    i = np.argsort(np.flip(a, axis), axis=axis, kind="stable")
    return _back(np.flip(n - 1 - i, axis).astype("int64"), x)


def sort(x, /, *, axis=-1, descending=False, stable=True):
    """x sorted along axis (host; a sync point)."""
    np = _np()
    a = np.sort(_host(x), axis=axis, kind="stable")
    if descending:
        a = np.flip(a, axis)
    return _back(a, x).to(x.dtype)


# ---- statistical ---------------------------------------------------------------------------
def _reduce(fn, x, axis, keepdims, **kw):
    if axis == () or (x.ndim == 0 and axis is None):
        return None
    return fn(x, dim=axis, keepdim=keepdims, **kw)


def cumulative_sum(x, /, *, axis=None, dtype=None, include_initial=False):
    """Running sum along axis (axis may be omitted for 1-D x)."""
    if axis is None:
        if x.ndim != 1:
            raise ValueError("cumulative_sum: axis is required for arrays of more than one dim")
        axis = 0
    r = _l.cumsum(x, axis, dtype=dtype)
    if include_initial:
        shape = list(r.shape)
        shape[axis] = 1
        r = _l.cat([_l.zeros(shape, dtype=r.dtype, device=r.device), r], axis)
    return r


def max(x, /, *, axis=None, keepdims=False):  # noqa: A001
    """Maximum over axis."""
    r = _reduce(_l.amax, x, axis, keepdims)
    return x.clone() if r is None else r


def min(x, /, *, axis=None, keepdims=False):  # noqa: A001
    """Minimum over axis."""
    r = _reduce(_l.amin, x, axis, keepdims)
    return x.clone() if r is None else r


def mean(x, /, *, axis=None, keepdims=False):
    """Arithmetic mean over axis (floating x)."""
    r = _reduce(_l.mean, x, axis, keepdims)
    return x.clone() if r is None else r


def _acc_dtype(x, dtype):
    if dtype is not None:
        return dtype
    if x.dtype in _unsigned_dtypes:  # the standard: the unsigned type of the default's width
        return uint64
    if x.dtype in _int_dtypes or x.dtype == bool:
        return int64
    return x.dtype


def prod(x, /, *, axis=None, dtype=None, keepdims=False):
    """Product over axis (signed integers accumulate in int64, unsigned ones in uint64)."""
    dt = _acc_dtype(x, dtype)
    r = _reduce(_l.prod, x.to(dt), axis, keepdims)
    return x.to(dt) if r is None else r.to(dt)


def sum(x, /, *, axis=None, dtype=None, keepdims=False):  # noqa: A001
    """Sum over axis (signed integers accumulate in int64, unsigned ones in uint64)."""
    dt = _acc_dtype(x, dtype)
    r = _reduce(_l.sum, x.to(dt), axis, keepdims)
    return x.to(dt) if r is None else r.to(dt)


def var(x, /, *, axis=None, correction=0.0, keepdims=False):
    """Variance over axis: the sum of squared deviations over max(N - correction, 0), so nan
    or inf where that is 0 (as numpy); axis=() reduces nothing (N = 1)."""
    x = _floating(x)
    axes = tuple(range(x.ndim)) if axis is None else _axes(axis, x.ndim)
    n = math.prod(x.shape[a] for a in axes)
    if axes:
        dev = x - _l.mean(x, dim=axes, keepdim=True)
        ss = _l.sum(dev * dev, dim=axes, keepdim=keepdims)
    else:
        dev = x - x  # nan where x is inf or nan, as a mean over one element gives
        ss = dev * dev
    return ss / builtins.max(n - correction, 0)


def std(x, /, *, axis=None, correction=0.0, keepdims=False):
    """Standard deviation over axis: sqrt(var(...)) with the same correction (default 0)."""
    return _l.sqrt(var(x, axis=axis, correction=correction, keepdims=keepdims))


# ---- utility -------------------------------------------------------------------------------
def all(x, /, *, axis=None, keepdims=False):  # noqa: A001
    """True where every element over axis is nonzero."""
    r = _reduce(_l.all, x, axis, keepdims)
    return (x != 0) if r is None else r


def any(x, /, *, axis=None, keepdims=False):  # noqa: A001
    """True where some element over axis is nonzero."""
    r = _reduce(_l.any, x, axis, keepdims)
    return (x != 0) if r is None else r


# Every public function of the namespace (written here or taken from _loom) returns Arrays;
# the inspection ones return none, so they stay as they are.
_not_array_functions = {"can_cast", "finfo", "iinfo", "isdtype", "result_type"}
for _name, _fn in list(globals().items()):
    if (not _name.startswith("_") and callable(_fn) and not isinstance(_fn, type)
            and getattr(_fn, "__module__", None) in (__name__, _l.__name__)
            and _name not in _not_array_functions):
        globals()[_name] = returning_arrays(_fn)
del _name, _fn

__all__ = [n for n in dir() if not n.startswith("_") or n == "__array_namespace_info__"]
__all__ = [n for n in __all__ if n not in ("annotations", "builtins", "math", "namedtuple",
                                           "Optional", "Sequence", "Tuple", "Union",
                                           "as_array", "promote", "returning_arrays",
                                           "shift")]
