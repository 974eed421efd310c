"""loom.linalg: the functions of torch.linalg that loom has, with torch's names and keywords."""
from __future__ import annotations

import math

from . import _loom as _l


def svdvals(A):
    """The singular values of the matrices in A's last two dims, descending: [..., min(m, n)].

    Computed in float64 and rounded once to A's dtype (on the host for a device without an
    SVD); a matrix holding a NaN or an infinity gives NaNs."""
    return _l._svdvals(A)


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False):  # noqa: A002
    """The ord-norm of the matrices over the two dims `dim`: 'fro' (Frobenius), 'nuc' (sum of
    the singular values), 2 / -2 (largest / smallest singular value), 1 / -1 (largest /
    smallest column sum of |A|), inf / -inf (largest / smallest row sum)."""
    if A.dim() < 2:
        raise ValueError(f"matrix_norm: needs a tensor of at least 2 dims, got {tuple(A.shape)}")
    if len(dim) != 2:
        raise ValueError(f"matrix_norm: dim must name two dims, got {dim}")
    nd = A.dim()
    r, c = (d + nd if d < 0 else d for d in dim)
    if not (0 <= r < nd and 0 <= c < nd) or r == c:
        raise ValueError(f"matrix_norm: dim {dim} does not name two dims of {tuple(A.shape)}")
    if not A.dtype.is_floating_point:
        raise TypeError(f"matrix_norm: needs a floating tensor, got {A.dtype} {tuple(A.shape)}")
    # the two dims last, rows then columns
    rest = [d for d in range(nd) if d not in (r, c)]
    x = A.permute(*rest, r, c)
    a = _l.abs(x)
    if ord == "fro":
        out = _l.sqrt(_l.sum(a * a, dim=(-2, -1)))
    elif ord in (1, -1):
        sums = _l.sum(a, dim=-2)
        out = _l.amax(sums, dim=-1) if ord == 1 else _l.amin(sums, dim=-1)
    elif ord in (math.inf, -math.inf):
        sums = _l.sum(a, dim=-1)
        out = _l.amax(sums, dim=-1) if ord > 0 else _l.amin(sums, dim=-1)
    elif ord in (2, -2, "nuc"):
        s = svdvals(x)
        out = _l.sum(s, dim=-1) if ord == "nuc" else (s[..., 0] if ord == 2 else s[..., -1])
    else:
        raise ValueError(f"matrix_norm: ord must be 'fro', 'nuc', 1, -1, 2, -2, inf or -inf, "
                         f"got {ord!r}")
    if keepdim:
        for d in sorted((r, c)):
            out = out.unsqueeze(d)
    return out
