"""loom.nn: Module semantics, layers, losses, init and gradient clipping, checked against
numpy float64 references and finite differences, and (where torch is importable) against
torch.nn given the same weights."""
import math
from collections import OrderedDict

import numpy as np
import pytest

import loom
from loom import nn
from loom.nn import functional as F
from loom.nn import init

try:
    import torch
except ImportError:  # CI has no torch: the comparisons skip
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")


def _np(t):
    return t.detach().numpy().astype(np.float64)


def _set(param, array):
    with loom.no_grad():
        param.copy_(loom.tensor(np.asarray(array), dtype=param.dtype))


def _mlp(dtype=loom.float32, p=0.0):
    return nn.Sequential(nn.Linear(5, 8, dtype=dtype), nn.LayerNorm(8, dtype=dtype),
                         nn.GELU(), nn.Dropout(p), nn.Linear(8, 8, dtype=dtype), nn.Tanh(),
                         nn.Linear(8, 3, dtype=dtype))


# ---- Parameter ---------------------------------------------------------------------


def test_parameter_is_a_leaf_sharing_memory():
    x = loom.ones(3, requires_grad=True)
    data = x * 2  # a non-leaf: the Parameter must be cut from its graph
    p = nn.Parameter(data)
    assert isinstance(p, loom.Tensor) and isinstance(p, nn.Parameter)
    assert p.is_leaf and p.requires_grad and p.grad_fn is None
    assert p.data_ptr() == data.data_ptr()
    (p * p).sum().backward()
    np.testing.assert_allclose(p.grad.numpy(), [4, 4, 4])
    assert x.grad is None
    q = nn.Parameter(loom.zeros(2), requires_grad=False)
    assert not q.requires_grad
    assert tuple(nn.Parameter().shape) == (0,)
    assert repr(q).startswith("Parameter containing:\ntensor(")
    assert str(p).startswith("Parameter containing:\n")
    assert repr(p).endswith("requires_grad=True)")
    assert type(p * 2) is loom.Tensor  # ops on a parameter are plain tensors


def test_deepcopy_gives_an_independent_model():
    import copy

    a = nn.Sequential(nn.Linear(3, 2), nn.Linear(2, 2))
    b = copy.deepcopy(a)
    assert isinstance(b[0].weight, nn.Parameter) and b[0].weight.requires_grad
    assert b[0].weight.data_ptr() != a[0].weight.data_ptr()
    np.testing.assert_array_equal(b[0].weight.numpy(), a[0].weight.numpy())
    with loom.no_grad():
        a[0].weight.mul_(2)
    assert not np.array_equal(b[0].weight.numpy(), a[0].weight.numpy())
    tied = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
    tied[1].weight = tied[0].weight
    copied = copy.deepcopy(tied)
    assert copied[1].weight is copied[0].weight  # sharing survives the copy


# ---- Linear forward ----------------------------------------------------------------


