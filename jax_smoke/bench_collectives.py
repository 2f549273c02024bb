"""all_reduce and all_gather across processes: pjrtx (a jitted shard_map
psum / all_gather over one device per process) beside MLX's own
mx.distributed.all_sum / all_gather in the same processes, over the same
connection (pjrtx joins MLX's ring; MLX's Python API then returns that
group), 4 KiB to 64 MiB per process.

    python jax_smoke/bench_collectives.py [--nprocs 2] [--repeats 7] [--max-mib 64]

starts the processes itself (python -m pjrtx launch). Rank 0 prints one
row per size: milliseconds per call (median of the repeats) and the ratio
pjrtx / MLX (1.00: the same speed)."""
from __future__ import annotations

import argparse
import os
import sys
import time


def worker(repeats: int, max_mib: float) -> int:
    import jax
    import jax.numpy as jnp
    import mlx.core as mx
    import numpy as np
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    jax.distributed.initialize()
    devs = jax.devices("pjrtx")
    k = len(devs)
    mesh = Mesh(np.asarray(devs, dtype=object), ("x",))
    group = mx.distributed.init(backend="ring")  # the group pjrtx joined
    assert group.size() == jax.process_count(), (group.size(), jax.process_count())
    rank = jax.process_index()
    psum = jax.jit(jax.shard_map(lambda a: jax.lax.psum(a, "x"), mesh=mesh, in_specs=P("x"),
                                 out_specs=P("x"), check_vma=False))
    gather = jax.jit(jax.shard_map(lambda a: jax.lax.all_gather(a, "x", tiled=True), mesh=mesh,
                                   in_specs=P("x"), out_specs=P("x"), check_vma=False))

    def median_ms(fn):
        fn()  # warm-up (compiles)
        fn()
        ts = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
        return 1e3 * sorted(ts)[len(ts) // 2]

    rows = []
    size = 4 << 10
    while size <= max_mib * (1 << 20):
        n = size // 4
        local = np.full((n,), rank + 1, np.float32)
        arr = jax.make_array_from_callback(
            (n * k,), NamedSharding(mesh, P("x")),
            lambda idx: np.full((n,), (idx[0].start or 0) // n + 1, np.float32))
        xm = mx.array(local)
        mx.eval(xm)
        # correctness first: every element is the sum 1 + 2 + ... + k
        got = np.asarray(psum(arr).addressable_shards[0].data)
        want_sum = k * (k + 1) / 2
        if not np.all(got == want_sum):
            print(f"rank {rank}: psum of {size} bytes gave {got[:4]}, want {want_sum}", flush=True)
            return 1
        t_psum = median_ms(lambda: psum(arr).block_until_ready())
        t_sum = median_ms(lambda: mx.eval(mx.distributed.all_sum(xm, group=group)))
        t_gather = median_ms(lambda: gather(arr).block_until_ready())
        t_mgather = median_ms(lambda: mx.eval(mx.distributed.all_gather(xm, group=group)))
        rows.append((size, t_psum, t_sum, t_gather, t_mgather))
        size *= 4
    if rank == 0:
        print(f"{k} processes, one device each ({jax.devices('pjrtx')[0].device_kind}), "
              f"MLX ring; milliseconds per call, median of {repeats}")
        print(f"{'bytes':>10} {'psum':>9} {'mx.all_sum':>11} {'ratio':>6} "
              f"{'all_gather':>11} {'mx.gather':>10} {'ratio':>6}")
        for size, a, b, c, d in rows:
            label = f"{size >> 20} MiB" if size >= 1 << 20 else f"{size >> 10} KiB"
            print(f"{label:>10} {a:9.3f} {b:11.3f} {a / b:6.2f} {c:11.3f} {d:10.3f} {c / d:6.2f}")
    jax.distributed.shutdown()
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nprocs", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--max-mib", type=float, default=64)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args.repeats, args.max_mib)
    from pjrtx import launch

    os.environ.setdefault("JAX_PLATFORMS", "pjrtx,cpu")
    return launch.launch(args.nprocs, 1, os.path.abspath(__file__),
                         ["--worker", "--repeats", str(args.repeats), "--max-mib",
                          str(args.max_mib)])


if __name__ == "__main__":
    sys.exit(main())
