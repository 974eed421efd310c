"""loom's benchmark suite: memory-bound workloads, every implementation in one process.

Implementations: loom fused, loom fusion-off, numpy (CPU), torch eager and torch.compile (CPU and
GPU, when torch is importable), and a copy as the bandwidth ceiling. Each result is checked
against the others (or, where a workload has one, against a float64 numpy reference) before
timing, so a fast wrong answer fails the run. A torch.compile that fails to compile is skipped
with its reason in the row; torch.compiler.reset() runs before each workload so one row's
compiled graphs and guards don't leak into the next.

    python bench/suite.py [--device cpu|cuda] [--json out.json] [--png out.png] [--quick]
                          [--only group,name,...]

Bandwidth rows report effective GB/s (each input read once, each output written once) and % of
the copy measured in the same run: the copy that moves the nearest byte count (a 2 GiB f32 copy,
and on the GPU a 1 GiB bf16 copy, since a kernel's fixed launch and tail cost weighs twice as much
on half the bytes); `pct_big_copy` keeps the ratio to the 2 GiB copy for every row; host rows report ms (tiny ops also µs per op); compile rows
report a never-seen signature's cold lowering, its disk-cache load and a memory hit.

Every row has the median and the min of its runs: torch eager on a small shared CPU shows
random multi-ms stalls (its OpenMP threads), so a cell whose min and median differ by more than
2x is marked suspect. On the CPU the suite adds groups (CPU_GROUPS) aimed at the CPU backend's
targets, each with a summary after the table:
  L=        softmax, log_softmax, layer_norm, rms_norm and row sum over row lengths 64..32768 at
            a fixed element count, plus transposed and sliced rows: GB/s, the ratio to loom's own
            L=4096 speed of the op (target <= 1.3x) and to torch eager (target >= 2x from 128)
  small     softmax, layer_norm, add+sum at 64x64..256x1024: µs per call vs torch eager
  bfloat16  bf16 sum / layer_norm / softmax and an f16 sum, checked against float32 numpy
  column    column reductions (sum/mean/amax over dim 0, a middle dim, keepdim, a pointwise
            prologue and epilogue): the ratio to the best of numpy, torch eager, torch.compile
  gpt       one GPT block forward (and its matmuls alone) against torch eager / torch.compile
--only takes group names (the whole group) or, for anything not a group name, substrings of
workload names; the copy ceiling always runs.
"""
import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import textwrap
import time

import numpy as np

import loom

try:
    import torch
except Exception:  # torch is optional
    torch = None


class Timer:
    """Median of n runs after warm-up. On the GPU, CUDA events around each run (loom's events
    record on its current stream after submitting what is pending there; torch's on its
    current stream); on the CPU, a host timer after a sync."""

    def __init__(self, device, reps):
        self.device, self.reps = device, reps

    def sync(self):
        loom.sync()
        if torch is not None and self.device == "cuda":
            torch.cuda.synchronize()

    def _events(self, backend):
        if self.device != "cuda" or backend == "numpy":
            return None
        if backend == "torch":
            return torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        return loom.cuda.Event(enable_timing=True), loom.cuda.Event(enable_timing=True)

    def median_ms(self, fn, nin, backend="loom"):
        return self.stats(fn, nin, backend)[0]

    def stats(self, fn, nin, backend="loom", reps=None):
        """(median, min) in ms of `reps` runs (default: the Timer's). Both are kept: the median
        is the figure, and a min far below it says the runs were disturbed."""
        # The result is held until after the sync: loom never computes what nobody holds.
        for i in range(3):
            out = fn(i % nin)
            self.sync()
            del out
        times = []
        for i in range(reps or self.reps):
            ev = self._events(backend)
            if ev:
                ev[0].record()
                out = fn(i % nin)
                ev[1].record()
                ev[1].synchronize()
                times.append(ev[0].elapsed_time(ev[1]))
            else:
                t0 = time.perf_counter()
                out = fn(i % nin)
                self.sync()
                times.append((time.perf_counter() - t0) * 1e3)
            del out
        self.sync()
        return statistics.median(times), min(times)


def rel_err(a, b):
    a = np.asarray(a, dtype=np.float64).ravel()
    b = np.asarray(b, dtype=np.float64).ravel()
    den = max(np.linalg.norm(b), 1e-30)
    return float(np.linalg.norm(a - b) / den)


def to_np(x):
    """A host copy: in-place workloads go on mutating their outputs while they are timed."""
    if isinstance(x, (np.ndarray, np.generic)):
        return np.array(x)
    if torch is not None and isinstance(x, torch.Tensor):
        return x.detach().float().cpu().numpy().copy()
    if x.dtype == loom.bfloat16 or x.dtype == loom.float16:
        x = x.to(loom.float32)
    return np.array(x.to("cpu").numpy())


# ---- workloads: (name, bytes, make inputs, implementations) ---------------------------------
def chain8(x):
    return ((((x * 1.5 + 0.5).tanh() * x).sigmoid()) + x * x - 0.25).relu()


def np_chain8(x):
    t = np.tanh(x * 1.5 + 0.5) * x
    return np.maximum(1 / (1 + np.exp(-t)) + x * x - 0.25, 0)


def np_gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(np.float32(math.sqrt(2 / math.pi)) * (x + 0.044715 * x * x * x)))


def np_softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def np_layer_norm(x, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(x.var(-1, keepdims=True) + eps)


def np_rms_norm(x, eps=1e-6):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps)


def adam(p, g, m, v, lr=1e-3, b1=0.9, b2=0.999, eps=1e-8, t=10):
    """One in-place Adam step (the same code runs on loom and torch tensors)."""
    m.mul_(b1).add_(g, alpha=1 - b1)
    v.mul_(b2).add_(g * g, alpha=1 - b2)
    p.sub_((lr / (1 - b1**t)) * m / ((v / (1 - b2**t)).sqrt() + eps))
    return p


def np_adam(p, g, m, v, lr=1e-3, b1=0.9, b2=0.999, eps=1e-8, t=10):
    m *= b1
    m += (1 - b1) * g
    v *= b2
    v += (1 - b2) * g * g
    p -= (lr / (1 - b1**t)) * m / (np.sqrt(v / (1 - b2**t)) + eps)
    return p