@pytest.mark.parametrize("bias", [True, False])
def test_linear_forward_matches_numpy(fusion, rng, bias):
    lin = nn.Linear(7, 5, bias=bias)
    assert tuple(lin.weight.shape) == (5, 7)
    assert (lin.bias is None) == (not bias)
    x = rng.standard_normal((2, 3, 7)).astype(np.float32)
    y = lin(loom.tensor(x))
    assert tuple(y.shape) == (2, 3, 5)
    ref = x.astype(np.float64) @ _np(lin.weight).T
    if bias:
        ref = ref + _np(lin.bias)
    np.testing.assert_allclose(y.numpy(), ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(F.linear(loom.tensor(x), lin.weight, lin.bias).numpy(), ref,
                               rtol=1e-5, atol=1e-5)


def test_linear_float64_and_errors(rng):
    lin = nn.Linear(4, 3, dtype=loom.float64)
    assert lin.weight.dtype == loom.float64 and lin.bias.dtype == loom.float64
    x = rng.standard_normal((6, 4))
    np.testing.assert_allclose(lin(loom.tensor(x)).numpy(),
                               x @ _np(lin.weight).T + _np(lin.bias), rtol=1e-12)
    with pytest.raises(RuntimeError, match=r"Linear\(in_features=4.*\[6, 5\].*expected 4"):
        lin(loom.randn(6, 5, dtype=loom.float64))
    with pytest.raises(RuntimeError, match=r"linear: input shape \[2, 3\].*\[3, 4\]"):
        F.linear(loom.randn(2, 3), loom.randn(3, 4))
    with pytest.raises(RuntimeError, match="LayerNorm.*trailing shape \\[8\\].*\\[2, 7\\]"):
        nn.LayerNorm(8)(loom.randn(2, 7))


# ---- gradients ---------------------------------------------------------------------


def test_mlp_gradients_match_finite_differences(fusion, rng):
    loom.manual_seed(3)
    model = nn.Sequential(nn.Linear(3, 4, dtype=loom.float64), nn.LayerNorm(4, dtype=loom.float64),
                          nn.GELU(), nn.Linear(4, 4, dtype=loom.float64), nn.SiLU(),
                          nn.Linear(4, 2, dtype=loom.float64))
    # Move the norm's affine parameters off ones/zeros so their gradients are generic.
    _set(model[1].weight, rng.uniform(0.5, 1.5, 4))
    _set(model[1].bias, rng.uniform(-0.5, 0.5, 4))
    x = loom.tensor(rng.standard_normal((5, 3)))
    target = loom.tensor(rng.standard_normal((5, 2)))

    def loss_value():
        return F.mse_loss(model(x), target)

    loss = loss_value()
    loss.backward()
    eps = 1e-6
    for name, p in model.named_parameters():
        analytic = p.grad.numpy()
        base = p.detach().numpy().copy()
        numeric = np.zeros_like(base)
        for idx in np.ndindex(base.shape):
            for sign in (1, -1):
                moved = base.copy()
                moved[idx] += sign * eps
                _set(p, moved)
                with loom.no_grad():
                    numeric[idx] += sign * loss_value().item() / (2 * eps)
        _set(p, base)
        np.testing.assert_allclose(analytic, numeric, rtol=1e-5, atol=1e-8, err_msg=name)


def test_zero_grad_modes():
    lin = nn.Linear(3, 2)
    lin(loom.ones(4, 3)).sum().backward()
    assert lin.weight.grad is not None
    lin.zero_grad(set_to_none=False)
    np.testing.assert_array_equal(lin.weight.grad.numpy(), np.zeros((2, 3)))
    np.testing.assert_array_equal(lin.bias.grad.numpy(), np.zeros(2))
    lin(loom.ones(4, 3)).sum().backward()
    np.testing.assert_allclose(lin.bias.grad.numpy(), [4, 4])  # accumulates onto the zeros
    lin.zero_grad()
    assert lin.weight.grad is None and lin.bias.grad is None


# ---- registration and traversal ----------------------------------------------------


class _Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(4, 3)
        self.mid = nn.ReLU()
        self.dec = nn.Linear(3, 4, bias=False)
        self.again = self.enc  # the same module reachable twice
        self.scale = nn.Parameter(loom.ones(1))
        self.register_buffer("steps", loom.zeros(1, dtype=loom.int64))
        self.register_buffer("scratch", loom.zeros(2), persistent=False)

    def forward(self, x):
        return self.dec(self.mid(self.enc(x))) * self.scale


def test_named_parameters_order_and_dedupe():
    m = _Tied()
    names = [n for n, _ in m.named_parameters()]
    assert names == ["scale", "enc.weight", "enc.bias", "dec.weight"]
    all_names = [n for n, _ in m.named_parameters(remove_duplicate=False)]
    assert all_names == ["scale", "enc.weight", "enc.bias", "dec.weight", "again.weight",
                         "again.bias"]
    assert [n for n, _ in m.named_parameters(recurse=False)] == ["scale"]
    assert [n for n, _ in m.named_parameters(prefix="model")][0] == "model.scale"
    assert len(list(m.parameters())) == 4
    # Tied weights: one Parameter registered on two modules is listed once.
    m.dec.weight = nn.Parameter(loom.zeros(4, 3))
    m.enc.weight = m.dec.weight
    assert [n for n, _ in m.named_parameters()] == ["scale", "enc.weight", "enc.bias"]
    assert [n for n, _ in m.named_children()] == ["enc", "mid", "dec"]
    assert [n for n, _ in m.named_modules()] == ["", "enc", "mid", "dec"]
    assert len(list(m.modules())) == 4 and len(list(m.children())) == 3
    assert [n for n, _ in m.named_buffers()] == ["steps", "scratch"]
    assert m.get_submodule("enc") is m.enc and m.get_parameter("dec.weight") is m.dec.weight


def test_setattr_getattr_delattr():
    m = _Tied()
    assert "scale" in m._parameters and "scale" not in m.__dict__
    assert "enc" in m._modules and "steps" in m._buffers
    with pytest.raises(TypeError, match="parameter 'scale'"):
        m.scale = loom.ones(1)  # a plain tensor cannot replace a parameter
    m.scale = None
    assert m.scale is None and "scale" not in dict(m.named_parameters())
    m.steps = loom.ones(1, dtype=loom.int64)
    assert m._buffers["steps"] is m.steps
    with pytest.raises(TypeError, match="buffer 'steps'"):
        m.steps = 3
    with pytest.raises(TypeError, match="child module 'mid'"):
        m.mid = 3
    m.plain = 5
    assert m.plain == 5 and "plain" in m.__dict__
    with pytest.raises(KeyError, match="already exists"):
        m.register_buffer("plain", loom.ones(1))
    with pytest.raises(KeyError, match="contain"):
        m.register_parameter("a.b", None)
    with pytest.raises(TypeError, match="Parameter or None"):
        m.register_parameter("w", loom.ones(1))
    del m.dec
    assert "dec" not in m._modules
    with pytest.raises(AttributeError, match="'_Tied' object has no attribute 'dec'"):
        m.dec
    assert {"enc", "steps", "scale", "forward"} <= set(dir(m))
    m.enc = nn.Parameter(loom.ones(2))  # a name moves from modules to parameters
    assert "enc" not in m._modules and "enc" in m._parameters

    class NoInit(nn.Module):
        def __init__(self):
            self.w = nn.Parameter(loom.ones(1))

    with pytest.raises(AttributeError, match="before Module.__init__"):
        NoInit()
    with pytest.raises(NotImplementedError, match="forward"):
        nn.Module()(loom.ones(1))


def test_to_and_dtype_casts():
    m = _Tied()
    m.enc.weight.requires_grad_(False)
    assert m.double() is m
    assert m.enc.weight.dtype == loom.float64 and isinstance(m.enc.weight, nn.Parameter)
    assert not m.enc.weight.requires_grad and m.enc.bias.requires_grad
    assert m.again.weight is m.enc.weight
    assert m.steps.dtype == loom.int64  # integer buffers keep their dtype
    assert m.scratch.dtype == loom.float64
    m.to(dtype=loom.float32)
    assert m.dec.weight.dtype == loom.float32
    m.to(loom.float16)
    assert m.dec.weight.dtype == loom.float16
    m.float()
    assert m.to("cpu") is m and m.cpu() is m and str(m.dec.weight.device) == "cpu"
    with pytest.raises(TypeError, match="floating point"):
        m.to(loom.int32)
    lin = nn.Linear(2, 2)
    lin(loom.ones(1, 2)).sum().backward()
    lin.double()
    assert lin.weight.grad.dtype == loom.float64  # gradients follow the conversion
    seen = []
    assert m.apply(lambda mod: seen.append(type(mod).__name__)) is m
    assert seen == ["Linear", "ReLU", "Linear", "_Tied"]


def test_requires_grad_and_train_eval_flags():
    m = nn.Sequential(nn.Linear(2, 2), nn.Sequential(nn.Dropout(), nn.ReLU()))
    assert all(mod.training for mod in m.modules())
    assert m.eval() is m
    assert not any(mod.training for mod in m.modules())
    m.train()
    assert all(mod.training for mod in m.modules())
    with pytest.raises(ValueError, match="boolean"):
        m.train("no")
    m.requires_grad_(False)
    assert not any(p.requires_grad for p in m.parameters())


# ---- state_dict --------------------------------------------------------------------


def test_state_dict_round_trip(fusion, rng):
    loom.manual_seed(0)
    a = _Tied()
    with loom.no_grad():
        a.steps.fill_(7)
    sd = a.state_dict()
    assert isinstance(sd, OrderedDict)
    assert list(sd) == ["scale", "steps", "enc.weight", "enc.bias", "dec.weight",
                        "again.weight", "again.bias"]
    assert "scratch" not in sd  # non-persistent
    assert all(not v.requires_grad and not isinstance(v, nn.Parameter) for v in sd.values())
    assert isinstance(a.state_dict(keep_vars=True)["scale"], nn.Parameter)
    loom.manual_seed(1)
    b = _Tied()
    x = loom.tensor(rng.standard_normal((3, 4)).astype(np.float32))
    assert not np.allclose(a(x).numpy(), b(x).numpy())
    result = b.load_state_dict(sd)
    assert result.missing_keys == [] and result.unexpected_keys == []
    np.testing.assert_array_equal(a(x).numpy(), b(x).numpy())
    assert b.steps.item() == 7
    assert isinstance(b.enc.weight, nn.Parameter) and b.enc.weight.requires_grad
    with loom.no_grad():  # a copy, not an alias
        a.enc.weight.mul_(2)
    assert not np.allclose(a.enc.weight.numpy(), b.enc.weight.numpy())


def test_load_state_dict_errors_leave_model_unchanged():
    m = nn.Sequential(nn.Linear(3, 2), nn.LayerNorm(2))
    before = {k: v.numpy().copy() for k, v in m.state_dict().items()}
    good = {k: v + 1 for k, v in m.state_dict().items()}

    def unchanged():
        for k, v in m.state_dict().items():
            np.testing.assert_array_equal(v.numpy(), before[k])

    missing = dict(good)
    del missing["1.bias"]
    with pytest.raises(RuntimeError, match=r'for Sequential:\s+Missing key\(s\) in state_dict: "1.bias"'):
        m.load_state_dict(missing)
    unchanged()
    extra = dict(good, **{"2.weight": loom.ones(2)})
    with pytest.raises(RuntimeError, match=r'Unexpected key\(s\) in state_dict: "2.weight"'):
        m.load_state_dict(extra)
    unchanged()
    wrong = dict(good, **{"0.weight": loom.ones(2, 4)})
    with pytest.raises(RuntimeError,
                       match=r"size mismatch for 0.weight: .*\[2, 4\] .*\[2, 3\]"):
        m.load_state_dict(wrong)
    unchanged()
    with pytest.raises(RuntimeError, match="size mismatch"):  # even when not strict
        m.load_state_dict(wrong, strict=False)
    unchanged()
    result = m.load_state_dict(dict(missing, **{"x": loom.ones(1)}), strict=False)
    assert result.missing_keys == ["1.bias"] and result.unexpected_keys == ["x"]
    np.testing.assert_array_equal(m[0].weight.numpy(), before["0.weight"] + 1)
    np.testing.assert_array_equal(m[1].bias.numpy(), before["1.bias"])


# ---- containers --------------------------------------------------------------------


def test_sequential_indexing_and_ordereddict():
    layers = [nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)]
    s = nn.Sequential(*layers)
    assert len(s) == 3 and list(s) == layers and s[-1] is layers[2]
    head = s[:2]
    assert isinstance(head, nn.Sequential) and list(head) == layers[:2]
    x = loom.randn(5, 3)
    np.testing.assert_allclose(s(x).numpy(), layers[2](layers[1](layers[0](x))).numpy(),
                               rtol=1e-6)
    s.append(nn.Tanh())
    assert len(s) == 4 and isinstance(s[3], nn.Tanh)
    del s[1]
    assert [n for n, _ in s.named_children()] == ["0", "1", "2"]
    with pytest.raises(IndexError, match="out of range"):
        s[5]
    named = nn.Sequential(OrderedDict([("fc", nn.Linear(2, 2)), ("act", nn.ReLU())]))
    assert [n for n, _ in named.named_parameters()] == ["fc.weight", "fc.bias"]
    assert isinstance(named[1], nn.ReLU)


