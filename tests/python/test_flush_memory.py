"""Memory a flush holds while it runs: counters()["bytes_peak"] against what the program
needs at once (values checked too, so a plan that saves memory by skipping work fails)."""
import importlib.util
import pathlib

import numpy as np

import loom

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"


def test_a_cat_base_takes_memory_when_first_written():
    n = 1 << 20  # 4 MiB of float32 a tensor
    loom.sync()
    loom.manual_seed(3)
    t = loom.randn(n).cumsum(0)  # a scan's input and output: 8 MiB at once
    s = t.sum()
    del t
    c = loom.cat([loom.arange(n // 2, dtype=loom.float32), loom.full((n // 2,), 2.0)])
    loom.reset_counters()
    before = loom.counters()["bytes_live"]  # what other tests' tensors still hold
    loom.sync()
    peak = loom.counters()["bytes_peak"] - before
    # The scan's 8 MiB and then the cat's 4 MiB, not all 12 at once.
    assert peak < 10 * 2**20, peak
    want = np.concatenate([np.arange(n // 2, dtype=np.float32), np.full(n // 2, 2.0, np.float32)])
    np.testing.assert_array_equal(c.numpy(), want)
    assert np.isfinite(s.item())


def test_a_first_training_step_holds_no_more_than_the_steps_after():
    # The parameters are still pending (their initialisation runs in the first step's flush):
    # that must not reorder the backward so that weight gradients, and the activations they
    # read, wait for the end of the chain down to the first layer. The later steps hold the
    # previous gradients during the forward and the optimizer's state throughout; the first
    # holds neither, so it may not exceed them.
    spec = importlib.util.spec_from_file_location("gpt", EXAMPLES / "gpt.py")
    gpt = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpt)
    loom.sync()
    loom.manual_seed(0)
    cfg = gpt.GPTConfig(block_size=64, vocab_size=96, n_layer=3, n_head=4, n_embd=64, dropout=0.0)
    model = gpt.GPT(cfg)
    opt = loom.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1)
    tokens = np.random.default_rng(0).integers(0, 96, (16, 65))
    xb, yb = loom.tensor(tokens[:, :-1].copy()), loom.tensor(tokens[:, 1:].copy())

    def step():
        _, loss = model(xb, yb)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.item()

    peaks, losses = [], []
    for _ in range(3):
        loom.reset_counters()
        losses.append(step())
        peaks.append(loom.counters()["bytes_peak"])
    assert peaks[0] <= peaks[1], peaks
    assert peaks[1] == peaks[2], peaks
    assert np.all(np.isfinite(losses)) and losses[2] < losses[0]
