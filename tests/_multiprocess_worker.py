"""One process of tests/test_multiprocess.py: joins a jax.distributed job,
runs sharded programs over every process's devices on pjrtx and on XLA:CPU
(which also spans the processes, through its own collectives) and prints
each program's comparison as JSON.

    python _multiprocess_worker.py PORT PROCESS_ID NUM_PROCESSES [PROGRAM ...]

PJRTX_DEVICES and XLA's host device count give each process that many
devices on both backends (the test sets them)."""
from __future__ import annotations

import json
import os
import sys
import traceback
import zlib

os.environ.setdefault("JAX_PLATFORMS", "pjrtx,cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402
from jax.sharding import Mesh, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

from pjrtx import jax_plugin  # noqa: E402

jax_plugin.ensure_registered()

PROGRAMS = {}


def program(name, *, terms=None):
    """terms: float results are compared within the bound of a sum of that
    many terms (scaled by the same program on |inputs|); None: exactly."""
    def deco(fn):
        PROGRAMS[name] = (fn, terms)
        return fn
    return deco


def smap(f, m, in_specs, out_specs):
    return jax.shard_map(f, mesh=m, in_specs=in_specs, out_specs=out_specs, check_vma=False)


def put(x, m, *spec):
    """A global array sharded over every process's devices (each process
    supplies its own shards, as multi-host JAX code does)."""
    sh = NamedSharding(m, P(*spec))
    return jax.make_array_from_callback(x.shape, sh, lambda idx: x[idx])


def ints(rng, *shape):
    return rng.integers(-50, 50, shape).astype(np.int32)


def normal(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


@program("psum_i32")
def _(m, rng):
    k = m.size
    x = ints(rng, 2 * k, 3)
    return smap(lambda a: lax.psum(a, "x"), m, P("x"), P())(put(x, m, "x"))


@program("psum_f32", terms=16)
def _(m, rng):
    x = normal(rng, 2 * m.size, 5)
    return smap(lambda a: lax.psum(a, "x"), m, P("x"), P())(put(x, m, "x"))


@program("pmax_pmin_i32")
def _(m, rng):
    x = ints(rng, m.size, 4)
    return smap(lambda a: (lax.pmax(a, "x"), lax.pmin(a, "x")), m, P("x"), (P(), P()))(
        put(x, m, "x"))


@program("all_gather_tiled")
def _(m, rng):
    x = ints(rng, 3 * m.size, 2)
    return smap(lambda a: lax.all_gather(a, "x", tiled=True), m, P("x"), P())(put(x, m, "x"))


@program("psum_scatter")
def _(m, rng):
    k = m.size
    x = ints(rng, k * k, 3)
    return smap(lambda a: lax.psum_scatter(a, "x", tiled=True), m, P("x"), P("x"))(
        put(x, m, "x"))


@program("all_to_all")
def _(m, rng):
    k = m.size
    x = ints(rng, k * k, 2)
    return smap(lambda a: lax.all_to_all(a, "x", 0, 0, tiled=True), m, P("x"), P("x"))(
        put(x, m, "x"))


@program("ppermute_ring_and_far")
def _(m, rng):
    k = m.size
    x = ints(rng, k, 3)
    ring = [(i, (i + 1) % k) for i in range(k)]
    far = [(i, (i + k // 2) % k) for i in range(k)]  # across processes, not neighbours
    return smap(lambda a: (lax.ppermute(a, "x", ring), lax.ppermute(a, "x", far)), m, P("x"),
                (P("x"), P("x")))(put(x, m, "x"))


@program("axis_index")
def _(m, rng):
    x = ints(rng, m.size, 1)
    return smap(lambda a: a * 0 + lax.axis_index("x"), m, P("x"), P("x"))(put(x, m, "x"))


@program("psum_2d_mesh_rows")
def _(m2, rng):
    x = ints(rng, 4 * m2.shape["a"], 2 * m2.shape["b"])
    return smap(lambda a: lax.psum(a, "a"), m2, P("a", "b"), P(None, "b"))(put(x, m2, "a", "b"))


@program("jit_matmul_sharded_contraction", terms=32)
def _(m, rng):
    a = normal(rng, 8, 4 * m.size)
    b = normal(rng, 4 * m.size, 6)
    f = jax.jit(lambda p, q: p @ q, out_shardings=NamedSharding(m, P()))
    return f(put(a, m, None, "x"), put(b, m, "x"))


@program("jit_sum_and_max", terms=64)
def _(m, rng):
    x = normal(rng, 4 * m.size, 8)
    f = jax.jit(lambda a: (a.sum(0), a.max()), out_shardings=NamedSharding(m, P()))
    return f(put(x, m, "x"))


@program("mlp_step_data_parallel", terms=256)
def _(m, rng):
    k = m.size
    w1, w2 = normal(rng, 6, 16) * 0.3, normal(rng, 16, 3) * 0.3
    xs, ys = normal(rng, 4 * k, 6), normal(rng, 4 * k, 3)

    def loss(params, x, y):
        h = jnp.tanh(x @ params[0])
        return jnp.mean((h @ params[1] - y) ** 2)

    rep = NamedSharding(m, P())

    @jax.jit
    def step(params, x, y):
        lval, g = jax.value_and_grad(loss)(params, x, y)
        return lval, jax.tree.map(lambda p, d: p - 0.1 * d, params, g)

    params = (put(w1, m), put(w2, m))
    params = jax.tree.map(lambda a: jax.device_put(a, rep), params)
    return step(params, put(xs, m, "x"), put(ys, m, "x"))


def mesh_for(name, devs):
    if name == "psum_2d_mesh_rows":
        return Mesh(np.asarray(devs, dtype=object).reshape(-1, 2), ("a", "b"))
    return Mesh(np.asarray(devs, dtype=object), ("x",))


def local_values(tree):
    """Each output's shards on this process, by global index, as NumPy."""
    out = []
    for a in jax.tree.leaves(tree):
        shards = sorted(a.addressable_shards, key=lambda s: str(s.index))
        out.append([(str(s.index), np.asarray(s.data)) for s in shards])
    return out


def run(name):
    fn, terms = PROGRAMS[name]
    res = {}
    for backend in ("pjrtx", "cpu"):
        rng = np.random.default_rng(zlib.crc32(name.encode()))
        m = mesh_for(name, jax.devices(backend))
        res[backend] = local_values(fn(m, rng))
    errs = []
    got, want = res["pjrtx"], res["cpu"]
    if len(got) != len(want):
        return [f"{len(got)} results on pjrtx, {len(want)} on XLA:CPU"]
    for k, (g, w) in enumerate(zip(got, want)):
        if [i for i, _ in g] != [i for i, _ in w]:
            errs.append(f"result {k}: shards {[i for i, _ in g]} vs XLA's {[i for i, _ in w]}")
            continue
        for (idx, gv), (_, wv) in zip(g, w):
            if gv.shape != wv.shape or gv.dtype != wv.dtype:
                errs.append(f"result {k} shard {idx}: {gv.dtype}{gv.shape} vs {wv.dtype}{wv.shape}")
            elif terms is None or gv.dtype.kind != "f":
                if not np.array_equal(gv, wv):
                    errs.append(f"result {k} shard {idx}: {gv.ravel()[:6]} vs {wv.ravel()[:6]}")
            else:
                # Both sides sum the same terms in other orders, each within
                # terms * eps * sum|terms| of the exact value, so they differ
                # by at most twice that. The inputs are O(1) normals, so each
                # term is at most max(1, max|result|) in size and
                # sum|terms| <= terms * that.
                eps = np.finfo(np.float32).eps
                scale = max(1.0, float(np.max(np.abs(wv))) if wv.size else 1.0)
                bound = 2 * terms * eps * terms * scale
                if not np.all(np.abs(gv - wv) <= bound):
                    errs.append(f"result {k} shard {idx}: max diff {np.max(np.abs(gv - wv))}")
    return errs


def main(argv):
    port, pid, n = argv[0], int(argv[1]), int(argv[2])
    names = argv[3:] or list(PROGRAMS)
    jax.distributed.initialize(coordinator_address=f"127.0.0.1:{port}", num_processes=n,
                               process_id=pid, initialization_timeout=120)
    info = {"process_index": jax.process_index("pjrtx"), "process_count": jax.process_count("pjrtx"),
            "devices": [d.id for d in jax.devices("pjrtx")],
            "device_processes": [d.process_index for d in jax.devices("pjrtx")],
            "local": [d.id for d in jax.local_devices(backend="pjrtx")],
            "cpu_devices": len(jax.devices("cpu"))}
    print("INFO " + json.dumps(info), flush=True)
    for name in names:
        try:
            errs = run(name)
        except Exception:
            errs = ["raised:\n" + traceback.format_exc(limit=8)]
        print("RESULT " + json.dumps({"name": name, "errors": errs}), flush=True)
    jax.distributed.shutdown()


if __name__ == "__main__":
    main(sys.argv[1:])
