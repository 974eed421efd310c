"""loom.save / loom.load: safetensors checkpoints of module and optimizer state, nested state,
malformed files, and files the safetensors package and torch read and write."""
import json
import os
import struct

import numpy as np
import pytest

import loom
import loom.nn as nn

try:
    import safetensors.numpy as st_numpy
except ImportError:
    st_numpy = None
try:
    import torch
    import safetensors.torch as st_torch
except ImportError:
    torch = st_torch = None

needs_safetensors = pytest.mark.skipif(st_numpy is None, reason="safetensors is not installed")
needs_torch = pytest.mark.skipif(st_torch is None, reason="torch or safetensors is not installed")


def header_of(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n))


def assert_same(a, b):
    assert isinstance(a, loom.Tensor) and isinstance(b, loom.Tensor)
    assert a.dtype == b.dtype and tuple(a.shape) == tuple(b.shape)
    if a.dtype == loom.bfloat16:  # numpy has no bfloat16; the cast to float32 is exact
        a, b = a.float(), b.float()
    np.testing.assert_array_equal(a.numpy(), b.numpy())


def make_model():
    return nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.LayerNorm(16), nn.Linear(16, 3))


def test_module_state_dict_round_trip(tmp_path):
    model = make_model()
    path = tmp_path / "model.safetensors"
    loom.save(model.state_dict(), path)
    loaded = loom.load(path)
    sd = model.state_dict()
    assert sorted(loaded) == sorted(sd)
    for k in sd:
        assert_same(loaded[k], sd[k])
    # Stored under exactly the state_dict's names, with no structure of loom's own.
    header = header_of(path)
    assert sorted(k for k in header if k != "__metadata__") == sorted(sd)
    assert "__metadata__" not in header

    fresh = make_model()
    fresh.load_state_dict(loaded)
    x = loom.tensor(np.random.default_rng(0).standard_normal((5, 6)).astype(np.float32))
    np.testing.assert_array_equal(fresh(x).detach().numpy(), model(x).detach().numpy())


def test_strict_load_state_dict_unchanged(tmp_path):
    model = make_model()
    path = tmp_path / "model.safetensors"
    sd = dict(model.state_dict())
    del sd["0.bias"]
    sd["extra"] = loom.zeros(2)
    loom.save(sd, path)
    loaded = loom.load(path)
    fresh = make_model()
    before = fresh.state_dict()["0.weight"].numpy().copy()
    with pytest.raises(RuntimeError, match='(?s)Missing key.*"0.bias".*Unexpected key.*"extra"'):
        fresh.load_state_dict(loaded)
    np.testing.assert_array_equal(fresh.state_dict()["0.weight"].numpy(), before)
    missing, unexpected = fresh.load_state_dict(loaded, strict=False)
    assert missing == ["0.bias"] and unexpected == ["extra"]
    np.testing.assert_array_equal(fresh.state_dict()["0.weight"].numpy(),
                                  model.state_dict()["0.weight"].numpy())


