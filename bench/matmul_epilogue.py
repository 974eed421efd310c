#!/usr/bin/env python3
"""A matmul and its epilogue (x@w, x@w + b, gelu(x@w + b), x@w + b + r; float32) in one process:
loom with the epilogue off (LOOM_CPU_MATMUL_EPILOGUE=0: a kernel of its own, as before the
epilogue), fused in blocks of rows (LOOM_CPU_EPILOGUE_SPLIT=rows), fused after the whole GEMM
(=after) and as chosen (auto); numpy, and torch eager and torch.compile where torch imports.
Rounds interleave the variants (the order rotates each round), each a block of runs after a
warm-up; prints min and median ms of every run. The machine is noisy: read both columns."""
import argparse
import os
import statistics
import time

import numpy as np

import loom

try:
    import torch
except ImportError:
    torch = None

SHAPES = [(2048, 768, 768), (2048, 768, 3072), (2048, 128, 384), (2048, 128, 512)]
OPS = ["x@w", "x@w+b", "gelu(x@w+b)", "x@w+b+r"]


def loom_fn(op, x, w, b, r, epilogue, split):
    def run():
        os.environ["LOOM_CPU_MATMUL_EPILOGUE"] = epilogue
        os.environ["LOOM_CPU_EPILOGUE_SPLIT"] = split
        if op == "x@w":
            y = x @ w
        elif op == "x@w+b":
            y = x @ w + b
        elif op == "gelu(x@w+b)":
            y = loom.gelu(x @ w + b, "none")
        else:
            y = x @ w + b + r
        loom.sync()
        return y

    return run


def numpy_fn(op, x, w, b, r):
    if op == "gelu(x@w+b)":
        return None  # numpy has no erf
    return {
        "x@w": lambda: x @ w,
        "x@w+b": lambda: x @ w + b,
        "x@w+b+r": lambda: x @ w + b + r,
    }[op]


def torch_fns(op, x, w, b, r):
    f = {
        "x@w": lambda x, w, b, r: x @ w,
        "x@w+b": lambda x, w, b, r: x @ w + b,
        "gelu(x@w+b)": lambda x, w, b, r: torch.nn.functional.gelu(x @ w + b),
        "x@w+b+r": lambda x, w, b, r: x @ w + b + r,
    }[op]
    c = torch.compile(f)
    return {"torch eager": lambda: f(x, w, b, r), "torch.compile": lambda: c(x, w, b, r)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runs", type=int, default=4, help="runs a block (x4 for K=128 shapes)")
    ap.add_argument("--shapes", default="all", help="comma-separated MxKxN, or all")
    a = ap.parse_args()
    shapes = SHAPES
    if a.shapes != "all":
        shapes = [tuple(int(v) for v in s.split("x")) for s in a.shapes.split(",")]
    rng = np.random.default_rng(0)
    print("| GEMM (MxKxN) | op | variant | min ms | median ms |")
    print("|---|---|---|---:|---:|")
    for M, K, N in shapes:
        xn = rng.standard_normal((M, K), dtype=np.float32)
        wn = (rng.standard_normal((K, N)) / np.sqrt(K)).astype(np.float32)
        bn = rng.standard_normal((N,), dtype=np.float32)
        rn = rng.standard_normal((M, N), dtype=np.float32)
        xl, wl, bl, rl = (loom.tensor(v) for v in (xn, wn, bn, rn))
        runs = a.runs * (4 if K <= 256 else 1)
        for op in OPS:
            fns = {
                "loom before (epilogue off)": loom_fn(op, xl, wl, bl, rl, "0", "auto"),
                "loom rows": loom_fn(op, xl, wl, bl, rl, "1", "rows"),
                "loom after": loom_fn(op, xl, wl, bl, rl, "1", "after"),
                "loom auto": loom_fn(op, xl, wl, bl, rl, "1", "auto"),
            }
            if op == "x@w":  # no epilogue: the variants are one
                fns = {"loom": fns["loom auto"]}
            if numpy_fn(op, xn, wn, bn, rn):
                fns["numpy"] = numpy_fn(op, xn, wn, bn, rn)
            if torch is not None:
                tt = [torch.from_numpy(v) for v in (xn, wn, bn, rn)]
                fns.update(torch_fns(op, *tt))
            times = {k: [] for k in fns}
            names = list(fns)
            for rd in range(a.rounds):
                order = names[rd % len(names):] + names[: rd % len(names)]
                for k in order:
                    fns[k]()  # warm-up (and the compile, the first time)
                    for _ in range(runs):
                        t0 = time.perf_counter()
                        fns[k]()
                        times[k].append(time.perf_counter() - t0)
                    time.sleep(0.05)  # BLAS workers spinning after one variant spare the next
            for k in names:
                t = times[k]
                print(f"| {M}x{K}x{N} | {op} | {k} | {min(t) * 1e3:.2f} | "
                      f"{statistics.median(t) * 1e3:.2f} |", flush=True)
    os.environ.pop("LOOM_CPU_MATMUL_EPILOGUE", None)
    os.environ.pop("LOOM_CPU_EPILOGUE_SPLIT", None)


if __name__ == "__main__":
    main()
