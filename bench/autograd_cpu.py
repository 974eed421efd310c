#!/usr/bin/env python3
"""Backward passes on the CPU in one process: loom against torch eager and torch.compile.

Each workload's forward runs once (its result materialized); a timed run is the backward alone
with a fixed upstream gradient, until every input's gradient is computed (loom: backward records,
a sync runs it). Gradients are checked against torch's before timing. Rounds interleave the
implementations; prints min and median ms. torch.compile compiles the forward with its
backward (AOTAutograd); its backward is what is timed."""
import argparse
import statistics
import time

import numpy as np

import loom

try:
    import torch
except ImportError:
    torch = None


def workloads(n, c, ce_rows, ce_classes):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, c)).astype(np.float32)
    w = rng.standard_normal(c).astype(np.float32)
    b = rng.standard_normal(c).astype(np.float32)
    logits = rng.standard_normal((ce_rows, ce_classes)).astype(np.float32)
    target = rng.integers(0, ce_classes, ce_rows)
    return [
        ("softmax", [x], lambda m, x: m.softmax(x, dim=-1)),
        ("log_softmax", [x], lambda m, x: m.log_softmax(x, dim=-1)),
        ("layer_norm", [x, w, b], lambda m, x, w, b: (
            torch.nn.functional.layer_norm if m is torch else loom.layer_norm)(x, (c,), w, b)),
        ("rms_norm", [x, w], lambda m, x, w: (
            torch.nn.functional.rms_norm if m is torch else loom.rms_norm)(x, (c,), w)),
        ("gelu_tanh", [x], lambda m, x: (
            torch.nn.functional.gelu if m is torch else loom.gelu)(x, approximate="tanh")),
        ("cross_entropy fwd+bwd", [logits], lambda m, x: (
            torch.nn.functional.cross_entropy if m is torch else loom.cross_entropy)(
                x, m.tensor(target))),
    ]


def make_runs(name, arrays, f):
    """name -> {impl: run()} where run() does one backward and returns the input grads."""
    fwd_bwd = name.endswith("fwd+bwd")
    runs = {}
    lx = [loom.tensor(a, requires_grad=True) for a in arrays]
    ly = f(loom, *lx)
    dy_np = np.random.default_rng(1).standard_normal(tuple(ly.shape)).astype(np.float32)
    ldy = loom.tensor(dy_np)
    ly.numpy() if ly.ndim else ly.item()

    def loom_run(check=False):
        for t in lx:
            t.grad = None
        y = f(loom, *lx) if fwd_bwd else ly
        y.backward(ldy, retain_graph=True)
        if check:
            return [t.grad.numpy() for t in lx]
        loom.sync()  # the gradients are computed (numpy() would add a copy out)

    runs["loom"] = loom_run
    if torch is not None:
        for impl in ("torch eager", "torch.compile"):
            tx = [torch.tensor(a, requires_grad=True) for a in arrays]
            g = torch.compile(lambda *a: f(torch, *a)) if impl == "torch.compile" else (
                lambda *a: f(torch, *a))
            ty = g(*tx)
            tdy = torch.tensor(dy_np)

            def torch_run(check=False, tx=tx, ty=ty, tdy=tdy, g=g):
                for t in tx:
                    t.grad = None
                y = g(*tx) if fwd_bwd else ty
                y.backward(tdy, retain_graph=True)
                return [t.grad.numpy() for t in tx] if check else None

            runs[impl] = torch_run
    return runs


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=4096)
    ap.add_argument("--cols", type=int, default=4096)
    ap.add_argument("--ce", default="8192x32000", help="cross_entropy logits shape")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=4)
    ap.add_argument("--only", default="", help="comma-separated workload names")
    a = ap.parse_args()
    ce_rows, ce_classes = (int(v) for v in a.ce.split("x"))
    print(f"torch {torch.__version__ if torch else 'absent'}, loom fusion {loom.fusion_enabled()}")
    print(f"{'workload':24} {'impl':14} {'min ms':>9} {'median ms':>10} {'vs torch.compile':>17}")
    for name, arrays, f in workloads(a.rows, a.cols, ce_rows, ce_classes):
        if a.only and name not in a.only.split(","):
            continue
        runs = make_runs(name, arrays, f)
        ref = runs.get("torch eager")
        if ref is not None:
            want = ref(True)
            for impl, run in runs.items():
                for got, exp in zip(run(True), want):
                    np.testing.assert_allclose(got, exp, rtol=2e-3, atol=2e-4,
                                               err_msg=f"{name} {impl}")
        times = {k: [] for k in runs}
        order = list(runs)
        for r in range(a.rounds):
            order = order[1:] + order[:1]
            for impl in order:
                runs[impl]()  # warm
                for _ in range(a.reps):
                    t0 = time.perf_counter()
                    runs[impl]()
                    times[impl].append((time.perf_counter() - t0) * 1e3)
        med = {k: statistics.median(v) for k, v in times.items()}
        for impl in runs:
            vs = f"{med['torch.compile'] / med[impl]:.2f}x" if "torch.compile" in med else "-"
            print(f"{name:24} {impl:14} {min(times[impl]):9.2f} {med[impl]:10.2f} {vs:>17}")


if __name__ == "__main__":
    main()
