"""Loss layers: module wrappers that hold a loss's options and call loom.nn.functional."""
from . import functional as F
from .module import Module

__all__ = ["CrossEntropyLoss", "NLLLoss", "MSELoss", "L1Loss", "BCEWithLogitsLoss"]


def _check_reduction(layer, reduction):
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{layer}: {reduction!r} is not a valid value for reduction "
                         "(expected 'mean', 'sum' or 'none')")
    return reduction


class CrossEntropyLoss(Module):
    """Cross entropy of logits against class indices or probabilities (F.cross_entropy)."""

    def __init__(self, weight=None, ignore_index=-100, reduction="mean",
                 label_smoothing=0.0):
        super().__init__()
        self.reduction = _check_reduction("CrossEntropyLoss", reduction)
        self.register_buffer("weight", weight)
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing

    def forward(self, input, target):
        return F.cross_entropy(input, target, weight=self.weight, ignore_index=self.ignore_index,
                               reduction=self.reduction, label_smoothing=self.label_smoothing)


class NLLLoss(Module):
    """Negative log likelihood of log-probabilities (F.nll_loss)."""

    def __init__(self, weight=None, ignore_index=-100, reduction="mean"):
        super().__init__()
        self.reduction = _check_reduction("NLLLoss", reduction)
        self.register_buffer("weight", weight)
        self.ignore_index = ignore_index

    def forward(self, input, target):
        return F.nll_loss(input, target, weight=self.weight, ignore_index=self.ignore_index,
                          reduction=self.reduction)


class MSELoss(Module):
    """Mean squared error; reduction 'mean', 'sum' or 'none'."""

    def __init__(self, reduction="mean"):
        super().__init__()
        self.reduction = _check_reduction("MSELoss", reduction)

    def forward(self, input, target):
        return F.mse_loss(input, target, reduction=self.reduction)


class L1Loss(Module):
    """Mean absolute error; reduction 'mean', 'sum' or 'none'."""

    def __init__(self, reduction="mean"):
        super().__init__()
        self.reduction = _check_reduction("L1Loss", reduction)

    def forward(self, input, target):
        return F.l1_loss(input, target, reduction=self.reduction)


class BCEWithLogitsLoss(Module):
    """Binary cross entropy on logits (stable form); weight and pos_weight are
    registered as buffers so they follow to()."""

    def __init__(self, weight=None, reduction="mean", pos_weight=None):
        super().__init__()
        self.reduction = _check_reduction("BCEWithLogitsLoss", reduction)
        self.register_buffer("weight", weight)
        self.register_buffer("pos_weight", pos_weight)

    def forward(self, input, target):
        return F.binary_cross_entropy_with_logits(
            input, target, self.weight, reduction=self.reduction, pos_weight=self.pos_weight)
