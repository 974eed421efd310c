"""Trains a character-level GPT (examples/gpt.py, shaped like nanoGPT) on a text corpus that
ships offline (Debian's fortunes by default, any text file with --text), with AdamW, a
cosine learning rate after a linear warmup, gradient clipping and dropout; then samples text.

Each training step is plain eager code; loom records forward, backward, clipping and the
AdamW update and runs them as one flush when the loss is read.

    python3 examples/train_gpt.py [--iters 400] [--text FILE] [--device cpu] [--png gpt_loss.png]
"""
import argparse
import glob
import math
import os
import sys
import time

import numpy as np

import loom

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt import GPT, GPTConfig  # noqa: E402
from progress import Progress, plot_losses  # noqa: E402

FORTUNES = "/usr/share/games/fortunes"


def read_corpus(path):
    if path:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    files = sorted(p for p in glob.glob(os.path.join(FORTUNES, "*"))
                   if os.path.isfile(p) and not p.endswith((".dat", ".u8")) and
                   not os.path.islink(p))
    if not files:
        sys.exit(f"no text at {FORTUNES}: install Debian's fortunes package "
                 "(apt-get install fortunes) or pass --text FILE")
    parts = []
    for p in files:
        with open(p, encoding="utf-8", errors="replace") as f:
            parts.append(f.read())
    return "".join(parts)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--text", default=None, help="a text file (default: Debian's fortunes)")
    ap.add_argument("--iters", type=int, default=400)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--block", type=int, default=64)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--width", type=int, default=128)
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--min-lr", type=float, default=3e-4)
    ap.add_argument("--warmup", type=int, default=40)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--grad-clip", type=float, default=1.0)
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--sample", type=int, default=300, help="characters to sample at the end")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--png", default="gpt_loss.png")
    args = ap.parse_args()

    text = read_corpus(args.text)
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    data = np.array([stoi[c] for c in text], dtype=np.int64)
    n_train = int(0.9 * len(data))
    train, val = data[:n_train], data[n_train:]
    rng = np.random.default_rng(args.seed)
    dev = args.device

    def batch(split):
        d = train if split == "train" else val
        ix = rng.integers(0, len(d) - args.block - 1, args.batch)
        x = np.stack([d[i:i + args.block] for i in ix])
        y = np.stack([d[i + 1:i + 1 + args.block] for i in ix])
        return loom.tensor(x, device=dev), loom.tensor(y, device=dev)

    loom.manual_seed(args.seed)
    cfg = GPTConfig(block_size=args.block, vocab_size=len(chars), n_layer=args.layers,
                    n_head=args.heads, n_embd=args.width, dropout=args.dropout)
    model = GPT(cfg).to(dev)
    n_params = sum(p.numel() for p in model.parameters())
    opt = model.configure_optimizers(args.weight_decay, args.lr, (0.9, 0.99))

    def lr_at(it):  # linear warmup, then cosine down to min_lr
        if it < args.warmup:
            return args.lr * (it + 1) / (args.warmup + 1)
        t = (it - args.warmup) / max(1, args.iters - args.warmup)
        return args.min_lr + 0.5 * (1 + math.cos(math.pi * min(t, 1.0))) * (args.lr - args.min_lr)

    @loom.no_grad()
    def estimate(split, n=8):
        model.eval()
        losses = [model(*batch(split))[1].item() for _ in range(n)]
        model.train()
        return float(np.mean(losses))

    print(f"gpt: {len(text):,} characters, vocabulary {len(chars)}, {n_params:,} parameters, "
          f"{args.layers} layers x {args.heads} heads x {args.width} wide, context {args.block}",
          file=sys.stderr)
    train_curve, val_curve = [], []
    bar = Progress(args.iters, "gpt")
    t0 = time.perf_counter()
    first_step = None
    for it in range(args.iters):
        for g in opt.param_groups:
            g["lr"] = lr_at(it)  # a kernel argument: nothing recompiles
        x, y = batch("train")
        _, loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        loom.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
        opt.step()
        value = loss.item()  # the step's one sync point
        if first_step is None:
            first_step = time.perf_counter() - t0
        train_curve.append((it + 1, value))
        if (it + 1) % args.eval_every == 0 or it + 1 == args.iters:
            val_curve.append((it + 1, estimate("val")))
        bar.update(it + 1, loss=value, val=val_curve[-1][1] if val_curve else float("nan"))
    seconds = time.perf_counter() - t0
    steady = (seconds - first_step) / max(1, args.iters - 1)

    start = loom.tensor([[stoi["\n"]]], device=dev)
    sample = model.generate(start, args.sample, temperature=0.8, top_k=20)[0].tolist()
    print("".join(chars[i] for i in sample[1:]))
    if args.png:
        plot_losses(args.png, {"train": train_curve, "validation": val_curve},
                    "loom: character-level GPT")
    tokens = args.batch * args.block
    print(f"gpt: {args.iters} steps in {seconds:.1f} s (first step {first_step:.2f} s, then "
          f"{1e3 * steady:.1f} ms/step, {tokens / steady:,.0f} tokens/s), train loss "
          f"{train_curve[-1][1]:.3f}, validation loss {val_curve[-1][1]:.3f} "
          f"(uniform would be {math.log(len(chars)):.3f})")
    return val_curve[-1][1], math.log(len(chars))


if __name__ == "__main__":
    main()
