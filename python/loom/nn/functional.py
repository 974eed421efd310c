"""loom.nn.functional: the stateless ops layers are built from, under torch's names and
signatures. Each is a thin call into loom's fused kernels; options loom does not run
yet raise NotImplementedError naming the option instead of being silently ignored."""
import warnings

from .. import _loom

__all__ = [
    "linear", "relu", "gelu", "silu", "tanh", "sigmoid", "softplus", "softmax",
    "log_softmax", "dropout", "layer_norm", "rms_norm", "cross_entropy", "mse_loss",
    "l1_loss", "binary_cross_entropy_with_logits", "embedding",
]


def linear(input, weight, bias=None):
    """input @ weight.T + bias, with weight [out_features, in_features]; input may have
    any number of leading batch dims. The bias add fuses into the matmul's epilogue."""
    if weight.ndim != 2:
        raise RuntimeError(
            f"linear: weight must be 2-D [out_features, in_features], got shape "
            f"{list(weight.shape)}")
    if input.ndim == 0 or input.shape[-1] != weight.shape[1]:
        raise RuntimeError(
            f"linear: input shape {list(input.shape)} does not match weight shape "
            f"{list(weight.shape)}: the input's last dim must equal in_features "
            f"({weight.shape[1]})")
    if bias is not None and tuple(bias.shape) not in ((weight.shape[0],), ()):
        raise RuntimeError(
            f"linear: bias shape {list(bias.shape)} does not match out_features "
            f"({weight.shape[0]})")
    out = _loom.matmul(input, weight.T)
    return out if bias is None else out + bias


def relu(input, inplace=False):
    return input.relu_() if inplace else _loom.relu(input)


def gelu(input, approximate="none"):
    """GELU: x * Phi(x) (approximate='none') or its tanh form (approximate='tanh')."""
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return _loom.gelu(input, approximate=approximate)


def silu(input, inplace=False):
    return input.silu_() if inplace else _loom.silu(input)


def tanh(input):
    return _loom.tanh(input)


def sigmoid(input):
    return _loom.sigmoid(input)


def softplus(input, beta=1.0, threshold=20.0):
    """log(1 + exp(beta x)) / beta, linear above threshold (as torch)."""
    if beta == 1.0 and threshold == 20.0:
        return _loom.softplus(input)
    scaled = input * beta
    return _loom.where(scaled > threshold, input, _loom.softplus(scaled) / beta)


def _softmax_dim(name, ndim, dim):
    if dim is not None:
        return dim
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. "
                  "Change the call to include dim=X as an argument.", stacklevel=3)
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    return _loom.softmax(input, _softmax_dim("softmax", input.ndim, dim), dtype=dtype)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    return _loom.log_softmax(input, _softmax_dim("log_softmax", input.ndim, dim), dtype=dtype)


