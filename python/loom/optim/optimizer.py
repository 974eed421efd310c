"""The Optimizer base class: parameter groups, per-parameter state, zero_grad, state_dict."""
import copy

from .. import _loom
from ..autograd import no_grad


class _Required:
    """The marker of a hyper-parameter with no default (torch's `required`)."""

    def __repr__(self):
        return "<required parameter>"


required = _Required()


class Optimizer:
    """Base class of loom's optimizers.

    params: an iterable of tensors, or of dicts each holding "params" and per-group options.
    defaults: the options a group takes where it does not name its own.
    """

    def __init__(self, params, defaults):
        self.defaults = dict(defaults)
        self.state = {}
        self.param_groups = []
        if isinstance(params, _loom.Tensor):
            raise TypeError(
                f"{type(self).__name__}: params must be an iterable of tensors or dicts, "
                "not a tensor")
        groups = list(params)
        if not groups:
            raise ValueError(f"{type(self).__name__} got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for g in groups:
            self.add_param_group(g)

    def add_param_group(self, param_group):
        """Adds a group (a dict with "params"); options it omits come from the defaults."""
        name = type(self).__name__
        if not isinstance(param_group, dict):
            raise TypeError(f"{name}: a parameter group must be a dict, not "
                            f"{type(param_group).__name__}")
        group = dict(param_group)
        params = group["params"]
        if isinstance(params, _loom.Tensor):
            params = [params]
        elif isinstance(params, set):
            raise TypeError(f"{name}: parameters must be an ordered collection, not a set")
        params = list(params)
        for i, p in enumerate(params):
            if not isinstance(p, _loom.Tensor):
                raise TypeError(f"{name}: parameter {i} is a {type(p).__name__}, not a tensor")
            if not p.is_floating_point():
                raise TypeError(f"{name}: parameter {i} of dtype {p.dtype} (an optimizer "
                                "updates floating tensors only)")
            if not p.is_leaf:
                raise ValueError(f"{name}: can't optimize a non-leaf tensor (parameter {i} "
                                 f"of shape {list(p.shape)})")
        ids = [id(p) for p in params]
        if len(set(ids)) != len(ids):
            raise ValueError(f"{name}: a parameter group holds one parameter twice")
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if seen & set(ids):
            raise ValueError(f"{name}: some parameters appear in more than one parameter group")
        group["params"] = params
        for key, default in self.defaults.items():
            if default is required and key not in group:
                raise ValueError(f"{name}: parameter group didn't specify a value of required "
                                 f"optimization parameter {key}")
            group.setdefault(key, default)
        self._check_group(group)
        self.param_groups.append(group)

    def _check_group(self, group):
        """Raises ValueError for an option torch's constructor would refuse."""

    def zero_grad(self, set_to_none=True):
        """Clears every parameter's gradient (or zeroes it in place: set_to_none=False)."""
        with no_grad():
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    if set_to_none:
                        p.grad = None
                    else:
                        p.grad.zero_()

    def _with_grads(self, group):
        """The group's parameters that have a gradient, with those gradients."""
        ps, gs = [], []
        for p in group["params"]:
            g = p.grad
            if g is not None:
                ps.append(p)
                gs.append(g)
        return ps, gs

    def step(self, closure=None):
        """One update of every parameter with a gradient; returns closure()'s loss if given."""
        loss = None
        if closure is not None:
            from ..autograd import enable_grad

            with enable_grad():
                loss = closure()
        for group in self.param_groups:
            self._check_group(group)
            self._step_group(group)
        return loss

    def _step_group(self, group):
        raise NotImplementedError

    def state_dict(self):
        """torch's layout: {"state": {index: {...}}, "param_groups": [{..., "params": [index]}]}.

        Parameters are numbered in group order; the state's tensors are the live ones (as
        torch's), so copy them to keep a snapshot."""
        index, groups = {}, []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            packed["params"] = []
            for p in group["params"]:
                index.setdefault(id(p), len(index))
                packed["params"].append(index[id(p)])
            groups.append(packed)
        state = {}
        for group in self.param_groups:
            for p in group["params"]:
                if p in self.state:
                    state[index[id(p)]] = dict(self.state[p])
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict):
        """Loads a state_dict() of an optimizer over parameters of the same shapes, in place.

        Checks everything first: a mismatch raises ValueError and changes nothing."""
        name = type(self).__name__
        groups = state_dict["param_groups"]
        if len(groups) != len(self.param_groups):
            raise ValueError(f"{name}.load_state_dict: the state has {len(groups)} parameter "
                             f"groups, this optimizer {len(self.param_groups)}")
        mapping = {}
        for gi, (mine, theirs) in enumerate(zip(self.param_groups, groups)):
            if len(mine["params"]) != len(theirs["params"]):
                raise ValueError(f"{name}.load_state_dict: group {gi} has "
                                 f"{len(theirs['params'])} parameters in the state, "
                                 f"{len(mine['params'])} here")
            for p, idx in zip(mine["params"], theirs["params"]):
                mapping[idx] = p
        new_state = {}
        for idx, st in state_dict["state"].items():
            if idx not in mapping:
                raise ValueError(f"{name}.load_state_dict: state for parameter {idx}, which "
                                 "no group lists")
            p = mapping[idx]
            entry = {}
            for key, val in st.items():
                if isinstance(val, _loom.Tensor) and key != "step":
                    if list(val.shape) != list(p.shape):
                        raise ValueError(
                            f"{name}.load_state_dict: state {key!r} of parameter {idx} has "
                            f"shape {list(val.shape)}, the parameter {list(p.shape)}")
                    val = val.to(device=p.device, dtype=p.dtype).clone()
                elif key == "step":
                    val = int(val.item()) if isinstance(val, _loom.Tensor) else int(val)
                else:
                    val = copy.deepcopy(val)
                entry[key] = val
            new_state[p] = entry
        for mine, theirs in zip(self.param_groups, groups):
            for k, v in theirs.items():
                if k != "params":
                    mine[k] = copy.deepcopy(v)
        self.state = new_state

    def __repr__(self):
        lines = [type(self).__name__ + " ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            for k in sorted(group):
                if k != "params":
                    lines.append(f"    {k}: {group[k]}")
        lines.append(")")
        return "\n".join(lines)
