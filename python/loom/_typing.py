"""Type aliases for annotating code that uses loom (the generated _loom.pyi types the API)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence, Union

if TYPE_CHECKING:
    from ._loom import Tensor, device, dtype

    #: A dtype: loom.float32, a Python type (float, int, bool), a numpy dtype or its name.
    DTypeLike = Union[dtype, type, str, Any]
    #: A device: loom.device or a string ('cpu', 'cuda', 'cuda:1').
    DeviceLike = Union[device, str]
    #: Sizes: an int or a sequence of ints.
    ShapeLike = Union[int, Sequence[int]]
    #: A `dim` argument of a reduction: None (all dims), an int or a sequence of ints.
    DimLike = Union[None, int, Sequence[int]]
    #: A Python scalar operand (it takes part in type promotion weakly, like torch's).
    ScalarLike = Union[bool, int, float]
    #: What loom.tensor / loom.from_dlpack accept.
    ArrayLike = Union[Tensor, ScalarLike, Sequence[Any], Any]
else:
    DTypeLike = DeviceLike = ShapeLike = DimLike = ScalarLike = ArrayLike = Any

__all__ = ["DTypeLike", "DeviceLike", "ShapeLike", "DimLike", "ScalarLike", "ArrayLike"]
