"""Every op-table row from Python against numpy (float64 references), fused and unfused."""
import math

import mpmath
import numpy as np
import pytest

import loom
from helpers import check

N = 257  # odd, so no kernel sees only whole tiles

_erf = np.vectorize(math.erf)


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


# name -> (numpy reference on float64, input domain)
UNARY = {
    "neg": (np.negative, "any"),
    "abs": (np.abs, "any"),
    "sign": (np.sign, "any"),
    "square": (np.square, "any"),
    "relu": (lambda x: np.maximum(x, 0), "any"),
    "floor": (np.floor, "any"),
    "ceil": (np.ceil, "any"),
    "round": (np.round, "any"),
    "trunc": (np.trunc, "any"),
    "bitwise_not": (np.invert, "int"),
    "exp": (np.exp, "any"),
    "exp2": (np.exp2, "any"),
    "expm1": (np.expm1, "any"),
    "log": (np.log, "pos"),
    "log2": (np.log2, "pos"),
    "log1p": (np.log1p, "pos"),
    "sqrt": (np.sqrt, "pos"),
    "rsqrt": (lambda x: 1 / np.sqrt(x), "pos"),
    "reciprocal": (lambda x: 1 / x, "pos"),
    "sin": (np.sin, "any"),
    "cos": (np.cos, "any"),
    "tan": (np.tan, "unit"),
    "tanh": (np.tanh, "any"),
    "asin": (np.arcsin, "unit"),
    "acos": (np.arccos, "unit"),
    "atan": (np.arctan, "any"),
    "sinh": (np.sinh, "any"),
    "cosh": (np.cosh, "any"),
    "erf": (_erf, "any"),
    "sigmoid": (_sigmoid, "any"),
    "gelu": (lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2))), "any"),
    "gelu_tanh": (lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3))),
                  "any"),
    "silu": (lambda x: x * _sigmoid(x), "any"),
    "softplus": (lambda x: np.logaddexp(0, x), "any"),
    "isnan": (np.isnan, "special"),
    "isinf": (np.isinf, "special"),
    "isfinite": (np.isfinite, "special"),
    "logical_not": (np.logical_not, "any"),
    "log10": (np.log10, "pos"),
    "cbrt": (np.cbrt, "any"),
    "asinh": (np.arcsinh, "any"),
    "acosh": (np.arccosh, "ge1"),
    "atanh": (np.arctanh, "unit"),
    "erfc": (np.vectorize(math.erfc), "any"),
    "erfinv": (np.vectorize(lambda v: float(mpmath.erfinv(v))), "unit"),
    "lgamma": (np.vectorize(math.lgamma), "pos"),
    "digamma": (np.vectorize(lambda v: float(mpmath.digamma(v))), "pos"),
    "sinc": (np.sinc, "any"),
    "deg2rad": (np.deg2rad, "any"),
    "rad2deg": (np.rad2deg, "any"),
    "frac": (lambda x: x - np.trunc(x), "float"),
    "signbit": (np.signbit, "special"),
}

BINARY = {
    "add": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "div": np.true_divide,
    "floor_divide": np.floor_divide,
    "remainder": np.remainder,
    "pow": np.power,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "atan2": np.arctan2,
    "eq": np.equal,
    "ne": np.not_equal,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
    "logical_and": np.logical_and,
    "logical_or": np.logical_or,
    "logical_xor": np.logical_xor,
    "bitwise_and": np.bitwise_and,
    "bitwise_or": np.bitwise_or,
    "bitwise_xor": np.bitwise_xor,
    "bitwise_left_shift": np.left_shift,
    "bitwise_right_shift": np.right_shift,
    "hypot": np.hypot,
    "copysign": np.copysign,
    "nextafter": np.nextafter,
    "logaddexp": np.logaddexp,
    "logaddexp2": np.logaddexp2,
    "xlogy": lambda a, b: np.where(a == 0, 0.0, a * np.log(np.where(a == 0, 1, b))),
    "fmod": np.fmod,
}

