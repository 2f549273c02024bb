"""Training across processes on pjrtx, checked against one device.

An MLP is trained from one seed three ways: on 1 process x 1 device (the
reference, in float32 and in float64), data-parallel on 2 processes x 2
devices (the batch sharded, gradients all-reduced across processes), and
tensor-parallel on 2 x 2 (hidden units sharded: the first weight matrix by
columns, the second by rows). The parallel runs sum the same terms in
another order, so their float32 losses may differ from the reference's by
rounding only: each step must stay within 4x the largest difference between
the float32 and float64 reference losses so far (the size of float32
rounding in this very run) plus 8 ulps. Prints the losses side by side and
the step times; exits 1 if any step is outside the bound.

    python jax_smoke/data_parallel.py [--steps 30] [--nprocs 2] [--devices 2]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

BATCH, D_IN, HIDDEN, D_OUT, LR = 64, 16, 32, 4, 0.05


def data(np):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((BATCH, D_IN)).astype(np.float64)
    w_true = rng.standard_normal((D_IN, D_OUT))
    y = np.tanh(x @ w_true) + 0.1 * rng.standard_normal((BATCH, D_OUT))
    w1 = rng.standard_normal((D_IN, HIDDEN)) * 0.3
    w2 = rng.standard_normal((HIDDEN, D_OUT)) * 0.3
    return x, y, w1, w2


def train(mode: str, steps: int) -> dict:
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    if mode == "ref64":
        jax.config.update("jax_enable_x64", True)
    dt = np.float64 if mode == "ref64" else np.float32
    x, y, w1, w2 = (a.astype(dt) for a in data(np))

    def loss(params, xb, yb):
        h = jnp.tanh(xb @ params[0])
        return jnp.mean((h @ params[1] - yb) ** 2)

    def step(params, xb, yb):
        val, g = jax.value_and_grad(loss)(params, xb, yb)
        return val, (params[0] - LR * g[0], params[1] - LR * g[1])

    if mode in ("ref32", "ref64"):
        dev = jax.local_devices(backend="pjrtx")[0]
        put = lambda a: jax.device_put(a, dev)  # noqa: E731
        params, xb, yb = (put(w1), put(w2)), put(x), put(y)
        fn = jax.jit(step)
    else:
        mesh = Mesh(np.asarray(jax.devices("pjrtx"), dtype=object), ("x",))

        def put(a, *spec):
            sh = NamedSharding(mesh, P(*spec))
            return jax.make_array_from_callback(a.shape, sh, lambda idx: a[idx])

        if mode == "dp":  # batch sharded, weights replicated
            params, xb, yb = (put(w1), put(w2)), put(x, "x"), put(y, "x")
            pspec = (P(), P())
        else:  # "tp": hidden units sharded, batch replicated
            params, xb, yb = (put(w1, None, "x"), put(w2, "x")), put(x), put(y)
            pspec = (P(None, "x"), P("x"))
        fn = jax.jit(step, out_shardings=(NamedSharding(mesh, P()),
                                          tuple(NamedSharding(mesh, s) for s in pspec)))
    losses, times = [], []
    for _ in range(steps):
        t0 = time.perf_counter()
        val, params = fn(params, xb, yb)
        val = float(np.asarray(val.addressable_shards[0].data))
        times.append(time.perf_counter() - t0)
        losses.append(val)
    # steady-state step time: the median after the first (compiling) steps
    steady = sorted(times[2:])[len(times[2:]) // 2] if len(times) > 3 else times[-1]
    return {"losses": losses, "step_ms": 1e3 * steady}


def worker(mode: str, steps: int, out: str) -> int:
    import jax

    if mode in ("dp", "tp"):
        jax.distributed.initialize()
    res = train(mode, steps)
    if mode in ("ref32", "ref64") or jax.process_index() == 0:
        with open(out, "w") as f:
            json.dump(res, f)
    if mode in ("dp", "tp"):
        jax.distributed.shutdown()
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--nprocs", type=int, default=2)
    ap.add_argument("--devices", type=int, default=2, help="pjrtx devices per process")
    ap.add_argument("--worker", nargs=2, metavar=("MODE", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args.worker[0], args.steps, args.worker[1])
    from pjrtx import launch

    here = os.path.abspath(__file__)
    env = dict(os.environ, JAX_PLATFORMS="pjrtx,cpu", PJRTX_DEVICES="1")
    env.pop("JAX_ENABLE_X64", None)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for mode in ("ref32", "ref64"):
            out = os.path.join(tmp, mode)
            # one process, one device, registered as the launcher's workers are
            code = ("import sys, runpy; from pjrtx import jax_plugin; "
                    "jax_plugin.ensure_registered(); sys.argv = sys.argv[1:]; "
                    "runpy.run_path(sys.argv[0], run_name='__main__')")
            subprocess.run([sys.executable, "-c", code, here, "--steps", str(args.steps),
                            "--worker", mode, out], env=env, check=True)
            results[mode] = json.load(open(out))
        os.environ["JAX_PLATFORMS"] = "pjrtx,cpu"
        for mode in ("dp", "tp"):
            out = os.path.join(tmp, mode)
            rc = launch.launch(args.nprocs, args.devices, here,
                               ["--steps", str(args.steps), "--worker", mode, out],
                               out=open(os.devnull, "w"))
            if rc != 0 or not os.path.exists(out):
                print(f"{mode}: the {args.nprocs}-process run failed (status {rc})")
                return 1
            results[mode] = json.load(open(out))
    ref, ref64 = results["ref32"]["losses"], results["ref64"]["losses"]
    eps = 2.0 ** -23
    bad = 0
    n = args.nprocs * args.devices
    print(f"MLP {D_IN}-{HIDDEN}-{D_OUT}, batch {BATCH}, {args.steps} steps of SGD; "
          f"1x1 reference vs {args.nprocs} processes x {args.devices} devices")
    print(f"{'step':>4} {'1x1 f32':>12} {'data-par':>12} {'tensor-par':>12} {'bound':>10}")
    scale = 0.0
    for t in range(args.steps):
        scale = max(scale, abs(ref[t] - ref64[t]))
        bound = 4 * scale + 8 * eps * abs(ref[t])
        dp, tp = results["dp"]["losses"][t], results["tp"]["losses"][t]
        ok = abs(dp - ref[t]) <= bound and abs(tp - ref[t]) <= bound
        bad += not ok
        if t < 5 or t == args.steps - 1 or not ok:
            print(f"{t:>4} {ref[t]:12.7f} {dp:12.7f} {tp:12.7f} {bound:10.2e}"
                  f"{'' if ok else '  OUTSIDE'}")
    print(f"step time (ms, median): 1 process x 1 device {results['ref32']['step_ms']:.2f}; "
          f"data-parallel {n} devices {results['dp']['step_ms']:.2f}; "
          f"tensor-parallel {n} devices {results['tp']['step_ms']:.2f}")
    print(f"{args.steps - bad} passed, {bad} failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
