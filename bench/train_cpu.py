#!/usr/bin/env python3
"""Training steps in one process: loom against torch eager and torch.compile (CPU, or CUDA by flag).

Two models, each built from ONE source for every implementation: examples/gpt.py (nanoGPT's
shape) runs on torch by replacing the word "loom" with "torch" in its text, the digits MLP is
an nn.Sequential of either library. Every implementation starts from the same weights (copied
through numpy), sees the same batches and takes AdamW steps with the same hyper-parameters.
Before timing, the first steps' losses are compared (loom vs torch eager). Timed: the
steady-state step (forward, backward, gradient clipping for the GPT, AdamW, reading the loss),
median over rounds that interleave the implementations, and the first step (cold: loom's
kernels compiled, torch.compile's graphs compiled)."""
import argparse
import os
import statistics
import sys
import time

import numpy as np

import loom

try:
    import torch
except ImportError:
    torch = None

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(os.path.dirname(HERE), "examples")


def gpt_module(lib_name):
    """examples/gpt.py as a module over `lib_name` ("loom" or "torch")."""
    with open(os.path.join(EXAMPLES, "gpt.py")) as f:
        src = f.read().replace("loom", lib_name)
    mod = type(sys)("gpt_" + lib_name)
    exec(compile(src, f"gpt.py[{lib_name}]", "exec"), mod.__dict__)
    return mod


def mlp(lib):
    nn = lib.nn
    return nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 256), nn.GELU(),
                         nn.Linear(256, 10))


def copy_weights(src_torch, dst_loom):
    sd = {k: loom.tensor(v.detach().numpy()) for k, v in src_torch.state_dict().items()}
    dst_loom.load_state_dict(sd, strict=False)  # tied weights appear once in loom's


def build(model_name, cfg):
    """{impl: (step(batch) -> loss float, batches)}; impls share weights and batches."""
    rng = np.random.default_rng(0)
    if model_name == "gpt":
        tg, lg = gpt_module("torch"), gpt_module("loom")
        tcfg = tg.GPTConfig(block_size=cfg.block, vocab_size=96, n_layer=cfg.layers,
                            n_head=cfg.heads, n_embd=cfg.width, dropout=0.0)
        lcfg = lg.GPTConfig(**vars(tcfg))
        torch.manual_seed(0)
        tmodel = tg.GPT(tcfg)
        lmodel = lg.GPT(lcfg)
        x = rng.integers(0, 96, (cfg.batch, cfg.block + 1))
        batch_np = (x[:, :-1], x[:, 1:])
    else:
        torch.manual_seed(0)
        tmodel, lmodel = mlp(torch), mlp(loom)
        batch_np = (rng.standard_normal((64, 64)).astype(np.float32), rng.integers(0, 10, 64))
    copy_weights(tmodel, lmodel)
    tmodel.to(cfg.device)
    lmodel.to(cfg.device)
    impls = {}

    def step_fn(lib, model, opt):
        xb, yb = (lib.tensor(a).to(cfg.device) for a in batch_np)

        def forward():
            if model_name == "gpt":
                return model(xb, yb)[1]
            return lib.nn.functional.cross_entropy(model(xb), yb)

        def step():
            if cfg.autocast:
                with lib.autocast(cfg.device.split(":")[0], dtype=getattr(lib, cfg.autocast)):
                    loss = forward()
            else:
                loss = forward()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if model_name == "gpt":
                lib.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            return loss.item()
        return step

    def opt_for(lib, model):
        return lib.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.99),
                               weight_decay=0.1)

    impls["loom"] = step_fn(loom, lmodel, opt_for(loom, lmodel))
    impls["torch eager"] = step_fn(torch, tmodel, opt_for(torch, tmodel))
    if cfg.compile:
        cmodel = mlp(torch) if model_name == "mlp" else tg.GPT(tcfg)
        cmodel.load_state_dict(tmodel.state_dict())
        cmodel.to(cfg.device)
        impls["torch.compile"] = step_fn(torch, torch.compile(cmodel), opt_for(torch, cmodel))
    return impls


def drain(impl, device):
    """Waits for all of `impl`'s device work: a step ends at its loss read, which in loom
    waits for the loss's kernel alone (the backward and update may still run), so a timed
    block ends here for every library alike."""
    if impl == "loom":
        loom.sync()
    elif device.startswith("cuda"):
        torch.cuda.synchronize()


