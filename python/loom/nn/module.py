"""Module: the base class of every layer, with PyTorch's registration and state semantics.

Assigning a Parameter, a Module or (for a name registered with ``register_buffer``) a
tensor as an attribute stores it in ``_parameters``, ``_modules`` or ``_buffers``; the
traversals (``named_parameters``, ``state_dict``, ``to``, ``train`` ...) walk those dicts
in registration order, so names and order match what torch gives for the same model.
"""
from collections import OrderedDict, namedtuple

from .. import _loom
from ..autograd import no_grad
from .hooks import RemovableHandle
from .parameter import Parameter

__all__ = ["Module"]


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    """What load_state_dict returns: the keys the model wanted and did not get, and the
    keys it got and did not want."""

    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


def _indent(text, spaces):
    """Indents every line of a multi-line repr except the first."""
    lines = text.split("\n")
    if len(lines) == 1:
        return text
    pad = " " * spaces
    return lines[0] + "\n" + "\n".join(pad + line for line in lines[1:])


def _check_name(kind, name):
    if not isinstance(name, str):
        raise TypeError(f"{kind} name should be a string, got {type(name).__name__}")
    if name == "":
        raise KeyError(f'{kind} name can\'t be empty string ""')
    if "." in name:
        raise KeyError(f'{kind} name can\'t contain ".", got: {name}')


def _parse_to_args(args, kwargs):
    """Reads Module.to's arguments: (device), (dtype), (device, dtype), (tensor) or
    keywords device= / dtype=. Returns (device, dtype)."""
    device = kwargs.pop("device", None)
    dtype = kwargs.pop("dtype", None)
    kwargs.pop("non_blocking", None)
    if kwargs:
        raise TypeError(f"to() got unexpected keyword argument(s) {sorted(kwargs)}")
    for a in args:
        if isinstance(a, _loom.Tensor):
            device, dtype = a.device, a.dtype
        elif isinstance(a, _loom.dtype):
            dtype = a
        elif isinstance(a, (str, _loom.device, int)):
            device = a
        else:
            raise TypeError(f"to() received an invalid argument of type {type(a).__name__}")
    return device, dtype


