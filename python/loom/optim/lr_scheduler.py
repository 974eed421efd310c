"""Learning-rate schedulers with torch.optim.lr_scheduler's names and semantics.

Each scheduler computes a group's rate in closed form from its base rate and the epoch count
(``last_epoch``), and writes it into ``param_groups[i]["lr"]``. The rate reaches the update as
a kernel argument, so a schedule compiles nothing new.
"""
import bisect
import math


class LRScheduler:
    """Base class: construction sets each group's ``initial_lr`` and takes step 0."""

    def __init__(self, optimizer, last_epoch=-1):
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(f"param 'initial_lr' is not specified in param_groups[{i}] "
                                   "when resuming an optimizer")
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self.step()

    def lr_at(self, epoch):
        """The rates of the groups at `epoch` (a list, one per group)."""
        raise NotImplementedError

    def get_last_lr(self):
        return list(self._last_lr)

    def get_lr(self):
        return self.lr_at(self.last_epoch)

    def step(self, epoch=None):
        self.last_epoch = self.last_epoch + 1 if epoch is None else epoch
        lrs = self.lr_at(self.last_epoch)
        for group, lr in zip(self.optimizer.param_groups, lrs):
            group["lr"] = lr
        self._last_lr = list(lrs)

    def state_dict(self):
        return {k: v for k, v in self.__dict__.items()
                if k not in ("optimizer", "lr_lambdas") and not callable(v)}

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)


def _per_group(value, n, what):
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise ValueError(f"expected {n} {what}, got {len(value)}")
        return list(value)
    return [value] * n


class LambdaLR(LRScheduler):
    """lr = base_lr * lr_lambda(epoch); one function, or one per group."""

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        self.lr_lambdas = _per_group(lr_lambda, len(optimizer.param_groups), "lr_lambdas")
        super().__init__(optimizer, last_epoch)

    def lr_at(self, epoch):
        return [base * f(epoch) for base, f in zip(self.base_lrs, self.lr_lambdas)]


class StepLR(LRScheduler):
    """lr = base_lr * gamma ** (epoch // step_size)."""

    def __init__(self, optimizer, step_size, gamma=0.1, last_epoch=-1):
        self.step_size, self.gamma = step_size, gamma
        super().__init__(optimizer, last_epoch)

    def lr_at(self, epoch):
        return [base * self.gamma ** (epoch // self.step_size) for base in self.base_lrs]


class MultiStepLR(LRScheduler):
    """lr = base_lr * gamma ** (the number of milestones <= epoch)."""

    def __init__(self, optimizer, milestones, gamma=0.1, last_epoch=-1):
        self.milestones, self.gamma = sorted(milestones), gamma
        super().__init__(optimizer, last_epoch)

    def lr_at(self, epoch):
        k = bisect.bisect_right(self.milestones, epoch)
        return [base * self.gamma ** k for base in self.base_lrs]


class ExponentialLR(LRScheduler):
    """lr = base_lr * gamma ** epoch."""

    def __init__(self, optimizer, gamma, last_epoch=-1):
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def lr_at(self, epoch):
        return [base * self.gamma ** epoch for base in self.base_lrs]


class LinearLR(LRScheduler):
    """The rate's factor goes linearly from start_factor to end_factor over total_iters
    epochs, then stays (a linear warmup with the defaults' end_factor of 1)."""

    def __init__(self, optimizer, start_factor=1.0 / 3, end_factor=1.0, total_iters=5,
                 last_epoch=-1):
        if not 0 < start_factor <= 1 or not 0 <= end_factor <= 1:
            raise ValueError("LinearLR: start_factor must be in (0, 1] and end_factor in [0, 1]")
        self.start_factor, self.end_factor, self.total_iters = (start_factor, end_factor,
                                                                total_iters)
        super().__init__(optimizer, last_epoch)

    def lr_at(self, epoch):
        t = min(epoch, self.total_iters) / self.total_iters if self.total_iters else 1.0
        factor = self.start_factor + (self.end_factor - self.start_factor) * t
        return [base * factor for base in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2."""

    def __init__(self, optimizer, T_max, eta_min=0.0, last_epoch=-1):  # noqa: N803
        self.T_max, self.eta_min = T_max, eta_min
        super().__init__(optimizer, last_epoch)

    def lr_at(self, epoch):
        c = (1 + math.cos(math.pi * epoch / self.T_max)) / 2
        return [self.eta_min + (base - self.eta_min) * c for base in self.base_lrs]


class SequentialLR(LRScheduler):
    """Runs schedulers[i] from milestones[i - 1] on, counting its epochs from there."""

    def __init__(self, optimizer, schedulers, milestones, last_epoch=-1):
        if len(milestones) != len(schedulers) - 1:
            raise ValueError(f"SequentialLR: {len(schedulers)} schedulers need "
                             f"{len(schedulers) - 1} milestones, got {len(milestones)}")
        for s in schedulers:
            if s.optimizer is not optimizer:
                raise ValueError("SequentialLR: every scheduler must drive the same optimizer")
        self._schedulers, self._milestones = list(schedulers), list(milestones)
        for group, base in zip(optimizer.param_groups, schedulers[0].base_lrs):
            group["initial_lr"] = base
        super().__init__(optimizer, last_epoch)

    def lr_at(self, epoch):
        i = bisect.bisect_right(self._milestones, epoch)
        start = self._milestones[i - 1] if i else 0
        return self._schedulers[i].lr_at(epoch - start)

    def state_dict(self):
        d = super().state_dict()
        d["_schedulers"] = [s.state_dict() for s in self._schedulers]
        return d

    def load_state_dict(self, state_dict):
        inner = state_dict.pop("_schedulers")
        super().load_state_dict(state_dict)
        state_dict["_schedulers"] = inner
        for s, sd in zip(self._schedulers, inner):
            s.load_state_dict(sd)
