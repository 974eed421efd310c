"""Row kernels over row lengths and views on the GPU: softmax, layer_norm and rms_norm in f32 and
bf16, and the column mean (col_mean: mean over dim 0, a thread a column), loom against torch
eager (and torch.compile with --compile), CUDA events, median of --reps. Each shape holds about
--elems elements (2^28: the suite's [65536, 4096]); GB/s counts the input read once and the
output written once, and % copy is against torch's device copy of the same bytes in the same
process. Every loom result is checked against torch before it is timed.

    python bench/rows_sweep.py [--reps 20] [--compile] [--only softmax,bf16] [--json out.json]
    python bench/rows_sweep.py --ab "LOOM_CUDA_ROW_TPR=256" "LOOM_CUDA_ROW_TPR=128" ...
    python bench/rows_sweep.py --only col --reps 10 --ab "" "LOOM_CUDA_COL_SLICES=4" \
        "LOOM_CUDA_COL_PAIRS=1" "LOOM_CUDA_COL_COMBINE=0"   (the column knobs, cuda/launch.cpp)

--ab runs the sweep once per setting (loom reads its row knobs once a process, see
cuda/launch.cpp), each in a child process with those variables set ("" = the defaults), and
prints one table with a GB/s column per setting.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

import torch

import loom

VIEWS = ("contiguous", "slice", "offset1", "transposed")


def cases(elems, only):
    out = []
    for op in ("softmax", "layer_norm", "rms_norm"):
        for dt in ("float32", "bfloat16"):
            for cols in (128, 1000, 1001, 4096, 8192, 32768):
                out.append((op, dt, cols, "contiguous"))
            for view in VIEWS[1:]:  # views at the suite's row length
                out.append((op, dt, 4096, view))
            for cols in (1000, 8192):  # transposed at other lengths (staged tiles of 4-32 rows)
                out.append((op, dt, cols, "transposed"))
    for dt in ("float32", "bfloat16"):  # column reductions: --elems // cols rows of cols
        for cols in (1000, 1001, 4096):  # (1001: rows not 16-byte aligned)
            out.append(("col_mean", dt, cols, "contiguous"))
        for view in ("slice", "offset1"):  # views into rows of 4104: aligned / offset by one
            out.append(("col_mean", dt, 4096, view))
    if only:
        out = [c for c in out if all(o in f"{c[0]} {c[1]} {c[2]} {c[3]}" for o in only)]
    return [(op, dt, max(1, elems // cols), cols, view) for op, dt, cols, view in out]


def make(rows, cols, dt, view):
    """The torch input for `view` (every view has rows x cols elements)."""
    g = torch.Generator(device="cuda").manual_seed(rows ^ cols)
    t = getattr(torch, dt)
    if view == "contiguous":
        return torch.randn(rows, cols, device="cuda", generator=g).to(t)
    if view == "transposed":  # read column by column
        return torch.randn(cols, rows, device="cuda", generator=g).to(t).t()
    base = torch.randn(rows, cols + 8, device="cuda", generator=g).to(t)
    return base[:, :cols] if view == "slice" else base[:, 1:cols + 1]


def fns(op, cols):
    if op == "col_mean":
        return (lambda x: x.mean(dim=0)), (lambda x: x.mean(dim=0))
    if op == "softmax":
        return (lambda x: loom.softmax(x, dim=-1)), (lambda x: torch.softmax(x, dim=-1))
    if op == "layer_norm":
        return ((lambda x: loom.layer_norm(x, (cols,))),
                (lambda x: torch.nn.functional.layer_norm(x, (cols,))))
    return ((lambda x: loom.rms_norm(x, (cols,), eps=1e-6)),
            (lambda x: torch.nn.functional.rms_norm(x, (cols,), eps=1e-6)))


def median_ms(fn, x, reps, event):
    for _ in range(3):
        out = fn(x)
        del out
    loom.sync()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = event(), event()
        a.record()
        out = fn(x)  # held until after the sync: loom computes only what is held
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
        del out
    return statistics.median(times)


def sweep(args):
    loom_ev = lambda: loom.cuda.Event(enable_timing=True)  # noqa: E731
    torch_ev = lambda: torch.cuda.Event(enable_timing=True)  # noqa: E731
    only = [o.strip() for o in args.only.split(",")] if args.only else None
    rows = []
    copy_cache = {}
    for op, dt, nrows, cols, view in cases(args.elems, only):
        tx = make(nrows, cols, dt, view)
        torch.cuda.synchronize()
        lx = loom.from_dlpack(tx)
        lf, tf = fns(op, cols)
        # Bytes moved: the input once and the output once (a column mean writes one row).
        nbytes = tx.element_size() * (nrows * cols + (cols if op == "col_mean" else nrows * cols))
        if nbytes not in copy_cache:  # the ceiling: a device copy of as many bytes
            src = torch.empty(nbytes // 2, dtype=torch.uint8, device="cuda")
            copy_cache[nbytes] = median_ms(lambda s: s.clone(), src, args.reps, torch_ev)
            del src
        ref = tf(tx)
        got = torch.from_dlpack(lf(lx)).float()
        err = float((got - ref.float()).norm() / ref.float().norm().clamp_min(1e-30))
        tol = 2e-2 if dt == "bfloat16" else 1e-4
        if not err <= tol:
            sys.exit(f"{op} {dt} {nrows}x{cols} {view}: loom disagrees with torch (rel err {err:.3g})")
        del ref, got
        r = {"op": op, "dtype": dt, "rows": nrows, "cols": cols, "view": view,
             "copy_ms": copy_cache[nbytes], "bytes": nbytes}
        r["loom_ms"] = median_ms(lf, lx, args.reps, loom_ev)
        r["eager_ms"] = median_ms(tf, tx, args.reps, torch_ev)
        if args.compile:
            cf = torch.compile(tf, dynamic=False)
            r["compile_ms"] = median_ms(cf, tx, args.reps, torch_ev)
        rows.append(r)
        print(f"  {op} {dt} {nrows}x{cols} {view}: loom {r['loom_ms']:.3f} ms "
              f"({100 * r['copy_ms'] / r['loom_ms']:.0f}% copy), eager {r['eager_ms']:.3f} ms",
              file=sys.stderr, flush=True)
        del lx, tx
    return rows


def table(results):
    """results: [(setting, rows)]; one line a case, GB/s and % copy per setting."""
    for i, (s, _) in enumerate(results):
        print(f"#{i}: {s or 'defaults'}")
    if not results or not results[0][1] or any(len(rs) != len(results[0][1]) for _, rs in results):
        sys.exit("rows_sweep: no cases matched --only, or the settings timed different cases")
    head = f"{'case':<40}" + "".join(f"{'#' + str(i):>28}" for i in range(len(results)))
    head += f"{'eager':>12}" + (f"{'compile':>12}" if "compile_ms" in results[0][1][0] else "")
    print(head)
    for i, r in enumerate(results[0][1]):
        line = f"{r['op']} {r['dtype']} {r['rows']}x{r['cols']} {r['view']:<10}"
        line = f"{line:<40}"
        for _, rs in results:
            x = rs[i]
            line += f"{x['bytes'] / x['loom_ms'] / 1e6:>12.0f} GB/s {100 * x['copy_ms'] / x['loom_ms']:>4.0f}% "
            line += f"{r['eager_ms'] / x['loom_ms']:>4.2f}x"
        line += f"{r['bytes'] / r['eager_ms'] / 1e6:>7.0f} GB/s"
        if "compile_ms" in r:
            line += f"{r['bytes'] / r['compile_ms'] / 1e6:>7.0f} GB/s"
        print(line)
    print("(per setting: loom GB/s, % of the copy, speed-up over torch eager)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--elems", type=int, default=1 << 28)
    ap.add_argument("--only", help="comma-separated substrings every selected case contains")
    ap.add_argument("--compile", action="store_true", help="also time torch.compile")
    ap.add_argument("--json")
    ap.add_argument("--ab", nargs="+", help="settings 'VAR=v VAR2=w' to compare, '' = defaults")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        with open(args.child, "w") as f:
            json.dump(sweep(args), f)
        return
    results = []
    for setting in args.ab or [""]:
        env = dict(os.environ)
        for kv in setting.split():
            k, v = kv.split("=", 1)
            env[k] = v
        out = os.path.join(os.environ.get("OUT", "/tmp"), f"rows_sweep_{len(results)}.json")
        cmd = [sys.executable, __file__, "--child", out, "--reps", str(args.reps),
               "--elems", str(args.elems)] + (["--only", args.only] if args.only else []) + \
              (["--compile"] if args.compile else [])
        print(f"== {setting or 'defaults'}", file=sys.stderr, flush=True)
        rc = subprocess.call(cmd, env=env)
        if rc != 0:
            sys.exit(f"rows_sweep: setting '{setting}' failed (exit {rc})")
        with open(out) as f:
            results.append((setting, json.load(f)))
    table(results)
    if args.json:
        with open(args.json, "w") as f:
            json.dump([{"setting": s, "rows": r} for s, r in results], f, indent=1)


if __name__ == "__main__":
    main()
