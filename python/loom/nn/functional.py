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
    return _loom._linear(input, weight, bias)


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


def _check_same_shape(op, input, target):
    if tuple(input.shape) != tuple(target.shape):
        warnings.warn(
            f"{op}: using a target size ({list(target.shape)}) that is different to the "
            f"input size ({list(input.shape)}); they will be broadcast", stacklevel=3)


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100,
                  reduce=None, reduction="mean", label_smoothing=0.0):
    """Cross entropy of logits ([N, C], [C] or [N, C, d...]) against class indices or class
    probabilities, with class weights, ignore_index and label smoothing (loom's fused kernel
    with its own one-pass backward for class indices)."""
    _legacy_reduction("cross_entropy", size_average, reduce)
    return _loom.cross_entropy(input, target, weight=weight, ignore_index=ignore_index,
                               reduction=reduction, label_smoothing=label_smoothing)


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
             reduction="mean"):
    """Negative log likelihood of log-probabilities at the target classes."""
    _legacy_reduction("nll_loss", size_average, reduce)
    return _loom.nll_loss(input, target, weight=weight, ignore_index=ignore_index,
                          reduction=reduction)


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
              scale_grad_by_freq=False, sparse=False):
    """The rows of weight [num_embeddings, embedding_dim] at input's indices (int64 or
    int32): input's shape + [embedding_dim]. An index out of range raises IndexError at
    the next sync point. The weight's gradient accumulates repeated indices in a fixed
    order (index_add); the padding_idx row gets none."""
    for name, value, default in (("max_norm", max_norm, None),
                                 ("scale_grad_by_freq", scale_grad_by_freq, False),
                                 ("sparse", sparse, False)):
        if value != default:
            raise NotImplementedError(f"embedding: {name}={value!r} is not supported yet")
    out = _loom.embedding(input, weight)
    if padding_idx is not None:
        n = weight.shape[0]
        if not -n <= padding_idx < n:
            raise ValueError(f"embedding: padding_idx {padding_idx} out of range for "
                             f"{n} embeddings")
        pad = (input == (padding_idx % n)).unsqueeze(-1)
        out = _loom.where(pad, out.detach(), out)  # same values; no gradient to that row
    return out


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """(input - target)^2, reduced."""
    _legacy_reduction("mse_loss", size_average, reduce)
    _check_same_shape("mse_loss", input, target)
    return _loom.mse_loss(input, target, reduction=reduction)


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """|input - target|, reduced."""
    _legacy_reduction("l1_loss", size_average, reduce)
    _check_same_shape("l1_loss", input, target)
    return _loom.l1_loss(input, target, reduction=reduction)


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None,
                                     reduce=None, reduction="mean", pos_weight=None):
    """Binary cross entropy of sigmoid(input) against target, from the logits without
    overflow; pos_weight multiplies the positive term, weight each element."""
    _legacy_reduction("binary_cross_entropy_with_logits", size_average, reduce)
    if tuple(input.shape) != tuple(target.shape):
        raise ValueError(
            f"binary_cross_entropy_with_logits: target size ({list(target.shape)}) must be "
            f"the same as input size ({list(input.shape)})")
    return _loom.binary_cross_entropy_with_logits(input, target, weight=weight,
                                                  reduction=reduction, pos_weight=pos_weight)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None):
    """softmax(query @ key^T * scale + mask) @ value; scale, mask and softmax run as one
    fused kernel, and so does their backward."""
    return _loom.scaled_dot_product_attention(query, key, value, attn_mask=attn_mask,
                                              dropout_p=dropout_p, is_causal=is_causal,
                                              scale=scale)


def one_hot(tensor, num_classes=-1):
    """int64 [..., num_classes] with a 1 at each class."""
    return _loom.one_hot(tensor, num_classes)
