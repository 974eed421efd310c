"""sort and topk with torch's return types: named tuples of (values, indices)."""
from collections import namedtuple

from . import _loom

SortResult = namedtuple("sort", ["values", "indices"])
TopkResult = namedtuple("topk", ["values", "indices"])


def sort(input, dim=-1, descending=False, stable=False):
    """(values, indices) of input sorted along dim (stable; NaN sorts as the largest)."""
    return SortResult(*_loom._sort(input, dim, descending, stable))


def topk(input, k, dim=-1, largest=True, sorted=True):
    """(values, indices) of the k largest (or smallest) elements along dim, in order."""
    return TopkResult(*_loom._topk(input, k, dim, largest, sorted))


def _method(fn):
    def method(self, *args, **kwargs):
        return fn(self, *args, **kwargs)

    method.__name__, method.__doc__ = fn.__name__, fn.__doc__
    return method


_loom.Tensor.sort = _method(sort)
_loom.Tensor.topk = _method(topk)
