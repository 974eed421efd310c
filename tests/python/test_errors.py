"""loom::Error maps to ValueError / TypeError / IndexError / RuntimeError / MemoryError by its
kind, carrying loom's message (op, shapes, reason), at the call site, not at a sync point."""
import numpy as np
import pytest

import loom


def test_value_errors_name_the_op_and_shapes():
    with pytest.raises(ValueError, match=r"add: shapes \[2, 3\] and \[4\]"):
        loom.ones(2, 3) + loom.ones(4)
    with pytest.raises(ValueError, match="matmul"):
        loom.ones(2, 3) @ loom.ones(2, 3)
    with pytest.raises(ValueError, match="reshape"):
        loom.ones(6).reshape(4, 2)
    with pytest.raises(ValueError, match="cat"):
        loom.cat([loom.ones(2, 3), loom.ones(3, 2)])
    with pytest.raises(ValueError, match="layer_norm"):
        loom.layer_norm(loom.ones(2, 3), [4])
    with pytest.raises(ValueError, match="negative|invalid"):
        loom.zeros(-1)
    with pytest.raises(ValueError, match="item"):
        loom.ones(3).item()


def test_type_errors():
    with pytest.raises(TypeError, match="bitwise_and"):
        loom.ones(2) & loom.ones(2)
    with pytest.raises(TypeError, match="mean"):
        loom.arange(3).mean()
    with pytest.raises(TypeError, match="matmul"):
        loom.ones(2, 2) @ loom.ones(2, 2, dtype=loom.float64)
    with pytest.raises(TypeError, match="where"):
        loom.where(loom.ones(2), loom.ones(2), loom.ones(2))
    with pytest.raises(TypeError):  # bad argument types are TypeErrors too (nanobind)
        loom.exp("x")
    with pytest.raises(TypeError):
        loom.ones(2, dtype="nonsense")
    with pytest.raises(TypeError, match="from_dlpack"):
        loom.from_dlpack([1, 2])


def test_index_errors():
    with pytest.raises(IndexError, match="select"):
        loom.ones(3)[3]
    with pytest.raises(IndexError, match="dim"):
        loom.ones(2, 3).sum(dim=2)
    with pytest.raises(IndexError):
        loom.softmax(loom.ones(2), dim=1)
    # the target's range is checked with the work and raised at the next sync point
    loss = loom.cross_entropy(loom.ones(2, 3), loom.tensor([0, 3]))
    with pytest.raises(IndexError, match=r"cross_entropy.*\[0, 3\).*\[2, 3\]"):
        loss.item()
    assert np.isfinite(loss.item())  # computed, and read once the error is out


def test_integer_division_by_zero():
    a = loom.tensor([7, -7, 9])
    b = loom.tensor([2, 0, 4])
    q = a // b  # no sync at the call: the divisor's values are checked with the work
    with pytest.raises(ValueError, match="floor_divide: integer division by zero"):
        loom.sync()
    assert q.tolist() == [3, 0, 2]
    with pytest.raises(ValueError, match="remainder.*division by zero"):
        (a % b).tolist()
    with pytest.raises(ValueError, match="division by zero"):
        a // 0
    assert (a.float() // b).tolist()[1] == float("-inf")


def test_runtime_errors():
    if not loom.cuda_is_available():
        with pytest.raises(RuntimeError, match="not available"):
            loom.ones(2).to("cuda")
    with pytest.raises(ValueError, match="device"):
        loom.device("tpu")


def test_memory_error_kind_maps_to_memory_error():
    with pytest.raises(MemoryError):
        # A huge allocation fails when it is made (at the sync point) with MemoryError.
        loom.empty(1 << 60, dtype=loom.uint8).fill_(1).sum().item()


def test_errors_raise_at_the_call_not_at_sync():
    x = loom.ones(3) * 2  # pending
    with pytest.raises(ValueError):
        x + loom.ones(4)
    assert x.sum().item() == 6  # the failed call left nothing broken
