"""loom.optim from Python: updates against float64 numpy ones (always) and torch.optim's (when
torch is importable), parameter groups, state_dict round trips, schedulers, errors."""
import math

import numpy as np
import pytest

import loom

try:
    import torch
except ImportError:  # CI has no torch: the comparisons skip
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")

SHAPES = [(6, 4), (4,), (2, 3, 2)]


def numpy_adam(p, grads, lr, b1, b2, eps, wd, decoupled, amsgrad):
    p = p.astype(np.float64).copy()
    m = np.zeros_like(p)
    v = np.zeros_like(p)
    vmax = np.zeros_like(p)
    for t, g in enumerate(grads, start=1):
        g = g.astype(np.float64)
        if decoupled:
            p *= 1 - lr * wd
        else:
            g = g + wd * p
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        vmax = np.maximum(vmax, v)
        second = vmax if amsgrad else v
        p -= lr / (1 - b1**t) * m / (np.sqrt(second) / math.sqrt(1 - b2**t) + eps)
    return p


def numpy_sgd(p, grads, lr, momentum, dampening, wd, nesterov):
    p = p.astype(np.float64).copy()
    buf = None
    for g in grads:
        d = g.astype(np.float64) + wd * p
        if momentum:
            buf = d.copy() if buf is None else momentum * buf + (1 - dampening) * d
            d = d + momentum * buf if nesterov else buf
        p -= lr * d
    return p


@pytest.mark.parametrize("cls,kw", [
    ("Adam", dict(lr=0.01)),
    ("Adam", dict(lr=0.01, weight_decay=0.1, amsgrad=True)),
    ("AdamW", dict(lr=0.02, betas=(0.8, 0.95))),
    ("AdamW", dict(lr=0.02, amsgrad=True)),
])
def test_adam_matches_float64(fusion, rng, cls, kw):
    p0 = rng.standard_normal((5, 3)).astype(np.float32)
    grads = [rng.standard_normal((5, 3)).astype(np.float32) for _ in range(6)]
    p = loom.tensor(p0, requires_grad=True)
    opt = getattr(loom.optim, cls)([p], **kw)
    for g in grads:
        p.grad = loom.tensor(g)
        opt.step()
    b1, b2 = kw.get("betas", (0.9, 0.999))
    wd = kw.get("weight_decay", 1e-2 if cls == "AdamW" else 0.0)
    want = numpy_adam(p0, grads, kw["lr"], b1, b2, 1e-8, wd, cls == "AdamW",
                      kw.get("amsgrad", False))
    np.testing.assert_allclose(p.numpy(), want, rtol=1e-5, atol=2e-6)
    assert opt.state[p]["step"] == len(grads)


@pytest.mark.parametrize("kw", [dict(lr=0.1), dict(lr=0.1, momentum=0.9, weight_decay=0.01),
                                dict(lr=0.1, momentum=0.9, nesterov=True),
                                dict(lr=0.05, momentum=0.5, dampening=0.3)])
def test_sgd_matches_float64(fusion, rng, kw):
    p0 = rng.standard_normal(7).astype(np.float32)
    grads = [rng.standard_normal(7).astype(np.float32) for _ in range(4)]
    p = loom.tensor(p0, requires_grad=True)
    opt = loom.optim.SGD([p], **kw)
    for g in grads:
        p.grad = loom.tensor(g)
        opt.step()
    want = numpy_sgd(p0, grads, kw["lr"], kw.get("momentum", 0), kw.get("dampening", 0),
                     kw.get("weight_decay", 0), kw.get("nesterov", False))
    np.testing.assert_allclose(p.numpy(), want, rtol=1e-5, atol=1e-6)


def _mlp_params(rng):
    return [rng.standard_normal(s).astype(np.float32) * 0.5 for s in [(16, 8), (16,), (3, 16), (3,)]]


def _mlp_loss(lib, ps, x, y):
    h = lib.tanh(x @ ps[0].T + ps[1])
    return lib.nn.functional.cross_entropy(h @ ps[2].T + ps[3], y) if lib is torch else \
        loom.cross_entropy(h @ ps[2].T + ps[3], y)


