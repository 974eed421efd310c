"""A one-line progress bar and a loss-curve plot, shared by the training examples."""
import sys
import time


class Progress:
    """Prints `label [#####.....] i/n  key=value ...` over one terminal line."""

    def __init__(self, total, label, width=30, stream=sys.stderr):
        self.total, self.label, self.width, self.stream = total, label, width, stream
        self.start = time.perf_counter()
        self.tty = stream.isatty()
        self._last = 0.0

    def update(self, i, **figures):
        now = time.perf_counter()
        done = i >= self.total
        if not done and now - self._last < (0.1 if self.tty else 2.0):
            return  # keep logs short when not on a terminal
        self._last = now
        fill = int(self.width * i / max(self.total, 1))
        bar = "#" * fill + "." * (self.width - fill)
        text = " ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}"
                        for k, v in figures.items())
        line = f"{self.label} [{bar}] {i}/{self.total} {now - self.start:5.1f}s {text}"
        end = "\n" if done or not self.tty else ""
        self.stream.write(("\r" if self.tty else "") + line + end)
        self.stream.flush()


def plot_losses(path, curves, title):
    """Writes a PNG of one or more loss curves ({name: [(step, loss), ...]}); returns whether
    it could (matplotlib is optional: without it the figures are printed, no plot)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"(matplotlib is not installed: no plot written to {path})", file=sys.stderr)
        return False
    fig, ax = plt.subplots(figsize=(7, 4))
    for name, points in curves.items():
        if points:
            xs, ys = zip(*points)
            ax.plot(xs, ys, label=name)
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax.set_yscale("log")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True
