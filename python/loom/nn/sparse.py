"""Embedding: a lookup table of vectors indexed by integers (torch.nn.Embedding)."""
from .. import _loom
from ..autograd import no_grad
from . import functional as F
from . import init
from .module import Module
from .parameter import Parameter

__all__ = ["Embedding"]


class Embedding(Module):
    """num_embeddings vectors of embedding_dim; weights drawn from N(0, 1) as torch's, the
    padding_idx row zeroed and left out of the gradient."""

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None,
                 norm_type=2.0, scale_grad_by_freq=False, sparse=False, _weight=None,
                 _freeze=False, device=None, dtype=None):
        super().__init__()
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise ValueError(f"Embedding: padding_idx {padding_idx} must be within "
                                 f"num_embeddings ({num_embeddings})")
            padding_idx %= num_embeddings
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.padding_idx, self.max_norm, self.norm_type = padding_idx, max_norm, norm_type
        self.scale_grad_by_freq, self.sparse = scale_grad_by_freq, sparse
        if _weight is None:
            kw = {} if dtype is None else {"dtype": dtype}
            self.weight = Parameter(_loom.empty(num_embeddings, embedding_dim, device=device,
                                                **kw), requires_grad=not _freeze)
            self.reset_parameters()
        else:
            if list(_weight.shape) != [num_embeddings, embedding_dim]:
                raise ValueError(f"Embedding: _weight of shape {list(_weight.shape)}, expected "
                                 f"{[num_embeddings, embedding_dim]}")
            self.weight = Parameter(_weight, requires_grad=not _freeze)

    def reset_parameters(self):
        init.normal_(self.weight)
        if self.padding_idx is not None:
            with no_grad():
                self.weight[self.padding_idx].fill_(0)

    def forward(self, input):
        return F.embedding(input, self.weight, self.padding_idx, self.max_norm, self.norm_type,
                           self.scale_grad_by_freq, self.sparse)

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        return s

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, padding_idx=None, **kwargs):
        rows, dim = embeddings.shape
        return cls(rows, dim, padding_idx=padding_idx, _weight=embeddings, _freeze=freeze,
                   **kwargs)
