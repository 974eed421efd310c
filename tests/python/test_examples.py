"""The training examples run end to end and reach their targets (the digits MLP: >= 97% on the
held-out images)."""
import importlib.util
import pathlib
import sys

import pytest

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"


def load(name):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_digits_mlp_reaches_97_percent(tmp_path, monkeypatch):
    pytest.importorskip("sklearn")
    png = tmp_path / "loss.png"
    monkeypatch.setattr(sys, "argv", ["train_digits.py", "--png", str(png)])
    acc = load("train_digits").main()
    assert acc >= 0.97
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return
    assert png.stat().st_size > 1000