REDUCE = {
    "sum": np.sum,
    "prod": np.prod,
    "amax": np.max,
    "amin": np.min,
    "argmax": np.argmax,
    "argmin": np.argmin,
    "any": np.any,
    "all": np.all,
}

TABLE = loom.op_table()


def test_every_table_row_has_a_reference():
    assert sorted(n for n, _ in TABLE["unary"]) == sorted(UNARY)
    assert sorted(n for n, _ in TABLE["binary"]) == sorted(BINARY)
    assert sorted(n for n, _ in TABLE["reduce"]) == sorted(REDUCE)


def _input(rng, domain, n=N):
    if domain == "pos":
        return rng.uniform(0.05, 4.0, n)
    if domain == "unit":
        return rng.uniform(-0.95, 0.95, n)
    if domain == "ge1":
        return rng.uniform(1.0, 5.0, n)
    if domain == "special":
        x = rng.normal(size=n) * 3
        x[::7], x[1::11], x[2::13] = np.nan, np.inf, -np.inf
        return x
    x = rng.normal(size=n) * 3
    x[::10] = np.round(x[::10]) + 0.5  # exact halves for round()
    return x


@pytest.mark.parametrize("name,kind", TABLE["unary"])
@pytest.mark.parametrize("dt", ["float32", "float64"])
def test_unary_float(fusion, rng, name, kind, dt):
    ref, domain = UNARY[name]
    if domain == "int":
        pytest.skip("integer-only op")
    x = _input(rng, domain).astype(dt)
    t = loom.tensor(x)
    want = ref(x.astype(np.float64))
    tol = 1e-12 if dt == "float64" else 2e-6
    if name in ("tan", "exp", "exp2", "sinh", "cosh"):
        tol *= 4
    out_dtype = loom.bool if kind == "BoolOut" else t.dtype
    check(getattr(loom, name)(t), want, rtol=tol, atol=tol, dtype=out_dtype)
    check(getattr(t, name)(), want, rtol=tol, atol=tol, dtype=out_dtype)


@pytest.mark.parametrize("name,kind", TABLE["unary"])
@pytest.mark.parametrize("dt", ["int32", "int64"])
def test_unary_int(fusion, rng, name, kind, dt):
    ref, domain = UNARY[name]
    if domain == "float":
        with pytest.raises(TypeError, match=name):
            getattr(loom, name)(loom.tensor(np.arange(3).astype(dt)))
        return
    x = rng.integers(1 if domain in ("pos", "ge1") else -50, 50, N).astype(dt)
    if domain == "unit":
        x = rng.integers(-1, 2, N).astype(dt)
    t = loom.tensor(x)
    want = ref(x.astype(np.int64) if kind == "Same" else x.astype(np.float64))
    out_dtype = {"Same": t.dtype, "FloatOut": loom.float32, "BoolOut": loom.bool}[kind]
    check(getattr(loom, name)(t), want, rtol=2e-6, atol=2e-6, dtype=out_dtype)


@pytest.mark.parametrize("name", ["exp", "sigmoid", "tanh", "neg", "abs", "sqrt"])
@pytest.mark.parametrize("dt", [loom.float16, loom.bfloat16])
def test_unary_reduced_float(fusion, rng, name, dt):
    x = _input(rng, UNARY[name][1]).astype(np.float32)
    t = loom.tensor(x, dtype=dt)
    x = t.float().numpy().astype(np.float64)  # the rounded inputs
    tol = 1e-3 if dt == loom.float16 else 8e-3
    check(getattr(loom, name)(t), UNARY[name][0](x), rtol=tol, atol=tol, dtype=dt)


