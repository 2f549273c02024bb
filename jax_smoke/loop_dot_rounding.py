"""How often a dot inside a host loop rounds as XLA:CPU's does.

Random shapes (m, k, n < 40), float32 and float64: each runs a one-step
fori_loop around a dot with PJRTX_LOOPS=host on pjrtx and on XLA:CPU, and
prints how many result elements differ and how many shapes are bit-equal.
XLA:CPU picks its dot's summation order by shape and CPU, so this is a
measurement, not a test (tests/test_host_loops.py asserts pjrtx's own
order: one FMA per product, in the contracted index's order).

    python jax_smoke/loop_dot_rounding.py [--shapes 30] [--seed 7]
"""
import argparse
import os

os.environ.setdefault("JAX_PLATFORMS", "pjrtx,cpu")
os.environ["PJRTX_LOOPS"] = "host"

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

jax.config.update("jax_enable_x64", True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", type=int, default=30)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    cpu, pj = jax.devices("cpu")[0], jax.devices("pjrtx")[0]
    rng = np.random.default_rng(args.seed)
    # The loop carry feeds the dot (times 0), so the dot cannot leave the loop.
    f = jax.jit(lambda a, b, n: jax.lax.fori_loop(
        0, n, lambda i, c: jnp.dot(a + c[:, :1] * 0, b), jnp.zeros((a.shape[0], b.shape[1]), a.dtype)))
    shapes = [(4, 32, 32), (3, 5, 7), (1, 8, 1), (2, 3, 4)]
    shapes += [tuple(int(v) for v in rng.integers(1, 40, 3)) for _ in range(args.shapes)]
    for dt in (np.float32, np.float64):
        diff = total = equal = 0
        for m, k, n in shapes:
            a = rng.standard_normal((m, k)).astype(dt)
            b = rng.standard_normal((k, n)).astype(dt)
            got, want = (np.asarray(f(jax.device_put(a, d), jax.device_put(b, d), jax.device_put(np.int32(1), d)))
                         for d in (pj, cpu))
            d = int((got != want).sum())
            diff, total, equal = diff + d, total + want.size, equal + (d == 0)
        print(f"{np.dtype(dt).name}: {diff} of {total} elements differ from XLA:CPU; "
              f"{equal} of {len(shapes)} shapes bit-equal")


if __name__ == "__main__":
    main()
