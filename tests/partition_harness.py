"""Checks pjrtx.frontend.partition.localize against jax.jit on XLA:CPU.

Run as a script (tests/test_partition.py starts it in a subprocess, so the
8 host devices are set up before JAX starts and a Shardy CHECK abort cannot
kill the caller):

    python tests/partition_harness.py [--force shardy|global] [CASE ...]

For each case it lowers a jit / shard_map / pmap program for 8 CPU devices,
checks it is what a plugin receives (sdy.mesh, mhlo.num_partitions = 8,
mhlo.num_replicas = 1), localizes it, runs the per-device program on XLA:CPU
as 8 replicas (XLA:CPU refuses num_partitions > 1 without its own SPMD
partitioner: partition_id becomes replica_id, and permutes lose their channel
so they are cross-replica), feeding device i the shard JAX holds on the i-th
device of the assignment, and reassembles the global results from the
per-device outputs with the shardings localize reports. It prints one JSON
line per case.
"""
from __future__ import annotations

import json
import os
import re
import sys
import traceback

N = 8
os.environ["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={N}"
os.environ["JAX_PLATFORMS"] = "cpu"
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P  # noqa: E402
from jax._src.lib import xla_client as xc  # noqa: E402

from pjrtx.frontend import partition  # noqa: E402
from pjrtx.frontend.partition.sharding import coords_of_partition  # noqa: E402
from pjrtx.frontend.partition.walk import func_attr_list, func_type, main_func  # noqa: E402
from pjrtx.frontend.parse import parse_module  # noqa: E402

DEVS = jax.devices()
MESH2 = Mesh(np.array(DEVS).reshape(2, 4), ("x", "y"))
MESH1 = Mesh(np.array(DEVS), ("d",))
# a mesh whose device order is not the devices' id order
MESHP = Mesh(np.array(DEVS)[[3, 1, 2, 0, 7, 5, 6, 4]].reshape(4, 2), ("a", "b"))
S = lambda *s: NamedSharding(MESH2, P(*s))  # noqa: E731
D = lambda *s: NamedSharding(MESH1, P(*s))  # noqa: E731
R = np.random.default_rng(0)


def put(shape, sh, dtype=np.float32):
    return jax.device_put(R.standard_normal(shape).astype(dtype), sh)


def _mlp():
    W1, W2, X = put((16, 32), S(None, "y")), put((32, 8), S("y", None)), put((8, 16), S("x", None))

    def loss(p, X):
        h = jax.nn.relu(X @ p[0])
        return jnp.mean((h @ p[1]) ** 2)

    f = jax.jit(lambda p, X: jax.tree.map(lambda a, g: a - 0.1 * g, p, jax.grad(loss)(p, X)))
    return f, ((W1, W2), X), MESH2


class _InMesh:
    """A jitted function traced and run inside `jax.set_mesh(mesh)` (JAX's
    explicit sharding, where `unreduced` outputs live)."""

    def __init__(self, f, mesh):
        self.f, self.mesh = f, mesh

    def lower(self, *args):
        with jax.set_mesh(self.mesh):
            return self.f.lower(*args)

    def __call__(self, *args):
        with jax.set_mesh(self.mesh):
            return self.f(*args)


MESHE = Mesh(np.array(DEVS).reshape(2, 4), ("x", "y"), axis_types=(jax.sharding.AxisType.Explicit,) * 2)
E = lambda *s, **kw: NamedSharding(MESHE, P(*s, **kw))  # noqa: E731


def _explicit(f, args):
    return _InMesh(jax.jit(f), MESHE), args, MESHE


def _custom_partitioning():
    """A custom_partitioning function whose per-device body needs its
    partition's collectives: the mean over 'y' of x's rows plus y."""
    from jax.experimental.custom_partitioning import custom_partitioning

    def partition(mesh, arg_shapes, result_shape):
        def lower_fn(x, y):
            return jax.lax.psum(x.reshape((4,)) + y, "y") / 4
        return mesh, lower_fn, result_shape.sharding, jax.tree.map(lambda s: s.sharding, arg_shapes)

    @custom_partitioning
    def f(x, y):
        return x.reshape((8,)) + y

    f.def_partition(infer_sharding_from_operands=None, propagate_user_sharding=None,
                    partition=partition, sharding_rule="(i k) j, (i k j) -> (i k j)",
                    i=2, k=2, need_replication_factors=("k",))
    return (jax.jit(lambda a, b: f(a, b) * 2),
            (put((4, 2), S("x", None)), put((8,), S("x"))), MESH2)


def _unreduced_arg():
    to_unreduced = _InMesh(jax.jit(lambda a: jax.sharding.reshard(a, P(None, None, unreduced={"x"}))), MESHE)
    return to_unreduced(put((4, 8), E(None, "y")))


def _reduced_fwd_unreduced_bwd():
    body = jax.shard_map(lambda a: a * a, out_specs=P(reduced={"x"}))
    return _explicit(jax.grad(lambda a: body(a).sum()),
                     (jax.device_put(R.standard_normal(8).astype(np.float32), E(reduced={"x"})),))


def _smap(body, in_specs, out_specs, mesh=MESH2, **kw):
    return jax.jit(jax.shard_map(body, mesh=mesh, in_specs=in_specs, out_specs=out_specs, **kw))


# name -> () -> (jitted f, args pytree, mesh whose device order is the assignment)
CASES = {
    "reduce_sum": lambda: (jax.jit(lambda a: jnp.sum(a * 2, axis=0), out_shardings=S("y")),
                           (put((8, 4), S("x", "y")),), MESH2),
    "reduce_sum_unspecified_out": lambda: (jax.jit(lambda a: jnp.sum(a, axis=1)),
                                           (put((8, 4), S("x", "y")),), MESH2),
    "matmul_sharded_contraction": lambda: (
        jax.jit(lambda x, w: jnp.tanh(x @ w), out_shardings=S("x", None)),
        (put((8, 16), S("x", "y")), put((16, 4), S("y", None))), MESH2),
    "matmul_batch": lambda: (jax.jit(lambda x, w: jnp.einsum("bij,bjk->bik", x, w)),
                             (put((4, 8, 16), S("x", "y")), put((4, 16, 4), S("x", None, "y"))), MESH2),
    "matmul_T": lambda: (jax.jit(lambda x, w: (x @ w).T @ x, out_shardings=S(None, "y")),
                         (put((8, 16), S("x", "y")), put((16, 4), S("y", None))), MESH2),
    "reshard": lambda: (jax.jit(lambda a: a + 1, out_shardings=S("y", "x")),
                        (put((8, 8), S("x", "y")),), MESH2),
    "softmax": lambda: (jax.jit(lambda a: jax.nn.softmax(a, axis=1)),
                        (put((8, 8), S("x", "y")),), MESH2),
    "max_sharded_dim": lambda: (jax.jit(lambda a: jnp.max(a, axis=0)),
                                (put((8, 4), S("x", "y")),), MESH2),
    "min_1d": lambda: (jax.jit(lambda a: jnp.min(a)), (put((16,), D("d")),), MESH1),
    "argmax": lambda: (jax.jit(lambda a: jnp.argmax(a, axis=0)),
                       (put((8, 4), S("x", "y")),), MESH2),
    "cumsum_sharded_dim": lambda: (jax.jit(lambda a: jnp.cumsum(a, axis=0)),
                                   (put((8, 4), S("x", "y")),), MESH2),
    "gather": lambda: (jax.jit(lambda a, i: a[i]),
                       (put((8, 4), S("x", "y")), jax.device_put(np.array([7, 0, 3, 1, 2, 2, 5, 6]), S("x"))),
                       MESH2),
    "fori_loop": lambda: (jax.jit(lambda a: jax.lax.fori_loop(0, 3, lambda i, c: c @ c.T @ c * 0.01, a)),
                          (put((8, 8), S("x", "y")),), MESH2),
    "dynamic_slice": lambda: (jax.jit(lambda a, i: jax.lax.dynamic_slice_in_dim(a, i, 4, 0)),
                              (put((8, 4), S("x", "y")), jax.device_put(np.int32(2), S())), MESH2),
    "mesh2d_elementwise": lambda: (jax.jit(lambda a, b: a * b + 1, out_shardings=S("y", "x")),
                                   (put((8, 8), S("x", "y")), put((8, 8), S("y", "x"))), MESH2),
    "two_axes_one_dim": lambda: (jax.jit(lambda a: jnp.exp(a), out_shardings=S(None, ("x", "y"))),
                                 (put((16, 8), S(("y", "x"))),), MESH2),
    "uneven_divisible": lambda: (jax.jit(lambda a: a * 2 + 1, out_shardings=S("x")),
                                 (put((6, 12), S(None, "y")),), MESH2),
    "permuted_mesh": lambda: (jax.jit(lambda a: jnp.sin(a).sum(0),
                                      out_shardings=NamedSharding(MESHP, P("b"))),
                              (put((8, 6), NamedSharding(MESHP, P("a", "b"))),), MESHP),
    "replicated_only": lambda: (jax.jit(lambda a, b: (a @ b, a.sum())),
                                (put((8, 8), S()), put((8, 4), S())), MESH2),
    "uncommitted_arg": lambda: (jax.jit(lambda a, u: (a.sum(0), u * 2)),
                                (put((8, 4), S("x", "y")), put((6,), S())), MESH2),
    "sort": lambda: (jax.jit(lambda a: jnp.sort(a, axis=0)), (put((8, 4), S("x", "y")),), MESH2),
    "concat": lambda: (jax.jit(lambda a, b: jnp.concatenate([a, b], 0)),
                       (put((8, 4), S("x", "y")), put((8, 4), S("x", "y"))), MESH2),
    "transpose_reshape": lambda: (jax.jit(lambda a: (a.T + 0).reshape(32)),
                                  (put((8, 4), S("x", "y")),), MESH2),
    "scatter_add": lambda: (jax.jit(lambda a, i: a.at[i].add(1.0)),
                            (put((8, 4), S("x", "y")), jax.device_put(np.array([7, 0, 3, 1]), S())), MESH2),
    "conv_batch": lambda: (jax.jit(lambda a, k: jax.lax.conv(a, k, (1, 1), "SAME")),
                           (put((8, 3, 8, 8), S("x")), put((2, 3, 3, 3), S())), MESH2),
    "sharding_constraint": lambda: (
        jax.jit(lambda a: jax.lax.with_sharding_constraint(a * 2, S("y")) + 1),
        (put((8, 4), S("x", "y")),), MESH2),
    "bool_int": lambda: (jax.jit(lambda a: ((a > 0).astype(jnp.int32) * 3, jnp.any(a > 1, axis=0))),
                         (put((8, 4), S("x", "y")),), MESH2),
    "mlp_grad_step": _mlp,
    "shard_map_psum": lambda: (_smap(lambda a: jax.lax.psum(a.sum(0), "x"), P("x", "y"), P("y")),
                               (put((8, 4), S("x", "y")),), MESH2),
    "shard_map_all_gather": lambda: (
        _smap(lambda a: jax.lax.all_gather(a, "y", axis=1, tiled=True) * 2, P("x", "y"), P("x"), check_vma=False),
        (put((8, 8), S("x", "y")),), MESH2),
    "shard_map_ppermute": lambda: (
        _smap(lambda a: jax.lax.ppermute(a, "y", [(i, (i + 1) % 4) for i in range(4)]),
              P("x", "y"), P("x", "y")),
        (put((8, 8), S("x", "y")),), MESH2),
    "shard_map_pmax_fori": lambda: (
        _smap(lambda a: jax.lax.pmax(jax.lax.fori_loop(0, 2, lambda i, c: c * 2 + i, a), "d"),
              P("d"), P(), MESH1),
        (put((16, 2), D("d")),), MESH1),
    "shard_map_psum_scatter_all_to_all": lambda: (
        _smap(lambda a: jax.lax.all_to_all(jax.lax.psum_scatter(a, "y", tiled=True), "x", 0, 0, tiled=True),
              P(None, "y"), P(("x", "y"))),
        (put((16, 8), S(None, "y")),), MESH2),
    "shard_map_then_unsafe": lambda: (
        jax.jit(lambda a: jnp.cumsum(jax.shard_map(lambda b: jax.lax.psum(b, "x"), mesh=MESH2,
                                                   in_specs=P("x", "y"), out_specs=P(None, "y"))(a), axis=0)),
        (put((8, 8), S("x", "y")),), MESH2),
    "pmap": lambda: (jax.pmap(lambda a: jax.lax.psum(a, "i") * a, axis_name="i"),
                     (jnp.asarray(R.standard_normal((N, 3)).astype(np.float32)),), MESH1),
    # batched ops whose sharded dims are batch (or whole, unindexed window) dims
    "gather_batch_diagonal": lambda: (jax.jit(jax.vmap(lambda m: m[jnp.arange(6), jnp.arange(6)])),
                                      (put((8, 6, 6), S("x")),), MESH2),
    "scatter_set_batch": lambda: (
        jax.jit(jax.vmap(lambda m: m.at[jnp.arange(6), jnp.arange(6)].set(1.0))),
        (put((8, 6, 6), S(("x", "y"))),), MESH2),
    "gather_batching_dims": lambda: (
        jax.jit(jax.vmap(lambda m, i: m[i])),
        (put((8, 6, 3), S("x")), jax.device_put(np.arange(8 * 4).reshape(8, 4) % 6, S("x"))), MESH2),
    "pad_unsharded_dim": lambda: (jax.jit(lambda a: jnp.pad(a, ((0, 0), (1, 2)), constant_values=3.0)),
                                  (put((8, 4), S("x")),), MESH2),
    "pad_sharded_dim": lambda: (jax.jit(lambda a: jnp.pad(a, ((2, 0), (0, 0)))),
                                (put((8, 4), S("x")),), MESH2),
    # unreduced (JAX explicit sharding): each device's shard as XLA leaves it
    "unreduced_einsum": lambda: _explicit(
        lambda a, b: jnp.einsum("ab,bc->ac", a, b, out_sharding=P(None, None, unreduced={"y"})),
        (put((4, 8), E(None, "y")), put((8, 4), E("y", None)))),
    "unreduced_reduce_sum": lambda: _explicit(
        lambda a: jax.lax.reduce_sum(a, axes=(0,), out_sharding=P(None, unreduced={"x"})),
        (put((8, 4), E("x", None)),)),
    "replicated_to_unreduced": lambda: _explicit(
        lambda a: jax.sharding.reshard(a, P(None, unreduced={"x", "y"})), (put((6,), E()),)),
    "sharded_to_unreduced": lambda: _explicit(
        lambda a: jax.sharding.reshard(a * 2, P("x", None, unreduced={"y"})), (put((4, 8), E("x", "y")),)),
    "unreduced_segment_sum": lambda: _explicit(
        lambda d, i: jax.ops.segment_sum(d, i, 4, out_sharding=P(None, unreduced={"x"})),
        (put((8, 3), E("x", None)), jax.device_put(np.array([0, 3, 1, 1, 2, 0, 3, 3]), E("x")))),
    "reduced_fwd_unreduced_bwd": _reduced_fwd_unreduced_bwd,
    # jaxlib 0.10.2 exports these reshards of an unreduced argument with a
    # second reduction (all_reduce then all_reduce / reduce_scatter)
    "unreduced_arg_to_replicated": lambda: _explicit(
        lambda a: jax.sharding.reshard(a, P()) * 1.5, (_unreduced_arg(),)),
    "custom_partitioning": _custom_partitioning,
    "unreduced_arg_to_sharded": lambda: _explicit(
        lambda a: jax.sharding.reshard(a, P("x", "y")), (_unreduced_arg(),)),
}
# Expected path per case ("error": localize refuses with a ValueError).
EXPECTED = {
    "reduce_sum": "shardy", "reduce_sum_unspecified_out": "shardy",
    "matmul_sharded_contraction": "shardy", "matmul_batch": "shardy", "matmul_T": "shardy",
    "reshard": "shardy", "softmax": "shardy", "max_sharded_dim": "shardy", "min_1d": "shardy",
    "argmax": "global", "cumsum_sharded_dim": "global", "gather": "global",
    "fori_loop": "global", "dynamic_slice": "global", "mesh2d_elementwise": "shardy",
    "two_axes_one_dim": "shardy", "uneven_divisible": "shardy", "permuted_mesh": "shardy",
    "replicated_only": "shardy", "uncommitted_arg": "shardy", "sort": "shardy", "concat": "shardy",
    "transpose_reshape": "shardy", "scatter_add": "shardy", "conv_batch": "shardy",
    "sharding_constraint": "shardy", "bool_int": "shardy", "mlp_grad_step": "shardy",
    "shard_map_psum": "shardy", "shard_map_all_gather": "shardy", "shard_map_ppermute": "shardy",
    "shard_map_pmax_fori": "shardy", "shard_map_psum_scatter_all_to_all": "shardy",
    "shard_map_then_unsafe": "global", "pmap": "shardy",
    "gather_batch_diagonal": "shardy", "scatter_set_batch": "shardy",
    "gather_batching_dims": "shardy", "pad_unsharded_dim": "shardy", "pad_sharded_dim": "global",
    "unreduced_einsum": "shardy", "unreduced_reduce_sum": "shardy",
    "replicated_to_unreduced": "shardy", "sharded_to_unreduced": "shardy",
    "unreduced_segment_sum": "shardy", "reduced_fwd_unreduced_bwd": "shardy",
    "unreduced_arg_to_replicated": "global", "unreduced_arg_to_sharded": "global",
    "custom_partitioning": "shardy",
}


def as_replicas(text: str) -> str:
    """The per-device program, runnable by XLA:CPU as N replicas."""
    text = text.replace("stablehlo.partition_id", "stablehlo.replica_id")
    out = []
    for line in text.splitlines():
        if re.search(r"collective_permute|all_to_all|collective_broadcast", line):
            line = re.sub(r"channel_handle = #stablehlo.channel_handle<[^>]*>,? ?", "", line)
        out.append(line)
    return "\n".join(out)


def check_received(text: str):
    assert f"mhlo.num_partitions = {N} : i32" in text, "no mhlo.num_partitions"
    assert "mhlo.num_replicas = 1 : i32" in text, "no mhlo.num_replicas = 1"
    assert "sdy.mesh @" in text, "no sdy.mesh"


def _hlo_equal(ours: str, theirs) -> bool:
    from jax._src import op_shardings
    return op_shardings.are_hlo_shardings_equal(xc.HloSharding.from_string(ours), theirs) \
        if hasattr(xc.HloSharding, "from_string") else None


def run_case(name: str, force: str | None):
    f, args, mesh = CASES[name]()
    devices = list(mesh.devices.flat)
    lowered = f.lower(*args)
    text = lowered.as_text()
    check_received(text)
    ref = f(*args)
    with parse_module(text) as module:
        main = main_func(module)
        n_res = len(func_type(main).results)
        specified = ["sdy.sharding" in d for d in func_attr_list(main, "res_attrs", n_res)]
        info = partition.localize(module, N, force=force)
        local = str(module)
    assert "sdy." not in local, "sdy left after localize"
    flat_args = jax.tree.leaves(args)
    assert len(info.arg_shardings) == len(flat_args)
    opts = xc.CompileOptions()
    opts.num_replicas, opts.num_partitions = N, 1
    opts.executable_build_options.use_spmd_partitioning = False
    opts.device_assignment = xc.DeviceAssignment.create(
        np.array([d.id for d in devices]).reshape(N, 1))
    exe = DEVS[0].client.compile_and_load(as_replicas(local), devices, opts)
    # Each arg on the assignment's devices as JAX holds it (pmap args: split on dim 0).
    if name == "pmap":  # pmap splits its (uncommitted) argument over dim 0 itself
        placed = [jax.device_put(a, D("d")) for a in flat_args]
    else:
        placed = flat_args
    mismatches = []
    for k, (a, vs) in enumerate(zip(placed, info.arg_shardings)):
        if vs is not None and vs.unreduced:
            continue  # hlo_sharding() has no spelling for unreduced subgroups
        if _hlo_equal(info.hlo_sharding(vs, a.ndim), a.sharding._to_xla_hlo_sharding(a.ndim)) is False:
            mismatches.append(f"arg {k} sharding {info.hlo_sharding(vs, a.ndim)}")
    outs = exe.execute_sharded(placed).disassemble_into_single_device_arrays()
    refs = jax.tree.leaves(ref)
    assert len(outs) == len(refs) == len(info.result_shardings)
    for k, (o, rf, vs) in enumerate(zip(outs, refs, info.result_shardings)):
        pieces = [np.asarray(x) for x in o]
        if vs is not None and vs.unreduced:
            theirs = [np.asarray({s.device: s.data for s in rf.addressable_shards}[d]) for d in devices]
            if info.path == "shardy":
                # partial values: device by device as XLA leaves them
                for p in range(N):
                    if theirs[p].shape != pieces[p].shape or not np.allclose(
                            pieces[p], theirs[p], atol=1e-4, rtol=1e-4):
                        mismatches.append(f"result {k} partition {p} (unreduced)")
            else:
                # the global path keeps the value on one device of each
                # group: only the group sums must agree
                axes, ids = info.mesh_of(vs)
                coords = coords_of_partition(axes, ids)
                unr = {a.split(":")[0] for a in vs.unreduced}
                groups = {}
                for p in range(N):
                    key = tuple(sorted((a, c) for a, c in coords[p].items() if a not in unr))
                    groups.setdefault(key, []).append(p)
                for g in groups.values():
                    ours_sum = sum(pieces[p] for p in g)
                    want_sum = sum(theirs[p] for p in g)
                    if not np.allclose(ours_sum, want_sum, atol=1e-4, rtol=1e-4):
                        mismatches.append(f"result {k} group {g} (unreduced sum)")
            continue
        want = np.asarray(rf)
        for p in range(N):
            idx = info.shard_index(vs, p)
            loc = pieces[p]
            sl = tuple(slice(i * s, (i + 1) * s) for i, s in zip(idx, loc.shape))
            exp = want[sl] if sl else want
            if exp.shape != loc.shape or not np.allclose(loc, exp, atol=1e-4, rtol=1e-4):
                mismatches.append(f"result {k} partition {p}")
        # where JAX was told the output sharding, ours must agree
        if specified[k] and hasattr(rf.sharding, "_to_xla_hlo_sharding"):
            eq = _hlo_equal(info.hlo_sharding(vs, want.ndim), rf.sharding._to_xla_hlo_sharding(want.ndim))
            if eq is False:
                mismatches.append(f"result {k} sharding {info.hlo_sharding(vs, want.ndim)} != "
                                  f"{rf.sharding._to_xla_hlo_sharding(want.ndim)}")
    return info, mismatches


def main(argv):
    force = None
    if argv[:1] == ["--force"]:
        force, argv = argv[1], argv[2:]
    for name in argv or list(CASES):
        rec = {"case": name, "force": force}
        try:
            info, mism = run_case(name, force)
            rec.update(path=info.path, reason=info.reason, ok=not mism, mismatches=mism[:10],
                       results=[None if v is None else [list(d) for d in v.dims]
                                for v in info.result_shardings])
        except ValueError as e:
            rec.update(path="error", ok=False, error=str(e)[:400])
        except Exception as e:  # noqa: BLE001
            rec.update(path="exception", ok=False,
                       error=f"{type(e).__name__}: {str(e)[:400]}",
                       tb=traceback.format_exc()[-800:])
        print(json.dumps(rec), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