def converge(cfg, steps):
    """The GPT trained by loom and by torch eager from the same weights on the same batches:
    the losses of the last 10 steps, averaged, and their relative difference."""
    tg, lg = gpt_module("torch"), gpt_module("loom")
    tcfg = tg.GPTConfig(block_size=cfg.block, vocab_size=96, n_layer=cfg.layers,
                        n_head=cfg.heads, n_embd=cfg.width, dropout=0.0)
    torch.manual_seed(0)
    tmodel, lmodel = tg.GPT(tcfg), lg.GPT(lg.GPTConfig(**vars(tcfg)))
    copy_weights(tmodel, lmodel)
    topt = tmodel.configure_optimizers(0.1, 1e-3, (0.9, 0.99))
    lopt = lmodel.configure_optimizers(0.1, 1e-3, (0.9, 0.99))
    # A learnable stream: a noisy repeating pattern over 96 symbols.
    rng = np.random.default_rng(1)
    base = rng.integers(0, 96, 997)
    stream = np.where(rng.random(200_000) < 0.1, rng.integers(0, 96, 200_000),
                      np.resize(base, 200_000))
    curves = {"loom": [], "torch eager": []}
    for _ in range(steps):
        ix = rng.integers(0, len(stream) - cfg.block - 1, cfg.batch)
        x = np.stack([stream[i:i + cfg.block] for i in ix])
        y = np.stack([stream[i + 1:i + 1 + cfg.block] for i in ix])
        for lib, model, opt, key in ((loom, lmodel, lopt, "loom"),
                                     (torch, tmodel, topt, "torch eager")):
            _, loss = model(lib.tensor(x), lib.tensor(y))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            lib.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            curves[key].append(loss.item())
    end = {k: float(np.mean(v[-10:])) for k, v in curves.items()}
    rel = abs(end["loom"] - end["torch eager"]) / end["torch eager"]
    print(f"\ngpt convergence over {steps} steps (same weights and batches): loss "
          f"{curves['loom'][0]:.4f} -> loom {end['loom']:.4f}, torch eager "
          f"{end['torch eager']:.4f} (last 10 steps' mean), relative difference {100 * rel:.2f}%")
    return rel


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="mlp,gpt")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--steps", type=int, default=5, help="steps per round and implementation")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--width", type=int, default=128)
    ap.add_argument("--block", type=int, default=64)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--no-compile", dest="compile", action="store_false")
    ap.add_argument("--pause", type=float, default=0.2,
                    help="seconds of rest before each timed block (0: none)")
    ap.add_argument("--device", default="cpu", help="cpu or cuda (both libraries)")
    ap.add_argument("--autocast", default="", choices=["", "bfloat16", "float16"],
                    help="run each forward under autocast to this dtype (both libraries)")
    ap.add_argument("--converge", type=int, default=0,
                    help="also train the GPT this many steps in loom and torch eager and "
                         "compare the final losses")
    args = ap.parse_args()
    if torch is None:
        sys.exit("bench/train_cpu.py compares against torch: pip install torch")
    torch.set_num_threads(os.cpu_count())
    if args.converge:
        converge(args, args.converge)
    for name in [m for m in args.models.split(",") if m]:
        impls = build(name, args)
        first = {}
        losses = {}
        for impl, step in impls.items():
            t0 = time.perf_counter()
            losses[impl] = [step()]
            first[impl] = time.perf_counter() - t0
            losses[impl] += [step() for _ in range(4)]
        ref = losses["torch eager"]
        for impl, ls in losses.items():
            tol = 3e-2 if args.autocast else 2e-3  # low-precision matmuls round differently
            if not np.allclose(ls, ref, rtol=tol, atol=tol):
                sys.exit(f"{name}: {impl}'s losses {ls} differ from torch eager's {ref}")
        times = {impl: [] for impl in impls}
        order = list(impls)
        for r in range(args.rounds):
            # Blocks in a rotated order, each after a pause and one untimed step: a library's
            # worker threads keep spinning for a while after its last op (torch's OpenMP pool,
            # loom's TBB) and would take a core from whichever block ran next; the untimed
            # step wakes the block's own threads and caches after the pause.
            for impl in order[r % len(order):] + order[:r % len(order)]:
                step = impls[impl]
                time.sleep(args.pause)
                step()
                drain(impl, args.device)
                t0 = time.perf_counter()
                for _ in range(args.steps):
                    step()
                drain(impl, args.device)  # the last step's work the loss read did not wait for
                times[impl].append((time.perf_counter() - t0) / args.steps * 1e3)
        base = statistics.median(times["torch eager"])
        amp = f", autocast {args.autocast}" if args.autocast else ""
        print(f"\n{name} training step on {args.device}{amp} ({os.cpu_count()} threads; losses agree over 5 steps: "
              f"{ref[0]:.4f} -> {ref[-1]:.4f})")
        print(f"{'impl':<14} {'median ms':>10} {'min ms':>8} {'vs eager':>9} {'first step s':>13}")
        for impl, ts in times.items():
            med = statistics.median(ts)
            print(f"{impl:<14} {med:10.3f} {min(ts):8.3f} {med / base:8.2f}x {first[impl]:13.3f}")


if __name__ == "__main__":
    main()
