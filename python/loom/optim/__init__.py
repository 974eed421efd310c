"""loom.optim: torch.optim's optimizers and learning-rate schedulers.

The update rules are loom's C++ ones (``ops/optim.h``); these classes keep the parameter groups
(``param_groups``, a list of dicts, editable between steps as in torch) and the per-parameter
``state``. A step records its in-place updates lazily, so it runs in the same flush as the
forward and backward that made the gradients; its scalars (the learning rate, the bias
corrections) are kernel arguments, so changing them compiles nothing new.
"""
from . import lr_scheduler  # noqa: F401
from .adam import Adam, AdamW  # noqa: F401
from .optimizer import Optimizer  # noqa: F401
from .sgd import SGD  # noqa: F401

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "lr_scheduler"]
