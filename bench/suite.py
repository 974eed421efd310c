"""loom's benchmark suite: memory-bound workloads, every implementation in one process.

Implementations: loom fused, loom fusion-off, numpy (CPU), torch eager and torch.compile (GPU,
when torch is importable), and a copy as the bandwidth ceiling. Each result is checked against
the others before timing, so a fast wrong answer fails the run.

    python bench/suite.py [--device cpu|cuda] [--json out.json] [--png out.png] [--quick]

Bandwidth rows report effective GB/s (each input read once, each output written once) and % of
the copy measured in the same run: the copy that moves the nearest byte count (a 2 GiB f32 copy,
and on the GPU a 1 GiB bf16 copy, since a kernel's fixed launch and tail cost weighs twice as much
on half the bytes); `pct_big_copy` keeps the ratio to the 2 GiB copy for every row; host rows report ms (tiny ops also µs per op); compile rows
report a never-seen signature's cold lowering, its disk-cache load and a memory hit.
"""
import argparse
import json
import math
import os
import statistics
import sys
import tempfile
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
        # The result is held until after the sync: loom never computes what nobody holds.
        for i in range(3):
            out = fn(i % nin)
            self.sync()
            del out
        times = []
        for i in range(self.reps):
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
        return statistics.median(times)


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
            ms = statistics.median(times[5:])
        finally:
            loom.set_fusion(True)
        rows.append({"work": f"{TINY_OPS} tiny ops", "impl": impl, "ms": ms, "gbs": None,
                     "us_per_op": ms * 1e3 / TINY_OPS})
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


def make_inputs(spec, backend, dev, host_sets):
    kind = spec[0]
    outs = []
    for arrs in host_sets:
        dt = spec[3] if kind == "mat" and len(spec) > 3 else "float32"
        if backend == "numpy":
            outs.append([a.copy() for a in arrs])  # in-place workloads must not share state
        elif backend == "torch":
            outs.append([torch.from_numpy(a.copy()).to(dev).to(getattr(torch, dt)) for a in arrs])
        else:
            outs.append([loom.tensor(a.copy(), device=dev).to(getattr(loom, dt)) for a in arrs])
    return outs


def bandwidth_rows(dev, quick, timer, have_torch, rng, rows, only=None, skip=()):
    """Every bandwidth workload for every implementation not in `skip`; rows are appended as
    measured."""
    copies = {}  # bytes moved -> the fastest copy's GB/s of the run
    for name, nbytes, spec, impls in workloads(dev, quick):
        if only and not name.startswith("copy") and not any(o in name for o in only):
            continue
        results, ref = {}, None
        nin = 2
        host_sets = host_inputs(spec, nin, rng)
        for impl, fn in impls.items():
            backend = "numpy" if impl == "numpy" else "torch" if impl.startswith("torch") else "loom"
            if (backend == "numpy" and dev == "cuda") or impl in skip:
                continue
            if backend == "torch" and (not have_torch or (impl == "torch.compile" and dev != "cuda")):
                continue
            if impl == "torch.compile":
                fn = torch.compile(fn)
            ins = make_inputs(spec, backend, dev, host_sets)
            loom.set_fusion(impl != "loom fusion-off")
            try:
                out = to_np(fn(*ins[0]))
                if ref is None:
                    ref = out
                else:
                    err = rel_err(out, ref)
                    tol = 2e-2 if "bfloat16" in name else 1e-4
                    if not err <= tol:
                        sys.exit(f"{name}: {impl} disagrees with the first implementation (rel err {err:.3g})")
                ms = timer.median_ms(lambda i: fn(*ins[i]), nin, backend)
            finally:
                loom.set_fusion(True)
            gbs = nbytes / ms / 1e6
            results[impl] = ms
            if name.startswith("copy"):  # a ceiling: the fastest copy of these bytes in the run
                copies[nbytes] = max(copies.get(nbytes, 0), gbs)
            rows.append({"work": name, "impl": impl, "ms": ms, "gbs": gbs})
            print(f"  measured {name} / {impl}: {ms:.3f} ms", flush=True)
        base = {k: results.get(k) for k in ("torch.compile", "torch eager", "numpy")}
        near = min(copies, key=lambda b: abs(math.log(b / nbytes))) if copies else None
        for r in rows:
            if r["work"] != name:
                continue
            r["pct_copy"] = 100 * r["gbs"] / copies[near] if near else None
            r["pct_big_copy"] = 100 * r["gbs"] / copies[max(copies)] if copies else None
            r["copy_bytes"] = near
            for k, v in base.items():
                if v:
                    r["x_vs_" + k.replace(" ", "_").replace(".", "_")] = v / r["ms"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if loom.cuda.is_available() else "cpu")
    ap.add_argument("--json")
    ap.add_argument("--png")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--only", help="comma-separated workload names (substrings) to run; the copy "
                    "ceiling always runs; 'tiny' and 'compile' select the host rows")
    ap.add_argument("--cache-dir", help="loom's disk kernel cache (default: a fresh temporary "
                    "folder, so compile rows start cold)")
    ap.add_argument("--skip", default="", help="comma-separated implementations to leave out of "
                    "the bandwidth rows (e.g. 'torch.compile,loom fusion-off' for quick A/B runs)")
    args = ap.parse_args()
    os.environ["LOOM_CACHE_DIR"] = args.cache_dir or tempfile.mkdtemp(prefix="loom-suite-")
    only = [o.strip() for o in args.only.split(",")] if args.only else None
    dev = args.device
    rng = np.random.default_rng(0)
    timer = Timer(dev, args.reps)
    have_torch = torch is not None and (dev == "cpu" or torch.cuda.is_available())
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
    print(f"{'work':<30}{'impl':<18}{'ms':>10}{'GB/s':>10}{'% copy':>8}{'% big':>7}  vs peer")
    for r in rows:
        pct = f"{r['pct_copy']:.0f}" if r.get("pct_copy") else "-"
        big = f"{r['pct_big_copy']:.0f}" if r.get("pct_big_copy") else "-"
        gbs = f"{r['gbs']:.1f}" if r.get("gbs") else "-"
        peer = next((f"{r[k]:.2f}x {k[5:]}" for k in ("x_vs_torch_compile", "x_vs_torch_eager",
                                                       "x_vs_numpy") if r.get(k)), "")
        extra = f"  {r['us_per_op']:.2f} us/op" if "us_per_op" in r else ""
        print(f"{r['work']:<30}{r['impl']:<18}{r['ms']:>10.3f}{gbs:>10}{pct:>8}{big:>7}  {peer}{extra}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": dev, "rows": rows, "failure": failure}, f, indent=1)
    if args.png:
        plot(rows, args.png)
    if failure:
        sys.exit("FAILED: " + failure)


def plot(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in rows if r.get("pct_copy")]
    works = sorted({r["work"] for r in rows}, key=[r["work"] for r in rows].index)
    impls = sorted({r["impl"] for r in rows}, key=[r["impl"] for r in rows].index)
    fig, ax = plt.subplots(figsize=(max(8, len(works) * 1.2), 4.5))
    w = 0.8 / len(impls)
    for k, impl in enumerate(impls):
        xs, ys = [], []
        for i, wk in enumerate(works):
            for r in rows:
                if r["work"] == wk and r["impl"] == impl and r.get("pct_copy"):
                    xs.append(i + k * w)
                    ys.append(r["pct_copy"])
        ax.bar(xs, ys, w, label=impl)
    ax.set_xticks([i + 0.4 - w / 2 for i in range(len(works))])
    ax.set_xticklabels(works, rotation=30, ha="right")
    ax.set_ylabel("% of copy bandwidth")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