def np_log_softmax(x):
    s = x - x.max(-1, keepdims=True)
    return s - np.log(np.exp(s).sum(-1, keepdims=True))


def round_to(a, dt):
    """float32 values rounded to bf16 / f16 (still float32): every implementation and the
    float64 reference then start from the same numbers."""
    if dt == "float16":
        return a.astype(np.float16).astype(np.float32)
    if dt == "bfloat16":  # round to nearest even on the upper 16 bits (numpy has no bf16)
        u = a.view(np.uint32)
        u = (u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) & np.uint32(0xFFFF0000)
        return u.view(np.float32)
    return a


# ---- one GPT block, written once over three spellings of its non-method ops ------------------
class NpOps:
    @staticmethod
    def ln(x, w, b):
        return np_layer_norm(x) * w + b

    softmax = staticmethod(np_softmax)
    gelu = staticmethod(np_gelu_tanh)
    heads = staticmethod(lambda t, s: t.reshape(s).transpose(0, 2, 1, 3))
    merge = staticmethod(lambda t, s: t.transpose(0, 2, 1, 3).reshape(s))
    mT = staticmethod(lambda t: t.swapaxes(-1, -2))
    masked_fill = staticmethod(lambda t, m, v: np.where(m, v, t))


class TorchOps:
    @staticmethod
    def ln(x, w, b):
        return torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b)

    softmax = staticmethod(lambda t: torch.softmax(t, dim=-1))
    gelu = staticmethod(lambda t: torch.nn.functional.gelu(t, approximate="tanh"))
    heads = staticmethod(lambda t, s: t.reshape(s).permute(0, 2, 1, 3))
    merge = staticmethod(lambda t, s: t.permute(0, 2, 1, 3).reshape(s))
    mT = staticmethod(lambda t: t.transpose(-2, -1))
    masked_fill = staticmethod(lambda t, m, v: t.masked_fill(m, v))


class LoomOps(TorchOps):
    @staticmethod
    def ln(x, w, b):
        return loom.layer_norm(x, (x.shape[-1],), w, b)

    softmax = staticmethod(lambda t: loom.softmax(t, dim=-1))
    gelu = staticmethod(lambda t: loom.gelu(t, approximate="tanh"))


GPT_B, GPT_T, GPT_C, GPT_H = 32, 64, 128, 4


