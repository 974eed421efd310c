"""Type promotion against torch's documented rules (torch.result_type / promote_types).

Categories bool < integer < floating. Same category: the wider type wins (float16 with
bfloat16 gives float32). A higher category wins regardless of size. Dimensioned tensors
dominate 0-d tensors and Python scalars of the same category; a 0-d tensor of a higher
category gives its own dtype, a Python scalar of a higher category the default dtype of
its category (float32 / int64). Integers of mixed signedness, where torch has no rule for the
newer unsigned types, follow the array API's lattice (uint8 with int8 is int16 in both).
"""
import itertools

import pytest

import loom

b, u8, i8, i32, i64 = loom.bool, loom.uint8, loom.int8, loom.int32, loom.int64
f16, bf16, f32, f64 = loom.float16, loom.bfloat16, loom.float32, loom.float64

PAIRS = [
    (b, b, b), (b, u8, u8), (b, i32, i32), (b, f16, f16),
    (u8, i8, loom.int16), (u8, i32, i32), (i8, i64, i64), (i32, i64, i64),
    (i32, f16, f16), (i64, f16, f16), (i64, bf16, bf16), (u8, f32, f32), (i64, f32, f32),
    (f16, bf16, f32), (f16, f32, f32), (bf16, f32, f32), (bf16, f64, f64), (f32, f64, f64),
]


@pytest.mark.parametrize("x,y,want", PAIRS)
def test_tensor_tensor(x, y, want):
    assert loom.promote_types(x, y) == want
    assert loom.promote_types(y, x) == want
    a, c = loom.ones(3, dtype=x), loom.ones(3, dtype=y)
    assert loom.result_type(a, c) == want
    assert (a + c).dtype == want if want != b else (a | c).dtype == b


@pytest.mark.parametrize("t,s,want", [
    (i32, 5, i32), (i8, 1000, i8), (u8, 1, u8), (i32, 2.5, f32), (i64, 2.5, f32),
    (f16, 2.5, f16), (bf16, 1e10, bf16), (f64, 2, f64), (b, 1, i64), (b, 1.5, f32),
    (b, True, b), (i32, True, i32), (f32, True, f32),
])
def test_tensor_scalar(t, s, want):
    x = loom.ones(3, dtype=t)
    assert loom.result_type(x, s) == want
    assert loom.result_type(s, x) == want
    op = loom.logical_or if want == b else loom.mul
    assert op(x, s).dtype == want
    assert op(s, x).dtype == want


@pytest.mark.parametrize("dim_t,zero_t,want", [
    (i32, i64, i32),   # same category: the dimensioned tensor wins
    (f16, f64, f16),
    (i32, f64, f64),   # higher category 0-d: its own dtype
    (u8, f16, f16),
    (b, i32, i32),
])
def test_zero_dim(dim_t, zero_t, want):
    a, z = loom.ones(3, dtype=dim_t), loom.ones((), dtype=zero_t)
    assert loom.result_type(a, z) == want
    assert (a * z).dtype == want
    assert (z * a).dtype == want


def test_op_kinds():
    i = loom.arange(4)
    assert (i / 2).dtype == f32          # true division of integers is float
    assert (i // 2).dtype == i64
    assert loom.exp(i).dtype == f32      # FloatOut ops on integers
    assert loom.abs(i).dtype == i64      # Same ops keep the dtype
    assert loom.isnan(i).dtype == b
    assert (i < 2).dtype == b
    assert loom.atan2(i, i).dtype == f32
    assert loom.mean(i.float()).dtype == f32
    assert loom.sum(loom.ones(3, dtype=b)).dtype == i64
    assert loom.sum(loom.ones(3, dtype=f16)).dtype == f16


def test_every_pair_is_symmetric():
    dts = [b, u8, i8, i32, i64, f16, bf16, f32, f64]
    for x, y in itertools.product(dts, dts):
        assert loom.promote_types(x, y) == loom.promote_types(y, x)
