"""Adam and AdamW (decoupled weight decay), with amsgrad (torch.optim.Adam / AdamW)."""
from .. import _loom
from ..autograd import no_grad
from .optimizer import Optimizer


class Adam(Optimizer):
    _decoupled = False

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 amsgrad=False, *, maximize=False):
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, amsgrad=amsgrad,
                                      maximize=maximize))

    def _check_group(self, group):
        name = type(self).__name__
        b1, b2 = group["betas"]
        if group["lr"] < 0:
            raise ValueError(f"{name}: invalid learning rate: {group['lr']}")
        if group["eps"] < 0:
            raise ValueError(f"{name}: invalid epsilon value: {group['eps']}")
        if not 0 <= b1 < 1:
            raise ValueError(f"{name}: invalid beta parameter at index 0: {b1}")
        if not 0 <= b2 < 1:
            raise ValueError(f"{name}: invalid beta parameter at index 1: {b2}")
        if group["weight_decay"] < 0:
            raise ValueError(f"{name}: invalid weight_decay value: {group['weight_decay']}")

    def _step_group(self, group):
        ps, gs = self._with_grads(group)
        if not ps:
            return
        amsgrad = bool(group["amsgrad"])
        ms, vs, vmax, steps = [], [], [], []
        with no_grad():
            for p in ps:
                st = self.state.get(p)
                if not st:
                    st = self.state[p] = {"step": 0, "exp_avg": _loom.zeros_like(p),
                                          "exp_avg_sq": _loom.zeros_like(p)}
                if amsgrad and "max_exp_avg_sq" not in st:
                    st["max_exp_avg_sq"] = _loom.zeros_like(p)
                ms.append(st["exp_avg"])
                vs.append(st["exp_avg_sq"])
                if amsgrad:
                    vmax.append(st["max_exp_avg_sq"])
                steps.append(st["step"] + 1)
        b1, b2 = group["betas"]
        _loom._adam_step(ps, gs, ms, vs, vmax, steps, float(group["lr"]), float(b1), float(b2),
                         float(group["eps"]), float(group["weight_decay"]), amsgrad,
                         bool(group["maximize"]), self._decoupled)
        for p in ps:
            self.state[p]["step"] += 1


class AdamW(Adam):
    """Adam with decoupled weight decay: p *= 1 - lr * weight_decay before the Adam update."""

    _decoupled = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, *, maximize=False):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                         amsgrad=amsgrad, maximize=maximize)
