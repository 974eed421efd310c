"""The CPU matmuls' BLAS (cpu/blas_lib.h): LOOM_CPU_BLAS picks Intel MKL or OpenBLAS at the
first float matmul of a process; either gives the float64 product's values, and a setting that
cannot be met is an error naming the knob. Each case runs in a fresh interpreter."""
import os
import subprocess
import sys

PROG = """
import numpy as np, loom
rng = np.random.default_rng(0)
a = rng.standard_normal((67, 129)).astype(np.float32)
b = rng.standard_normal((129, 33)).astype(np.float32)
got = (loom.tensor(a).t().contiguous().t() @ loom.tensor(b)).numpy()
err = float(np.abs(got - a.astype(np.float64) @ b.astype(np.float64)).max())
print(loom._loom._cpu_blas())
print(err)
"""


def run(**env):
    return subprocess.run([sys.executable, "-c", PROG], env=dict(os.environ, **env),
                          capture_output=True, text=True, timeout=120)


def mkl_installed():
    return os.path.exists(os.path.join(sys.prefix, "lib", "libmkl_rt.so.3"))


def test_openblas_when_asked():
    r = run(LOOM_CPU_BLAS="openblas")
    assert r.returncode == 0, r.stderr
    name, err = r.stdout.split("\n")[:2]
    assert name == "openblas"
    assert float(err) < 1e-3


def test_auto_takes_mkl_where_it_loads():
    r = run(LOOM_CPU_BLAS="auto")
    assert r.returncode == 0, r.stderr
    name, err = r.stdout.split("\n")[:2]
    assert name.startswith("mkl (") if mkl_installed() else name == "openblas"
    assert float(err) < 1e-3


def test_mkl_asked_for_but_not_found_is_an_error():
    r = run(LOOM_CPU_BLAS="mkl", LOOM_MKL="/nonexistent/lib")
    assert r.returncode != 0
    assert "matmul: LOOM_CPU_BLAS=mkl but no MKL library loads" in r.stderr


def test_an_unknown_setting_is_an_error():
    r = run(LOOM_CPU_BLAS="blis")
    assert r.returncode != 0
    assert "matmul: LOOM_CPU_BLAS must be auto, mkl or openblas, got 'blis'" in r.stderr