def test_training_resumes_bit_identically(tmp_path):
    rng = np.random.default_rng(7)
    xs = [loom.tensor(rng.standard_normal((8, 6)).astype(np.float32)) for _ in range(7)]
    ys = [loom.tensor(rng.integers(0, 3, 8)) for _ in range(7)]

    def train(model, opt, batches):
        for x, y in batches:
            loss = loom.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            loss.item()  # a sync a step, as a training loop's logging has

    def fresh(seed):
        loom.manual_seed(seed)
        model = nn.Sequential(nn.Linear(6, 10), nn.Tanh(), nn.Linear(10, 3))
        return model, loom.optim.AdamW(model.parameters(), lr=0.02, betas=(0.8, 0.95),
                                       weight_decay=0.1)

    straight, opt = fresh(1)
    train(straight, opt, zip(xs, ys))

    model, opt = fresh(1)
    train(model, opt, list(zip(xs, ys))[:4])
    path = tmp_path / "ckpt.safetensors"
    loom.save({"model": model.state_dict(), "optim": opt.state_dict(), "step": 4}, path)

    resumed, opt2 = fresh(2)  # other weights, to be overwritten
    ckpt = loom.load(path)
    assert ckpt["step"] == 4
    resumed.load_state_dict(ckpt["model"])
    opt2.load_state_dict(ckpt["optim"])
    # The straight run's step 5 starts a flush of its own (the loss is read each step); so must
    # the resumed one's, rather than share one with the copies into the weights: a fused plan
    # may round differently where a trace starts elsewhere.
    loom.sync()
    assert opt2.param_groups[0]["betas"] == (0.8, 0.95)
    assert opt2.state[opt2.param_groups[0]["params"][0]]["step"] == 4
    train(resumed, opt2, list(zip(xs, ys))[4:])
    for (name, a), (_, b) in zip(straight.state_dict().items(), resumed.state_dict().items()):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=name)
    # Without the optimizer's state the run differs: the comparison above can tell.
    lost, opt3 = fresh(2)
    lost.load_state_dict(ckpt["model"])
    train(lost, opt3, list(zip(xs, ys))[4:])
    assert not np.array_equal(lost.state_dict()["0.weight"].numpy(),
                              straight.state_dict()["0.weight"].numpy())


def test_optimizer_state_dict_structure(tmp_path):
    p = loom.randn(3, 2, requires_grad=True)
    q = loom.randn(4, requires_grad=True)
    opt = loom.optim.AdamW([{"params": [p]}, {"params": [q], "lr": 0.5}], amsgrad=True)
    p.grad, q.grad = loom.ones(3, 2), loom.ones(4)
    opt.step()
    sd = opt.state_dict()
    path = tmp_path / "optim.safetensors"
    loom.save(sd, path)
    got = loom.load(path)
    assert set(got) == {"state", "param_groups"}
    assert sorted(got["state"]) == [0, 1]  # integer keys come back as ints
    assert got["param_groups"] == [
        {k: v for k, v in g.items()} for g in sd["param_groups"]]
    assert isinstance(got["param_groups"][0]["betas"], tuple)
    for i in (0, 1):
        assert got["state"][i]["step"] == 1 and type(got["state"][i]["step"]) is int
        for k in ("exp_avg", "exp_avg_sq", "max_exp_avg_sq"):
            assert_same(got["state"][i][k], sd["state"][i][k])
    names = sorted(k for k in header_of(path) if k != "__metadata__")
    assert "state.0.exp_avg" in names and "state.1.max_exp_avg_sq" in names


def test_nested_structure_preserved(tmp_path):
    t = loom.arange(6).reshape(2, 3)
    obj = {
        "a": [t, (1, 2.5, "x"), None, True, {"deep": {3: t.float(), (1, "k"): "tuple key"}}],
        "a.0": loom.ones(2),  # the dotted name "a.0" is also the list's first tensor's
        7: {"nan": float("nan"), "inf": float("-inf"), "big": 2**70, "empty": {}, "l": []},
        None: "none key",
        "tensors_in_tuple": (loom.zeros(1, dtype=loom.bool), loom.tensor(3.5)),
    }
    path = tmp_path / "nested.safetensors"
    loom.save(obj, path, metadata={"author": "test"})
    got = loom.load(path)
    assert list(got) == list(obj)
    assert_same(got["a"][0], t)
    assert got["a"][1] == (1, 2.5, "x") and type(got["a"][1][0]) is int
    assert got["a"][2] is None and got["a"][3] is True
    assert_same(got["a"][4]["deep"][3], t.float())
    assert got["a"][4]["deep"][(1, "k")] == "tuple key"
    assert_same(got["a.0"], loom.ones(2))
    assert np.isnan(got[7]["nan"]) and got[7]["inf"] == float("-inf")
    assert got[7]["big"] == 2**70
    assert got[7]["empty"] == {} and got[7]["l"] == []
    assert got[None] == "none key"
    assert isinstance(got["tensors_in_tuple"], tuple)
    assert_same(got["tensors_in_tuple"][0], loom.zeros(1, dtype=loom.bool))
    assert_same(got["tensors_in_tuple"][1], loom.tensor(3.5))
    tensors, meta = loom._load_file(os.fspath(path))
    assert meta["author"] == "test"
    assert len(tensors) == 5