def _binary_inputs(rng, name, dt):
    if dt in ("int32", "int64"):
        a = rng.integers(-20, 20, N).astype(dt)
        b = rng.integers(-20, 20, N).astype(dt)
        if name in ("floor_divide", "remainder", "div", "fmod"):
            b[b == 0] = 3
        if name in ("bitwise_left_shift", "bitwise_right_shift"):
            b = rng.integers(0, 10, N).astype(dt)
        if name == "xlogy":
            b[b <= 0] = 2
        if name == "pow":
            a, b = rng.integers(-4, 5, N).astype(dt), rng.integers(0, 5, N).astype(dt)
        return a, b
    a = rng.normal(size=N).astype(dt) * 3
    b = rng.normal(size=N).astype(dt) * 3
    b[::9] = a[::9]  # some equal pairs for comparisons
    if name == "pow":
        a = np.abs(a) + 0.1
    if name in ("div", "floor_divide", "remainder", "fmod"):
        b[np.abs(b) < 0.1] = 0.5
    if name == "xlogy":
        b = np.abs(b) + 0.1
    return a, b


@pytest.mark.parametrize("name,kind", TABLE["binary"])
@pytest.mark.parametrize("dt", ["float32", "float64", "int32", "int64"])
def test_binary(fusion, rng, name, kind, dt):
    if kind == "Bitwise" and dt.startswith("float"):
        pytest.skip("bitwise ops take integers")
    if kind == "Floating" and dt.startswith("int"):  # torch has no integer kernel for these
        ints = loom.tensor(np.arange(3).astype(dt))
        with pytest.raises(TypeError, match=name):
            getattr(loom, name)(ints, ints)
        return
    a, b = _binary_inputs(rng, name, dt)
    ta, tb = loom.tensor(a), loom.tensor(b)
    ref = BINARY[name]
    wide = np.float64 if dt.startswith("float") or kind == "TrueDiv" else np.int64
    want = ref(a.astype(wide), b.astype(wide))
    tol = 1e-12 if dt == "float64" else 4e-6
    if name == "floor_divide" and dt.startswith("float"):
        # floor(a / b) can land on the other side of an integer in float32.
        want = np.floor(a / b).astype(np.float64)
    out_dtype = {"Compare": loom.bool, "Logical": loom.bool}.get(kind, ta.dtype)
    if kind == "TrueDiv" and dt.startswith("int"):
        out_dtype = loom.float32
    fn = getattr(loom, name)
    check(fn(ta, tb), want, rtol=tol, atol=tol, dtype=out_dtype)
    check(getattr(ta, name)(tb), want, rtol=tol, atol=tol, dtype=out_dtype)
    # Python scalars on either side.
    s = 3 if dt.startswith("int") else 1.5
    check(fn(ta, s), ref(a.astype(wide), s), rtol=tol, atol=tol)
    if name != "pow" or dt.startswith("float"):
        check(fn(s, tb), ref(s, b.astype(wide)), rtol=tol, atol=tol)


@pytest.mark.parametrize("name", ["logical_and", "logical_or", "logical_xor", "bitwise_and",
                                  "bitwise_or", "bitwise_xor", "eq", "ne"])
def test_binary_bool(fusion, rng, name):
    a, b = rng.random(N) < 0.5, rng.random(N) < 0.5
    check(getattr(loom, name)(loom.tensor(a), loom.tensor(b)), BINARY[name](a, b),
          dtype=loom.bool)


def test_binary_broadcast(fusion, rng):
    a, b = rng.normal(size=(5, 1, 7)), rng.normal(size=(3, 1))
    check(loom.tensor(a) + loom.tensor(b), a + b, dtype=loom.float64)
    check(loom.tensor(a) * loom.tensor(b).T[:, :, None], a * b.T[:, :, None])


@pytest.mark.parametrize("name,kind", TABLE["reduce"])
@pytest.mark.parametrize("dim", [None, 0, 1, -1, (0, 2)])
@pytest.mark.parametrize("keepdim", [False, True])
def test_reduce(fusion, rng, name, kind, dim, keepdim):
    if kind == "Index" and isinstance(dim, tuple):
        pytest.skip("argmax/argmin take one dim")
    x = rng.normal(size=(6, 5, 7))
    if kind == "Bool":
        x = x > 0.8
    if name == "prod":
        x = 1 + 0.1 * x
    t = loom.tensor(x)
    ref = REDUCE[name]
    if kind == "Index" and dim is None:
        want = ref(x)
        if keepdim:
            want = np.reshape(want, (1, 1, 1))
    else:
        want = ref(x, axis=dim, keepdims=keepdim)
    r = getattr(loom, name)(t, dim, keepdim)
    check(r, want, rtol=1e-12, atol=1e-12)
    check(getattr(t, name)(dim=dim, keepdim=keepdim), want, rtol=1e-12, atol=1e-12)
    expected = {"Sum": loom.float64, "Keep": loom.float64, "Index": loom.int64,
                "Bool": loom.bool}[kind]
    assert r.dtype == expected