def test_modulelist_and_moduledict():
    ml = nn.ModuleList([nn.Linear(2, 2) for _ in range(2)])
    ml.append(nn.ReLU())
    ml.extend([nn.Tanh()])
    ml.insert(1, nn.Sigmoid())
    assert [type(m).__name__ for m in ml] == ["Linear", "Sigmoid", "Linear", "ReLU", "Tanh"]
    assert len(ml) == 5 and isinstance(ml[1:3], nn.ModuleList) and len(ml[1:3]) == 2
    assert [n for n, _ in ml.named_parameters()] == ["0.weight", "0.bias", "2.weight", "2.bias"]
    del ml[0]
    assert [n for n, _ in ml.named_parameters()] == ["1.weight", "1.bias"]

    class Holder(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList([nn.Linear(2, 2)])
            self.heads = nn.ModuleDict({"a": nn.Linear(2, 1), "b": nn.Identity()})

    h = Holder()
    assert [n for n, _ in h.named_parameters()] == ["blocks.0.weight", "blocks.0.bias",
                                                     "heads.a.weight", "heads.a.bias"]
    assert list(h.heads) == ["a", "b"] and "a" in h.heads and len(h.heads) == 2
    h.heads["c"] = nn.ReLU()
    assert list(h.heads.keys()) == ["a", "b", "c"]
    assert isinstance(h.heads.pop("b"), nn.Identity) and list(h.heads) == ["a", "c"]


# ---- hooks and repr ----------------------------------------------------------------


def test_forward_hooks():
    lin = nn.Linear(2, 2)
    calls = []
    pre = lin.register_forward_pre_hook(lambda m, args: (args[0] * 0,))
    post = lin.register_forward_hook(lambda m, args, out: calls.append(m) or out + 1)
    out = lin(loom.ones(3, 2))
    # Input zeroed by the pre-hook, so out = bias + 1.
    np.testing.assert_allclose(out.numpy(), np.broadcast_to(_np(lin.bias) + 1, (3, 2)),
                               rtol=1e-6)
    assert calls == [lin]
    pre.remove()
    post.remove()
    x = loom.ones(3, 2)
    np.testing.assert_allclose(lin(x).numpy(), F.linear(x, lin.weight, lin.bias).numpy())
    assert calls == [lin]
    seen = []
    kw = lin.register_forward_hook(lambda m, a, k, o: seen.append(sorted(k)), with_kwargs=True)
    lin(input=x)
    kw.remove()
    assert seen == [["input"]]
    order = []
    lin.register_forward_pre_hook(lambda m, a: order.append("second"))
    lin.register_forward_pre_hook(lambda m, a: order.append("first"), prepend=True)
    lin(x)
    assert order == ["first", "second"]


def test_repr_strings():
    assert repr(nn.Linear(64, 32)) == "Linear(in_features=64, out_features=32, bias=True)"
    assert repr(nn.Linear(2, 3, bias=False)) == "Linear(in_features=2, out_features=3, bias=False)"
    model = nn.Sequential(nn.Linear(4, 8), nn.Sequential(nn.GELU(), nn.Dropout(0.1)),
                          nn.LayerNorm(8))
    lines = repr(model).split("\n")
    assert lines[0] == "Sequential("
    assert lines[1] == "  (0): " + repr(model[0])
    assert lines[2] == "  (1): Sequential("
    assert lines[3] == "    (0): GELU(approximate='none')"
    assert lines[4] == "    (1): Dropout(p=0.1, inplace=False)"
    assert lines[5] == "  )"
    assert lines[6] == "  (2): LayerNorm((8,), eps=1e-05, elementwise_affine=True, bias=True)"
    assert lines[7] == ")"
    assert repr(nn.ReLU()) == "ReLU()" and repr(nn.Softmax(dim=-1)) == "Softmax(dim=-1)"
    assert repr(nn.MSELoss()) == "MSELoss()"


# ---- dropout -----------------------------------------------------------------------


@pytest.mark.parametrize("p", [0.2, 0.5])
def test_dropout_train_and_eval(fusion, p):
    loom.manual_seed(5)
    d = nn.Dropout(p)
    x = loom.ones(200, 500)
    y = d(x).numpy()
    zero_frac = (y == 0).mean()
    assert abs(zero_frac - p) < 0.01
    np.testing.assert_allclose(y[y != 0], 1 / (1 - p), rtol=1e-6)
    d.eval()
    np.testing.assert_array_equal(d(x).numpy(), x.numpy())
    np.testing.assert_array_equal(F.dropout(x, p, training=False).numpy(), x.numpy())
    for bad in (-0.1, 1.5):
        with pytest.raises(ValueError, match="between 0 and 1"):
            nn.Dropout(bad)
        with pytest.raises(ValueError, match="between 0 and 1"):
            F.dropout(x, bad)


# ---- init --------------------------------------------------------------------------


def test_fans_and_gain():
    assert init._calculate_fan_in_and_fan_out(loom.empty(5, 3)) == (3, 5)
    assert init._calculate_fan_in_and_fan_out(loom.empty(8, 4, 3, 2)) == (24, 48)
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        init._calculate_fan_in_and_fan_out(loom.empty(4))
    assert init.calculate_gain("relu") == pytest.approx(math.sqrt(2))
    assert init.calculate_gain("tanh") == pytest.approx(5 / 3)
    assert init.calculate_gain("leaky_relu", 0.2) == pytest.approx(math.sqrt(2 / 1.04))
    assert init.calculate_gain("leaky_relu") == pytest.approx(math.sqrt(2 / 1.0001))
    assert init.calculate_gain("sigmoid") == 1 and init.calculate_gain("conv2d") == 1
    with pytest.raises(ValueError, match="Unsupported nonlinearity"):
        init.calculate_gain("swish")


def test_init_distributions():
    loom.manual_seed(11)
    w = loom.empty(400, 300)
    assert init.kaiming_uniform_(w, a=0, nonlinearity="relu") is w
    bound = math.sqrt(2) * math.sqrt(3 / 300)
    a = w.numpy()
    assert np.abs(a).max() <= bound and np.abs(a).max() > 0.99 * bound
    assert abs(a.mean()) < 0.01 * bound and abs(a.var() - bound ** 2 / 3) < 0.02 * bound ** 2
    init.kaiming_normal_(w, mode="fan_out", nonlinearity="relu")
    assert abs(w.numpy().std() - math.sqrt(2 / 400)) < 0.01 * math.sqrt(2 / 400)
    init.xavier_uniform_(w, gain=2.0)
    xb = 2.0 * math.sqrt(6 / 700)
    assert np.abs(w.numpy()).max() <= xb and np.abs(w.numpy()).max() > 0.99 * xb
    init.xavier_normal_(w)
    assert abs(w.numpy().std() - math.sqrt(2 / 700)) < 0.01 * math.sqrt(2 / 700)
    init.normal_(w, mean=3.0, std=0.5)
    assert abs(w.numpy().mean() - 3.0) < 0.005 and abs(w.numpy().std() - 0.5) < 0.005
    init.uniform_(w, -2.0, 1.0)
    assert w.numpy().min() >= -2.0 and w.numpy().max() < 1.0
    assert abs(w.numpy().mean() + 0.5) < 0.01
    init.trunc_normal_(w, std=1.0, a=-1.0, b=0.5)
    assert w.numpy().min() >= -1.0 and w.numpy().max() <= 0.5
    init.constant_(w, 0.25)
    assert np.all(w.numpy() == 0.25)
    init.ones_(w)
    assert np.all(w.numpy() == 1)
    init.zeros_(w)
    assert np.all(w.numpy() == 0)
    p = nn.Parameter(loom.empty(3, 4))
    init.normal_(p)
    assert p.is_leaf and p.requires_grad and p.grad_fn is None  # written outside autograd


def test_init_reproducible_with_manual_seed():
    def draw():
        loom.manual_seed(42)
        lin = nn.Linear(20, 10)
        t = init.normal_(loom.empty(50))
        return lin.weight.numpy().copy(), lin.bias.numpy().copy(), t.numpy().copy()

    first, second = draw(), draw()
    for u, v in zip(first, second):
        np.testing.assert_array_equal(u, v)
    loom.manual_seed(43)
    assert not np.array_equal(nn.Linear(20, 10).weight.numpy(), first[0])


def test_linear_and_layernorm_default_init():
    loom.manual_seed(2)
    lin = nn.Linear(256, 128)
    bound = 1 / math.sqrt(256)
    w, b = lin.weight.numpy(), lin.bias.numpy()
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.98 * bound
    assert np.abs(b).max() <= bound and np.abs(b).max() > 0.9 * bound
    assert abs(w.var() - bound ** 2 / 3) < 0.05 * bound ** 2
    ln = nn.LayerNorm((4, 6))
    assert tuple(ln.weight.shape) == (4, 6)
    assert np.all(ln.weight.numpy() == 1) and np.all(ln.bias.numpy() == 0)
    assert nn.LayerNorm(4, bias=False).bias is None
    plain = nn.LayerNorm(4, elementwise_affine=False)
    assert plain.weight is None and list(plain.parameters()) == []
    assert np.all(nn.RMSNorm(5).weight.numpy() == 1)


# ---- norms and losses vs numpy -----------------------------------------------------


def test_norm_layers_match_numpy(fusion, rng):
    x = rng.standard_normal((3, 4, 6))
    ln = nn.LayerNorm(6, eps=1e-5, dtype=loom.float64)
    _set(ln.weight, rng.standard_normal(6))
    _set(ln.bias, rng.standard_normal(6))
    mu = x.mean(-1, keepdims=True)
    ref = (x - mu) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) * _np(ln.weight) + _np(ln.bias)
    np.testing.assert_allclose(ln(loom.tensor(x)).numpy(), ref, rtol=1e-10, atol=1e-12)
    rms = nn.RMSNorm(6, eps=1e-6, dtype=loom.float64)
    _set(rms.weight, rng.standard_normal(6))
    ref = x / np.sqrt((x ** 2).mean(-1, keepdims=True) + 1e-6) * _np(rms.weight)
    np.testing.assert_allclose(rms(loom.tensor(x)).numpy(), ref, rtol=1e-10, atol=1e-12)


