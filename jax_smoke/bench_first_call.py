"""What a program run once pays: the first call of loop-heavy programs, each in
a fresh process, on XLA:CPU and on pjrtx with loops as host code (a cold and
a warm host-loop cache) and on MLX.

    python jax_smoke/bench_first_call.py [--rows nuts ode newton] [--repeats 3]

Each configuration runs in its own Python process: the time is from the
first call to its answer (tracing, lowering, pjrtx's plan, the host loop's
C++ build, the run), as a user meets it. `host new` builds the program's
loops for the first time (the cache holds none of them; a first process
that builds a loop runs before, so the compiler's files are in the page
cache, as on any machine that has built one: its time is printed apart;
only loops that factor or solve share a precompiled prelude, kept); `host cached` runs again over the cache the first run
left, as a second process does. The rows are _bench_workloads' `nuts` (NumPyro's
NUTS, 50 warm-up and 50 samples), `ode` and `newton`; every configuration's
answer is checked against XLA:CPU's. Issue 36's bound: the first call at
most 2x XLA:CPU's.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

CHILD = r"""
import json, os, sys, time
sys.path.insert(0, {here!r})
import numpy as np
import jax
import _bench_workloads as w
wl = next(x for x in w.WORKLOADS if x.name == {row!r})
platform = {platform!r}
if platform == "pjrtx":
    from pjrtx import jax_plugin
    jax_plugin.ensure_registered()
dev = jax.devices(platform)[0]
s = dict(wl.sizes, device=dev)
t0 = time.perf_counter()
run = wl.make_jax(s)
out = run.call()
t = time.perf_counter() - t0
leaves = [np.asarray(x, np.float64).ravel().tolist() for x in jax.tree_util.tree_leaves(out)]
print(json.dumps({{"seconds": t, "out": leaves}}))
"""


# Any loop: the compiler's first run on this machine.
PRELUDE = """
import jax, jax.numpy as jnp
from jax import lax
print(jax.jit(lambda x: lax.fori_loop(0, 3, lambda i, c: c + 1.0, x))(jnp.zeros(2)))
"""


def run_child(row: str, platform: str, env: dict) -> dict:
    code = CHILD.format(here=HERE, platform=platform, row=row)
    e = dict(os.environ, **env)
    e["JAX_PLATFORMS"] = "pjrtx,cpu" if platform == "pjrtx" else "cpu"
    r = subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, text=True,
                       timeout=3600, cwd=tempfile.gettempdir())
    if r.returncode != 0:
        raise SystemExit(f"{row} on {platform} {env}: failed\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def close(a, b, rel: float) -> bool:
    """Normwise relative difference per output within the row's bound (the
    one bench.py's numerics check uses)."""
    import numpy as np

    return len(a) == len(b) and all(
        np.linalg.norm(np.subtract(x, y)) <= rel * max(np.linalg.norm(y), 1e-30)
        for x, y in zip(a, b))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", nargs="+", default=["nuts", "ode", "newton"])
    ap.add_argument("--repeats", type=int, default=1,
                    help="runs of each configuration (each a fresh process, 'host new' over a "
                         "fresh cache); the table shows the fastest")
    args = ap.parse_args()
    sys.path.insert(0, HERE)
    import _bench_workloads as w

    rel = {x.name: x.rel(x.sizes) for x in w.WORKLOADS}
    cache_tmp = tempfile.TemporaryDirectory()
    cache = cache_tmp.name
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", PRELUDE], check=True, cwd=tempfile.gettempdir(),
                   env=dict(os.environ, PJRTX_CACHE_DIR=cache, PJRTX_LOOPS="host",
                            JAX_PLATFORMS="pjrtx,cpu"))
    print(f"a first host loop on this machine (the compiler's first run): "
          f"{time.perf_counter() - t0:.2f}s for a whole process")
    print(f"{'row':<8} {'XLA:CPU':>9} {'host new':>10} {'host cached':>12} {'mlx':>9}   "
          f"new/XLA  cached/XLA  mlx/XLA")
    worst = 0.0
    def fastest(runs):
        return min(runs, key=lambda r: r["seconds"])

    for row in args.rows:
        xs, colds, warms, mlxs = [], [], [], []
        for _ in range(args.repeats):
            # A cache without this row's loops (precompiled preludes kept).
            fresh = tempfile.mkdtemp(dir=cache)
            shutil.copytree(os.path.join(cache, "host_loops"), os.path.join(fresh, "host_loops"),
                            ignore=lambda d, names: [n for n in names if not n.startswith("prelude-")])
            xs.append(run_child(row, "cpu", {}))
            colds.append(run_child(row, "pjrtx", {"PJRTX_LOOPS": "auto", "PJRTX_CACHE_DIR": fresh}))
            warms.append(run_child(row, "pjrtx", {"PJRTX_LOOPS": "auto", "PJRTX_CACHE_DIR": fresh}))
            mlxs.append(run_child(row, "pjrtx", {"PJRTX_LOOPS": "mlx", "PJRTX_CACHE_DIR": fresh}))
        xla, cold, warm, mlx = fastest(xs), fastest(colds), fastest(warms), fastest(mlxs)
        for name, r in (("host new", cold), ("host cached", warm), ("mlx", mlx)):
            if not close(r["out"], xla["out"], rel[row]):
                print(f"{row}: {name} answer differs from XLA:CPU: {r['out']} vs {xla['out']}")
                return 1
        x = xla["seconds"]
        worst = max(worst, cold["seconds"] / x)
        print(f"{row:<8} {x:>8.2f}s {cold['seconds']:>9.2f}s {warm['seconds']:>11.2f}s "
              f"{mlx['seconds']:>8.2f}s   {cold['seconds'] / x:>6.2f}x {warm['seconds'] / x:>9.2f}x "
              f"{mlx['seconds'] / x:>7.2f}x")
    cache_tmp.cleanup()
    print(f"worst first call with new loops: {worst:.2f}x XLA:CPU (issue 36's bound: 2x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