class Module:
    """Base class of all layers. Subclasses call ``super().__init__()`` first, assign
    their parameters and submodules as attributes, and define ``forward``; calling the
    module runs the forward pre-hooks, ``forward`` and the forward hooks."""

    training: bool

    def __init__(self, *args, **kwargs):
        if args or kwargs:
            raise TypeError(
                f"{type(self).__name__}.__init__() got unexpected arguments; "
                "Module.__init__ takes none")
        object.__setattr__(self, "training", True)
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_buffers", OrderedDict())
        object.__setattr__(self, "_non_persistent_buffers_set", set())
        object.__setattr__(self, "_modules", OrderedDict())
        object.__setattr__(self, "_forward_pre_hooks", OrderedDict())
        object.__setattr__(self, "_forward_pre_hooks_with_kwargs", set())
        object.__setattr__(self, "_forward_hooks", OrderedDict())
        object.__setattr__(self, "_forward_hooks_with_kwargs", set())

    # ---- forward and hooks -------------------------------------------------------

    def forward(self, *args, **kwargs):
        raise NotImplementedError(
            f'Module [{type(self).__name__}] is missing the required "forward" function')

    def __call__(self, *args, **kwargs):
        for hid, hook in list(self._forward_pre_hooks.items()):
            if hid in self._forward_pre_hooks_with_kwargs:
                result = hook(self, args, kwargs)
                if result is not None:
                    if not (isinstance(result, tuple) and len(result) == 2):
                        raise RuntimeError(
                            "forward pre-hook registered with with_kwargs=True must return "
                            f"None or a tuple (args, kwargs), got {result!r}")
                    args, kwargs = result
            else:
                result = hook(self, args)
                if result is not None:
                    args = result if isinstance(result, tuple) else (result,)
        output = self.forward(*args, **kwargs)
        for hid, hook in list(self._forward_hooks.items()):
            if hid in self._forward_hooks_with_kwargs:
                result = hook(self, args, kwargs, output)
            else:
                result = hook(self, args, output)
            if result is not None:
                output = result
        return output

    @staticmethod
    def _add_hook(hooks, kw_set, hook, prepend, with_kwargs):
        handle = RemovableHandle(hooks)
        hooks[handle.id] = hook
        if with_kwargs:
            kw_set.add(handle.id)
        if prepend:
            hooks.move_to_end(handle.id, last=False)
        return handle

    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        """hook(module, args) runs before forward; a non-None result replaces args (a
        non-tuple is wrapped). With with_kwargs=True: hook(module, args, kwargs) returns
        None or (args, kwargs). Returns a handle whose remove() unregisters it."""
        return self._add_hook(self._forward_pre_hooks, self._forward_pre_hooks_with_kwargs,
                              hook, prepend, with_kwargs)

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False):
        """hook(module, args, output) runs after forward; a non-None result replaces the
        output. With with_kwargs=True: hook(module, args, kwargs, output)."""
        return self._add_hook(self._forward_hooks, self._forward_hooks_with_kwargs,
                              hook, prepend, with_kwargs)

    # ---- registration --------------------------------------------------------------

    def register_parameter(self, name, param):
        """Adds a Parameter (or None, a placeholder state_dict skips) under name."""
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        _check_name("parameter", name)
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"attribute '{name}' already exists")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(
                f"cannot assign '{type(param).__name__}' object to parameter '{name}' "
                "(loom.nn.Parameter or None required)")
        self._parameters[name] = param

    def register_buffer(self, name, tensor, persistent=True):
        """Adds a tensor that is module state but not learnable (e.g. running stats).
        Persistent buffers are part of state_dict; all buffers follow to()."""
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        _check_name("buffer", name)
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, _loom.Tensor):
            raise TypeError(
                f"cannot assign '{type(tensor).__name__}' object to buffer '{name}' "
                "(loom.Tensor or None required)")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name, module):
        """Adds a child module (or None) under name."""
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        _check_name("module", name)
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        self._modules[name] = module

    register_module = add_module

    def __setattr__(self, name, value):
        d = self.__dict__
        params = d.get("_parameters")

        def discard(*dicts):
            for container in dicts:
                if name in container:
                    del container[name]

        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            discard(d, self._buffers, self._modules)
            self._non_persistent_buffers_set.discard(name)
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(
                    f"cannot assign '{type(value).__name__}' as parameter '{name}' "
                    "(loom.nn.Parameter or None expected)")
            self.register_parameter(name, value)
        elif isinstance(value, Module):
            if "_modules" not in d:
                raise AttributeError("cannot assign module before Module.__init__() call")
            discard(d, self._parameters, self._buffers)
            self._non_persistent_buffers_set.discard(name)
            self._modules[name] = value
        elif "_modules" in d and name in self._modules:
            if value is not None:
                raise TypeError(
                    f"cannot assign '{type(value).__name__}' as child module '{name}' "
                    "(loom.nn.Module or None expected)")
            self._modules[name] = value
        elif "_buffers" in d and name in self._buffers:
            if value is not None and not isinstance(value, _loom.Tensor):
                raise TypeError(
                    f"cannot assign '{type(value).__name__}' as buffer '{name}' "
                    "(loom.Tensor or None expected)")
            self._buffers[name] = value
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name):
        # Only reached when normal lookup fails: parameters, buffers and children live
        # in their dicts, not in __dict__.
        d = self.__dict__
        for store in ("_parameters", "_buffers", "_modules"):
            if store in d and name in d[store]:
                return d[store][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        if name in self._parameters:
            del self._parameters[name]
        elif name in self._buffers:
            del self._buffers[name]
            self._non_persistent_buffers_set.discard(name)
        elif name in self._modules:
            del self._modules[name]
        else:
            object.__delattr__(self, name)

    def __dir__(self):
        keys = (list(dir(type(self))) + list(self.__dict__) + list(self._parameters)
                + list(self._modules) + list(self._buffers))
        return sorted(k for k in set(keys) if not k[0].isdigit())

    def get_submodule(self, target):
        """The module at dotted path target ('' is self)."""
        mod = self
        if target == "":
            return mod
        for item in target.split("."):
            if item not in mod._modules or mod._modules[item] is None:
                raise AttributeError(f"{mod._get_name()} has no submodule `{item}`")
            mod = mod._modules[item]
        return mod

    def get_parameter(self, target):
        """The parameter at dotted path target."""
        mod_path, _, name = target.rpartition(".")
        mod = self.get_submodule(mod_path)
        if name not in mod._parameters:
            raise AttributeError(f"{mod._get_name()} has no parameter `{name}`")
        return mod._parameters[name]

    # ---- traversal -----------------------------------------------------------------

    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        """(dotted name, module) for self and every descendant, depth first; a module
        reachable twice is listed once unless remove_duplicate is False."""
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, module in self._modules.items():
            if module is None:
                continue
            sub = prefix + ("." if prefix else "") + name
            yield from module.named_modules(memo, sub, remove_duplicate)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def named_children(self):
        seen = set()
        for name, module in self._modules.items():
            if module is not None and id(module) not in seen:
                seen.add(id(module))
                yield name, module

    def children(self):
        for _, m in self.named_children():
            yield m

    def _named_members(self, store, prefix, recurse, remove_duplicate):
        seen = set()
        mods = (self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate)
                if recurse else [(prefix, self)])
        for mod_prefix, mod in mods:
            for name, value in getattr(mod, store).items():
                if value is None:
                    continue
                if remove_duplicate:
                    if id(value) in seen:
                        continue
                    seen.add(id(value))
                yield mod_prefix + ("." if mod_prefix else "") + name, value

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        """(dotted name, Parameter) in registration order; a parameter shared by two
        modules is listed once, under its first name."""
        yield from self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    # ---- modes ---------------------------------------------------------------------

    def train(self, mode=True):
        """Sets the training flag (read by Dropout and the like) on self and every
        descendant; returns self."""
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for m in self.children():
            m.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        """Drops every parameter's gradient (set_to_none=True) or zeroes it in place."""
        for p in self.parameters():
            g = p.grad
            if g is None:
                continue
            if set_to_none:
                p.grad = None
            else:
                with no_grad():
                    g.zero_()

    # ---- conversion ----------------------------------------------------------------

    def _apply(self, fn, _memo=None):
        """Replaces the data of every parameter, gradient and buffer t (recursively) by
        fn(t). Parameters keep their identity (their `.data` is replaced, as torch's), so an
        optimizer built before a to() still holds them, and a parameter shared by several
        modules (tied weights) is converted once and stays shared."""
        done = set() if _memo is None else _memo
        for m in self.children():
            m._apply(fn, done)
        with no_grad():
            for p in self._parameters.values():
                if p is None or id(p) in done:
                    continue
                done.add(id(p))
                grad = p.grad
                p.data = fn(p)
                if grad is not None:
                    p.grad = fn(grad)
            for name, b in self._buffers.items():
                if b is not None:
                    self._buffers[name] = fn(b)
        return self

    def to(self, *args, **kwargs):
        """Moves parameters and buffers to a device and/or converts the floating ones
        to dtype (integer buffers keep theirs); returns self. Accepts (device),
        (dtype), (device, dtype), (tensor) or device=/dtype= keywords."""
        device, dtype = _parse_to_args(args, dict(kwargs))
        if dtype is not None and not dtype.is_floating_point:
            raise TypeError(
                f"nn.Module.to only accepts floating point dtypes, but got desired dtype={dtype}")

        def convert(t):
            return t.to(device=device, dtype=dtype if t.is_floating_point() else None)

        return self._apply(convert)

    def cpu(self):
        return self.to(device="cpu")

    def cuda(self, device=None):
        if device is None:
            return self.to(device="cuda")
        if isinstance(device, int):
            device = f"cuda:{device}"
        return self.to(device=device)

    def _cast_floating(self, dtype):
        return self._apply(lambda t: t.to(dtype=dtype) if t.is_floating_point() else t)

    def float(self):
        return self._cast_floating(_loom.float32)

    def double(self):
        return self._cast_floating(_loom.float64)

    def half(self):
        return self._cast_floating(_loom.float16)

    def bfloat16(self):
        return self._cast_floating(_loom.bfloat16)

    def apply(self, fn):
        """Calls fn on every descendant (children first) and then on self; returns self."""
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # ---- state ---------------------------------------------------------------------

    def _state_items(self, prefix, keep_vars):
        for name, p in self._parameters.items():
            if p is not None:
                yield prefix + name, p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                yield prefix + name, b if keep_vars else b.detach()
        for name, m in self._modules.items():
            if m is not None:
                yield from m._state_items(prefix + name + ".", keep_vars)

    def state_dict(self, *, destination=None, prefix="", keep_vars=False):
        """An OrderedDict of dotted name -> tensor for every parameter and persistent
        buffer. Values are detached handles sharing the module's memory (keep_vars=True
        gives the Parameters themselves)."""
        if destination is None:
            destination = OrderedDict()
        for key, value in self._state_items(prefix, keep_vars):
            destination[key] = value
        return destination

    def load_state_dict(self, state_dict, strict=True):
        """Copies state_dict's values into the parameters and persistent buffers in
        place (no autograd recording). Every key is checked before anything is copied:
        a shape mismatch, or with strict=True a missing or unexpected key, raises a
        RuntimeError naming the keys and leaves the module unchanged. Returns
        (missing_keys, unexpected_keys)."""
        if not hasattr(state_dict, "keys") or not hasattr(state_dict, "__getitem__"):
            raise TypeError(
                f"Expected state_dict to be dict-like, got {type(state_dict).__name__}.")
        own = OrderedDict(self._state_items("", keep_vars=True))
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict.keys() if k not in own]
        errors = []
        for key, target in own.items():
            if key not in state_dict:
                continue
            value = state_dict[key]
            if not isinstance(value, _loom.Tensor):
                errors.append(
                    f'While copying the parameter named "{key}", expected a loom.Tensor '
                    f"from the state_dict, got {type(value).__name__}.")
            elif tuple(value.shape) != tuple(target.shape):
                errors.append(
                    f"size mismatch for {key}: copying a param with shape "
                    f"{list(value.shape)} from checkpoint, the shape in current model is "
                    f"{list(target.shape)}.")
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: "
                              + ", ".join(f'"{k}"' for k in unexpected) + ". ")
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: "
                              + ", ".join(f'"{k}"' for k in missing) + ". ")
        if errors:
            raise RuntimeError(
                f"Error(s) in loading state_dict for {self._get_name()}:\n\t"
                + "\n\t".join(errors))
        with no_grad():
            for key, target in own.items():
                if key in state_dict:
                    target.copy_(state_dict[key])
        return _IncompatibleKeys(missing, unexpected)

    # ---- printing ------------------------------------------------------------------

    def _get_name(self):
        return type(self).__name__

    def extra_repr(self):
        """The text inside this module's parentheses in repr (its constructor settings)."""
        return ""

    def __repr__(self):
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [f"({name}): " + _indent(repr(m), 2)
                       for name, m in self._modules.items()]
        lines = extra_lines + child_lines
        text = self._get_name() + "("
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                text += extra_lines[0]
            else:
                text += "\n  " + "\n  ".join(lines) + "\n"
        return text + ")"
