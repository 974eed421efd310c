"""SGD with momentum, dampening, Nesterov momentum and weight decay (torch.optim.SGD)."""
from .. import _loom
from .optimizer import Optimizer, required


class SGD(Optimizer):
    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0,
                 nesterov=False, *, maximize=False):
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov,
                                      maximize=maximize))

    def _check_group(self, group):
        if group["lr"] is required:
            raise ValueError("SGD: a learning rate is required")
        if group["lr"] < 0:
            raise ValueError(f"SGD: invalid learning rate: {group['lr']}")
        if group["momentum"] < 0:
            raise ValueError(f"SGD: invalid momentum value: {group['momentum']}")
        if group["weight_decay"] < 0:
            raise ValueError(f"SGD: invalid weight_decay value: {group['weight_decay']}")
        if group["nesterov"] and (group["momentum"] <= 0 or group["dampening"] != 0):
            raise ValueError("SGD: nesterov momentum requires a momentum and zero dampening")

    def _step_group(self, group):
        ps, gs = self._with_grads(group)
        if not ps:
            return
        bufs = [self.state.get(p, {}).get("momentum_buffer") for p in ps]
        bufs = _loom._sgd_step(ps, gs, bufs, float(group["lr"]), float(group["momentum"]),
                               float(group["dampening"]), float(group["weight_decay"]),
                               bool(group["nesterov"]), bool(group["maximize"]))
        for p, b in zip(ps, bufs):
            st = self.state.setdefault(p, {})
            if b is not None:
                st["momentum_buffer"] = b
