#!/usr/bin/env python3
"""Where a GPU training step's device time goes, kernel by kernel: loom and torch eager on the
same model, weights and batch (bench/train_cpu.py's builders), each step's wall time, the GPU's
busy time and the kernels it ran, from torch.profiler's CUDA trace (CUPTI sees every kernel of
the process, loom's included). --order prints loom's kernels of one step in launch order with
the fusion log of that flush on stderr, to match a slow kernel with its group.

    python3 bench/step_kernels.py [--model gpt|mlp] [--layers 4 --heads 4 --width 128 ...]
                                  [--autocast bfloat16] [--order 2> fusion.log]

--order also sums each fused group's kernel time by signature (the groups of the step's
fusion log paired with loom's kernels in launch order) and lists the costliest with their ops.
"""
import argparse
import collections
import os
import sys
import tempfile
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


def fusion_groups(log):
    """The fused groups of the last flush in a fusion log, in launch order: (header, ops,
    launch kind). Opaque groups (matmuls, gathers) launch no loom_kernel and are left out."""
    lines = log.split("\n")
    heads = [i for i, l in enumerate(lines) if l.startswith("[loom] flush cuda")]
    if not heads:
        return []
    first = max((i for i in range(heads[-1]) if lines[i].startswith("[loom] flush")), default=-1)
    launches = [l.split("launch ", 1)[1] for l in lines[first + 1:heads[-1]]
                if "cuda launch" in l]
    groups = []
    for l in lines[heads[-1] + 1:]:
        if l.startswith("[loom] flush"):
            break
        if l.startswith("  group"):
            groups.append([l.strip(), []])
        elif l.startswith("  %") and groups:
            groups[-1][1].append(l.strip())
    groups = [g for g in groups if "opaque" not in g[0]]
    return [(h, ops, k) for (h, ops), k in zip(groups, launches)]


def order(step):
    for _ in range(4):
        step()
    torch.cuda.synchronize()
    # The fusion log of the profiled step, from loom's stderr (a file descriptor: C++ writes it).
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as f:
        os.dup2(f.fileno(), 2)
        try:
            loom.set_log_fusion(True)
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                step()
                torch.cuda.synchronize()
            loom.set_log_fusion(False)
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        f.seek(0)
        log = f.read().decode(errors="replace")
    sys.stderr.write(log)
    events = cuda_events(prof)
    print("loom's kernels of one step in launch order (loom_kernel* are fused groups, the rest "
          "cuBLAS): index, name, us")
    for i, e in enumerate(events):
        print(f"  {i:5d} {e.name[:60]:60s} {e.device_time:9.1f}")
    # Each fused group's kernel time (a split reduction's two parts summed), by signature.
    times, i = [], 0
    fused = [e for e in events if e.name.startswith("loom_kernel")]
    while i < len(fused):
        t = fused[i].device_time
        if fused[i].name.endswith("_p0") and i + 1 < len(fused) and \
                fused[i + 1].name.endswith("_p1"):
            t += fused[i + 1].device_time
            i += 1
        times.append(t)
        i += 1
    groups = fusion_groups(log)
    if len(groups) != len(times):
        print(f"(fused kernels {len(times)} and logged groups {len(groups)} differ: no summary)")
        return
    by_sig = collections.defaultdict(lambda: [0, 0.0, None])
    for t, (head, ops, kind) in zip(times, groups):
        sig = head.split("sig ")[1].split()[0] if "sig " in head else head
        b = by_sig[sig]
        b[0] += 1
        b[1] += t
        b[2] = b[2] or (head, ops, kind)
    print("\nfused kernels by signature: us in all, count, launch, the group's size and ops")
    for sig, (c, us, (head, ops, kind)) in sorted(by_sig.items(), key=lambda kv: -kv[1][1])[:20]:
        size = head.split(", ")[-1] if ", " in head else head
        names = " ".join(o.split("= ")[1].split(" ")[0] for o in ops
                         if "= " in o and " = const." not in o)
        print(f"  {us:9.1f} {c:4d}x  {kind.split(' x')[0][:34]:34s} {size[:26]:26s} {names[:90]}")


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