@needs_torch
@pytest.mark.parametrize("cls,kw", [
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-3)),
    ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.2, maximize=True)),
    ("Adam", dict(lr=1e-2, weight_decay=1e-2)),
    ("AdamW", dict(lr=1e-2, amsgrad=True)),
])
def test_training_matches_torch(rng, cls, kw):
    init = _mlp_params(rng)
    x = rng.standard_normal((32, 8)).astype(np.float32)
    y = rng.integers(0, 3, 32)
    lp = [loom.tensor(a, requires_grad=True) for a in init]
    tp = [torch.tensor(a, requires_grad=True) for a in init]
    lo = getattr(loom.optim, cls)([{"params": lp[:2]}, {"params": lp[2:], "lr": kw["lr"] / 2}], **kw)
    to = getattr(torch.optim, cls)([{"params": tp[:2]}, {"params": tp[2:], "lr": kw["lr"] / 2}], **kw)
    ls = loom.optim.lr_scheduler.StepLR(lo, step_size=3, gamma=0.5)
    ts = torch.optim.lr_scheduler.StepLR(to, step_size=3, gamma=0.5)
    for _ in range(8):
        for lib, ps, opt, sch in [(loom, lp, lo, ls), (torch, tp, to, ts)]:
            xx = lib.tensor(x)
            yy = lib.tensor(y, dtype=lib.int64)
            loss = _mlp_loss(lib, ps, xx, yy)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sch.step()
    for a, b in zip(lp, tp):
        np.testing.assert_allclose(a.numpy(), b.detach().numpy(), rtol=1e-4, atol=1e-5)
    assert ls.get_last_lr() == pytest.approx(ts.get_last_lr())


def test_param_groups_options_and_skipped_params(rng):
    a = loom.tensor(rng.standard_normal(3).astype(np.float32), requires_grad=True)
    b = loom.tensor(rng.standard_normal(3).astype(np.float32), requires_grad=True)
    c = loom.zeros(2, requires_grad=True)
    opt = loom.optim.SGD([{"params": [a]}, {"params": b, "lr": 0.5}], lr=0.1)
    assert [g["lr"] for g in opt.param_groups] == [0.1, 0.5]
    opt.add_param_group({"params": [c], "momentum": 0.9})
    assert opt.param_groups[2]["momentum"] == 0.9 and opt.param_groups[2]["lr"] == 0.1
    a0, b0 = a.numpy().copy(), b.numpy().copy()
    a.grad = loom.ones(3)
    opt.param_groups[0]["lr"] = 0.25  # edits between steps are used, as in torch
    opt.step()
    np.testing.assert_allclose(a.numpy(), a0 - 0.25, rtol=1e-6)
    np.testing.assert_array_equal(b.numpy(), b0)  # no gradient: untouched
    assert b not in opt.state
    opt.zero_grad()
    assert a.grad is None
    a.grad = loom.ones(3)
    opt.zero_grad(set_to_none=False)
    np.testing.assert_array_equal(a.grad.numpy(), np.zeros(3))


def test_state_dict_round_trip_resumes_exactly(rng):
    init = rng.standard_normal((4, 4)).astype(np.float32)
    grads = [rng.standard_normal((4, 4)).astype(np.float32) for _ in range(6)]

    def run(ps, opt, gs):
        for g in gs:
            ps.grad = loom.tensor(g)
            opt.step()

    p = loom.tensor(init, requires_grad=True)
    opt = loom.optim.AdamW([p], lr=0.05, amsgrad=True)
    run(p, opt, grads)
    straight = p.numpy().copy()

    q = loom.tensor(init, requires_grad=True)
    opt1 = loom.optim.AdamW([q], lr=0.05, amsgrad=True)
    run(q, opt1, grads[:3])
    sd = opt1.state_dict()
    assert sorted(sd["state"][0]) == ["exp_avg", "exp_avg_sq", "max_exp_avg_sq", "step"]
    assert sd["param_groups"][0]["params"] == [0]
    r = loom.tensor(q.numpy(), requires_grad=True)
    opt2 = loom.optim.AdamW([r], lr=0.9, amsgrad=True)
    opt2.load_state_dict(sd)
    assert opt2.param_groups[0]["lr"] == 0.05
    run(r, opt2, grads[3:])
    np.testing.assert_array_equal(r.numpy(), straight)


def test_load_state_dict_mismatch_changes_nothing():
    p = loom.zeros(3, requires_grad=True)
    opt = loom.optim.Adam([p], lr=0.1)
    p.grad = loom.ones(3)
    opt.step()
    other = loom.optim.Adam([loom.zeros(4, requires_grad=True)], lr=0.3)
    other.param_groups[0]["params"][0].grad = loom.ones(4)
    other.step()
    before = dict(opt.state[p])
    with pytest.raises(ValueError, match="exp_avg.*shape"):
        opt.load_state_dict(other.state_dict())
    assert opt.param_groups[0]["lr"] == 0.1
    assert opt.state[p]["exp_avg"] is before["exp_avg"]
    with pytest.raises(ValueError, match="groups"):
        opt.load_state_dict({"state": {}, "param_groups": []})


