"""loom.nn: layers, losses and initializers with PyTorch's torch.nn API.

Modules hold Parameters (leaf tensors) and run loom's lazy ops in forward, so a whole
training step (forward, backward, clipping, update) records into fused kernels and
only syncs where a value is read back.
"""
from . import functional, init, utils  # noqa: F401
from .activation import GELU, LogSoftmax, ReLU, Sigmoid, SiLU, Softmax, Softplus, Tanh
from .container import ModuleDict, ModuleList, Sequential
from .dropout import Dropout
from .flatten import Flatten
from .linear import Identity, Linear
from .loss import BCEWithLogitsLoss, CrossEntropyLoss, L1Loss, MSELoss, NLLLoss
from .module import Module
from .normalization import LayerNorm, RMSNorm
from .parameter import Parameter
from .sparse import Embedding

__all__ = [
    "Module", "Parameter", "Linear", "Identity", "ReLU", "GELU", "SiLU", "Tanh", "Sigmoid",
    "Softplus", "Softmax", "LogSoftmax", "Dropout", "LayerNorm", "RMSNorm", "Flatten",
    "Sequential", "ModuleList", "ModuleDict", "CrossEntropyLoss", "NLLLoss", "MSELoss", "L1Loss",
    "BCEWithLogitsLoss", "Embedding", "functional", "init", "utils",
]
