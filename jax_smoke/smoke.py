"""End-to-end smoke test: a few jitted JAX programs on the pjrtx device,
printed next to the same programs on XLA:CPU. Exits non-zero on a mismatch.

    python jax_smoke/smoke.py
"""
from __future__ import annotations

import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "pjrtx,cpu")

import jax  # noqa: E402

from pjrtx import jax_plugin  # noqa: E402

jax_plugin.ensure_registered()  # a source checkout has no entry point
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402


def mlp(params, x):
    for w, b in params[:-1]:
        x = jax.nn.relu(x @ w + b)
    w, b = params[-1]
    return jax.nn.log_softmax(x @ w + b)


def init_mlp(key, sizes):
    params = []
    for n_in, n_out in zip(sizes[:-1], sizes[1:]):
        key, k1, k2 = jax.random.split(key, 3)
        params.append((jax.random.normal(k1, (n_in, n_out)) / np.sqrt(n_in),
                       jax.random.normal(k2, (n_out,)) * 0.1))
    return params


def main() -> int:
    pjrtx = jax.devices("pjrtx")[0]
    cpu = jax.devices("cpu")[0]
    print(f"jax {jax.__version__}; device under test: {pjrtx!r} (platform {pjrtx.platform}, "
          f"kind {pjrtx.device_kind!r}); oracle: {cpu!r}")

    rng = np.random.default_rng(0)
    with jax.default_device(cpu):
        params = jax.tree_util.tree_map(np.asarray, init_mlp(jax.random.key(0), [16, 32, 32, 10]))
    x = rng.standard_normal((8, 16)).astype(np.float32)
    cases = [
        ("add", lambda a, b: a + b, (np.arange(6, dtype=np.float32), np.full(6, 0.5, np.float32)), 0.0),
        ("matmul+tanh+sum", lambda a, b: jnp.tanh(a @ b).sum(0),
         (np.ones((4, 3), np.float32), np.ones((3, 2), np.float32)), 1e-6),
        ("mlp forward", mlp, (params, x), 1e-5),
    ]
    failures = 0
    for name, f, args, rtol in cases:
        outs = {}
        for dev in (pjrtx, cpu):
            placed = jax.device_put(args, dev)
            outs[dev.platform] = np.asarray(jax.jit(f)(*placed))
        got, want = outs["pjrtx"], outs["cpu"]
        ok = got.shape == want.shape and got.dtype == want.dtype and np.allclose(
            got, want, rtol=rtol, atol=rtol)
        failures += not ok
        err = float(np.max(np.abs(got - want))) if got.shape == want.shape and got.size else 0.0
        print(f"\n{name}: {'ok' if ok else 'MISMATCH'} (max abs error {err:.3g})")
        print(f"  pjrtx: {np.array2string(got.ravel()[:6], precision=4)}{' ...' if got.size > 6 else ''}")
        print(f"  cpu:   {np.array2string(want.ravel()[:6], precision=4)}{' ...' if want.size > 6 else ''}")
    print(f"\n{len(cases) - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
