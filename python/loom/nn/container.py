"""Containers: Sequential (a pipeline), ModuleList and ModuleDict (registered holders).

Children are registered under their index ('0', '1', ...) or key, so parameter names
and state_dict keys read like torch's (e.g. '0.weight')."""
import operator
from collections import OrderedDict

from .module import Module

__all__ = ["Sequential", "ModuleList", "ModuleDict"]


def _index(container, idx):
    """A non-negative position for idx in a container of len(container)."""
    idx = operator.index(idx)
    n = len(container)
    if not -n <= idx < n:
        raise IndexError(f"index {idx} is out of range for {type(container).__name__} "
                         f"of length {n}")
    return idx + n if idx < 0 else idx


class _Indexed(Module):
    """Shared list behaviour: children stored under '0'..'n-1', renumbered on delete."""

    def _renumber(self, modules):
        self._modules.clear()
        for i, m in enumerate(modules):
            self.add_module(str(i), m)

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __setitem__(self, idx, module):
        self.add_module(str(_index(self, idx)), module)

    def __delitem__(self, idx):
        mods = list(self._modules.values())
        if isinstance(idx, slice):
            del mods[idx]
        else:
            del mods[_index(self, idx)]
        self._renumber(mods)

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules):
        for m in modules:
            self.append(m)
        return self

    def insert(self, index, module):
        mods = list(self._modules.values())
        mods.insert(index, module)
        self._renumber(mods)

    def pop(self, idx=-1):
        m = self[idx]
        del self[idx]
        return m

    def __dir__(self):
        return [k for k in super().__dir__() if not k.isdigit()]


class Sequential(_Indexed):
    """Calls its modules in order, each on the previous one's output. Built from
    positional modules (named '0', '1', ...) or one OrderedDict of name -> module."""

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for key, m in args[0].items():
                self.add_module(key, m)
        else:
            for i, m in enumerate(args):
                self.add_module(str(i), m)

    def __getitem__(self, idx):
        items = list(self._modules.items())
        if isinstance(idx, slice):
            return Sequential(OrderedDict(items[idx]))
        return items[_index(self, idx)][1]

    def __setitem__(self, idx, module):
        key = list(self._modules)[_index(self, idx)]
        self.add_module(key, module)

    def forward(self, input):
        for m in self:
            input = m(input)
        return input


class ModuleList(_Indexed):
    """A list of modules whose parameters the owner sees; it has no forward."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __getitem__(self, idx):
        mods = list(self._modules.values())
        if isinstance(idx, slice):
            return ModuleList(mods[idx])
        return mods[_index(self, idx)]

    def __iadd__(self, modules):
        return self.extend(modules)

    def __add__(self, other):
        return ModuleList(list(self) + list(other))

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleList has no forward; call its modules instead")


class ModuleDict(Module):
    """An ordered dict of name -> module whose parameters the owner sees."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key):
        return self._modules[key]

    def __setitem__(self, key, module):
        self.add_module(key, module)

    def __delitem__(self, key):
        del self._modules[key]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key):
        return key in self._modules

    def clear(self):
        self._modules.clear()

    def pop(self, key):
        m = self[key]
        del self[key]
        return m

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def update(self, modules):
        """Adds modules from a mapping or an iterable of (name, module) pairs."""
        pairs = modules.items() if hasattr(modules, "items") else modules
        for j, pair in enumerate(pairs):
            if len(pair) != 2:
                raise ValueError(f"ModuleDict update sequence element #{j} has length "
                                 f"{len(pair)}; 2 is required")
            self[pair[0]] = pair[1]

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleDict has no forward; call its modules instead")
