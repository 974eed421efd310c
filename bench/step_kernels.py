#!/usr/bin/env python3
"""Where a GPU training step's device time goes, kernel by kernel: loom and torch eager on the
same model, weights and batch (bench/train_cpu.py's builders), each step's wall time, the GPU's
busy time and the kernels it ran, from torch.profiler's CUDA trace (CUPTI sees every kernel of
the process, loom's included). --order prints loom's kernels of one step in launch order with
the fusion log of that flush on stderr, to match a slow kernel with its group.

    python3 bench/step_kernels.py [--model gpt|mlp] [--layers 4 --heads 4 --width 128 ...]
                                  [--order 2> fusion.log]
"""
import argparse
import collections
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import train_cpu  # noqa: E402

import loom  # noqa: E402
import torch  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402


def cuda_events(prof):
    evs = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    return sorted(evs, key=lambda e: e.time_range.start)


def table(name, step, steps, top):
    for _ in range(5):
        step()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(steps):
        step()
    torch.cuda.synchronize()
    wall = (time.perf_counter() - t) / steps * 1e3
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            step()
        torch.cuda.synchronize()
    agg = collections.defaultdict(lambda: [0, 0.0])
    for e in cuda_events(prof):
        agg[e.name[:90]][0] += 1
        agg[e.name[:90]][1] += e.device_time
    busy = sum(v[1] for v in agg.values()) / 3
    count = sum(v[0] for v in agg.values()) / 3
    print(f"== {name}: wall {wall:.2f} ms a step, GPU busy {busy / 1e3:.2f} ms, "
          f"{count:.0f} kernels and copies")
    for k, (c, us) in sorted(agg.items(), key=lambda kv: -kv[1][1])[:top]:
        print(f"  {us / 3 / 1e3:7.3f} ms {c / 3:6.1f}x  {k}")


def order(step):
    for _ in range(4):
        step()
    torch.cuda.synchronize()
    loom.set_log_fusion(True)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    loom.set_log_fusion(False)
    print("loom's kernels of one step in launch order (loom_kernel* are fused groups, the rest "
          "cuBLAS): index, name, us")
    for i, e in enumerate(cuda_events(prof)):
        print(f"  {i:5d} {e.name[:60]:60s} {e.device_time:9.1f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="gpt")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--width", type=int, default=128)
    ap.add_argument("--block", type=int, default=64)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--steps", type=int, default=10, help="timed steps for the wall time")
    ap.add_argument("--top", type=int, default=22, help="kernel names listed an implementation")
    ap.add_argument("--order", action="store_true", help="loom's kernels of one step in order")
    ap.add_argument("--autocast", default="", choices=["", "bfloat16", "float16"],
                    help="both libraries' steps under autocast to this dtype")
    a = ap.parse_args()
    cfg = argparse.Namespace(block=a.block, layers=a.layers, heads=a.heads, width=a.width,
                             batch=a.batch, device="cuda", compile=False, autocast=a.autocast)
    impls = train_cpu.build(a.model, cfg)
    if a.order:
        order(impls["loom"])
        return
    for name, step in impls.items():
        table(name, step, a.steps, a.top)


if __name__ == "__main__":
    main()
