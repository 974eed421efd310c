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


def test_digits_notebook_runs_headless():
    # The notebook runs in a fresh kernel (the loom this test imports: its folder goes on the
    # kernel's path) and its last cell's value is the held-out accuracy.
    pytest.importorskip("sklearn")
    pytest.importorskip("matplotlib")
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    import os

    import loom

    nb = nbformat.read(EXAMPLES / "notebooks" / "digits.ipynb", as_version=4)
    loom_parent = str(pathlib.Path(loom.__file__).resolve().parents[1])
    env_path = os.environ.get("PYTHONPATH", "")
    os.environ["PYTHONPATH"] = loom_parent + (os.pathsep + env_path if env_path else "")
    try:
        nbclient.NotebookClient(nb, timeout=300, kernel_name="python3").execute()
    finally:
        if env_path:
            os.environ["PYTHONPATH"] = env_path
        else:
            del os.environ["PYTHONPATH"]
    last = nb.cells[-1]
    result = [o for o in last.outputs if o.output_type == "execute_result"]
    assert result, last.outputs
    accuracy = float(result[0]["data"]["text/plain"])
    assert accuracy >= 0.97
