"""Per-call cost of a tiny jitted program: pjrtx vs XLA:CPU vs MLX itself.

    python jax_smoke/bench_dispatch.py [--calls N]

Prints microseconds per call for `jit(lambda x: x + 1)` on a 4-element f32
array, (a) dispatched back to back and synchronised once at the end, and
(b) synchronised after every call, plus the same for native MLX
(`mx.compile` from Python) measured in the same run, and the ratios.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("JAX_PLATFORMS", "pjrtx,cpu")

import jax  # noqa: E402

from pjrtx import jax_plugin  # noqa: E402

jax_plugin.ensure_registered()  # a source checkout has no entry point
import numpy as np  # noqa: E402


def per_call_us(step, sync, calls: int, repeats: int = 5) -> float:
    """Median over repeats of the mean time per call."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            out = step()
        sync(out)
        times.append((time.perf_counter() - t0) / calls * 1e6)
    return statistics.median(times)


def bench_jax(platform: str, calls: int) -> tuple[float, float]:
    d = jax.devices(platform)[0]
    x = jax.device_put(np.ones((4,), np.float32), d)
    f = jax.jit(lambda x: x + 1)
    for _ in range(100):
        f(x).block_until_ready()
    piped = per_call_us(lambda: f(x), lambda y: y.block_until_ready(), calls)
    synced = per_call_us(lambda: f(x).block_until_ready(), lambda y: None, calls)
    return piped, synced


def bench_mlx(calls: int) -> tuple[float, float]:
    import mlx.core as mx

    mx.set_default_device(mx.cpu if os.environ.get("PJRTX_DEVICE") == "cpu" else mx.default_device())
    x = mx.ones((4,), dtype=mx.float32)
    f = mx.compile(lambda x: x + 1)
    for _ in range(100):
        mx.eval(f(x))
    def piped_step():
        y = f(x)
        mx.async_eval(y)  # like a PJRT execute: scheduled, not awaited
        return y

    piped = per_call_us(piped_step, lambda y: mx.eval(y), calls)

    def synced_step():
        y = f(x)
        mx.eval(y)
        return y

    synced = per_call_us(synced_step, lambda y: None, calls)
    return piped, synced


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=2000)
    args = ap.parse_args()
    rows = {"pjrtx": bench_jax("pjrtx", args.calls), "XLA:CPU": bench_jax("cpu", args.calls),
            "MLX mx.compile": bench_mlx(args.calls)}
    print(f"jit(x + 1), f32[4], {args.calls} calls x 5 repeats (median); device "
          f"{jax.devices('pjrtx')[0].device_kind}")
    print(f"{'':16} {'pipelined us':>13} {'synced us':>10}")
    for name, (p, s) in rows.items():
        print(f"{name:16} {p:13.1f} {s:10.1f}")
    pj = rows["pjrtx"]
    for name in ("XLA:CPU", "MLX mx.compile"):
        o = rows[name]
        print(f"pjrtx / {name}: pipelined {pj[0] / o[0]:.2f}x, synced {pj[1] / o[1]:.2f}x")


if __name__ == "__main__":
    main()
