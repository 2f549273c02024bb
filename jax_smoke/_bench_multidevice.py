"""The several-device rows of jax_smoke/bench.py: an all-reduce and a
data-parallel MLP step over meshes of the first k of DEVICES devices.

Each backend's process is started with DEVICES devices before JAX starts
(`env_for`): pjrtx with PJRTX_DEVICES, XLA:CPU with
--xla_force_host_platform_device_count; native MLX (one process, no
devices) gives the all-reduce's bandwidth bound: the same bytes copied.
The rows are ordinary Workloads, so bench.py times them in the same
interleaved rounds as the single-device ones, in a second set of processes.
"""
from __future__ import annotations

import math

import numpy as np

from _bench_workloads import EPS32, MLP, MLP_Q, Run, Workload, mlp_flops, mlp_jax_step, mlp_params

DEVICES = 8
KS = (1, 2, 4, 8)
KIB, MIB = 1 << 10, 1 << 20
SIZES = (4 * KIB, 64 * KIB, MIB, 16 * MIB, 64 * MIB)
QUICK_SIZES = (4 * KIB, 64 * KIB)
# A device's result up to this size is compared whole; above it, a strided
# sample of it and two exact float64 sums (see digest).
WHOLE = 256 * KIB
DP_BATCH, DP_BATCH_Q = 256, 16  # per device: the global batch is this times k


def env_for(backend: str) -> dict:
    """What a backend's process needs in its environment before JAX starts."""
    import os

    if backend == "pjrtx":
        return {"PJRTX_DEVICES": str(DEVICES)}
    if backend == "xla":
        flag = f"--xla_force_host_platform_device_count={DEVICES}"
        return {"XLA_FLAGS": (os.environ.get("XLA_FLAGS", "") + " " + flag).strip()}
    return {}


def fmt_bytes(n: int) -> str:
    return f"{n // MIB}MiB" if n >= MIB else f"{n // KIB}KiB"


def mesh_of(s):
    import jax
    from jax.sharding import Mesh

    devs = s["devices"][:s["k"]]
    if len(devs) < s["k"]:
        raise RuntimeError(f"{len(devs)} devices, the row needs {s['k']}")
    return Mesh(np.array(devs), ("x",))


def digest(out) -> list:
    """Every device's copy of every output, in device order: whole when
    small, else a strided sample plus the shard's sum and its sum weighted
    by position mod 7 in float64 (exact for the small-integer all-reduce
    inputs), so a misplaced block is caught without saving 512 MiB."""
    import jax

    arrays = []
    for leaf in jax.tree_util.tree_leaves(out):
        for sh in sorted(leaf.addressable_shards, key=lambda sh: sh.device.id):
            a = np.asarray(sh.data).reshape(-1)
            if a.nbytes <= WHOLE:
                arrays.append(a)
                continue
            w = (np.arange(a.size) % 7).astype(np.float64)
            arrays += [a[::a.size // 4096], np.array([a.sum(dtype=np.float64), a @ w])]
    return arrays


# ---------------------------------------------------------------- all-reduce
def allreduce_input(s):
    # Small integers: every summation order gives the same float32 result.
    n = s["bytes"] // 4
    return np.random.default_rng(6).integers(-8, 9, s["k"] * n, dtype=np.int8).astype(np.float32)


def allreduce_jax(s):
    import jax
    from jax import lax
    from jax.sharding import NamedSharding, PartitionSpec as P

    mesh = mesh_of(s)
    x = jax.device_put(allreduce_input(s), NamedSharding(mesh, P("x")))
    # out_specs P("x"): the k replicas of the sum side by side, so the check
    # sees every device's copy.
    f = jax.jit(jax.shard_map(lambda a: lax.psum(a, "x"), mesh=mesh, in_specs=P("x"),
                              out_specs=P("x")))
    return Run(lambda: f(x).block_until_ready(), digest=digest)


def allreduce_mlx(s):
    """The bandwidth bound: k arrays of S bytes each copied once into fresh
    storage (k*S read, k*S written), evaluated together."""
    import mlx.core as mx

    n = s["bytes"] // 4
    xs = [mx.array(v) for v in allreduce_input(s).reshape(s["k"], n)]
    mx.eval(xs)
    ys = [mx.array(x) for x in xs]
    mx.eval(ys)

    def addr(a):
        return np.asarray(a).__array_interface__["data"][0]

    if any(addr(x) == addr(y) for x, y in zip(xs, ys)):
        raise RuntimeError("mx.array(x) shares x's storage: the copy column would time nothing")

    def call():
        out = [mx.array(x) for x in xs]
        mx.eval(out)
        return out

    return Run(call, lambda: [mx.array(x) for x in xs])


def allreduce_bytes(s) -> int:
    """Bytes the math needs: each of the k inputs read once, each of the k
    results written once."""
    return 2 * s["k"] * s["bytes"]


# ---------------------------------------------------------------- data-parallel MLP
def dp_mlp_jax(s):
    import jax
    from jax.sharding import NamedSharding, PartitionSpec as P

    mesh = mesh_of(s)
    ps, x, y = mlp_params(s)
    rep, batch = NamedSharding(mesh, P()), NamedSharding(mesh, P("x"))
    ps = jax.device_put(ps, rep)
    x, y = jax.device_put(x, batch), jax.device_put(y, batch)
    # The loss is the mean over the global batch: the partitioner all-reduces
    # the gradients; the updated parameters and the loss are replicated.
    f = jax.jit(mlp_jax_step(), in_shardings=([rep] * len(ps), batch, batch),
                out_shardings=([rep] * len(ps), rep))
    return Run(lambda: jax.block_until_ready(f(ps, x, y)), digest=digest)


def dp_rel(s):
    # The existing MLP bound over the longest dot, which is now the batch
    # sum of the weight gradients (reordered across devices).
    return 4 * 3 * max(max(s["dims"]), s["batch"]) * EPS32


def workloads():
    rows = []
    for k in KS:
        for b in SIZES:
            size = {"k": k, "bytes": b}
            rows.append(Workload(
                f"allreduce_k{k}_{fmt_bytes(b)}", f"psum of {fmt_bytes(b)} f32 over {k} devices",
                allreduce_jax, allreduce_mlx, None, lambda s: s["k"] * EPS32, size,
                size if b in QUICK_SIZES else None, group="allreduce"))
    for k in KS:
        rows.append(Workload(
            f"dp_mlp_k{k}", f"MLP SGD step, batch {DP_BATCH}*{k} sharded over {k} devices",
            dp_mlp_jax, None, mlp_flops, dp_rel, {**MLP, "k": k, "batch": DP_BATCH * k},
            {**MLP_Q, "k": k, "batch": DP_BATCH_Q * k}, group="dp_mlp"))
    return rows


WORKLOADS = workloads()