def test_activations_match_numpy(rng):
    x = rng.standard_normal((4, 5)) * 3
    t = loom.tensor(x)
    from math import erf
    gelu_ref = x * 0.5 * (1 + np.vectorize(erf)(x / math.sqrt(2)))
    checks = [
        (nn.ReLU(), np.maximum(x, 0)), (nn.GELU(), gelu_ref),
        (nn.GELU("tanh"), 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))),
        (nn.SiLU(), x / (1 + np.exp(-x))), (nn.Tanh(), np.tanh(x)),
        (nn.Sigmoid(), 1 / (1 + np.exp(-x))), (nn.Identity(), x),
        (nn.Softplus(), np.log1p(np.exp(x))),
        (nn.Softplus(beta=2.0, threshold=1.0), np.where(2 * x > 1, x, np.log1p(np.exp(2 * x)) / 2)),
        (nn.Softmax(dim=1), np.exp(x) / np.exp(x).sum(1, keepdims=True)),
        (nn.LogSoftmax(dim=-1), x - np.log(np.exp(x).sum(-1, keepdims=True))),
        (nn.Flatten(0), x.reshape(-1)),
    ]
    for layer, ref in checks:
        np.testing.assert_allclose(layer(t).numpy(), ref, rtol=1e-10, atol=1e-12,
                                   err_msg=repr(layer))
    with pytest.raises(ValueError, match="approximate"):
        nn.GELU("fast")