def test_errors_name_the_optimizer():
    p = loom.zeros(2, requires_grad=True)
    with pytest.raises(ValueError, match="SGD: invalid learning rate: -1"):
        loom.optim.SGD([p], lr=-1)
    with pytest.raises(ValueError, match="Adam: invalid beta parameter at index 0"):
        loom.optim.Adam([p], betas=(1.0, 0.9))
    with pytest.raises(ValueError, match="nesterov"):
        loom.optim.SGD([p], lr=0.1, nesterov=True)
    with pytest.raises(ValueError, match="twice"):
        loom.optim.SGD([p, p], lr=0.1)
    with pytest.raises(ValueError, match="more than one parameter group"):
        loom.optim.SGD([{"params": [p]}, {"params": [p]}], lr=0.1)
    with pytest.raises(ValueError, match="non-leaf"):
        loom.optim.SGD([p * 2], lr=0.1)
    with pytest.raises(TypeError, match="int64"):
        loom.optim.SGD([loom.zeros(2, dtype=loom.int64)], lr=0.1)
    with pytest.raises(ValueError, match="empty"):
        loom.optim.Adam([])
    opt = loom.optim.AdamW([p])
    opt.param_groups[0]["eps"] = -1.0
    p.grad = loom.ones(2)
    with pytest.raises(ValueError, match="epsilon"):
        opt.step()
    assert p not in opt.state


def test_step_is_lazy_and_compiles_nothing_new_under_a_schedule(rng):
    w = loom.tensor(rng.standard_normal((8, 4)).astype(np.float32), requires_grad=True)
    x = loom.tensor(rng.standard_normal((16, 4)).astype(np.float32))
    opt = loom.optim.AdamW([w], lr=1e-2)
    warm = loom.optim.lr_scheduler.LinearLR(opt, start_factor=0.1, total_iters=3)
    cos = loom.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=5)
    sch = loom.optim.lr_scheduler.SequentialLR(opt, [warm, cos], milestones=[3])
    lrs = []
    for step in range(7):
        loom.reset_counters()
        loss = (x @ w.T).tanh().square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        assert loom.counters()["flushes"] == 0
        loss.item()
        c = loom.counters()
        assert c["flushes"] == 1
        if step >= 2:
            assert c["cache_misses"] == 0
        lrs.append(opt.param_groups[0]["lr"])
        sch.step()
    want = [1e-2 * (0.1 + 0.9 * t / 3) for t in range(3)] + \
        [1e-2 * (1 + math.cos(math.pi * t / 5)) / 2 for t in range(4)]
    assert lrs == pytest.approx(want)


def test_schedulers_closed_forms():
    p = loom.zeros(1, requires_grad=True)

    def lrs(make, n=8, lr=1.0):
        opt = loom.optim.SGD([p], lr=lr)
        s = make(opt)
        out = []
        for _ in range(n):
            out.append(opt.param_groups[0]["lr"])
            s.step()
        return out

    sched = loom.optim.lr_scheduler
    assert lrs(lambda o: sched.StepLR(o, 3, gamma=0.5)) == pytest.approx(
        [0.5 ** (t // 3) for t in range(8)])
    assert lrs(lambda o: sched.MultiStepLR(o, [2, 5], gamma=0.1)) == pytest.approx(
        [1, 1, 0.1, 0.1, 0.1, 0.01, 0.01, 0.01])
    assert lrs(lambda o: sched.ExponentialLR(o, 0.9)) == pytest.approx([0.9 ** t for t in range(8)])
    assert lrs(lambda o: sched.LambdaLR(o, lambda e: 1 / (e + 1))) == pytest.approx(
        [1 / (t + 1) for t in range(8)])
    assert lrs(lambda o: sched.CosineAnnealingLR(o, 4, eta_min=0.1)) == pytest.approx(
        [0.1 + 0.9 * (1 + math.cos(math.pi * t / 4)) / 2 for t in range(8)])


@needs_torch
def test_schedulers_match_torch():
    cases = [("StepLR", dict(step_size=2, gamma=0.3)), ("MultiStepLR", dict(milestones=[1, 4])),
             ("ExponentialLR", dict(gamma=0.8)), ("LinearLR", dict(start_factor=0.2, total_iters=4)),
             ("CosineAnnealingLR", dict(T_max=6, eta_min=0.01))]
    for name, kw in cases:
        lo = loom.optim.SGD([loom.zeros(1, requires_grad=True)], lr=0.5)
        to = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.5)
        ls = getattr(loom.optim.lr_scheduler, name)(lo, **kw)
        ts = getattr(torch.optim.lr_scheduler, name)(to, **kw)
        for _ in range(6):
            assert lo.param_groups[0]["lr"] == pytest.approx(to.param_groups[0]["lr"]), name
            to.step()
            ls.step()
            ts.step()
