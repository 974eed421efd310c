"""Trains an MLP on scikit-learn's digits (1797 8x8 images, shipped inside scikit-learn) with
loom.nn and loom.optim, then reports the held-out accuracy.

Each step is plain eager code (forward, loss, backward, AdamW step); loom records it and runs
forward, backward and update as one flush when the loss is read.

    python3 examples/train_digits.py [--epochs 40] [--device cpu] [--png digits_loss.png]
"""
import argparse
import os
import sys
import time

import numpy as np

import loom
import loom.nn as nn
import loom.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from progress import Progress, plot_losses  # noqa: E402


def load_digits(seed):
    """Standardized features and labels, split 80/20 by a seeded permutation."""
    from sklearn.datasets import load_digits as sk_digits

    d = sk_digits()
    x = d.data.astype(np.float32) / 16.0
    y = d.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(x))
    x, y = x[order], y[order]
    n_train = int(0.8 * len(x))
    mean = x[:n_train].mean(0)
    std = x[:n_train].std(0) + 1e-2
    x = (x - mean) / std
    return (x[:n_train], y[:n_train]), (x[n_train:], y[n_train:])


class MLP(nn.Module):
    def __init__(self, hidden=256, dropout=0.1):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(64, hidden), nn.GELU(), nn.Dropout(dropout),
                                 nn.Linear(hidden, hidden), nn.GELU(), nn.Dropout(dropout),
                                 nn.Linear(hidden, 10))

    def forward(self, x):
        return self.net(x)


def accuracy(model, x, y):
    model.eval()
    with loom.no_grad():
        pred = model(x).argmax(dim=-1).numpy()
    model.train()
    return float((pred == y).mean())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--epochs", type=int, default=40)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--png", default="digits_loss.png")
    args = ap.parse_args()

    loom.manual_seed(args.seed)
    (xtr, ytr), (xte, yte) = load_digits(args.seed)
    dev = args.device
    model = MLP().to(dev)
    opt = loom.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-2)
    steps_per_epoch = len(xtr) // args.batch
    total = steps_per_epoch * args.epochs
    sched = loom.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=total)
    x_train = loom.tensor(xtr, device=dev)
    y_train = loom.tensor(ytr, device=dev)
    x_test = loom.tensor(xte, device=dev)
    rng = np.random.default_rng(args.seed)

    losses, step, t0 = [], 0, time.perf_counter()
    bar = Progress(total, "digits")
    for epoch in range(args.epochs):
        perm = rng.permutation(len(xtr))
        for b in range(steps_per_epoch):
            # A contiguous batch of a shuffled copy: slicing is a view, nothing is copied twice.
            if b == 0:
                xs = loom.tensor(xtr[perm], device=dev)
                ys = loom.tensor(ytr[perm], device=dev)
            xb = xs[b * args.batch:(b + 1) * args.batch]
            yb = ys[b * args.batch:(b + 1) * args.batch]
            loss = F.cross_entropy(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            step += 1
            value = loss.item()  # the step's one sync point
            losses.append((step, value))
            bar.update(step, epoch=epoch + 1, loss=value)
    seconds = time.perf_counter() - t0
    train_acc = accuracy(model, x_train, ytr)
    test_acc = accuracy(model, x_test, yte)
    if args.png:
        plot_losses(args.png, {"train loss": losses}, "loom: MLP on scikit-learn digits")
    print(f"digits: {args.epochs} epochs, {step} steps in {seconds:.2f} s "
          f"({1e3 * seconds / step:.2f} ms/step), final loss {losses[-1][1]:.4f}, "
          f"train accuracy {100 * train_acc:.1f}%, held-out accuracy {100 * test_acc:.1f}% "
          f"({len(yte)} images)")
    return test_acc


if __name__ == "__main__":
    main()
