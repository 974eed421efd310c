#!/usr/bin/env python3
"""Backward kernels in one process: loom against torch eager and torch.compile, on the CPU or
the GPU, with a copy of the same bytes as the ceiling.

Each workload's forward runs once (its result materialized); a timed run is the backward alone
with a fixed upstream gradient, until every input's gradient is computed (loom: backward
records, the flush at the end event or sync runs it). cross_entropy is timed forward and
backward together, and AdamW as one optimizer step over a GPT's parameter set (examples/gpt.py
at the given size). Gradients (and updated parameters) are checked against torch eager's before
timing. Rounds interleave the implementations; prints min and median ms, effective GB/s over
the bytes an ideal kernel moves, the percentage of the copy's GB/s measured in the same run,
loom's kernels a run, and the speed against torch.compile.

Bytes counted: softmax, log_softmax, gelu: y or x, dy read, dx written; layer_norm and rms_norm
the same (weights, dgamma, dbeta and row statistics are a row's length, left out);
cross_entropy: the logits read twice (the forward's log-sum-exp, the backward's softmax) and
their gradient written once; AdamW: parameters, gradients and both moments read, parameters
and moments written. The copy: loom's clone of as many elements of the workload's dtype as the
largest tensor. GPU times are device times (Clock): the kernels' bandwidth, not the host's
recording or launch rate (bench/train_cpu.py times whole steps)."""
import argparse
import os
import statistics
import sys
import time

import numpy as np

import loom

try:
    import torch
    # Each backward here runs with retain_graph (the forward runs once); torch.compile's
    # backward reuses ("donates") its saved buffers unless told not to, which forbids that.
    import torch._functorch.config
    torch._functorch.config.donated_buffer = False
except ImportError:
    torch = None

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_cpu import gpt_module  # noqa: E402


def lib_fn(m, name):
    """The op `name` of torch.nn.functional or loom."""
    return getattr(torch.nn.functional, name) if m is torch else getattr(loom, name)