def test_losses_match_numpy(fusion, rng):
    x = rng.standard_normal((6, 4))
    y = rng.standard_normal((6, 4))
    tx, ty = loom.tensor(x), loom.tensor(y)
    for reduction, fn in (("mean", np.mean), ("sum", np.sum), ("none", lambda a: a)):
        np.testing.assert_allclose(nn.MSELoss(reduction)(tx, ty).numpy(), fn((x - y) ** 2),
                                   rtol=1e-12)
        np.testing.assert_allclose(F.l1_loss(tx, ty, reduction=reduction).numpy(),
                                   fn(np.abs(x - y)), rtol=1e-12)
    with pytest.raises(ValueError, match="reduction"):
        nn.MSELoss("avg")
    labels = rng.integers(0, 4, size=6)
    logp = x - np.log(np.exp(x).sum(1, keepdims=True))
    ce_ref = -logp[np.arange(6), labels].mean()
    target = loom.tensor(labels.astype(np.int64))
    np.testing.assert_allclose(nn.CrossEntropyLoss()(tx, target).item(), ce_ref, rtol=1e-10)
    np.testing.assert_allclose(F.cross_entropy(tx[0], target[0]).item(),
                               -logp[0, labels[0]], rtol=1e-10)
    np.testing.assert_allclose(nn.CrossEntropyLoss(reduction="sum")(tx, target).item(),
                               ce_ref * 6, rtol=1e-10)
    np.testing.assert_allclose(nn.NLLLoss()(loom.tensor(logp), target).item(), ce_ref,
                               rtol=1e-10)
    # (the options' semantics: tests/python/test_losses.py)
    # Binary cross entropy on logits, including logits large enough to overflow exp.
    logits = np.concatenate([rng.standard_normal(8) * 3, [100.0, -100.0, 800.0, -800.0]])
    z = rng.integers(0, 2, size=logits.shape).astype(np.float64)
    ref = np.maximum(logits, 0) - logits * z + np.log1p(np.exp(-np.abs(logits)))
    got = F.binary_cross_entropy_with_logits(loom.tensor(logits), loom.tensor(z),
                                             reduction="none").numpy()
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, ref, rtol=1e-10, atol=1e-12)
    pw = rng.uniform(0.5, 2.0, size=logits.shape)
    w = rng.uniform(0.5, 2.0, size=logits.shape)
    sig = 1 / (1 + np.exp(-logits[:8]))
    ref_pw = -(pw[:8] * z[:8] * np.log(sig) + (1 - z[:8]) * np.log(1 - sig)) * w[:8]
    got_pw = nn.BCEWithLogitsLoss(weight=loom.tensor(w[:8]), pos_weight=loom.tensor(pw[:8]),
                                  reduction="sum")(loom.tensor(logits[:8]), loom.tensor(z[:8]))
    np.testing.assert_allclose(got_pw.item(), ref_pw.sum(), rtol=1e-10)


