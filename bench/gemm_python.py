#!/usr/bin/env python3
"""Matmul GFLOP/s of loom beside numpy, torch eager and torch.compile in one process, at the
shapes of bench/gemm_blas.cpp, and one GPT block's forward (float32, 2 cores). Each
implementation runs in a block of repetitions (a warm-up, then until a time budget passes);
the rounds rotate the order. Prints min and median. Needs torch for its columns (optional)."""
import argparse
import math
import statistics
import time

import numpy as np

import loom

try:
    import torch
except ImportError:
    torch = None

SHAPES = [  # (name, batch, M, K, N, A transposed, B transposed)
    ("4096x4096x4096", 0, 4096, 4096, 4096, False, False),
    ("1024x1024x1024", 0, 1024, 1024, 1024, False, False),
    ("2048x768x768", 0, 2048, 768, 768, False, False),
    ("2048x128x384", 0, 2048, 128, 384, False, False),
    ("128x128x128", 0, 128, 128, 128, False, False),
    ("64x64x64", 0, 64, 64, 64, False, False),
    ("[128]64x32x64", 128, 64, 32, 64, False, False),
    ("[128]64x64x32", 128, 64, 64, 32, False, False),
    ("1024^3 A.t()", 0, 1024, 1024, 1024, True, False),
    ("1024^3 B.t()", 0, 1024, 1024, 1024, False, True),
    ("2048x768x768 B.t()", 0, 2048, 768, 768, False, True),
    ("[128]64x32x64 B.t()", 128, 64, 32, 64, False, True),
]


def operand(rng, batch, r, c, tr, dtype):
    shape = (c, r) if tr else (r, c)
    if batch:
        shape = (batch,) + shape
    x = rng.standard_normal(shape).astype(dtype)
    return x.swapaxes(-1, -2) if tr else x  # a transposed view, not a copy


def loom_view(x):
    """A loom tensor over the same layout as x: the buffer in, then the same transpose."""
    if x.flags.c_contiguous:
        return loom.tensor(x)
    return loom.tensor(np.ascontiguousarray(x.swapaxes(-1, -2))).transpose(-1, -2)


def timed(fn, budget, lo=2, hi=40):
    fn()
    times, start = [], time.perf_counter()
    for i in range(hi):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        if i + 1 >= lo and time.perf_counter() - start > budget:
            break
    return times


def run_blocks(impls, rounds, budget):
    times = {k: [] for k in impls}
    names = list(impls)
    for r in range(rounds):
        for j in range(len(names)):
            k = names[(j + r) % len(names)]
            times[k] += timed(impls[k], budget)
            time.sleep(0.15)  # a BLAS's spinning workers must not run into the next block
    return {k: (min(v), statistics.median(v), len(v)) for k, v in times.items()}


def matmul_rows(args):
    rng = np.random.default_rng(0)
    for dt in args.dtypes:
        for name, batch, M, K, N, ta, tb in SHAPES:
            if args.case and args.case not in name:
                continue
            a, b = operand(rng, batch, M, K, ta, dt), operand(rng, batch, K, N, tb, dt)
            la, lb = loom_view(a), loom_view(b)
            impls = {"numpy": lambda: np.matmul(a, b)}

            def run_loom():
                c = la @ lb
                loom.sync()
                return c
            impls["loom"] = run_loom
            if torch is not None:
                ta_, tb_ = torch.from_numpy(a), torch.from_numpy(b)
                impls["torch eager"] = lambda: torch.matmul(ta_, tb_)
                comp = torch.compile(lambda x, y: torch.matmul(x, y))
                impls["torch.compile"] = lambda: comp(ta_, tb_)
            big = M * N * K * max(batch, 1) > 1e10
            res = run_blocks(impls, 1 if big else args.rounds, args.budget)
            flops = 2.0 * max(batch, 1) * M * N * K
            ref = np.matmul(a.astype(np.float64), b.astype(np.float64))
            err = np.abs(np.asarray(run_loom().numpy(), np.float64) - ref).max()
            for k, (mn, med, n) in res.items():
                print(f"{dt:8s} {name:22s} {k:14s} {flops / mn / 1e9:8.1f} {flops / med / 1e9:8.1f}"
                      f"   (min {mn * 1e3:.3f} ms, median {med * 1e3:.3f} ms, n={n})"
                      + (f"  loom max err {err:.2g}" if k == "loom" else ""), flush=True)