def workloads(a, cols, dtype):
    """(name, host arrays, f(lib, *tensors), ideal bytes); f of the arrays is the forward."""
    rng = np.random.default_rng(0)
    rows = max(1, a.elems // cols)
    s = np.dtype(np.float32).itemsize if dtype == "float32" else 2
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    w = rng.standard_normal(cols).astype(np.float32)
    b = rng.standard_normal(cols).astype(np.float32)
    e3 = 3 * rows * cols * s
    tag = f"[{rows}, {cols}]"
    out = [
        (f"softmax {tag}", [x], lambda m, x: m.softmax(x, dim=-1), e3),
        (f"log_softmax {tag}", [x], lambda m, x: m.log_softmax(x, dim=-1), e3),
        (f"layer_norm {tag}", [x, w, b],
         lambda m, x, w, b: lib_fn(m, "layer_norm")(x, (cols,), w, b), e3),
        (f"rms_norm {tag}", [x, w], lambda m, x, w: lib_fn(m, "rms_norm")(x, (cols,), w), e3),
        (f"gelu_tanh {tag}", [x], lambda m, x: lib_fn(m, "gelu")(x, approximate="tanh"), e3),
    ]
    return out


def ce_workload(a, dtype):
    r, v = (int(t) for t in a.ce.split("x"))
    rng = np.random.default_rng(2)
    logits = rng.standard_normal((r, v)).astype(np.float32)
    target = rng.integers(0, v, r)
    s = 4 if dtype == "float32" else 2
    return (f"cross_entropy fwd+bwd [{r}, {v}]", [logits],
            lambda m, x: lib_fn(m, "cross_entropy")(x, m.tensor(target, device=x.device)),
            3 * r * v * s)


class Clock:
    """ms of one run: on the GPU the device time of its kernels, CUDA events on each library's
    stream around it, recorded behind a matmul of a few ms queued first, so the first event
    fires when the matmul ends, by which time the host has recorded and launched the run (an
    optimizer step over 76 tensors is host-bound otherwise, and the events would time the
    host). On the CPU a host timer after a sync."""

    def __init__(self, device):
        self.device = device
        if device != "cpu":
            a = np.random.default_rng(5).standard_normal((4096, 4096)).astype(np.float32)
            self.busy = {"loom": loom.tensor(a, device=device)}
            if torch is not None:
                self.busy["torch"] = torch.tensor(a, device=device)
            self.hold = None

    def time(self, impl, run):
        """(ms, loom's kernels) of one run."""
        if self.device == "cpu":
            k0 = loom.counters()["kernels"]
            t0 = time.perf_counter()
            run()
            loom.sync()
            return (time.perf_counter() - t0) * 1e3, loom.counters()["kernels"] - k0
        lib = "loom" if impl == "loom" else "torch"
        ev = (loom.cuda if lib == "loom" else torch.cuda).Event
        e0, e1 = ev(enable_timing=True), ev(enable_timing=True)
        b = self.busy[lib]
        self.hold = b @ b  # loom: launched by e0's record, which submits what is pending
        e0.record()
        k0 = loom.counters()["kernels"]  # after the matmul's flush
        run()
        e1.record()
        e1.synchronize()
        return e0.elapsed_time(e1), loom.counters()["kernels"] - k0


def backward_runs(name, arrays, f, dev, dtype):
    """{impl: run(check) }: one backward (or forward + backward) with fresh gradients; with
    check=True the input gradients as float32 numpy arrays."""
    fwd_bwd = "fwd+bwd" in name
    runs = {}
    lx = [loom.tensor(a, device=dev, dtype=getattr(loom, dtype), requires_grad=True)
          for a in arrays]
    ly = f(loom, *lx)
    dy_np = np.random.default_rng(1).standard_normal(tuple(ly.shape)).astype(np.float32)
    ldy = loom.tensor(dy_np, device=dev, dtype=getattr(loom, dtype))
    loom.sync()

    def host(t):
        return (t.to(loom.float32) if t.dtype != loom.float32 else t).to("cpu").numpy()

    def loom_run(check=False):
        for t in lx:
            t.grad = None
        y = f(loom, *lx) if fwd_bwd else ly
        y.backward(ldy, retain_graph=not fwd_bwd)
        if check:
            return [host(t.grad) for t in lx]

    runs["loom"] = loom_run
    if torch is None:
        return runs

    def float64_run(check=True):
        # The reference: the same function in float64 on the CPU, of the inputs and dy rounded
        # to the workload's dtype as every implementation sees them.
        def exact(v):
            return torch.tensor(v, dtype=getattr(torch, dtype)).double()
        tx = [exact(a).requires_grad_() for a in arrays]
        f(torch, *tx).backward(exact(dy_np))
        return [t.grad.numpy() for t in tx]

    runs["float64"] = float64_run
    for impl in ("torch eager", "torch.compile"):
        if impl not in PEERS:
            continue
        tx = [torch.tensor(a, device=dev, dtype=getattr(torch, dtype), requires_grad=True)
              for a in arrays]
        g = torch.compile(lambda *a: f(torch, *a)) if impl == "torch.compile" else (
            lambda *a: f(torch, *a))
        ty = g(*tx)
        tdy = torch.tensor(dy_np, device=dev, dtype=getattr(torch, dtype))

        def torch_run(check=False, tx=tx, ty=ty, tdy=tdy, g=g):
            for t in tx:
                t.grad = None
            y = g(*tx) if fwd_bwd else ty
            y.backward(tdy, retain_graph=not fwd_bwd)
            if check:
                return [t.grad.detach().float().cpu().numpy() for t in tx]

        runs[impl] = torch_run
    return runs


def adamw_runs(a, dev, dtype):
    """One AdamW step over examples/gpt.py's parameters at the given size: {impl: run(check)},
    with check=True the updated parameters."""
    lg = gpt_module("loom")
    cfg = lg.GPTConfig(block_size=a.block, vocab_size=96, n_layer=a.layers, n_head=a.heads,
                       n_embd=a.width, dropout=0.0)
    shapes = [tuple(p.shape) for p in lg.GPT(cfg).parameters()]
    rng = np.random.default_rng(3)
    ps = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    gs = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    n = sum(p.size for p in ps)
    runs = {}

    def make(lib, opt_kw=None):
        params = [lib.tensor(p, device=dev, dtype=getattr(lib, dtype), requires_grad=True)
                  for p in ps]
        for p, g in zip(params, gs):
            p.grad = lib.tensor(g, device=dev, dtype=getattr(lib, dtype))
        opt = lib.optim.AdamW(params, lr=1e-3, betas=(0.9, 0.99), weight_decay=0.1,
                              **(opt_kw or {}))
        return params, opt

    lp, lopt = make(loom)

    def loom_run(check=False):
        lopt.step()
        if check:
            return [(p.detach().to(loom.float32) if p.dtype != loom.float32 else p.detach())
                    .to("cpu").numpy() for p in lp]

    runs["loom"] = loom_run
    if torch is not None:
        for impl, kw in (("torch eager", {"foreach": True}), ("torch fused", {"fused": True}),
                         ("torch.compile", None)):
            if impl not in PEERS or (impl == "torch fused" and dev == "cpu" and dtype != "float32"):
                continue
            tp, topt = make(torch, kw)
            step = torch.compile(topt.step) if impl == "torch.compile" else topt.step

            def torch_run(check=False, tp=tp, step=step):
                step()
                if check:
                    return [p.detach().float().cpu().numpy() for p in tp]

            runs[impl] = torch_run
    return f"AdamW, {len(shapes)} GPT params ({n})", runs, 7 * n * (
        4 if dtype == "float32" else 2), n


PEERS = {"torch eager", "torch fused", "torch.compile"}  # (--peers)


def copy_ms(clock, n, dev, dtype, reps):
    x = loom.tensor(np.random.default_rng(4).standard_normal(n).astype(np.float32),
                    device=dev, dtype=getattr(loom, dtype))
    loom.sync()
    out = [None]  # each run's clone replaces the last: its memory is reused, as a kernel's is

    def run():
        out[0] = x.clone()

    t = [clock.time("loom", run)[0] for _ in range(reps + 2)][2:]
    return statistics.median(t)


def measure(clock, name, runs, nbytes, copy_gbs, a, check_steps=True):
    # The reference: float64 where the workload has one (loom must match it; a peer that does
    # not is reported, not failed: torch's CPU bfloat16 layer_norm weight gradient is off by
    # more than bf16's rounding), else torch eager's result (AdamW's step).
    exact = runs.pop("float64", None)
    ref = exact or runs.get("torch eager")
    tol = 2e-3 if a.dtype == "float32" else 4e-2
    if ref is not None and check_steps:
        want = ref(True)
        for impl, run in runs.items():
            if impl == "torch eager" and exact is None:
                continue
            for i, (got, exp) in enumerate(zip(run(True), want)):
                # sums over many rows (a weight's gradient): relative to their largest value
                atol = tol * max(1.0, float(np.abs(exp).max()) if exp.size else 1.0)
                if impl == "loom" or exact is None:
                    np.testing.assert_allclose(got, exp, rtol=tol, atol=atol,
                                               err_msg=f"{name} {impl}")
                elif not np.allclose(got, exp, rtol=tol, atol=atol):
                    err = float(np.abs(got.astype(np.float64) - exp).max())
                    print(f"  ({impl}'s gradient {i} differs from float64 by up to {err:.3g}: "
                          f"reported, not checked)", flush=True)
    times = {k: [] for k in runs}
    kernels = []
    order = list(runs)
    for r in range(a.rounds):
        order = order[1:] + order[:1]
        for impl in order:
            runs[impl]()  # warm
            loom.sync()
            for _ in range(a.reps):
                ms, k = clock.time(impl, runs[impl])
                times[impl].append(ms)
                if impl == "loom":
                    kernels.append(k)
    med = {k: statistics.median(v) for k, v in times.items()}
    for impl in runs:
        gbs = nbytes / med[impl] / 1e6
        vs = f"{med['torch.compile'] / med[impl]:.2f}x" if "torch.compile" in med else "-"
        k = f"{statistics.median(kernels):.0f}" if impl == "loom" else ""
        print(f"{name:44} {impl:13} {min(times[impl]):8.3f} {med[impl]:8.3f} {gbs:8.0f} "
              f"{100 * gbs / copy_gbs:5.0f}% {k:>4} {vs:>8}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    ap.add_argument("--elems", type=int, default=1 << 24, help="elements of each row workload")
    ap.add_argument("--cols", default="4096", help="comma-separated row lengths")
    ap.add_argument("--ce", default="8192x32000", help="cross_entropy logits shape")
    ap.add_argument("--layers", type=int, default=6, help="AdamW: the GPT's size")
    ap.add_argument("--heads", type=int, default=6)
    ap.add_argument("--width", type=int, default=384)
    ap.add_argument("--block", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=4)
    ap.add_argument("--only", default="", help="comma-separated name prefixes")
    ap.add_argument("--peers", default="eager,fused,compile",
                    help="torch implementations to run (eager, fused, compile; 'none': loom and "
                    "the copy alone, unchecked): A/B runs of loom's knobs skip torch.compile's "
                    "warm-up")
    a = ap.parse_args()
    names = {"eager": "torch eager", "fused": "torch fused", "compile": "torch.compile"}
    PEERS.clear()
    PEERS.update(names[p] for p in a.peers.split(",") if p in names)
    dev = a.device
    clock = Clock(dev)
    print(f"torch {torch.__version__ if torch else 'absent'}, loom fusion {loom.fusion_enabled()}"
          f", {dev}, {a.dtype}")
    print(f"{'workload':44} {'impl':13} {'min ms':>8} {'med ms':>8} {'GB/s':>8} {'copy':>6} "
          f"{'kern':>4} {'vs comp':>8}")
    s = 4 if a.dtype == "float32" else 2

    def wanted(name):
        return not a.only or any(name.startswith(o) for o in a.only.split(","))

    copies = {}

    def copy_gbs(n):
        if n not in copies:
            copies[n] = 2 * n * s / copy_ms(clock, n, dev, a.dtype, 3 * a.reps) / 1e6
            print(f"{'copy of ' + str(n) + ' elements':44} {'loom':13} {'':8} "
                  f"{2 * n * s / copies[n] / 1e6:8.3f} {copies[n]:8.0f}  100%", flush=True)
        return copies[n]

    for cols in (int(c) for c in a.cols.split(",")):
        for name, arrays, f, nbytes in workloads(a, cols, a.dtype):
            if wanted(name):
                measure(clock, name, backward_runs(name, arrays, f, dev, a.dtype), nbytes,
                        copy_gbs(arrays[0].size), a)
    name, arrays, f, nbytes = ce_workload(a, a.dtype)
    if wanted(name):
        measure(clock, name, backward_runs(name, arrays, f, dev, a.dtype), nbytes,
                copy_gbs(arrays[0].size), a)
    if wanted("AdamW"):
        name, runs, nbytes, n = adamw_runs(a, dev, a.dtype)
        # Every step moves the parameters: the check runs one step in each before timing.
        measure(clock, name, runs, nbytes, copy_gbs(n), a)


if __name__ == "__main__":
    main()