@pytest.mark.parametrize("dt", ["int32", "int8", "bool"])
def test_sum_of_integers_is_int64(fusion, rng, dt):
    x = rng.integers(0, 3, (4, 9)).astype(dt)
    check(loom.sum(loom.tensor(x), 1), x.astype(np.int64).sum(1), dtype=loom.int64)
    check(loom.tensor(x).sum(dtype=loom.int32), x.sum().astype(np.int32), dtype=loom.int32)


def test_float32_reductions_use_float64_reference(fusion, rng):
    x = rng.normal(size=(64, 300)).astype(np.float32)
    t = loom.tensor(x)
    ref = x.astype(np.float64)
    check(t.sum(1), ref.sum(1), rtol=1e-5, atol=1e-4)
    check(t.mean((0, 1)), ref.mean(), rtol=1e-5, atol=1e-6)
    check(t.var(1), ref.var(1, ddof=1), rtol=1e-4, atol=1e-5)
    check(t.std(0, correction=0), ref.std(0), rtol=1e-4, atol=1e-5)
    check(loom.logsumexp(t, 1), np.log(np.exp(ref).sum(1)), rtol=1e-5, atol=1e-5)
    check(t.norm(), np.linalg.norm(ref), rtol=1e-5)
    check(t.norm(1, dim=1), np.abs(ref).sum(1), rtol=1e-5)
    check(t.norm(float("inf"), dim=0), np.abs(ref).max(0), rtol=1e-6)
    check(t.cumsum(1), np.cumsum(ref, 1), rtol=1e-4, atol=1e-4)
    check(t.count_nonzero(1), np.count_nonzero(x, 1))


def test_max_min_torch_forms(fusion, rng):
    x = rng.normal(size=(4, 6))
    t = loom.tensor(x)
    check(t.max(), x.max())
    check(loom.min(t), x.min())
    v, i = t.max(1)
    check(v, x.max(1))
    check(i, x.argmax(1))
    r = loom.min(t, dim=0, keepdim=True)
    check(r.values, x.min(0, keepdims=True))
    check(r.indices, x.argmin(0)[None])
    y = rng.normal(size=(4, 6))
    check(t.max(loom.tensor(y)), np.maximum(x, y))


def _softmax(x, d):
    e = np.exp(x - x.max(d, keepdims=True))
    return e / e.sum(d, keepdims=True)


def test_composites(fusion, rng):
    x = rng.normal(size=(8, 33)).astype(np.float32)
    r = x.astype(np.float64)
    t = loom.tensor(x)
    check(loom.softmax(t, dim=-1), _softmax(r, -1), rtol=1e-5, atol=1e-6)
    check(t.softmax(0), _softmax(r, 0), rtol=1e-5, atol=1e-6)
    check(loom.log_softmax(t, 1), np.log(_softmax(r, 1)), rtol=1e-5, atol=1e-5)
    w, b = rng.normal(size=33).astype(np.float32), rng.normal(size=33).astype(np.float32)
    mu, var = r.mean(1, keepdims=True), r.var(1, keepdims=True)
    want = (r - mu) / np.sqrt(var + 1e-5) * w + b
    check(loom.layer_norm(t, (33,), loom.tensor(w), loom.tensor(b)), want, rtol=1e-4, atol=1e-4)
    check(loom.layer_norm(t, 33), (r - mu) / np.sqrt(var + 1e-5), rtol=1e-4, atol=1e-4)
    want = r / np.sqrt((r * r).mean(1, keepdims=True) + 1e-6) * w
    check(loom.rms_norm(t, [33], loom.tensor(w), eps=1e-6), want, rtol=1e-4, atol=1e-4)
    tgt = rng.integers(0, 33, 8)
    lp = np.log(_softmax(r, 1))
    check(loom.cross_entropy(t, loom.tensor(tgt)), -lp[np.arange(8), tgt].mean(), rtol=1e-5)
    check(loom.gelu(t, approximate="tanh"), UNARY["gelu_tanh"][0](r), rtol=1e-5, atol=1e-6)


