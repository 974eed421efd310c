"""Loss layers: module wrappers that hold a loss's options and call loom.nn.functional."""
from . import functional as F
from .module import Module

__all__ = ["CrossEntropyLoss", "MSELoss", "L1Loss", "BCEWithLogitsLoss"]


def _check_reduction(layer, reduction):
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{layer}: {reduction!r} is not a valid value for reduction "
                         "(expected 'mean', 'sum' or 'none')")
    return reduction


class CrossEntropyLoss(Module):
    """Cross entropy of logits [N, C] against class indices [N] (mean only for now:
    the other options raise NotImplementedError at construction)."""

    def __init__(self, weight=None, ignore_index=-100, reduction="mean",
                 label_smoothing=0.0):
        super().__init__()
        _check_reduction("CrossEntropyLoss", reduction)
        if weight is not None or ignore_index != -100 or reduction != "mean" \
                or label_smoothing != 0.0:
            raise NotImplementedError(
                "CrossEntropyLoss: loom supports only the defaults yet (weight=None, "
                "ignore_index=-100, reduction='mean', label_smoothing=0.0)")
        self.ignore_index = ignore_index
        self.reduction = reduction
        self.label_smoothing = label_smoothing

    def forward(self, input, target):
        return F.cross_entropy(input, target)


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