# ---- gradient clipping ---------------------------------------------------------------


def _params_with_grads(rng, dtype=loom.float32):
    ps = [nn.Parameter(loom.tensor(rng.standard_normal(s), dtype=dtype))
          for s in ((4, 3), (5,), (2, 2, 2))]
    for p in ps:
        p.grad = loom.tensor(rng.standard_normal(tuple(p.shape)) * 3, dtype=dtype)
    return ps, [p.grad.numpy().astype(np.float64) for p in ps]


@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, math.inf])
def test_clip_grad_norm_matches_numpy_without_flushing(rng, norm_type):
    ps, grads = _params_with_grads(rng)
    flat = np.concatenate([g.ravel() for g in grads])
    total_ref = np.abs(flat).max() if math.isinf(norm_type) else \
        (np.abs(flat) ** norm_type).sum() ** (1 / norm_type)
    max_norm = 0.5 * total_ref
    loom.sync()
    loom.reset_counters()
    total = nn.utils.clip_grad_norm_(ps, max_norm, norm_type=norm_type)
    after = loom.counters()
    assert after["flushes"] == 0 and after["kernels"] == 0, after
    assert isinstance(total, loom.Tensor) and total.ndim == 0
    np.testing.assert_allclose(total.item(), total_ref, rtol=1e-5)
    scale = max_norm / (total_ref + 1e-6)
    for p, g in zip(ps, grads):
        np.testing.assert_allclose(p.grad.numpy(), g * scale, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("norm_type", [2.0, math.inf, -math.inf, 0.0, 0.5])
def test_total_norm_of_many_tensors_takes_a_kernel_each_and_a_few(rng, norm_type):
    # One reduction a tensor, then their parts combined in a few fused kernels: no kernel a
    # tensor to gather the per-tensor results (a stack of them took one copy each).
    gs = [loom.tensor(rng.standard_normal(s)).to(loom.float32)
          for s in [(40, 30), (30,), (7, 7, 7)] * 10]
    loom.sync()
    flat = np.concatenate([g.numpy().ravel() for g in gs]).astype(np.float64)
    loom.reset_counters()
    total = nn.utils.get_total_norm(gs, norm_type)
    got = total.item()
    assert loom.counters()["kernels"] <= len(gs) + 4, loom.counters()
    assert total.dtype == loom.float32
    np.testing.assert_allclose(got, np.linalg.norm(flat, norm_type), rtol=2e-5)


def test_clip_grad_norm_below_max_and_value_clip(rng):
    ps, grads = _params_with_grads(rng, dtype=loom.float64)
    total_ref = math.sqrt(sum((g ** 2).sum() for g in grads))
    total = nn.utils.clip_grad_norm_(iter(ps), total_ref * 2)  # a generator is fine too
    np.testing.assert_allclose(total.item(), total_ref, rtol=1e-12)
    for p, g in zip(ps, grads):
        np.testing.assert_array_equal(p.grad.numpy(), g)  # scale clamped to 1
    single = nn.utils.clip_grad_norm_(ps[1], 1e-3)
    np.testing.assert_allclose(single.item(), np.linalg.norm(grads[1]), rtol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(ps[1].grad.numpy()), 1e-3, rtol=1e-5)
    ps, grads = _params_with_grads(rng)
    nn.utils.clip_grad_value_(ps, 1.5)
    for p, g in zip(ps, grads):
        np.testing.assert_allclose(p.grad.numpy(), np.clip(g, -1.5, 1.5), rtol=1e-6)
    nan = nn.Parameter(loom.ones(2))
    nan.grad = loom.tensor([float("nan"), 1.0])
    with pytest.raises(RuntimeError, match="non-finite"):
        nn.utils.clip_grad_norm_([nan], 1.0, error_if_nonfinite=True)
    assert nn.utils.clip_grad_norm_([nn.Parameter(loom.ones(2))], 1.0).item() == 0.0


# ---- against torch -----------------------------------------------------------------


def _torch_mlp(model):
    """torch's twin of _mlp(), with the loom model's weights copied in via numpy."""
    tm = torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.LayerNorm(8), torch.nn.GELU(),
                             torch.nn.Dropout(0.0), torch.nn.Linear(8, 8), torch.nn.Tanh(),
                             torch.nn.Linear(8, 3))
    sd = {k: torch.from_numpy(v.numpy().copy()) for k, v in model.state_dict().items()}
    tm.load_state_dict(sd)
    return tm