# ---- one GPT block's forward: pre-norm attention + MLP ---------------------------------------
def gpt_block(F, x, p, H, causal):
    """F: a namespace of ops (loom or torch). x: [B, T, C]."""
    B, T, C = x.shape
    hd = C // H
    h = F.layer_norm(x, (C,), p["ln1_w"], p["ln1_b"])
    qkv = h @ p["w_qkv"] + p["b_qkv"]                                  # [B, T, 3C]
    qkv = qkv.reshape(B, T, 3, H, hd).permute(2, 0, 3, 1, 4)           # [3, B, H, T, hd]
    q, k, v = qkv[0], qkv[1], qkv[2]
    att = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(hd)) + causal   # [B, H, T, T]
    att = F.softmax(att, dim=-1)
    y = (att @ v).permute(0, 2, 1, 3).reshape(B, T, C)
    x = x + (y @ p["w_o"] + p["b_o"])
    h = F.layer_norm(x, (C,), p["ln2_w"], p["ln2_b"])
    h = F.gelu(h @ p["w_1"] + p["b_1"], approximate="tanh")
    return x + (h @ p["w_2"] + p["b_2"])


def gpt_rows(args):
    B, T, C, H = args.gpt
    rng = np.random.default_rng(1)
    shapes = {"ln1_w": (C,), "ln1_b": (C,), "w_qkv": (C, 3 * C), "b_qkv": (3 * C,),
              "w_o": (C, C), "b_o": (C,), "ln2_w": (C,), "ln2_b": (C,), "w_1": (C, 4 * C),
              "b_1": (4 * C,), "w_2": (4 * C, C), "b_2": (C,)}
    host = {k: (rng.standard_normal(s) * (0.02 if k.startswith("w") else 0.1)).astype(np.float32)
            for k, s in shapes.items()}
    host["ln1_w"] += 1
    host["ln2_w"] += 1
    xh = rng.standard_normal((B, T, C)).astype(np.float32)
    mask = np.triu(np.full((T, T), -1e9, np.float32), 1)
    lp = {k: loom.tensor(v) for k, v in host.items()}
    lx, lm = loom.tensor(xh), loom.tensor(mask)

    def run_loom():
        out = gpt_block(loom, lx, lp, H, lm)
        loom.sync()
        return out
    impls = {"loom": run_loom}
    flops = 2 * B * T * (C * 3 * C + C * C + 8 * C * C) + 2 * 2 * B * T * T * C
    if torch is not None:
        F = torch.nn.functional
        tp = {k: torch.from_numpy(v) for k, v in host.items()}
        tx, tm = torch.from_numpy(xh), torch.from_numpy(mask)
        with torch.no_grad():
            impls["torch eager"] = lambda: gpt_block(F, tx, tp, H, tm)
            comp = torch.compile(lambda x: gpt_block(F, x, tp, H, tm))
            impls["torch.compile"] = lambda: comp(tx)
            ref = gpt_block(F, tx, tp, H, tm).numpy()
        err = np.abs(run_loom().numpy() - ref).max()
        print(f"gpt block: loom vs torch max abs diff {err:.2g}")
    with torch.no_grad() if torch is not None else _null():
        res = run_blocks(impls, args.rounds, args.budget)
    for k, (mn, med, n) in res.items():
        print(f"gpt block B={B} T={T} C={C} H={H} {k:14s} min {mn * 1e3:8.3f} ms  median "
              f"{med * 1e3:8.3f} ms  ({flops / mn / 1e9:.1f} GFLOP/s of matmul at the min, n={n})",
              flush=True)


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--budget", type=float, default=0.3, help="seconds per block")
    ap.add_argument("--case", default="", help="only shapes whose name contains this")
    ap.add_argument("--dtypes", nargs="+", default=["float32", "float64"])
    ap.add_argument("--gpt", type=int, nargs=4, metavar=("B", "T", "C", "H"),
                    default=[32, 64, 128, 4])
    ap.add_argument("--no-matmul", action="store_true")
    ap.add_argument("--no-gpt", action="store_true")
    args = ap.parse_args()
    if torch is not None:
        torch.set_num_threads(2)
    print(f"torch {torch.__version__ if torch else '-'}, numpy {np.__version__}; GFLOP/s from "
          "the min and the median run")
    if not args.no_matmul:
        matmul_rows(args)
    if not args.no_gpt:
        gpt_rows(args)


if __name__ == "__main__":
    main()