def test_save_refuses_what_it_cannot_store(tmp_path):
    path = tmp_path / "x.safetensors"
    with pytest.raises(TypeError, match="set"):
        loom.save({"a": {1, 2}}, path)
    with pytest.raises(TypeError, match="key"):
        loom.save({"a": {(loom.ones(1),): 1}}, path)
    with pytest.raises(TypeError, match="metadata"):
        loom.save({"a": loom.ones(1)}, path, metadata={"k": 1})
    with pytest.raises(ValueError, match="loom.tree"):
        loom.save({"a": loom.ones(1)}, path, metadata={"loom.tree": "{}"})
    with pytest.raises(ValueError, match="__metadata__"):
        loom.save({"__metadata__": loom.ones(1)}, path)
    with pytest.raises(TypeError, match="path"):
        loom.save({"a": loom.ones(1)}, 42)
    assert not path.exists()
    assert os.listdir(tmp_path) == []


def test_values_of_every_dtype_and_layout(tmp_path, rng):
    base = loom.tensor(rng.standard_normal((5, 4)).astype(np.float32))
    sd = {
        "f64": loom.tensor(rng.standard_normal(3)),
        "f16": base.half(),
        "i8": loom.tensor(rng.integers(-128, 127, 6).astype(np.int8)),
        "u64": loom.tensor(rng.integers(0, 2**63, 4, dtype=np.uint64)),
        "b": base > 0,
        "scalar": loom.tensor(7),
        "empty": loom.zeros(0, 3),
        "t": base.t(),
        "row": base[3],
        "pending": (base * 3).exp(),
    }
    path = tmp_path / "v.safetensors"
    loom.save(sd, path)
    got = loom.load(path)
    for k, v in sd.items():
        assert_same(got[k], v)


def test_map_location(tmp_path):
    path = tmp_path / "m.safetensors"
    loom.save({"x": loom.ones(2)}, path)
    assert loom.load(path, map_location="cpu")["x"].device == loom.device("cpu")
    assert loom.load(path, map_location=loom.device("cpu"))["x"].device == loom.device("cpu")
    if loom.cuda.is_available():
        assert loom.load(path, map_location="cuda")["x"].device.type == "cuda"


