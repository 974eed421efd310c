"""loom.cuda: what torch.cuda offers that loom has (availability)."""
from . import _loom


def is_available() -> bool:
    """True when a CUDA driver and a GPU were found (the CUDA backend registered)."""
    return _loom.cuda_is_available()
