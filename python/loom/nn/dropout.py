"""Dropout: random zeroing while training, the identity in eval mode."""
from . import functional as F
from .module import Module

__all__ = ["Dropout"]


class Dropout(Module):
    """While self.training, zeroes each element with probability p and scales the rest
    by 1/(1-p) so the expected value is unchanged; after eval() it passes input through."""

    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        if inplace:
            raise NotImplementedError("Dropout: inplace=True is not supported by loom yet")
        self.p = p
        self.inplace = inplace

    def forward(self, input):
        return F.dropout(input, self.p, self.training, self.inplace)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"
