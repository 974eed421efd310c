"""In-place updates of pending values keep eager order from Python, fused and fusion-off: a value
computed from x, then x updated in place, then that value updated in place with x as an operand
(the optimizer's shape). References are numpy on the same data; torch too where it is installed."""
import numpy as np
import pytest

import loom

try:
    import torch
except ImportError:  # optional peer
    torch = None

# (program, what numpy computes from x): each program takes a module with tensor() and returns y.
CASES = {
    "mul_": (lambda m, x: _mul(m, x), lambda a: (a * 2) * (a + 1)),
    "add_": (lambda m, x: _add(m, x), lambda a: (a * 2) + (a + 1)),
    "zero_": (lambda m, x: _zero(m, x), lambda a: a + 0),
    "div_ permute": (lambda m, x: _div(m, x), lambda a: (-0.25 * a) * (a / -3)),
    "sub_": (lambda m, x: _sub(m, x), lambda a: (a - 2.0) - (a * -1.5)),
}


def _mul(m, x):
    y = x * 2
    x.add_(1)
    return y.mul_(x)


def _add(m, x):
    y = x * 2
    x.add_(1)
    return y.add_(x)


def _zero(m, x):
    y = x + 0
    x.zero_()
    return y.add_(x)


def _div(m, x):
    y = -0.25 * x
    x.permute(1, 0).permute(1, 0).div_(-3)
    return y.mul_(x)


def _sub(m, x):
    y = x - 2.0
    x.mul_(-1.5)
    return y.sub_(x)


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_pending_value_updated_after_its_input(fusion, name, dtype):
    program, ref = CASES[name]
    a = np.array([[1.0, 2.0, -3.5], [0.25, 7.0, -1.0]], dtype=dtype)
    x = loom.tensor(a)
    loom.sync()
    y = program(loom, x)
    want = ref(a.astype(np.float64))
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-6, atol=0)
    if torch is not None:
        t = program(torch, torch.tensor(a))
        np.testing.assert_allclose(y.numpy(), t.numpy(), rtol=1e-6, atol=0)


def test_region_write_between_read_and_update(fusion):
    # y = a + b; b[:] = 2.25; y += b  (b written through a whole-tensor index)
    a = np.array([0.5, -1.0, 3.0], dtype=np.float32)
    b = np.array([1.5, 2.0, -4.0], dtype=np.float32)
    x, z = loom.tensor(a), loom.tensor(b)
    loom.sync()
    y = x + z
    z[:] = 2.25
    y.add_(z)
    np.testing.assert_allclose(y.numpy(), a + b + 2.25, rtol=1e-6)
    np.testing.assert_allclose(z.numpy(), np.full(3, 2.25, np.float32))
