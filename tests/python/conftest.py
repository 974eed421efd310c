"""Shared fixtures: every test that takes `fusion` runs fused and with fusion off (the oracle)."""
import numpy as np
import pytest

import loom


@pytest.fixture(params=[True, False], ids=["fused", "unfused"])
def fusion(request):
    before = loom.fusion_enabled()
    loom.set_fusion(request.param)
    yield request.param
    loom.set_fusion(before)


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