def gpt_block(x, ln1w, ln1b, wqkv, bqkv, wp, bp, ln2w, ln2b, w1, b1, w2, b2, mask, F):
    """Pre-norm GPT block: x + attn(ln1(x)), then + mlp(ln2(.)); causal mask (True = hidden),
    tanh GELU (GPT-2's; numpy has no erf for the exact one)."""
    B, T, C = x.shape
    hs = (B, T, GPT_H, C // GPT_H)
    qkv = F.ln(x, ln1w, ln1b) @ wqkv + bqkv
    q, k, v = (F.heads(qkv[..., i * C:(i + 1) * C], hs) for i in range(3))
    att = F.masked_fill((q @ F.mT(k)) * (1.0 / math.sqrt(C // GPT_H)), mask, float("-inf"))
    x = x + F.merge(F.softmax(att) @ v, (B, T, C)) @ wp + bp
    return x + F.gelu(F.ln(x, ln2w, ln2b) @ w1 + b1) @ w2 + b2


def gpt_matmuls(x, ln1w, ln1b, wqkv, bqkv, wp, bp, ln2w, ln2b, w1, b1, w2, b2, mask, F):
    """The block's six matmuls alone, on the same shapes and head layout (no norms, bias,
    scale, mask, softmax or GELU)."""
    B, T, C = x.shape
    hs = (B, T, GPT_H, C // GPT_H)
    qkv = x @ wqkv
    q, k, v = (F.heads(qkv[..., i * C:(i + 1) * C], hs) for i in range(3))
    y = F.merge((q @ F.mT(k)) @ v, (B, T, C)) @ wp
    return (y @ w1) @ w2


def workloads(dev, quick):
    big = dev == "cuda"
    n_elems = (256 << 20) if big else (16 << 20)
    rows = 65536 if big else 4096
    if quick:
        n_elems //= 16
        rows //= 16
    C = 4096
    W = []
    W.append(("copy", 8 * n_elems, ("vec", n_elems), {
        "loom fused": lambda x: x.clone(), "numpy": lambda x: x.copy(),
        "torch eager": lambda x: x.clone()}))
    if big:  # the ceiling of the rows that move half the bytes (bf16 rows, sum, column mean)
        W.append(("copy bfloat16", 2 * 2 * rows * C, ("mat", rows, C, "bfloat16"), {
            "loom fused": lambda x: x.clone(), "torch eager": lambda x: x.clone()}))
    W.append(("chain8", 8 * n_elems, ("vec", n_elems), {
        "loom fused": chain8, "loom fusion-off": chain8, "numpy": np_chain8,
        "torch eager": chain8, "torch.compile": chain8}))
    W.append(("gelu+bias", 8 * rows * C + 4 * C, ("mat_bias", rows, C), {
        "loom fused": lambda x, b: loom.gelu(x + b, approximate="tanh"),
        "loom fusion-off": lambda x, b: loom.gelu(x + b, approximate="tanh"),
        "numpy": lambda x, b: np_gelu_tanh(x + b),
        "torch eager": lambda x, b: torch.nn.functional.gelu(x + b, approximate="tanh"),
        "torch.compile": lambda x, b: torch.nn.functional.gelu(x + b, approximate="tanh")}))
    for dt in ("float32", "bfloat16"):
        if dt == "bfloat16" and not big:
            continue
        sz = 2 if dt == "bfloat16" else 4
        W.append((f"softmax {dt}", 2 * sz * rows * C, ("mat", rows, C, dt), {
            "loom fused": lambda x: loom.softmax(x, dim=-1),
            "loom fusion-off": lambda x: loom.softmax(x, dim=-1),
            "numpy": np_softmax,
            "torch eager": lambda x: torch.softmax(x, dim=-1),
            "torch.compile": lambda x: torch.softmax(x, dim=-1)}))
        W.append((f"layer_norm {dt}", 2 * sz * rows * C, ("mat", rows, C, dt), {
            "loom fused": lambda x: loom.layer_norm(x, (x.shape[-1],)),
            "loom fusion-off": lambda x: loom.layer_norm(x, (x.shape[-1],)),
            "numpy": np_layer_norm,
            "torch eager": lambda x: torch.nn.functional.layer_norm(x, (x.shape[-1],)),
            "torch.compile": lambda x: torch.nn.functional.layer_norm(x, (x.shape[-1],))}))
        W.append((f"rms_norm {dt}", 2 * sz * rows * C, ("mat", rows, C, dt), {
            "loom fused": lambda x: loom.rms_norm(x, (x.shape[-1],), eps=1e-6),
            "loom fusion-off": lambda x: loom.rms_norm(x, (x.shape[-1],), eps=1e-6),
            "numpy": np_rms_norm,
            "torch eager": lambda x: torch.nn.functional.rms_norm(x, (x.shape[-1],), eps=1e-6),
            "torch.compile": lambda x: torch.nn.functional.rms_norm(x, (x.shape[-1],), eps=1e-6)}))
    W.append(("sum", 4 * n_elems, ("vec", n_elems), {
        "loom fused": lambda x: x.sum(), "loom fusion-off": lambda x: x.sum(),
        "numpy": lambda x: x.sum(dtype=np.float64),
        "torch eager": lambda x: x.sum(), "torch.compile": lambda x: x.sum()}))
    W.append(("column mean", 4 * rows * C + 4 * C, ("mat", rows, C, "float32"), {
        "loom fused": lambda x: x.mean(dim=0), "loom fusion-off": lambda x: x.mean(dim=0),
        "numpy": lambda x: x.mean(axis=0),
        "torch eager": lambda x: x.mean(dim=0), "torch.compile": lambda x: x.mean(dim=0)}))
    n_adam = n_elems // 4  # 64M parameters on the GPU
    W.append(("adam step", 7 * 4 * n_adam, ("adam", n_adam), {
        "loom fused": adam, "loom fusion-off": adam, "numpy": np_adam,
        "torch eager": adam, "torch.compile": adam}))
    # The base rows' group is their first word ("column mean" joins the column group).
    W = [work(name, nbytes, spec, impls, name.split()[0]) for name, nbytes, spec, impls in W]
    if dev == "cpu":
        W += (row_sweep(quick) + small_rows() + half_rows(quick) + column_rows(quick, C)
              + gpt_rows())
    return W


def work(name, nbytes, spec, impls, group, ref=None, tol=None, reps=None, tags=None):
    """One workload. `ref` (numpy, run in float64 on the host inputs) replaces the first
    implementation as what every result is checked against; `tags` go into its rows for the
    group's summary."""
    return {"name": name, "bytes": nbytes, "spec": spec, "impls": impls, "group": group,
            "ref": ref, "tol": tol, "reps": reps, "tags": tags or {}}


# ---- the CPU groups --------------------------------------------------------------------------
CPU_GROUPS = ("L=", "small", "bfloat16", "column", "gpt")
SWEEP_L = (64, 128, 1000, 1001, 1024, 4096, 32768)
# op -> (loom, torch, numpy reference, whether the output is a row (True) or one per row)
ROW_OPS = {
    "softmax": (lambda x: loom.softmax(x, dim=-1), lambda x: torch.softmax(x, dim=-1),
                np_softmax, True),
    "log_softmax": (lambda x: loom.log_softmax(x, dim=-1), lambda x: torch.log_softmax(x, dim=-1),
                    np_log_softmax, True),
    "layer_norm": (lambda x: loom.layer_norm(x, (x.shape[-1],)),
                   lambda x: torch.nn.functional.layer_norm(x, (x.shape[-1],)),
                   np_layer_norm, True),
    "rms_norm": (lambda x: loom.rms_norm(x, (x.shape[-1],), eps=1e-6),
                 lambda x: torch.nn.functional.rms_norm(x, (x.shape[-1],), eps=1e-6),
                 np_rms_norm, True),
    "row sum": (lambda x: x.sum(-1), lambda x: x.sum(-1), lambda x: x.sum(-1), False),
}


def row_sweep(quick):
    """Rows of length L at a fixed element count (16M f32, 1M under --quick), so every length
    moves the same bytes; then L=4096 rows of a transposed view (each row strided by the row
    count) and of a slice (rows 8 elements apart from their neighbours' ends)."""
    n = (16 << 20) // (16 if quick else 1)
    W = []
    for op, (lf, tf, ref, whole) in ROW_OPS.items():
        cases = [(L, None) for L in SWEEP_L] + [(4096, "t"), (4096, "slice")]
        for L, view in cases:
            R = max(1, n // L)
            base = (L, R) if view == "t" else (R, L + 8) if view == "slice" else (R, L)
            label = {None: "", "t": " [transposed]", "slice": " [sliced]"}[view]
            nbytes = 4 * R * L * (2 if whole else 1) + (0 if whole else 4 * R)
            W.append(work(f"L={L} {op}{label}", nbytes, ("arr", [base], "float32", view),
                          {"loom fused": lf, "torch eager": tf}, "L=", ref=ref, tol=1e-4,
                          tags={"op": op, "L": L, "view": view}))
    return W


def np_add_sum(x, y):
    return (x + y).sum()


def small_rows():
    """Shapes where per-call overhead (recording, planning, dispatch) is most of the time: µs
    per call, the sync included. 200 runs each: a call is tens of µs."""
    W = []
    for r, c in ((64, 64), (256, 256), (64, 1024), (256, 1024)):
        shape = [(r, c)]
        for op in ("softmax", "layer_norm"):
            lf, tf, ref, _ = ROW_OPS[op]
            W.append(work(f"small {r}x{c} {op}", 8 * r * c, ("arr", shape, "float32", None),
                          {"loom fused": lf, "numpy": ref, "torch eager": tf}, "small",
                          ref=ref, tol=1e-4, reps=200, tags={"op": op}))
        W.append(work(f"small {r}x{c} add+sum", 8 * r * c, ("arr", shape * 2, "float32", None),
                      {"loom fused": lambda x, y: (x + y).sum(), "numpy": np_add_sum,
                       "torch eager": lambda x, y: (x + y).sum()}, "small",
                      ref=np_add_sum, tol=1e-4, reps=200, tags={"op": "add+sum"}))
    return W


def half_rows(quick):
    """16-bit inputs (compute in f32 inside, as torch does), each checked against float64 numpy
    on the same (rounded) values with a bf16 tolerance."""
    k = 16 if quick else 1
    n = (16 << 20) // k
    ln_r, sm_r = 4096 // k, 16384 // k
    W = []
    for dt in ("bfloat16", "float16"):
        W.append(work(f"{dt} sum {n >> 20}M", 2 * n, ("arr", [(n,)], dt, None),
                      {"loom fused": lambda x: x.sum(), "torch eager": lambda x: x.sum(),
                       "torch.compile": lambda x: x.sum()}, "bfloat16",
                      ref=lambda x: x.sum(), tol=2e-2, tags={"op": "sum", "dtype": dt}))
    lf, tf, ref, _ = ROW_OPS["layer_norm"]
    W.append(work(f"bfloat16 layer_norm {ln_r}x4096", 2 * 2 * ln_r * 4096,
                  ("arr", [(ln_r, 4096)], "bfloat16", None),
                  {"loom fused": lf, "torch eager": tf, "torch.compile": tf}, "bfloat16",
                  ref=ref, tol=2e-2, tags={"op": "layer_norm", "dtype": "bfloat16"}))
    lf, tf, ref, _ = ROW_OPS["softmax"]
    W.append(work(f"bfloat16 softmax {sm_r}x1000", 2 * 2 * sm_r * 1000,
                  ("arr", [(sm_r, 1000)], "bfloat16", None),
                  {"loom fused": lf, "torch eager": tf, "torch.compile": tf}, "bfloat16",
                  ref=ref, tol=2e-2, tags={"op": "softmax", "dtype": "bfloat16"}))
    return W


def column_rows(quick, C):
    """Reductions over the leading (or a middle) dim: the output is a row, each input row adds
    into all of it. 4096x4096 mean(0) is the base "column mean" row. Under --quick the leading
    dim shrinks 16x."""
    k = 16 if quick else 1
    R = 4096 // k
    W = []

    def add(label, shape, fn, np_fn, out_elems, tags):
        shp = "x".join(map(str, shape))
        W.append(work(f"column {shp} {label}", 4 * (math.prod(shape) + out_elems),
                      ("arr", [shape], "float32", None),
                      {"loom fused": fn, "numpy": np_fn, "torch eager": fn, "torch.compile": fn},
                      "column", ref=np_fn, tol=1e-4, tags=tags))

    add("sum(0)", (R, C), lambda x: x.sum(0), lambda x: x.sum(0), C, {"op": "sum(0)"})
    add("amax(0)", (R, C), lambda x: x.amax(0), lambda x: x.max(0), C, {"op": "amax(0)"})
    for shape in ((1024 // k, 16384), (16384 // k, 1024), ((1 << 20) // k, 16), (16, (1 << 20) // k)):
        add("sum(0)", shape, lambda x: x.sum(0), lambda x: x.sum(0), shape[1], {"op": "sum(0)"})
    mid = (64 // k, 512, 512)
    add("sum(1)", mid, lambda x: x.sum(1), lambda x: x.sum(1), mid[0] * mid[2], {"op": "sum(1)"})
    add("sum(0,keep)", (R, C), lambda x: x.sum(0, keepdim=True),
        lambda x: x.sum(0, keepdims=True), C, {"op": "keepdim"})
    add("(x*x).sum(0)", (R, C), lambda x: (x * x).sum(0), lambda x: (x * x).sum(0), C,
        {"op": "prologue"})
    add("sum(0)/n+1", (R, C), lambda x: x.sum(0) / x.shape[0] + 1,
        lambda x: x.sum(0) / x.shape[0] + 1, C, {"op": "epilogue"})
    return W


def gpt_rows():
    """One GPT block forward, batch 32, context 64, width 128, 4 heads (same weights for every
    implementation), then its matmuls alone. ms per forward (no GB/s: it is compute bound)."""
    spec = ("gpt", GPT_B, GPT_T, GPT_C)
    W = []
    for name, f in (("gpt block", gpt_block), ("gpt block matmuls", gpt_matmuls)):
        W.append(work(f"{name} {GPT_B}x{GPT_T}x{GPT_C}", None, spec, {
            "loom fused": lambda *a, f=f: f(*a, F=LoomOps), "numpy": lambda *a, f=f: f(*a, F=NpOps),
            "torch eager": lambda *a, f=f: f(*a, F=TorchOps),
            "torch.compile": lambda *a, f=f: f(*a, F=TorchOps)}, "gpt",
            ref=lambda *a, f=f: f(*a, F=NpOps), tol=1e-4, tags={"op": name}))
    return W


# ---- host-side costs: dispatch of tiny ops, compile and cache loads -------------------------
TINY_N, TINY_OPS = 1024, 100


def tiny_chain(x):
    y = x
    for _ in range(TINY_OPS // 2):
        y = y * 1.0001
        y = y + 0.5
    return y


def tiny_rows(dev, reps, have_torch):
    """100 tiny ops on 1024 f32: host µs per op, recording, flush and launch included."""
    a = np.random.default_rng(1).standard_normal(TINY_N).astype(np.float32)
    want = tiny_chain(a.astype(np.float64))
    impls = {}
    lx = loom.tensor(a.copy(), device=dev)
    impls["loom fused"] = (lx, loom.sync, True)
    impls["loom fusion-off"] = (lx, loom.sync, False)
    if dev == "cpu":
        impls["numpy"] = (a.copy(), lambda: None, True)
    if have_torch:
        tx = torch.from_numpy(a.copy()).to(dev)
        impls["torch eager"] = (tx, torch.cuda.synchronize if dev == "cuda" else (lambda: None), True)
    rows = []
    for impl, (x, sync, fuse) in impls.items():
        loom.set_fusion(fuse)
        try:
            err = rel_err(to_np(tiny_chain(x)), want)
            if not err <= 1e-5:
                sys.exit(f"tiny ops: {impl} disagrees with float64 numpy (rel err {err:.3g})")
            times = []
            for i in range(max(reps, 50) + 5):
                t0 = time.perf_counter()
                y = tiny_chain(x)
                sync()
                times.append((time.perf_counter() - t0) * 1e3)
                del y
            ms, mn = statistics.median(times[5:]), min(times[5:])
        finally:
            loom.set_fusion(True)
        rows.append({"work": f"{TINY_OPS} tiny ops", "impl": impl, "ms": ms, "min_ms": mn,
                     "suspect": mn * 2 < ms, "gbs": None, "us_per_op": ms * 1e3 / TINY_OPS,
                     "group": "tiny"})
    base = {k: r["ms"] for r in rows for k in ("torch eager", "numpy") if r["impl"] == k}
    for r in rows:
        for k, v in base.items():
            r["x_vs_" + k.replace(" ", "_")] = v / r["ms"]
    return rows


UNARY = ["tanh", "sigmoid", "exp", "sin", "cos", "relu", "abs", "neg"]


def compile_rows(dev, reps):
    """A fused kernel of a signature never seen before: cold lowering (NVRTC on the GPU), then
    the same program after the in-memory cache is dropped (a disk-cache load on the GPU), then
    again (a memory hit: record + flush + launch + wait). Medians over `reps` distinct
    signatures. The memory hit is also split into its parts, timed in the same runs: recording
    the 18 ops, the flush (loom.flush: plan, signature, cache lookup, launch; on the CPU it also
    runs the kernel) and the wait (loom.sync: the GPU's time). A second memory hit of each
    signature shows what a hit costs once the module's first launch is behind it."""

    def program(x, i):  # op choice from the base-8 digits of i: a distinct signature per i
        y = x
        for _ in range(6):
            y = getattr(y, UNARY[i % 8])() * 0.5 + x
            i //= 8
        return y

    x = loom.tensor(np.random.default_rng(2).standard_normal(4096).astype(np.float32), device=dev)
    loom.sync()
    program(x, 0).numpy()  # warms the compiler up; not counted
    cold, disk, hot, again = [], [], [], []
    parts = {"record": [], "flush": [], "wait": []}

    def timed(i, split=None):
        c0 = loom.counters()
        t0 = time.perf_counter()
        y = program(x, i)
        t1 = time.perf_counter()
        loom.flush()
        t2 = time.perf_counter()
        loom.sync()
        t3 = time.perf_counter()
        c1 = loom.counters()
        del y
        if split is not None:
            for k, dt in (("record", t1 - t0), ("flush", t2 - t1), ("wait", t3 - t2)):
                split[k].append(dt * 1e3)
        return (t3 - t0) * 1e3, {k: c1[k] - c0[k] for k in ("cache_misses", "disk_hits",
                                                             "cache_hits")}

    for i in range(1, reps + 1):
        dt, d = timed(8**5 + i * 7919)  # far from 0's structure
        if d["cache_misses"] != 1 or d["disk_hits"] != 0:
            sys.exit(f"compile: expected one cold compile, counters moved {d}")
        cold.append(dt)
        loom.clear_kernel_cache()
        dt, d = timed(8**5 + i * 7919)
        if dev == "cuda":
            if d["disk_hits"] != 1:
                sys.exit(f"compile: expected one disk-cache hit, counters moved {d}")
            disk.append(dt)
        dt, d = timed(8**5 + i * 7919, parts)
        if d["cache_hits"] != 1:
            sys.exit(f"compile: expected one memory hit, counters moved {d}")
        hot.append(dt)
        dt, d = timed(8**5 + i * 7919)
        again.append(dt)
    rows = [{"work": "fused kernel, cold compile", "impl": "loom fused",
             "ms": statistics.median(cold), "gbs": None}]
    if disk:
        rows.append({"work": "fused kernel, disk-cache load", "impl": "loom fused",
                     "ms": statistics.median(disk), "gbs": None})
    rows.append({"work": "fused kernel, memory hit", "impl": "loom fused",
                 "ms": statistics.median(hot), "gbs": None})
    for k in ("record", "flush", "wait"):
        rows.append({"work": f"fused kernel, hit: {k}", "impl": "loom fused",
                     "ms": statistics.median(parts[k]), "gbs": None})
    rows.append({"work": "fused kernel, 2nd memory hit", "impl": "loom fused",
                 "ms": statistics.median(again), "gbs": None})
    return rows


def host_inputs(spec, nin, rng):
    """`nin` input sets (rotated while timing so caches don't flatter), shared by every
    implementation so their results can be compared."""
    kind = spec[0]
    sets = []
    for _ in range(nin):
        if kind == "vec":
            sets.append([rng.standard_normal(spec[1], dtype=np.float32)])
        elif kind == "mat":
            sets.append([rng.standard_normal((spec[1], spec[2]), dtype=np.float32)])
        elif kind == "arr":  # ("arr", [shape, ...], dtype, view): each shape standard normal
            sets.append([round_to(rng.standard_normal(s, dtype=np.float32), spec[2])
                         for s in spec[1]])
        elif kind == "gpt":  # activations, then the block's weights at their usual scales
            B, T, C = spec[1:]

            def w(*s, scale=1.0):
                return (scale * rng.standard_normal(s, dtype=np.float32)).astype(np.float32)

            sets.append([w(B, T, C), 1 + w(C, scale=0.1), w(C, scale=0.1),
                         w(C, 3 * C, scale=C**-0.5), w(3 * C, scale=0.1),
                         w(C, C, scale=C**-0.5), w(C, scale=0.1),
                         1 + w(C, scale=0.1), w(C, scale=0.1),
                         w(C, 4 * C, scale=C**-0.5), w(4 * C, scale=0.1),
                         w(4 * C, C, scale=(4 * C)**-0.5), w(C, scale=0.1),
                         np.triu(np.ones((T, T), dtype=bool), 1)])  # True above the diagonal
        elif kind == "adam":  # parameters, gradients, first and (positive) second moments
            n = spec[1]
            sets.append([rng.standard_normal(n, dtype=np.float32),
                         rng.standard_normal(n, dtype=np.float32),
                         0.1 * rng.standard_normal(n, dtype=np.float32),
                         0.01 * np.abs(rng.standard_normal(n, dtype=np.float32))])
        else:
            sets.append([rng.standard_normal((spec[1], spec[2]), dtype=np.float32),
                         rng.standard_normal(spec[2], dtype=np.float32)])
    return sets


def view_of(x, view):
    """The rows a workload reads out of its (contiguous) first input: the same view on numpy,
    torch and loom."""
    if view == "t":  # rows strided by the row count
        return x.T if isinstance(x, np.ndarray) else x.t()
    if view == "slice":  # rows of L out of L + 8
        return x[:, :x.shape[1] - 8]
    return x


def make_inputs(spec, backend, dev, host_sets):
    kind = spec[0]
    dt = (spec[3] if kind == "mat" and len(spec) > 3 else spec[2] if kind == "arr"
          else "float32")
    view = spec[3] if kind == "arr" else None
    outs = []
    for arrs in host_sets:
        if backend == "numpy":
            ins = [a.copy() for a in arrs]  # in-place workloads must not share state
        elif backend == "torch":  # bool masks keep their dtype
            ins = [torch.from_numpy(a.copy()).to(dev) for a in arrs]
            ins = [t if t.dtype == torch.bool else t.to(getattr(torch, dt)) for t in ins]
        else:
            ins = [loom.tensor(a.copy(), device=dev) for a in arrs]
            ins = [t if t.dtype == loom.bool_ else t.to(getattr(loom, dt)) for t in ins]
        outs.append([view_of(ins[0], view)] + ins[1:])
    loom.sync()
    return outs


def reference(w, host_set):
    """The float64 numpy result of the workload on the first input set (None: check against
    the first implementation instead)."""
    if w["ref"] is None:
        return None
    arrs = [a if a.dtype == bool else a.astype(np.float64) for a in host_set]
    view = w["spec"][3] if w["spec"][0] == "arr" else None
    return np.asarray(w["ref"](view_of(arrs[0], view), *arrs[1:]), dtype=np.float64)


def torch_reset():
    # Compiled graphs, guards and recompile counts of one workload must not carry over.
    try:
        torch.compiler.reset()
    except AttributeError:  # torch < 2.1
        torch._dynamo.reset()


def selected(w, only, groups):
    """--only: a group name takes its whole group; anything else is a substring of names."""
    if not only or w["name"].startswith("copy"):
        return True
    return any(w["group"] == o if o in groups else o in w["name"] for o in only)


def bandwidth_rows(dev, quick, timer, have_torch, rng, rows, only=None, skip=()):
    """Every bandwidth workload for every implementation not in `skip`; rows are appended as
    measured. An implementation that can't run a workload (a torch.compile that fails, an op
    missing) gets a row with ms None and the reason; a wrong result fails the run."""
    copies = {}  # bytes moved -> the fastest copy's GB/s of the run
    W = workloads(dev, quick)
    groups = {w["group"] for w in W}
    for w in W:
        name, nbytes, spec, impls = w["name"], w["bytes"], w["spec"], w["impls"]
        if not selected(w, only, groups):
            continue
        results = {}
        nin = 2
        host_sets = host_inputs(spec, nin, rng)
        ref = reference(w, host_sets[0])
        tol = w["tol"] or (2e-2 if "bfloat16" in name else 1e-4)
        for impl, fn in impls.items():
            backend = "numpy" if impl == "numpy" else "torch" if impl.startswith("torch") else "loom"
            if (backend == "numpy" and dev == "cuda") or impl in skip:
                continue
            if backend == "torch" and not have_torch:
                continue
            row = {"work": name, "impl": impl, "group": w["group"], **w["tags"]}
            if backend == "torch":
                torch_reset()
            if impl == "torch.compile":
                fn = torch.compile(fn)
            ins = make_inputs(spec, backend, dev, host_sets)
            loom.set_fusion(impl != "loom fusion-off")
            try:
                t0 = time.perf_counter()
                try:
                    out = to_np(fn(*ins[0]))
                except Exception as e:  # can't run here: say why in the row, go on
                    reason = f"{type(e).__name__}: {str(e).strip().splitlines()[0][:160]}" \
                        if str(e).strip() else type(e).__name__
                    rows.append({**row, "ms": None, "min_ms": None, "gbs": None,
                                 "skipped": reason})
                    print(f"  skipped {name} / {impl}: {reason}", flush=True)
                    continue
                if impl == "torch.compile":
                    row["compile_s"] = time.perf_counter() - t0
                if ref is None:
                    ref = out
                else:
                    err = rel_err(out, ref)
                    if not err <= tol:
                        what = "float64 numpy" if w["ref"] else "the first implementation"
                        sys.exit(f"{name}: {impl} disagrees with {what} (rel err {err:.3g})")
                ms, mn = timer.stats(lambda i: fn(*ins[i]), nin, backend, w["reps"])
            finally:
                loom.set_fusion(True)
                del ins
            gbs = nbytes / ms / 1e6 if nbytes else None
            results[impl] = ms
            if name.startswith("copy"):  # a ceiling: the fastest copy of these bytes in the run
                copies[nbytes] = max(copies.get(nbytes, 0), gbs)
            # A min under half the median: the runs were disturbed (another process, torch's
            # OpenMP threads waking late), so the median may not be this implementation's.
            row.update({"ms": ms, "min_ms": mn, "gbs": gbs, "suspect": mn * 2 < ms,
                        "load1": os.getloadavg()[0]})  # the box is shared: say how busy
            if w["reps"]:  # the per-call rows
                row["us_per_call"] = ms * 1e3
            rows.append(row)
            print(f"  measured {name} / {impl}: {ms:.3f} ms (min {mn:.3f})", flush=True)
        if have_torch:
            torch_reset()
        base = {k: results.get(k) for k in ("torch.compile", "torch eager", "numpy")}
        near = min(copies, key=lambda b: abs(math.log(b / nbytes))) if copies and nbytes else None
        for r in rows:
            if r["work"] != name or not r.get("ms"):
                continue
            r["pct_copy"] = 100 * r["gbs"] / copies[near] if near else None
            r["pct_big_copy"] = 100 * r["gbs"] / copies[max(copies)] if copies and r["gbs"] \
                else None
            r["copy_bytes"] = near
            for k, v in base.items():
                if v:
                    r["x_vs_" + k.replace(" ", "_").replace(".", "_")] = v / r["ms"]


def fmt_row(r):
    if r.get("ms") is None:
        return f"{r['work']:<34}{r['impl']:<18}{'skipped: ' + r.get('skipped', '?')}"
    pct = f"{r['pct_copy']:.0f}" if r.get("pct_copy") else "-"
    big = f"{r['pct_big_copy']:.0f}" if r.get("pct_big_copy") else "-"
    gbs = f"{r['gbs']:.1f}" if r.get("gbs") else "-"
    mn = f"{r['min_ms']:.3f}" if r.get("min_ms") is not None else "-"
    mn += "*" if r.get("suspect") else " "
    peer = next((f"{r[k]:.2f}x {k[5:]}" for k in ("x_vs_torch_compile", "x_vs_torch_eager",
                                                   "x_vs_numpy") if r.get(k)), "")
    extra = f"  {r['us_per_op']:.2f} us/op" if "us_per_op" in r else ""
    extra += f"  {r['us_per_call']:.1f} us/call" if "us_per_call" in r else ""
    extra += f"  (compile {r['compile_s']:.1f} s)" if "compile_s" in r else ""
    return (f"{r['work']:<34}{r['impl']:<18}{r['ms']:>10.3f}{mn:>11}{gbs:>8}{pct:>7}{big:>6}"
            f"  {peer}{extra}")


def summaries(rows):
    """Per CPU group, the ratios its targets are stated in; '<-' marks a cell that misses."""
    ms = {(r["work"], r["impl"]): r for r in rows if r.get("ms")}
    out = []

    def cell(work, impl):
        return ms.get((work, impl))

    def mark(miss):
        return "  <-" if miss else ""

    sweep = [r for r in rows if r.get("group") == "L=" and r["impl"] == "loom fused" and r.get("ms")]
    if sweep:
        out.append("L= rows (GB/s; 'vs 4096' = loom's L=4096 GB/s / this one, target <= 1.3; "
                   "'vs eager' = torch eager ms / loom ms, target >= 2 from L=128)")
        for op in ROW_OPS:
            mine = [r for r in sweep if r["op"] == op]
            top = next((r for r in mine if r["L"] == 4096 and not r["view"]), None)
            for r in mine:
                te = cell(r["work"], "torch eager")
                v4096 = top["gbs"] / r["gbs"] if top else None
                veag = te["ms"] / r["ms"] if te else None
                miss = (v4096 and v4096 > 1.3) or (veag and r["L"] >= 128 and veag < 2)
                out.append(f"  {r['work']:<34}{r['gbs']:>7.1f} GB/s"
                           f"{f'  vs 4096 {v4096:.2f}x' if v4096 else '':<18}"
                           f"{f'  vs eager {veag:.2f}x' if veag else '':<18}{mark(miss)}")
    small = [r for r in rows if r.get("group") == "small" and r["impl"] == "loom fused"
             and r.get("ms")]
    if small:
        out.append("small (us per call; target: loom no slower than torch eager)")
        for r in small:
            te = cell(r["work"], "torch eager")
            npr = cell(r["work"], "numpy")
            s = f"  {r['work']:<34}loom {r['us_per_call']:>8.1f}"
            if te:
                s += f"  torch {te['us_per_call']:>8.1f}  loom/torch {r['ms'] / te['ms']:.2f}x"
            if npr:
                s += f"  numpy {npr['us_per_call']:>8.1f}"
            out.append(s + mark(te and r["ms"] > te["ms"]))
    # The others: loom's ms over the best peer's (target <= 1.1 for the column group; the
    # rest are reported against torch eager and torch.compile, no stated target).
    for group, peers, target in (("bfloat16", ("torch eager", "torch.compile"), None),
                                 ("column", ("numpy", "torch eager", "torch.compile"), 1.1),
                                 ("gpt", ("numpy", "torch eager", "torch.compile"), None),
                                 ("sum", ("numpy", "torch eager", "torch.compile"), None),
                                 ("adam", ("numpy", "torch eager", "torch.compile"), None)):
        mine = [r for r in rows if r.get("group") == group and r["impl"] == "loom fused"
                and r.get("ms")]
        if not mine:
            continue
        out.append(f"{group} (loom ms / best peer's ms" +
                   (f", target <= {target})" if target else ")"))
        for r in mine:
            got = [(cell(r["work"], p)["ms"], p) for p in peers if cell(r["work"], p)]
            s = f"  {r['work']:<34}loom {r['ms']:>9.3f} ms"
            if got:
                best, who = min(got)
                s += f"  best {who} {best:.3f} ms  ratio {r['ms'] / best:.2f}x"
                s += mark(target and r["ms"] / best > target)
            out.append(s)
    skipped = [r for r in rows if r.get("ms") is None]
    if skipped:
        out.append("skipped cells:")
        out += [f"  {r['work']} / {r['impl']}: {r['skipped']}" for r in skipped]
    suspect = [r for r in rows if r.get("suspect")]
    if suspect:
        out.append(f"{len(suspect)} suspect cells (min < median / 2; the median may be noise):")
        out += textwrap.wrap("; ".join(f"{r['work']} / {r['impl']}" for r in suspect), 100,
                             initial_indent="  ", subsequent_indent="  ")
    return out


def torch_stall_probe():
    """Median ms of a 64x64 torch softmax (about 10 µs when healthy). On the 2-core VM torch's
    OpenMP team stalls a whole process at 4 ms steps per op, min included, which the suspect
    mark can't see: the run says so up front."""
    t = torch.randn(64, 64)
    times = []
    for _ in range(30):
        t0 = time.perf_counter()
        torch.softmax(t, dim=-1)
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if loom.cuda.is_available() else "cpu")
    ap.add_argument("--json")
    ap.add_argument("--png")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--only", help="comma-separated group names (the whole group: "
                    + ", ".join(CPU_GROUPS) + ", sum, adam, softmax, ...; the CPU groups on the "
                    "CPU only) or workload names (substrings) to run; the copy ceiling always "
                    "runs; 'tiny' and 'compile' select the host rows")
    ap.add_argument("--cache-dir", help="loom's disk kernel cache (default: a fresh temporary "
                    "folder, so compile rows start cold)")
    ap.add_argument("--skip", default="", help="comma-separated implementations to leave out of "
                    "the bandwidth rows (e.g. 'torch.compile,loom fusion-off' for quick A/B runs)")
    ap.add_argument("--torch-threads", type=int, help="torch.set_num_threads (default: torch's "
                    "own). On a loaded 2-core box torch's spinning OpenMP team stalls for ms per "
                    "op; 1 thread (or OMP_WAIT_POLICY=PASSIVE in the environment) avoids that")
    args = ap.parse_args()
    os.environ["LOOM_CACHE_DIR"] = args.cache_dir or tempfile.mkdtemp(prefix="loom-suite-")
    only = [o.strip() for o in args.only.split(",")] if args.only else None
    dev = args.device
    rng = np.random.default_rng(0)
    timer = Timer(dev, args.reps)
    have_torch = torch is not None and (dev == "cpu" or torch.cuda.is_available())
    probe = None  # ms of torch's 64x64 softmax on the CPU
    if torch is None:
        print("torch is not importable: no torch eager / torch.compile columns", flush=True)
    elif dev == "cpu":
        if args.torch_threads:
            torch.set_num_threads(args.torch_threads)
        probe = torch_stall_probe()
        print(f"torch {torch.__version__}: {torch.get_num_threads()} threads, OMP_WAIT_POLICY="
              f"{os.environ.get('OMP_WAIT_POLICY', '(unset)')}; load average "
              f"{os.getloadavg()[0]:.2f}; 64x64 softmax {probe * 1e3:.0f} us", flush=True)
        if probe > 1.0:
            print("WARNING: torch's OpenMP threads are stalling in this process (ms per op): the "
                  "torch columns measure the stalls, not torch. Rerun with OMP_WAIT_POLICY=PASSIVE "
                  "or --torch-threads 1", flush=True)
    rows, failure = [], None
    try:
        skip = {o.strip() for o in args.skip.split(",") if o.strip()}
        bandwidth_rows(dev, args.quick, timer, have_torch, rng, rows, only, skip)
        if not only or "tiny" in only:
            rows += tiny_rows(dev, args.reps, have_torch)
        if not only or "compile" in only:
            rows += compile_rows(dev, args.reps)
    except SystemExit as e:  # a failed check: report it after what was measured
        failure = str(e.code)
    print(f"{'work':<34}{'impl':<18}{'ms':>10}{'min ms':>11}{'GB/s':>8}{'% copy':>7}{'% big':>6}"
          "  vs peer")
    for r in rows:
        print(fmt_row(r))
    if any(r.get("suspect") for r in rows):
        print("* min under half the median: disturbed runs, the median is suspect")
    print()
    for line in summaries(rows):
        print(line)
    if args.json:
        with open(args.json, "w") as f:
            meta = {"quick": args.quick, "reps": args.reps}
            if torch is not None:
                meta.update(torch=torch.__version__, torch_threads=torch.get_num_threads(),
                            omp_wait_policy=os.environ.get("OMP_WAIT_POLICY"),
                            torch_probe_ms=probe)
            json.dump({"device": dev, **meta, "rows": rows, "failure": failure}, f, indent=1)
    if args.png:
        plot(rows, args.png)
    if failure:
        sys.exit("FAILED: " + failure)


# The base rows (one workload per group) share the first panel; each CPU group has its own.
# (group, y label, row key, log scale: per-call times span 5 µs to torch's multi-ms stalls)
PANELS = (("base", "% of copy bandwidth", "pct_copy", False), ("L=", "GB/s", "gbs", False),
          ("small", "us per call", "us_per_call", True), ("bfloat16", "GB/s", "gbs", False),
          ("column", "GB/s", "gbs", False), ("gpt", "ms", "ms", False))


def plot(rows, path):
    try:
        import matplotlib
    except ImportError:
        print(f"--png {path}: matplotlib is not importable, no plot drawn (pip install --target "
              "DIR matplotlib, then add DIR to PYTHONPATH)", file=sys.stderr)
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def panel(r):
        return r.get("group") if r.get("group") in CPU_GROUPS else "base"

    panels = [(g, label, key, log, [r for r in rows if panel(r) == g and r.get(key)])
              for g, label, key, log in PANELS]
    panels = [p for p in panels if p[4]]
    if not panels:
        print(f"--png {path}: no rows to plot", file=sys.stderr)
        return
    # One colour per implementation across the panels.
    every = sorted({r["impl"] for r in rows}, key=[r["impl"] for r in rows].index)
    colour = {impl: f"C{i}" for i, impl in enumerate(every)}
    widest = max(len({r["work"] for r in p[4]}) for p in panels)
    fig, axes = plt.subplots(len(panels), 1, figsize=(max(8, widest * 0.45), 4.2 * len(panels)),
                             squeeze=False)
    for ax, (g, label, key, log, prow) in zip(axes[:, 0], panels):
        works = sorted({r["work"] for r in prow}, key=[r["work"] for r in prow].index)
        impls = sorted({r["impl"] for r in prow}, key=[r["impl"] for r in prow].index)
        w = 0.8 / len(impls)
        for k, impl in enumerate(impls):
            xs, ys = [], []
            for i, wk in enumerate(works):
                for r in prow:
                    if r["work"] == wk and r["impl"] == impl:
                        xs.append(i + k * w)
                        ys.append(r[key])
            ax.bar(xs, ys, w, label=impl, color=colour[impl])
        ax.set_xticks([i + 0.4 - w / 2 for i in range(len(works))])
        ax.set_xticklabels(works, rotation=35, ha="right", fontsize=7)
        ax.set_ylabel(label)
        if log:
            ax.set_yscale("log")
        ax.set_title(g)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
