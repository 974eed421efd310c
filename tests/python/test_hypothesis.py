"""Property tests against numpy: broadcasting, basic indexing (get and set), reductions."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import loom
from helpers import check

FAST = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
shapes = hnp.array_shapes(min_dims=0, max_dims=4, min_side=0, max_side=5)


def data_for(shape, seed):
    return np.random.default_rng(seed).normal(size=shape)


@FAST
@given(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=4, max_side=4),
       st.sampled_from(["add", "mul", "maximum", "lt", "atan2"]), st.integers(0, 2**16))
def test_broadcasting(shapes, op, seed):
    (sa, sb), out = shapes
    a, b = data_for(sa, seed), data_for(sb, seed + 1)
    r = getattr(loom, op)(loom.tensor(a), loom.tensor(b))
    ref = {"add": np.add, "mul": np.multiply, "maximum": np.maximum, "lt": np.less,
           "atan2": np.arctan2}[op](a, b)
    assert r.shape == out
    check(r, ref, rtol=1e-12, atol=1e-12)


@FAST
@given(shapes, shapes)
def test_incompatible_shapes_raise(sa, sb):
    try:
        np.broadcast_shapes(sa, sb)
    except ValueError:
        with pytest.raises(ValueError):
            loom.ones(sa) + loom.ones(sb)
    else:
        assert (loom.ones(sa) + loom.ones(sb)).shape == np.broadcast_shapes(sa, sb)


@st.composite
def indexed(draw):
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=6))
    idx = draw(hnp.basic_indices(shape, allow_newaxis=True, allow_ellipsis=True))
    return shape, idx


@FAST
@given(indexed(), st.integers(0, 2**16))
def test_getitem(case, seed):
    shape, idx = case
    a = data_for(shape, seed)
    t = loom.tensor(a)
    check(t[idx], a[idx])
    check(t[idx] * 2, a[idx] * 2)


@FAST
@given(indexed(), st.integers(0, 2**16))
def test_setitem(case, seed):
    shape, idx = case
    a = data_for(shape, seed)
    t = loom.tensor(a)
    v = data_for(np.shape(a[idx]), seed + 1)
    t[idx] = loom.tensor(v)
    a[idx] = v
    check(t, a)
    t[idx] = -3.0
    a[idx] = -3.0
    check(t, a)


@st.composite
def reduced(draw):
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=6))
    dims = draw(st.none() | st.lists(st.integers(-len(shape), len(shape) - 1), min_size=1,
                                      max_size=len(shape), unique_by=lambda d: d % len(shape)))
    return shape, dims


@FAST
@given(reduced(), st.sampled_from(["sum", "mean", "amax", "amin", "prod", "any", "var"]),
       st.booleans(), st.integers(0, 2**16), st.booleans())
def test_reductions(case, op, keepdim, seed, fused):
    shape, dims = case
    loom.set_fusion(fused)
    try:
        a = data_for(shape, seed)
        axis = None if dims is None else tuple(dims)
        t = loom.tensor(a)
        if op == "any":
            r, ref = loom.any(t > 0.5, axis, keepdim), np.any(a > 0.5, axis=axis, keepdims=keepdim)
        elif op == "var":
            n = a.size if axis is None else np.prod([shape[d] for d in axis])
            if n < 2:
                return
            r, ref = loom.var(t, axis, keepdim=keepdim), np.var(a, axis=axis, ddof=1,
                                                               keepdims=keepdim)
        else:
            ref = {"sum": np.sum, "mean": np.mean, "amax": np.max, "amin": np.min,
                   "prod": np.prod}[op](a, axis=axis, keepdims=keepdim)
            r = getattr(loom, op)(t, axis, keepdim)
        check(r, ref, rtol=1e-10, atol=1e-10)
    finally:
        loom.set_fusion(True)


@FAST
@given(hnp.array_shapes(min_dims=1, max_dims=3, max_side=5), st.integers(0, 2**16))
def test_pointwise_chain_fused_equals_unfused(shape, seed):
    a = data_for(shape, seed).astype(np.float32)
    out = []
    for fused in (True, False):
        loom.set_fusion(fused)
        t = loom.tensor(a)
        out.append(((t * 1.5 + 1).relu().exp() - t.abs().sqrt()).sum(-1, keepdim=True).numpy())
    loom.set_fusion(True)
    np.testing.assert_allclose(out[0], out[1], rtol=2e-6, atol=1e-6)
