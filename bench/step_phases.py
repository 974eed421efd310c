#!/usr/bin/env python3
"""Where a loom training step's host time goes: recording (the Python model, backward and
optimizer calls), planning and running the one flush (CPU kernels, or GPU launches and the wait),
with the step's kernels, nodes and bytes. The GPT of examples/gpt.py and AdamW + clipping as in
bench/train_cpu.py; no peer (train_cpu.py compares).

    python3 bench/step_phases.py [--device cpu|cuda] [--layers 4 --heads 4 --width 128 ...]
"""
import argparse
import os
import sys
import time

import numpy as np

import loom

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples"))
import gpt  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--width", type=int, default=128)
    ap.add_argument("--block", type=int, default=64)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--autocast", default="", choices=["", "bfloat16", "float16"],
                    help="the forward under autocast to this dtype")
    args = ap.parse_args()
    cfg = gpt.GPTConfig(block_size=args.block, vocab_size=96, n_layer=args.layers,
                        n_head=args.heads, n_embd=args.width, dropout=0.0)
    loom.manual_seed(0)
    model = gpt.GPT(cfg).to(args.device)
    opt = loom.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.99), weight_decay=0.1)
    x = np.random.default_rng(0).integers(0, 96, (args.batch, args.block + 1))
    xb, yb = (loom.tensor(a).to(args.device) for a in (x[:, :-1], x[:, 1:]))

    dtype = getattr(loom, args.autocast) if args.autocast else None

    def record(times):
        t0 = time.perf_counter()
        if dtype is None:
            _, loss = model(xb, yb)
        else:
            with loom.autocast(args.device, dtype=dtype):
                _, loss = model(xb, yb)
        t1 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        t2 = time.perf_counter()
        loom.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        t3 = time.perf_counter()
        loss.item()
        t4 = time.perf_counter()
        for i, t in enumerate((t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
            times[i] += t
        return loss

    for _ in range(3):
        record([0.0] * 4)
    loom.reset_counters()
    times = [0.0] * 4
    for _ in range(args.steps):
        record(times)
    c = loom.counters()
    n = args.steps
    fwd, bwd, opt_t, read = (t / n * 1e3 for t in times)
    print(f"GPT step on {args.device} ({args.layers} layers x {args.heads} heads x {args.width}, "
          f"context {args.block}, batch {args.batch}"
          f"{', autocast ' + args.autocast if args.autocast else ''}), per step over {n} steps:")
    print(f"  record {fwd + bwd + opt_t:.2f} ms (forward {fwd:.2f}, backward {bwd:.2f}, "
          f"clip and optimizer {opt_t:.2f}), flush + read {read:.2f} ms "
          f"(plan {c['plan_ns'] / n / 1e6:.2f} ms, run {c['run_ns'] / n / 1e6:.2f} ms)")
    print(f"  {c['flushes'] / n:.0f} flushes, {c['kernels'] / n:.0f} kernels, "
          f"{c['nodes_recorded'] / n:.0f} nodes, {c['bytes_moved'] / n / 1e6:.0f} MB moved, "
          f"plan cache hits {c['plan_hits']}")


if __name__ == "__main__":
    main()