def test_pointwise_extras(fusion, rng):
    a, b, c = (rng.normal(size=(3, 4)) for _ in range(3))
    ta, tb, tc = loom.tensor(a), loom.tensor(b), loom.tensor(c)
    check(loom.where(ta > 0, ta, tb), np.where(a > 0, a, b))
    check(loom.where(ta > 0, 1.0, tb), np.where(a > 0, 1.0, b))
    check(loom.where(ta > 0, ta, 0), np.where(a > 0, a, 0))
    check(loom.where(ta > 0, 1.0, -1.0), np.where(a > 0, 1.0, -1.0))
    check(loom.clamp(ta, -0.5, 0.5), np.clip(a, -0.5, 0.5))
    check(ta.clamp(min=0), np.maximum(a, 0))
    check(loom.clamp(ta, tb, tb + 1), np.minimum(np.maximum(a, b), b + 1))
    check(loom.lerp(ta, tb, 0.3), a + 0.3 * (b - a))
    check(loom.lerp(ta, tb, tc), a + c * (b - a))
    check(loom.addcmul(ta, tb, tc, value=0.5), a + 0.5 * b * c)
    check(loom.addcdiv(ta, tb, tc + 5), a + b / (c + 5))
    check(loom.add(ta, tb, alpha=2), a + 2 * b)
    check(loom.sub(ta, tb, alpha=2), a - 2 * b)
    check(ta.masked_fill(ta > 0, 0), np.where(a > 0, 0, a))


def test_matmul_cat_stack(fusion, rng):
    a, b = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 4, 5))
    ta, tb = loom.tensor(a), loom.tensor(b)
    check(ta @ tb, a @ b, rtol=1e-12)
    check(loom.bmm(ta, tb), a @ b, rtol=1e-12)
    check(loom.matmul(ta[0], tb[0][:, 0]), a[0] @ b[0][:, 0], rtol=1e-12)
    check(loom.mm(ta[1], tb[1]), a[1] @ b[1], rtol=1e-12)
    check(loom.cat([ta, ta * 2], dim=1), np.concatenate([a, a * 2], 1))
    check(loom.stack([ta, tb[:, :3, :4]], dim=-1), np.stack([a, b[:, :3, :4]], -1))


def test_dropout(fusion):
    loom.manual_seed(7)
    x = loom.ones(10000)
    y = loom.dropout(x, p=0.25).numpy()
    assert set(np.unique(y).tolist()) <= {0.0, float(np.float32(1.0 / 0.75))}
    assert abs((y == 0).mean() - 0.25) < 0.03
    assert loom.dropout(x, 0.5, training=False).numpy().min() == 1


def test_fused_equals_unfused_on_a_chain(rng):
    """Invariant 1: fusion changes float results by rounding only, integer results not at all."""
    x = rng.normal(size=(16, 50)).astype(np.float32)
    k = rng.integers(-100, 100, (16, 50))
    out = {}
    for on in (True, False):
        loom.set_fusion(on)
        t, ti = loom.tensor(x), loom.tensor(k)
        y = ((t * 2 - 1).exp().softmax(1) + t.sigmoid()).sum(0) / 3
        z = ((ti * 3 + 7) // 2 % 5 - ti.abs()).sum(1)
        out[on] = (y.numpy(), z.numpy())
    loom.set_fusion(True)
    np.testing.assert_allclose(out[True][0], out[False][0], rtol=1e-6)
    np.testing.assert_array_equal(out[True][1], out[False][1])
