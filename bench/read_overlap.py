"""Whether a read waits for its own value's kernel alone (docs/ARCHITECTURE.md, "The path of
one op", step 6): a sum is read while the 60 products of [2048, 2048] recorded after it are
still on the stream, as a training step's loss is read while its backward still runs. Prints
the read's wall time and the wait for the rest after it, and checks both values."""
import argparse
import time

import numpy as np

import loom

ap = argparse.ArgumentParser()
ap.add_argument("--device", default="cuda")
ap.add_argument("--products", type=int, default=60)
args = ap.parse_args()
n = 2048
xh = (np.random.default_rng(0).standard_normal((n, n)) / np.sqrt(n)).astype(np.float32)
x = loom.tensor(xh).to(args.device)
loom.sync()
for rep in range(3):
    s, w = x.sum(), x
    for _ in range(args.products):
        w = w @ x
    t0 = time.perf_counter()
    v = s.item()
    t1 = time.perf_counter()
    loom.sync()
    t2 = time.perf_counter()
    print(f"read {1e3 * (t1 - t0):.2f} ms, then the rest {1e3 * (t2 - t1):.2f} ms")
ref = xh.astype(np.float64).sum()
assert abs(v - ref) <= 1e-3 * max(1.0, abs(ref)), (v, ref)
w2 = (x @ x).to("cpu").numpy()
ref2 = xh.astype(np.float64) @ xh.astype(np.float64)
assert np.allclose(w2, ref2, rtol=1e-3, atol=1e-3), "a product after the read"
print("values ok")