@needs_torch
@pytest.mark.parametrize("dropout_mode", ["p0", "eval"])
def test_mlp_forward_and_gradients_match_torch(fusion, rng, dropout_mode):
    loom.manual_seed(9)
    model = _mlp(p=0.0 if dropout_mode == "p0" else 0.7)
    _set(model[1].weight, rng.uniform(0.5, 1.5, 8))
    _set(model[1].bias, rng.uniform(-0.5, 0.5, 8))
    if dropout_mode == "eval":
        model.eval()
    tm = _torch_mlp(model)
    assert [n for n, _ in model.named_parameters()] == [n for n, _ in tm.named_parameters()]
    x = rng.standard_normal((16, 5)).astype(np.float32)
    labels = rng.integers(0, 3, size=16)
    out = model(loom.tensor(x))
    loss = F.cross_entropy(out, loom.tensor(labels.astype(np.int64)))
    loss.backward()
    tout = tm(torch.from_numpy(x))
    tloss = torch.nn.functional.cross_entropy(tout, torch.from_numpy(labels))
    tloss.backward()
    np.testing.assert_allclose(out.detach().numpy(), tout.detach().numpy(), atol=1e-4, rtol=1e-3)
    np.testing.assert_allclose(loss.item(), tloss.item(), atol=1e-4, rtol=1e-3)
    for (name, p), (_, tp) in zip(model.named_parameters(), tm.named_parameters()):
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), atol=1e-4, rtol=1e-3,
                                   err_msg=name)
    # Clipping agrees too.
    total = nn.utils.clip_grad_norm_(model.parameters(), 0.1)
    ttotal = torch.nn.utils.clip_grad_norm_(tm.parameters(), 0.1)
    np.testing.assert_allclose(total.item(), ttotal.item(), rtol=1e-4)
    for p, tp in zip(model.parameters(), tm.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), atol=1e-5, rtol=1e-3)


@needs_torch
def test_losses_and_functional_match_torch(rng):
    x = rng.standard_normal((6, 4)).astype(np.float32) * 4
    y = rng.standard_normal((6, 4)).astype(np.float32)
    z = (rng.random((6, 4)) > 0.5).astype(np.float32)
    tf = torch.nn.functional
    lx, ly, lz = loom.tensor(x), loom.tensor(y), loom.tensor(z)
    tx, ty, tz = torch.from_numpy(x), torch.from_numpy(y), torch.from_numpy(z)
    pairs = [
        (F.mse_loss(lx, ly, reduction="sum"), tf.mse_loss(tx, ty, reduction="sum")),
        (F.l1_loss(lx, ly), tf.l1_loss(tx, ty)),
        (F.binary_cross_entropy_with_logits(lx, lz), tf.binary_cross_entropy_with_logits(tx, tz)),
        (F.binary_cross_entropy_with_logits(lx, lz, pos_weight=loom.full((4,), 2.0)),
         tf.binary_cross_entropy_with_logits(tx, tz, pos_weight=torch.full((4,), 2.0))),
        (F.softplus(lx, beta=2.0, threshold=3.0), tf.softplus(tx, beta=2.0, threshold=3.0)),
        (F.gelu(lx, approximate="tanh"), tf.gelu(tx, approximate="tanh")),
        (F.log_softmax(lx, dim=0), tf.log_softmax(tx, dim=0)),
        (F.rms_norm(lx, (4,)), tf.rms_norm(tx, (4,))),
    ]
    for got, want in pairs:
        np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-5, rtol=1e-4)


