"""Where should a loop run: the measurement behind PJRTX_LOOP_WORK.

    python jax_smoke/bench_loop_placement.py [--sizes 64 1024 8192 65536 524288]

A fori_loop of 50 steps whose body is 12 element-wise ops on f32[N] (a
contracting map, so every backend's answer stays bounded), run with
PJRTX_LOOPS=host (the loop as compiled host code) and PJRTX_LOOPS=mlx (each
op an MLX primitive), side by side in one process, for a range of N. The
host wins while N is small (MLX pays microseconds per primitive, the host
nanoseconds per element) and loses once MLX's vectorised, threaded kernels
amortise their dispatch. The crossover, in elements per op and iteration,
is the auto placement's bound on this device (PJRTX_LOOP_WORK). Every
answer is checked against XLA:CPU.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("JAX_PLATFORMS", "pjrtx,cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402

from pjrtx import jax_plugin  # noqa: E402

jax_plugin.ensure_registered()

STEPS = 50


def body(i, x):
    # 12 element-wise ops; |d/dx| <= 0.5 * 0.9 + small: contracting.
    y = x * 0.5 + 0.25
    y = jnp.maximum(y, -1.0) * 0.9
    y = jnp.minimum(y, 1.0) + x * 0.05
    y = jnp.abs(y) * 0.5 - 0.1
    return jnp.where(y > 0, y, y * 0.5) + 0.01


def timed(f, x, repeats):
    """Median wall and CPU time (every thread of this process) per call: on a
    busy machine the wall time also counts waiting for a core, the CPU time
    only the work."""
    f(x).block_until_ready()
    wall, cpu = [], []
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        f(x).block_until_ready()
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    return statistics.median(wall), statistics.median(cpu)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[64, 1024, 8192, 65536, 524288])
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    dev = jax.devices("pjrtx")[0]
    print(f"fori_loop {STEPS} steps, 12 element-wise ops on f32[N] per step, on {dev.device_kind}")
    print(f"{'N':>8} {'host wall':>10} {'mlx wall':>10} {'host cpu':>10} {'mlx cpu':>10} "
          f"{'mlx/host':>9} (cpu)  faster")
    ok = True
    for n in args.sizes:
        x0 = np.linspace(-2, 2, n, dtype=np.float32)
        want = np.asarray(jax.jit(lambda x: lax.fori_loop(0, STEPS, body, x))(
            jax.device_put(x0, jax.devices("cpu")[0])))
        res = {}
        for mode in ("host", "mlx"):
            os.environ["PJRTX_LOOPS"] = mode
            f = jax.jit(lambda x: lax.fori_loop(0, STEPS, body, x))
            x = jax.device_put(x0, dev)
            got = np.asarray(f(x))
            # Exactly rounded ops in one order: bit for bit.
            if not np.array_equal(got, want):
                print(f"MISMATCH N={n} PJRTX_LOOPS={mode}: max err {np.max(np.abs(got - want))}")
                ok = False
            res[mode] = timed(f, x, args.repeats)
        (hw, hc), (mw, mc) = res["host"], res["mlx"]
        ratio = mc / hc
        print(f"{n:>8} {hw * 1e3:>8.2f}ms {mw * 1e3:>8.2f}ms {hc * 1e3:>8.2f}ms {mc * 1e3:>8.2f}ms "
              f"{ratio:>8.2f}x        {'host' if ratio > 1 else 'mlx'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