def dropout(input, p=0.5, training=True, inplace=False):
    """Zeroes each element with probability p and scales the rest by 1/(1-p) when
    training; the identity otherwise."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if inplace:
        raise NotImplementedError("dropout: inplace=True is not supported by loom yet")
    if not training or p == 0.0:
        return input
    return _loom.dropout(input, p, True)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    return _loom.layer_norm(input, normalized_shape, weight, bias, eps)


def rms_norm(input, normalized_shape, weight=None, eps=None):
    return _loom.rms_norm(input, normalized_shape, weight, eps)


def _legacy_reduction(op, size_average, reduce):
    if size_average is not None or reduce is not None:
        raise NotImplementedError(
            f"{op}: size_average/reduce are deprecated and not supported; use reduction=")


def _reduce(op, loss, reduction):
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    if reduction == "none":
        return loss
    raise ValueError(f"{op}: {reduction!r} is not a valid value for reduction "
                     "(expected 'mean', 'sum' or 'none')")


def _check_same_shape(op, input, target):
    if tuple(input.shape) != tuple(target.shape):
        warnings.warn(
            f"{op}: using a target size ({list(target.shape)}) that is different to the "
            f"input size ({list(input.shape)}); they will be broadcast", stacklevel=3)


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100,
                  reduce=None, reduction="mean", label_smoothing=0.0):
    """Mean cross entropy of logits [N, C] (or [C]) against class indices [N] (or []).
    Runs as loom's fused kernel; class weights, ignore_index, label smoothing, other
    reductions and probability targets are not supported yet and raise."""
    _legacy_reduction("cross_entropy", size_average, reduce)
    unsupported = []
    if weight is not None:
        unsupported.append("weight")
    if ignore_index != -100:
        unsupported.append(f"ignore_index={ignore_index}")
    if reduction != "mean":
        unsupported.append(f"reduction={reduction!r}")
    if label_smoothing != 0.0:
        unsupported.append(f"label_smoothing={label_smoothing}")
    if target.is_floating_point():
        unsupported.append("probability (floating) targets")
    if unsupported:
        raise NotImplementedError(
            "cross_entropy: loom supports only mean cross entropy over class indices; "
            "not supported yet: " + ", ".join(unsupported))
    if input.ndim == 1 and target.ndim == 0:
        input, target = input.reshape(1, -1), target.reshape(1)
    if input.ndim != 2 or target.ndim != 1 or target.shape[0] != input.shape[0]:
        raise NotImplementedError(
            f"cross_entropy: expected input [N, C] and target [N], got input "
            f"{list(input.shape)} and target {list(target.shape)} (extra spatial dims "
            "are not supported yet)")
    return _loom.cross_entropy(input, target)


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
              scale_grad_by_freq=False, sparse=False):
    """The rows of weight [num_embeddings, embedding_dim] at input's indices (int64 or
    int32): input's shape + [embedding_dim]. An index out of range raises IndexError at
    the next sync point. The weight's gradient accumulates repeated indices in a fixed
    order (index_add)."""
    for name, value, default in (("padding_idx", padding_idx, None), ("max_norm", max_norm, None),
                                 ("scale_grad_by_freq", scale_grad_by_freq, False),
                                 ("sparse", sparse, False)):
        if value != default:
            raise NotImplementedError(f"embedding: {name}={value!r} is not supported yet")
    return _loom.embedding(input, weight)


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """(input - target)^2, reduced."""
    _legacy_reduction("mse_loss", size_average, reduce)
    _check_same_shape("mse_loss", input, target)
    return _reduce("mse_loss", (input - target).square(), reduction)


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """|input - target|, reduced."""
    _legacy_reduction("l1_loss", size_average, reduce)
    _check_same_shape("l1_loss", input, target)
    return _reduce("l1_loss", (input - target).abs(), reduction)


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None,
                                     reduce=None, reduction="mean", pos_weight=None):
    """Binary cross entropy of sigmoid(input) against target, computed from the logits
    as max(x, 0) - x*y + log1p(exp(-|x|)) so large |x| neither overflows nor loses the
    loss to rounding. pos_weight multiplies the positive term, weight each element."""
    _legacy_reduction("binary_cross_entropy_with_logits", size_average, reduce)
    if tuple(input.shape) != tuple(target.shape):
        raise ValueError(
            f"binary_cross_entropy_with_logits: target size ({list(target.shape)}) must be "
            f"the same as input size ({list(input.shape)})")
    softplus_neg = _loom.log1p(_loom.exp(-input.abs()))  # log(1 + exp(-|x|))
    if pos_weight is None:
        loss = input.clamp(min=0) - input * target + softplus_neg
    else:
        # (1 - y) x + (1 + (pw - 1) y) * log(1 + exp(-x)), with log(1 + exp(-x)) stable.
        log_sig_neg = softplus_neg + (-input).clamp(min=0)
        loss = (1 - target) * input + (1 + (pos_weight - 1) * target) * log_sig_neg
    if weight is not None:
        loss = loss * weight
    return _reduce("binary_cross_entropy_with_logits", loss, reduction)