@needs_torch
def test_default_init_and_repr_match_torch():
    torch.manual_seed(0)
    loom.manual_seed(0)
    for fan_in, fan_out in ((64, 32), (300, 7)):
        lin, tlin = nn.Linear(fan_in, fan_out), torch.nn.Linear(fan_in, fan_out)
        assert repr(lin) == repr(tlin)
        for ours, theirs in ((lin.weight, tlin.weight), (lin.bias, tlin.bias)):
            a, b = ours.numpy(), theirs.detach().numpy()
            assert a.shape == b.shape and a.dtype == b.dtype
            bound = 1 / math.sqrt(fan_in)
            assert np.abs(a).max() <= bound and np.abs(b).max() <= bound
            if a.size >= 1000:  # enough draws that both fill the range and share its variance
                assert abs(np.abs(a).max() - np.abs(b).max()) < 0.01 * bound
                assert abs(a.var() - b.var()) < 0.1 * bound ** 2 / 3
    ln, tln = nn.LayerNorm(10), torch.nn.LayerNorm(10)
    np.testing.assert_array_equal(ln.weight.numpy(), tln.weight.detach().numpy())
    np.testing.assert_array_equal(ln.bias.numpy(), tln.bias.detach().numpy())
    model = _mlp(p=0.1)
    tmodel = torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.LayerNorm(8), torch.nn.GELU(),
                                 torch.nn.Dropout(0.1), torch.nn.Linear(8, 8), torch.nn.Tanh(),
                                 torch.nn.Linear(8, 3))
    assert repr(model) == repr(tmodel)
    assert list(model.state_dict()) == list(tmodel.state_dict())
    for ours, theirs in ((nn.RMSNorm(4), torch.nn.RMSNorm(4)), (nn.Softmax(1), torch.nn.Softmax(1)),
                         (nn.Flatten(), torch.nn.Flatten()), (nn.SiLU(), torch.nn.SiLU()),
                         (nn.Softplus(), torch.nn.Softplus()), (nn.Identity(), torch.nn.Identity()),
                         (nn.LayerNorm(3, bias=False), torch.nn.LayerNorm(3, bias=False)),
                         (nn.ReLU(inplace=True), torch.nn.ReLU(inplace=True)),
                         (nn.CrossEntropyLoss(), torch.nn.CrossEntropyLoss()),
                         (nn.LayerNorm((2, 3), elementwise_affine=False),
                          torch.nn.LayerNorm((2, 3), elementwise_affine=False))):
        assert repr(ours) == repr(theirs)
    p, tp = nn.Parameter(loom.ones(2)), torch.nn.Parameter(torch.ones(2))
    assert repr(p) == repr(tp)
    assert init.calculate_gain("leaky_relu", 0.3) == pytest.approx(
        torch.nn.init.calculate_gain("leaky_relu", 0.3))
    w = loom.empty(6, 5, 3)
    assert init._calculate_fan_in_and_fan_out(w) == \
        torch.nn.init._calculate_fan_in_and_fan_out(torch.empty(6, 5, 3))


def test_embedding_layer(fusion, rng):
    loom.manual_seed(5)
    emb = nn.Embedding(10, 4, padding_idx=2)
    w = emb.weight.numpy().copy()
    np.testing.assert_array_equal(w[2], np.zeros(4))  # the padding row starts at zero
    assert 0.5 < w[[0, 1, 3, 4, 5, 6, 7, 8, 9]].std() < 1.5  # N(0, 1) as torch's
    idx = rng.integers(0, 10, (3, 5))
    idx[0, 0] = 2
    out = emb(loom.tensor(idx))
    assert list(out.shape) == [3, 5, 4]
    np.testing.assert_array_equal(out.numpy(), w[idx])
    g = rng.standard_normal((3, 5, 4))
    (out * loom.tensor(g.astype(np.float32))).sum().backward()
    want = np.zeros_like(w, dtype=np.float64)
    np.add.at(want, idx.reshape(-1), g.reshape(-1, 4))
    want[2] = 0  # padding_idx: no gradient
    np.testing.assert_allclose(emb.weight.grad.numpy(), want, rtol=1e-5, atol=1e-6)
    assert repr(emb) == "Embedding(10, 4, padding_idx=2)"
    frozen = nn.Embedding.from_pretrained(loom.tensor(w))
    assert not frozen.weight.requires_grad
    with pytest.raises(ValueError, match="padding_idx"):
        nn.Embedding(3, 2, padding_idx=5)


def test_to_keeps_tied_parameters_tied():
    # A weight shared by two modules stays one Parameter after to() / float() / double(), so
    # its gradient is not split and an optimizer updates it once.
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(5, 3)
            self.head = nn.Linear(3, 5, bias=False)
            self.emb.weight = self.head.weight

    for convert in (lambda m: m.to("cpu"), lambda m: m.double(), lambda m: m.float()):
        m = convert(Tied())
        assert m.emb.weight is m.head.weight
        assert len(list(m.parameters())) == 1


def test_to_keeps_parameter_objects_and_data_assignment(rng):
    m = nn.Linear(3, 2)
    w = m.weight
    opt = loom.optim.SGD(m.parameters(), lr=0.1)
    m.double()
    assert m.weight is w and w.dtype == loom.float64 and w.requires_grad and w.is_leaf
    x = loom.tensor(rng.standard_normal((4, 3)))
    m(x).sum().backward()
    assert w.grad.dtype == loom.float64
    before = w.numpy().copy()
    opt.step()  # the optimizer built before double() updates the converted parameter
    np.testing.assert_allclose(w.numpy(), before - 0.1 * w.grad.numpy(), rtol=1e-12)
    # t.data = other: new memory for this tensor, its graph flags kept.
    p = loom.zeros(3, requires_grad=True)
    p.data = loom.ones(2, 2)
    assert list(p.shape) == [2, 2] and p.requires_grad and p.is_leaf
    np.testing.assert_array_equal(p.data.numpy(), np.ones((2, 2)))
    assert not p.data.requires_grad
    with pytest.raises(TypeError, match="set_data"):
        p.data = loom.zeros(2, dtype=loom.int64)