def test_corrupt_and_truncated_files_raise_with_the_path(tmp_path):
    path = tmp_path / "c.safetensors"
    with pytest.raises(FileNotFoundError):
        loom.load(tmp_path / "missing.safetensors")
    loom.save({"w": loom.randn(4, 4), "s": {"k": 1}}, path)
    good = path.read_bytes()
    cut = tmp_path / "cut.safetensors"
    for n in list(range(0, len(good), 7)) + [len(good) - 1]:
        cut.write_bytes(good[:n])
        with pytest.raises(ValueError, match=str(cut)):
            loom.load(cut)

    def with_header(h, data=b""):
        text = json.dumps(h).encode()
        path.write_bytes(struct.pack("<Q", len(text)) + text + data)

    with_header({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, b"\0" * 8)
    with pytest.raises(ValueError, match="needs 12 bytes"):
        loom.load(path)
    with_header({"a": {"dtype": "XX", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 8)
    with pytest.raises(ValueError, match="unknown dtype"):
        loom.load(path)
    path.write_bytes(struct.pack("<Q", 5) + b"{oops")
    with pytest.raises(ValueError, match=f"{path}.*not valid JSON"):
        loom.load(path)
    # A structure that is not loom's.
    with_header({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                 "__metadata__": {"loom.tree": "{\"version\": 1, \"tree\": {\"tensor\": \"b\"}}"}},
                b"\0" * 8)
    with pytest.raises(ValueError, match="'b'"):
        loom.load(path)
    with_header({"__metadata__": {"loom.tree": "not json"}})
    with pytest.raises(ValueError, match=str(path)):
        loom.load(path)


@needs_safetensors
def test_safetensors_reads_loom_files(tmp_path, rng):
    arrays = {
        "f32": rng.standard_normal((3, 4)).astype(np.float32),
        "f16": rng.standard_normal(5).astype(np.float16),
        "f64": rng.standard_normal(()),
        "i64": rng.integers(-9, 9, (2, 2)),
        "u8": rng.integers(0, 255, 7).astype(np.uint8),
        "i16": rng.integers(-9, 9, 3).astype(np.int16),
        "u32": rng.integers(0, 9, 3).astype(np.uint32),
        "b": rng.integers(0, 2, 4).astype(bool),
        "e": np.zeros((0, 2), np.float32),
    }
    path = tmp_path / "loom.safetensors"
    loom.save({k: loom.tensor(v) for k, v in arrays.items()}, path, metadata={"who": "loom"})
    got = st_numpy.load_file(os.fspath(path))
    assert sorted(got) == sorted(arrays)
    for k, v in arrays.items():
        assert got[k].dtype == v.dtype and got[k].shape == v.shape, k
        np.testing.assert_array_equal(got[k], v)
    from safetensors import safe_open
    with safe_open(os.fspath(path), "np") as f:
        assert f.metadata() == {"who": "loom"}


@needs_safetensors
def test_loom_reads_safetensors_files(tmp_path, rng):
    arrays = {
        "w": rng.standard_normal((4, 3)).astype(np.float32),
        "h": rng.standard_normal(6).astype(np.float16),
        "i": rng.integers(-5, 5, 5).astype(np.int32),
        "u": rng.integers(0, 2**63, 3, dtype=np.uint64),
        "b": np.array([True, False, True]),
        "z": np.zeros(0, np.float64),
        "s": np.array(2.5),
    }
    path = tmp_path / "st.safetensors"
    st_numpy.save_file(arrays, os.fspath(path), metadata={"k": "v"})
    got = loom.load(path)
    assert sorted(got) == sorted(arrays)
    for k, v in arrays.items():
        assert got[k].numpy().dtype == v.dtype and got[k].numpy().shape == v.shape, k
        np.testing.assert_array_equal(got[k].numpy(), v)
    assert loom._load_file(os.fspath(path))[1] == {"k": "v"}


@needs_torch
def test_bfloat16_and_state_dicts_with_torch(tmp_path):
    model = make_model()
    with loom.no_grad():
        model[0].weight.copy_(model[0].weight.to(loom.bfloat16).float())
    sd = dict(model.state_dict())
    sd["bf16"] = model[0].weight.to(loom.bfloat16)
    path = tmp_path / "loom.safetensors"
    loom.save(sd, path)
    got = st_torch.load_file(os.fspath(path))
    assert got["bf16"].dtype == torch.bfloat16
    np.testing.assert_array_equal(got["bf16"].float().numpy(), sd["bf16"].float().numpy())
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(got[k].numpy(), v.numpy(), err_msg=k)

    back = {"bf16": torch.tensor([1.5, -2.25, 3e38, 1e-40], dtype=torch.bfloat16),
            "lin.weight": torch.randn(3, 4), "t": torch.randn(4, 3).t().contiguous()}
    path2 = tmp_path / "torch.safetensors"
    st_torch.save_file(back, os.fspath(path2))
    mine = loom.load(path2)
    assert mine["bf16"].dtype == loom.bfloat16
    np.testing.assert_array_equal(mine["bf16"].float().numpy(), back["bf16"].float().numpy())
    assert np.array_equal(mine["bf16"].float().numpy().view(np.uint32) >> 16,
                          back["bf16"].view(torch.int16).numpy().view(np.uint16).astype(np.uint32))
    for k in ("lin.weight", "t"):
        np.testing.assert_array_equal(mine[k].numpy(), back[k].numpy())
