#!/usr/bin/env python3
"""Python dispatch cost: tiny ops on 1024 elements, µs per op, loom beside numpy (and torch if
importable) in the same process. Prints a table; --json PATH writes rows {work, impl, ms, gbs}
(ms: one repetition of the work; gbs: the bytes an eager run would move, per second)."""
import argparse
import json
import statistics
import time

import numpy as np

import loom

try:
    import torch
except ImportError:
    torch = None

N = 1024
OPS = 100


def timeit(fn, reps):
    fn()  # warm up (and compile, for loom)
    fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def chain(x, sync):
    """OPS alternating tiny ops on x (x * c, then + c), the result forced by `sync`."""
    def run():
        y = x
        for i in range(OPS // 2):
            y = y * 1.0001
            y = y + 0.5
        sync(y)
    return run


def impls():
    a = np.random.default_rng(0).normal(size=N).astype(np.float32)
    b = a[::-1].copy()
    out = {"numpy": (a, b, lambda y: None, lambda x, d: _np_softmax(x, d))}
    la, lb = loom.tensor(a), loom.tensor(b)
    out["loom fused"] = (la, lb, lambda y: loom.sync(), lambda x, d: loom.softmax(x, d))
    out["loom unfused"] = out["loom fused"]
    out["loom record only"] = (la, lb, lambda y: None, lambda x, d: loom.softmax(x, d))
    if torch is not None:
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        out["torch"] = (ta, tb, lambda y: None, lambda x, d: torch.softmax(x, d))
    return out


def _np_softmax(x, d):
    e = np.exp(x - x.max(d, keepdims=True))
    return e / e.sum(d, keepdims=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--json", help="write result rows to this file")
    ap.add_argument("--reps", type=int, default=30)
    args = ap.parse_args()

    rows = []
    for impl, (x, y, sync, softmax) in impls().items():
        loom.set_fusion(impl != "loom unfused")
        nbytes = 4 * N
        work = [
            (f"{OPS} tiny ops on {N} f32 (chain)", chain(x, sync), OPS, 2 * nbytes * OPS),
            (f"x + y on {N} f32, one op", lambda: sync(x + y), 1, 3 * nbytes),
            (f"softmax of 8x128 f32", lambda: sync(softmax(x.reshape(8, 128), -1)), 1,
             2 * nbytes),
        ]
        for name, fn, ops, moved in work:
            if impl == "loom record only":
                loom.sync()
            s = timeit(fn, args.reps)
            if impl == "loom record only":
                loom.sync()  # don't let the recorded work pile up
            rows.append({"work": name, "impl": impl, "ms": s * 1e3, "gbs": moved / s / 1e9,
                         "us_per_op": s * 1e6 / ops})
    loom.set_fusion(True)

    print(f"{'work':<34} {'impl':<18} {'µs/op':>9} {'ms':>9} {'GB/s':>8}")
    for r in rows:
        print(f"{r['work']:<34} {r['impl']:<18} {r['us_per_op']:>9.2f} {r['ms']:>9.4f} "
              f"{r['gbs']:>8.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump([{k: r[k] for k in ("work", "impl", "ms", "gbs")} for r in rows], f,
                      indent=1)


if __name__ == "__main__":
    main()
