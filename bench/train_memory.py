#!/usr/bin/env python3
"""Memory of one GPT training step on the CPU: loom against torch eager, each in a fresh process.

Saved bytes: what the autograd graph holds for the backward at the end of the forward (every
saved tensor's elements, parameters included, as torch's saved_tensors_hooks see them; loom's
counters()["saved_bytes_peak"] counts the same). Peak: the process's resident high-water mark
(ru_maxrss) over three steps minus the resident size just before them (model and batch in
place; the optimizer's state, created at the first step, counts in both).

    python3 bench/train_memory.py [--layers 4 --heads 4 --width 128 --block 64 --batch 32]
"""
import argparse
import json
import os
import resource
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(os.path.dirname(HERE), "examples")


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def measure(lib_name, cfg):
    lib = __import__(lib_name)
    with open(os.path.join(EXAMPLES, "gpt.py")) as f:
        src = f.read().replace("loom", lib_name)
    mod = type(sys)("gpt_" + lib_name)
    exec(compile(src, "gpt.py", "exec"), mod.__dict__)
    gcfg = mod.GPTConfig(block_size=cfg.block, vocab_size=96, n_layer=cfg.layers,
                         n_head=cfg.heads, n_embd=cfg.width, dropout=0.0)
    lib.manual_seed(0)
    model = mod.GPT(gcfg)
    opt = lib.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1)
    x = np.random.default_rng(0).integers(0, 96, (cfg.batch, cfg.block + 1))
    xb, yb = lib.tensor(np.ascontiguousarray(x[:, :-1])), lib.tensor(np.ascontiguousarray(x[:, 1:]))

    def step():
        _, loss = model(xb, yb)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss.item()

    base = rss_bytes()
    for _ in range(3):
        step()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - base
    if lib_name == "loom":
        lib.reset_counters()
        _, loss = model(xb, yb)
        saved = lib.counters()["saved_bytes_peak"]
    else:
        seen = {}

        def pack(t):  # each tensor once, however many nodes save it (as loom's counter)
            seen[(t.untyped_storage().data_ptr(), t.storage_offset(), t.numel(),
                  t.element_size())] = t.numel() * t.element_size()
            return t

        with lib.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            _, loss = model(xb, yb)
        saved = sum(seen.values())
    return {"saved": saved, "peak": peak}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--width", type=int, default=128)
    ap.add_argument("--block", type=int, default=64)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--one", help=argparse.SUPPRESS)  # the child: measure this library
    args = ap.parse_args()
    if args.one:
        print(json.dumps(measure(args.one, args)))
        return
    rows = {}
    for lib_name in ("loom", "torch"):
        cmd = [sys.executable, __file__, "--one", lib_name] + sys.argv[1:]
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode:
            sys.exit(f"{lib_name}: {out.stderr[-2000:]}")
        rows[lib_name] = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"GPT step memory ({args.layers} layers x {args.heads} heads x {args.width}, context "
          f"{args.block}, batch {args.batch}), MB:")
    print(f"{'impl':<8} {'saved':>9} {'peak':>11}")
    for k, r in rows.items():
        print(f"{k:<8} {r['saved'] / 1e6:9.1f} {r['peak'] / 1e6:11.1f}")


if __name__ == "__main__":
    main()
