"""loom: an eager-mode tensor runtime whose ops record lazily and run as fused kernels.

The API follows PyTorch's names and keywords::

    import loom
    x = loom.randn(4, 1024)
    y = loom.softmax(x * 2.0, dim=-1)   # recorded, not run
    print(y.sum(dim=-1))                # a sync point: runs as fused kernels

``loom.array_api`` is a Python array API standard (2023.12) namespace over the same tensors.
"""
import os as _os
import sys as _sys

# MKL from PyPI (`pip install mkl`, scripts/deps.sh) lands in this interpreter's lib folder, which
# the loader does not search: tell the runtime there (read at the first float matmul).
if _os.path.exists(_os.path.join(_sys.prefix, "lib", "libmkl_rt.so.3")):
    _os.environ.setdefault("LOOM_MKL", _os.path.join(_sys.prefix, "lib"))

from . import _loom  # noqa: E402
from ._loom import *  # noqa: F401,F403
from ._loom import Tensor, device, dtype, __version__  # noqa: F401
from ._loom import _load_file, _save_file  # noqa: F401  (loom.save and loom.load use them)
from . import amp  # noqa: F401
from . import autograd  # noqa: F401
from . import cuda  # noqa: F401
from . import linalg  # noqa: F401
from . import nn  # noqa: F401
from . import optim  # noqa: F401
from .checkpoint import load, save  # noqa: F401
from .amp import autocast  # noqa: F401
from ._sorting import sort, topk  # noqa: F401
from .autograd import enable_grad, inference_mode, no_grad, set_grad_enabled  # noqa: F401

# torch's dtype names that shadow Python builtins (kept out of _loom so its stub stays clean).
# Code below this point must reach the builtins through the builtins module.
bool = _loom.bool_  # noqa: A001
float = _loom.float32  # noqa: A001
int = _loom.int32  # noqa: A001
__all__ = [n for n in dir(_loom) if not n.startswith("_")] + [
    "bool", "float", "int", "autograd", "no_grad", "enable_grad", "set_grad_enabled",
    "inference_mode", "nn", "optim", "amp", "autocast", "sort", "topk", "save", "load"]


def __getattr__(name):
    # loom.array_api is imported on first use (it is plain Python over _loom).
    if name == "array_api":
        import importlib

        return importlib.import_module(".array_api", __name__)
    raise AttributeError(f"module 'loom' has no attribute {name!r}")
