"""In-place updates of a large donated buffer on pjrtx: peak memory and time.

    python jax_smoke/bench_donation.py [--gib 1.0] [--steps 20]

For each kind of update (a scatter at a traced index, dynamic_update_slice,
an element-wise optimizer-like step), runs `steps` calls of
jax.jit(update, donate_argnums=0) on a buffer of `gib` GiB, holding the
input until each call has run, and prints MLX's peak memory above the
buffer itself, in copies of the buffer, and the time per update, with
donation and without (where each call must allocate a second copy). Values
are checked against XLA:CPU on the first 4096 elements (exactly, or within
the element-wise step's rounding).
"""
from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("JAX_PLATFORMS", "pjrtx,cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from pjrtx import jax_plugin  # noqa: E402

jax_plugin.ensure_registered()  # a source checkout has no entry point
from pjrtx import _pjrtx  # noqa: E402

KINDS = {
    "scatter": lambda x, i: x.at[i].set(x[i + 1] * 0.5 + 1.0),
    "dynamic_update_slice": lambda x, i: jax.lax.dynamic_update_slice(
        x, jnp.full((4,), 2.0, x.dtype), (i,)),
    "elementwise": lambda x, i: x * 0.999 + i.astype(x.dtype) * 1e-3,
}


def run(kind, n, steps, donate):
    dev = jax.devices("pjrtx")[0]
    f = jax.jit(KINDS[kind], donate_argnums=0 if donate else ())
    f(jax.device_put(np.zeros(n, np.float32), dev), np.int32(0)).block_until_ready()
    x = jax.device_put(np.zeros(n, np.float32), dev)
    x.block_until_ready()
    _pjrtx.reset_peak_memory()
    base = _pjrtx.memory_stats()["in_use"]
    t0 = time.perf_counter()
    for k in range(steps):
        y = f(x, np.int32(k * 7))
        y.block_until_ready()
        x = y
    dt = (time.perf_counter() - t0) / steps
    peak = max(_pjrtx.memory_stats()["peak"], base)
    head = np.asarray(x[:4096])
    del x, y
    return (peak - base) / (4 * n), dt, head


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--steps", type=int, default=20)
    args = ap.parse_args()
    n = int(args.gib * (1 << 30)) // 4
    cpu = jax.devices("cpu")[0]
    print(f"pjrtx in-place updates of a {args.gib:g} GiB f32 buffer, {args.steps} calls each, "
          f"{time.strftime('%Y-%m-%d %H:%M')} UTC, device {jax.devices('pjrtx')[0].device_kind}")
    print(f"{'update':22} {'donated: extra peak':>20} {'time/update':>12}   "
          f"{'not donated: extra peak':>24} {'time/update':>12}  check")
    bad = 0
    for kind in KINDS:
        extra_d, t_d, head = run(kind, n, args.steps, True)
        extra_n, t_n, _ = run(kind, n, args.steps, False)
        want = np.zeros(4096, np.float32)
        g = jax.jit(KINDS[kind])
        for k in range(args.steps):
            want = np.asarray(g(jax.device_put(want, cpu), np.int32(k * 7)))
        # The scatter and the slice update are exact; the element-wise step
        # rounds twice per call (or once, fused into an FMA), and the map
        # contracts, so two implementations differ by at most 2 ulp of the
        # largest value per call.
        tol = 0.0 if kind != "elementwise" else (
            2 * args.steps * np.finfo(np.float32).eps * max(1.0, float(np.abs(want).max())))
        ok = bool(np.all(np.abs(head.astype(np.float64) - want) <= tol))
        bad += not ok
        print(f"{kind:22} {extra_d:17.3f} x {t_d * 1e3:9.1f} ms   {extra_n:21.3f} x "
              f"{t_n * 1e3:9.1f} ms  {'ok' if ok else 'MISMATCH'}")
    print("extra peak: MLX's peak memory during the calls above the buffer, in copies of it")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
