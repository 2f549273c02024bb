"""The multi-device battery's worker: runs sharded programs on pjrtx's N
devices and on XLA:CPU's N host devices, in one process, and compares them.

tests/test_multidevice.py starts it in a subprocess (the pytest process has
already imported jax, so XLA_FLAGS and PJRTX_DEVICES can no longer take
effect there). By hand:

    python tests/_multidevice_worker.py --list
    python tests/_multidevice_worker.py sm_psum_f32_x8 jit_sort_x4   # some programs
    PJRTX_BATTERY_BACKEND=cpu python tests/_multidevice_worker.py   # oracle vs oracle

Each program is a function of the backend's device list (and inputs made
once, so both sides and the error bound see the same numbers) that returns a
pytree of jax.Arrays. A result is compared on three levels: the global value,
the sharding (type, mesh, spec, which device holds which slice), and every
addressable shard's data against XLA's shard at the same mesh position.

Protocol (stdout): a line `@@battery {"event": "start", "name": ...}` before
each program and `@@battery {"event": "done", ...}` after it, so the parent
can name the program that was running when the process crashed or hung.
"""
from __future__ import annotations

import os
import sys

FULL = 8  # the largest mesh; 2- and 4-device meshes take the first 2 or 4
# PJRTX_BATTERY_DEVICES=N (N < 8) runs the battery on N devices on both
# sides: the programs whose meshes fit in N run, the others report that they
# need more devices (e.g. on a GPU with PJRTX_DEVICES=2).
NDEV = int(os.environ.get("PJRTX_BATTERY_DEVICES", str(FULL)))
MARK = "@@battery "


def _configure_env():
    """Before jax is imported: 8 host devices for XLA:CPU and 8 pjrtx devices."""
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_force_host_platform_device_count" not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={NDEV}".strip()
    os.environ["PJRTX_DEVICES"] = str(NDEV)
    if backend_under_test() == "cpu":
        os.environ["JAX_PLATFORMS"] = "cpu"
    else:
        os.environ["JAX_PLATFORMS"] = "pjrtx,cpu"


def backend_under_test() -> str:
    """pjrtx (default) or cpu: the oracle-vs-oracle mode that checks the harness."""
    b = os.environ.get("PJRTX_BATTERY_BACKEND", "pjrtx")
    if b not in ("pjrtx", "cpu"):
        raise SystemExit(f"PJRTX_BATTERY_BACKEND must be pjrtx or cpu, not {b!r}")
    return b


if __name__ == "__main__":
    _configure_env()

import json  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
import zlib  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from typing import Callable  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402
from jax.sharding import Mesh, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402


# --------------------------------------------------------------------------
# Registry

@dataclass
class Program:
    name: str
    fn: Callable  # fn(devs, *inputs) -> pytree of arrays
    inputs: Callable  # inputs(rng) -> tuple of numpy arrays
    terms: int | list | None  # float results: at most this many terms per element
    dyadic: bool  # float results are exact: every value is a short dyadic


PROGRAMS: dict[str, Program] = {}


def program(name, inputs=lambda rng: (), *, terms=None, dyadic=False):
    """Register fn under `name` (the test id). Float results compare exactly
    unless `terms` is given: then within the summation bound of a sum of
    `terms` terms, scaled by the same program run on |inputs| in float64.
    `dyadic`: the inputs make every float value in the program a dyadic
    rational with few bits, so every summation order gives the same bits;
    the worker checks that premise (XLA's float32 result equals its float64
    one) before asking for exact equality. `terms` may be a list, one entry
    per result leaf (None: that leaf is exact, e.g. a pmax next to a psum)."""
    def deco(fn):
        assert name not in PROGRAMS, name
        PROGRAMS[name] = Program(name, fn, inputs, terms, dyadic)
        return fn
    return deco


def seed_of(name: str) -> int:
    return zlib.crc32(name.encode())


# --------------------------------------------------------------------------
# Helpers for programs

def mesh(devs, shape, names):
    n = int(np.prod(shape))
    return Mesh(np.asarray(devs[:n], dtype=object).reshape(shape), names)


def ns(m, *spec):
    return NamedSharding(m, P(*spec))


def put(x, m, *spec):
    return jax.device_put(x, ns(m, *spec))


def smap(f, m, in_specs, out_specs, **kw):
    return jax.shard_map(f, mesh=m, in_specs=in_specs, out_specs=out_specs, **kw)


def normal(*shape):
    return lambda rng: (rng.standard_normal(shape).astype(np.float32),)


def ints(*shape, lo=-50, hi=50, dtype=np.int32):
    return lambda rng: (rng.integers(lo, hi, shape).astype(dtype),)


# --------------------------------------------------------------------------
# shard_map collectives

@program("sm_psum_f32_x8", normal(16, 5), terms=8)
def _(devs, x):
    m = mesh(devs, (8,), ("x",))
    return smap(lambda a: lax.psum(a, "x"), m, P("x"), P())(put(x, m, "x"))


@program("sm_psum_i32_x4", ints(8, 3))
def _(devs, x):
    m = mesh(devs, (4,), ("x",))
    return smap(lambda a: lax.psum(a, "x"), m, P("x"), P())(put(x, m, "x"))


@program("sm_psum_bool_x2", lambda rng: (rng.random((4, 6)) < 0.5,))
def _(devs, x):
    # psum of bools counts the Trues (an integer result).
    m = mesh(devs, (2,), ("x",))
    return smap(lambda a: lax.psum(a, "x"), m, P("x"), P())(put(x, m, "x"))


@program("sm_psum_2d_both_axes", ints(8, 8))
def _(devs, x):
    m = mesh(devs, (2, 4), ("x", "y"))
    return smap(lambda a: lax.psum(a, ("x", "y")), m, P("x", "y"), P())(put(x, m, "x", "y"))


@program("sm_psum_2d_axis_y_f32", normal(4, 8, 3), terms=4)
def _(devs, x):
    m = mesh(devs, (2, 4), ("x", "y"))
    return smap(lambda a: lax.psum(a, "y"), m, P("x", "y"), P("x"))(put(x, m, "x", "y"))


@program("sm_pmax_f32_x8", lambda rng: (np.where(rng.random((8, 7)) < 0.1, -0.0,
                                                 rng.standard_normal((8, 7))).astype(np.float32),))
def _(devs, x):
    m = mesh(devs, (8,), ("x",))
    return smap(lambda a: lax.pmax(a, "x"), m, P("x"), P())(put(x, m, "x"))


@program("sm_pmin_i32_2d_x", ints(4, 4, 5, lo=-2**31, hi=2**31 - 1))
def _(devs, x):
    m = mesh(devs, (2, 4), ("x", "y"))
    return smap(lambda a: lax.pmin(a, "x"), m, P("x", "y"), P(None, "y"))(put(x, m, "x", "y"))


@program("sm_pmax_u8_x4", ints(8, 5, lo=0, hi=256, dtype=np.uint8))
def _(devs, x):
    m = mesh(devs, (4,), ("x",))
    return smap(lambda a: lax.pmax(a, "x"), m, P("x"), P())(put(x, m, "x"))


@program("sm_pmax_pmin_bool_x4", lambda rng: (rng.random((8, 5)) < 0.3,))
def _(devs, x):
    # on bools pmax is "any" and pmin is "all"
    m = mesh(devs, (4,), ("x",))
    return smap(lambda a: (lax.pmax(a, "x"), lax.pmin(a, "x")), m, P("x"), (P(), P()))(put(x, m, "x"))


@program("sm_psum_pmax_large_x8", normal(8 * 96, 512), terms=[8, None])
def _(devs, x):
    # 192 KiB per device, a variadic all_reduce of 384 KiB: above the size
    # where each device folds only its chunk and the chunks are swapped
    # (the two-phase path), with a sum and a max body
    m = mesh(devs, (8,), ("x",))
    return smap(lambda a: (lax.psum(a, "x"), lax.pmax(a, "x")), m, P("x"), (P(), P()))(put(x, m, "x"))


@program("sm_psum_large_i32_2d_x", ints(8 * 70, 999), terms=None)
def _(devs, x):
    # 273 KiB per device, groups of 4 on a 4x2 mesh, an element count that
    # does not divide by 4 (uneven chunks)
    m = mesh(devs, (4, 2), ("x", "y"))
    return smap(lambda a: lax.psum(a, "x"), m, P("x"), P(None))(put(x, m, "x"))


@program("sm_collectives_of_constants_x4", normal(8, 3))
def _(devs, x):
    # collectives whose operands are constants: constant folding must not
    # evaluate them at compile time (each device's share meets the others'
    # at run time), and a fused segment must not swallow them
    m = mesh(devs, (4,), ("x",))

    def body(a):
        one = jnp.ones((2, 3), a.dtype)
        return (a + lax.psum(one, "x"), lax.all_gather(one * 2, "x", tiled=True),
                lax.ppermute(jnp.full((2, 3), 5.0, a.dtype), "x", [(0, 1), (1, 2)]) + a)
    return smap(body, m, P("x"), (P("x"), P(), P("x")), check_vma=False)(put(x, m, "x"))


@program("sm_psum_i8_wraps_x8", ints(8, 6, lo=-128, hi=128, dtype=np.int8))
def _(devs, x):
    # int8 sums of 8 terms overflow and wrap (two's complement, any order)
    m = mesh(devs, (8,), ("x",))
    return smap(lambda a: lax.psum(a, "x"), m, P("x"), P())(put(x, m, "x"))


@program("sm_pmax_pmin_nan_x4", lambda rng: (np.where(rng.random((8, 6)) < 0.15, np.nan,
                                                      rng.standard_normal((8, 6))).astype(np.float32),))
def _(devs, x):
    # a NaN on any device makes that element's max and min NaN, as
    # StableHLO's maximum/minimum say. XLA:CPU's own all-reduce max/min
    # drops NaNs (it uses the host's vector max instructions), so the
    # oracle side computes the same reduction with XLA's reduce over the
    # gathered values, which follows StableHLO.
    m = mesh(devs, (4,), ("x",))
    if devs[0].platform == "cpu":
        def body(a):
            g = lax.all_gather(a, "x")
            return jnp.max(g, axis=0), jnp.min(g, axis=0)
        return smap(body, m, P("x"), (P(), P()), check_vma=False)(put(x, m, "x"))
    return smap(lambda a: (lax.pmax(a, "x"), lax.pmin(a, "x")), m, P("x"), (P(), P()))(put(x, m, "x"))


@program("sm_pmean_f32_x4", normal(8, 6), terms=5)  # 4 terms, then one division
def _(devs, x):
    m = mesh(devs, (4,), ("x",))
    return smap(lambda a: lax.pmean(a, "x"), m, P("x"), P())(put(x, m, "x"))


@program("sm_all_gather_untiled_x4", normal(8, 3))
def _(devs, x):
    m = mesh(devs, (4,), ("x",))
    # jax 0.10.2 infers all_gather's result as varying over "x": a replicated
    # out_specs needs check_vma=False (the value is the same on every device)
    return smap(lambda a: lax.all_gather(a, "x"), m, P("x"), P(), check_vma=False)(put(x, m, "x"))


@program("sm_all_gather_tiled_x8", ints(16, 2))
def _(devs, x):
    m = mesh(devs, (8,), ("x",))
    # out_specs P("x") with check_vma on: the 8 gathered copies, stacked
    return smap(lambda a: lax.all_gather(a, "x", tiled=True), m, P("x"), P("x"))(put(x, m, "x"))


@program("sm_all_gather_2d_y_axis1_tiled", normal(4, 8))
def _(devs, x):
    m = mesh(devs, (2, 4), ("x", "y"))
    f = smap(lambda a: lax.all_gather(a, "y", axis=1, tiled=True), m, P("x", "y"), P("x", None),
             check_vma=False)
    return f(put(x, m, "x", "y"))


@program("sm_psum_scatter_tiled_x4", normal(16, 3), terms=5)  # a rounded product, then 4 terms
def _(devs, x):
    m = mesh(devs, (4,), ("x",))
    # every device holds a replicated (16, 3); each gets its summed quarter
    f = smap(lambda a: lax.psum_scatter(lax.pcast(a, "x", to="varying") * (lax.axis_index("x") + 1).astype(a.dtype),
                                        "x", tiled=True),
             m, P(), P("x"))
    return f(put(x, m))


@program("sm_psum_scatter_untiled_x2", normal(4, 2, 3), terms=2)
def _(devs, x):
    m = mesh(devs, (2,), ("x",))
    f = smap(lambda a: lax.psum_scatter(a[0], "x", scatter_dimension=0)[None], m, P("x"), P("x"))
    return f(put(x, m, "x"))


@program("sm_reduce_scatter_i32_2d_y_dim1", ints(2, 16, 8))
def _(devs, x):
    m = mesh(devs, (2, 4), ("x", "y"))
    f = smap(lambda a: lax.psum_scatter(a, "y", scatter_dimension=1, tiled=True), m,
             P("x", "y"), P("x", None, "y"))
    return f(put(x, m, "x", "y"))


@program("sm_all_to_all_x4", ints(16, 8))
def _(devs, x):
    m = mesh(devs, (4,), ("x",))
    f = smap(lambda a: lax.all_to_all(a, "x", 1, 0, tiled=True), m, P("x"), P(None, "x"))
    return f(put(x, m, "x"))


@program("sm_all_to_all_untiled_x8", normal(8, 8, 3))
def _(devs, x):
    m = mesh(devs, (8,), ("x",))
    f = smap(lambda a: lax.all_to_all(a, "x", 1, 0), m, P("x"), P("x"))
    return f(put(x, m, "x"))


@program("sm_all_to_all_2d_y", ints(8, 8, 2))
def _(devs, x):
    m = mesh(devs, (2, 4), ("x", "y"))
    f = smap(lambda a: lax.all_to_all(a, "y", 0, 1, tiled=True), m, P("x", "y"), P("x", "y"))
    return f(put(x, m, "x", "y"))


@program("sm_ppermute_cycle_x8", normal(16, 3))
def _(devs, x):
    m = mesh(devs, (8,), ("x",))
    perm = [(i, (i + 1) % 8) for i in range(8)]
    return smap(lambda a: lax.ppermute(a, "x", perm), m, P("x"), P("x"))(put(x, m, "x"))


@program("sm_ppermute_arbitrary_x8", ints(8, 4))
def _(devs, x):
    m = mesh(devs, (8,), ("x",))
    dst = [3, 6, 0, 7, 2, 1, 5, 4]  # cycles (0 3 7 4 2) (1 6 5)
    perm = list(enumerate(dst))
    return smap(lambda a: lax.ppermute(a, "x", perm), m, P("x"), P("x"))(put(x, m, "x"))


@program("sm_ppermute_partial_x4", normal(8, 5))
def _(devs, x):
    # devices 1 and 3 receive nothing: their result is zeros
    m = mesh(devs, (4,), ("x",))
    perm = [(0, 2), (1, 0), (3, 3)]
    return smap(lambda a: lax.ppermute(a, "x", perm), m, P("x"), P("x"))(put(x, m, "x"))


@program("sm_ppermute_swap_2d_x", ints(4, 8))
def _(devs, x):
    m = mesh(devs, (2, 4), ("x", "y"))
    f = smap(lambda a: lax.ppermute(a, "x", [(0, 1), (1, 0)]), m, P("x", "y"), P("x", "y"))
    return f(put(x, m, "x", "y"))


@program("sm_pshuffle_x4", ints(4, 3))
def _(devs, x):
    m = mesh(devs, (4,), ("x",))
    return smap(lambda a: lax.pshuffle(a, "x", [2, 0, 3, 1]), m, P("x"), P("x"))(put(x, m, "x"))


@program("sm_pbroadcast_emulated_x4", normal(4, 3))
def _(devs, x):
    # lax.pbroadcast has no lowering on XLA:CPU in jax 0.10.2 (no oracle);
    # this is its documented equivalent, a masked psum.
    m = mesh(devs, (4,), ("x",))
    f = smap(lambda a: lax.psum(jnp.where(lax.axis_index("x") == 2, a, jnp.zeros_like(a)), "x"),
             m, P("x"), P())
    return f(put(x, m, "x"))


@program("sm_axis_index_2d")
def _(devs):
    m = mesh(devs, (2, 4), ("x", "y"))
    f = smap(lambda: (lax.axis_index("x") * 10 + lax.axis_index("y"))[None, None], m, (), P("x", "y"))
    with jax.default_device(devs[0]):
        return jax.jit(f)()


@program("sm_axis_index_combined_x8", ints(8, 2))
def _(devs, x):
    m = mesh(devs, (2, 4), ("x", "y"))
    f = smap(lambda a: a * lax.axis_index(("x", "y")), m, P(("x", "y")), P(("x", "y")))
    return f(put(x, m, ("x", "y")))


@program("sm_psum_in_fori_loop_x4", ints(8, 3, lo=-3, hi=4))
def _(devs, x):
    m = mesh(devs, (4,), ("x",))

    def body(i, a):
        return (lax.psum(a, "x") - a * i) % 1000
    return smap(lambda a: lax.fori_loop(0, 5, body, a), m, P("x"), P("x"))(put(x, m, "x"))


@program("sm_ppermute_in_scan_x8", ints(8, 3))
def _(devs, x):
    m = mesh(devs, (8,), ("x",))
    perm = [(i, (i + 3) % 8) for i in range(8)]

    def step(c, t):
        c = lax.ppermute(c, "x", perm) + t
        return c, lax.pmax(c, "x")
    f = smap(lambda a: lax.scan(step, a, jnp.arange(4, dtype=a.dtype)), m, P("x"), (P("x"), P()))
    return f(put(x, m, "x"))


@program("sm_collective_in_cond_x4", ints(8, 2))
def _(devs, x):
    m = mesh(devs, (4,), ("x",))

    def f(a):
        total = lax.psum(jnp.sum(a), "x")  # the same on every device
        return lax.cond(total % 2 == 0, lambda b: lax.pmax(b, "x"), lambda b: lax.pmin(b, "x"), a)
    out = smap(f, m, P("x"), P())
    xp = put(x, m, "x")
    return out(xp), out(xp + 1)


@program("sm_grad_psum_x4", lambda rng: (rng.integers(-4, 5, (8, 4)).astype(np.float32) / 4,
                                          rng.integers(-4, 5, (4,)).astype(np.float32) / 4),
         dyadic=True)
def _(devs, x, w):
    m = mesh(devs, (4,), ("x",))
    fwd = smap(lambda a, v: lax.psum(jnp.sum((a @ v) ** 2), "x"), m, (P("x"), P()), P())
    return jax.jit(jax.value_and_grad(fwd, argnums=(0, 1)))(put(x, m, "x"), put(w, m))


@program("sm_grad_all_gather_ppermute_x2", lambda rng: (rng.integers(-4, 5, (4, 3)).astype(np.float32) / 2,),
         dyadic=True)
def _(devs, x):
    m = mesh(devs, (2,), ("x",))

    def f(a):
        g = lax.all_gather(a, "x", tiled=True)
        r = lax.ppermute(a, "x", [(0, 1), (1, 0)])
        return lax.psum(jnp.sum(g * g) + jnp.sum(r * a * 3), "x")
    return jax.jit(jax.grad(smap(f, m, P("x"), P())))(put(x, m, "x"))


# --------------------------------------------------------------------------
# jit with NamedShardings: the partitioner splits the program

def jit_on(devs, f, in_s, out_s, *args, **kw):
    with jax.default_device(devs[0]):
        return jax.jit(f, in_shardings=in_s, out_shardings=out_s, **kw)(*args)


def reduction(name, make, fn, mesh_shape, names, spec, out_spec, **kw):
    @program(name, make, **kw)
    def _(devs, x):
        m = mesh(devs, mesh_shape, names)
        return jit_on(devs, fn, ns(m, *spec), ns(m, *out_spec), put(x, m, *spec))


reduction("jit_sum_rows_f32_x8", normal(32, 6), lambda a: jnp.sum(a, axis=0), (8,), ("x",), ("x",), (),
          terms=32)
reduction("jit_sum_all_f32_2d", normal(8, 12), jnp.sum, (2, 4), ("x", "y"), ("x", "y"), (), terms=96)
reduction("jit_sum_i32_2d_y", ints(6, 16), lambda a: jnp.sum(a, axis=1), (2, 4), ("x", "y"), (None, "y"),
          ())
reduction("jit_max_f32_x4", normal(8, 5), lambda a: jnp.max(a, axis=0), (4,), ("x",), ("x",), ())
reduction("jit_min_i32_2d", ints(8, 8), lambda a: jnp.min(a, axis=(0, 1)), (2, 4), ("x", "y"), ("x", "y"), ())
reduction("jit_prod_f32_x4", lambda rng: (rng.uniform(0.5, 1.5, (16, 3)).astype(np.float32),),
          lambda a: jnp.prod(a, axis=0), (4,), ("x",), ("x",), (), terms=16)
reduction("jit_prod_i32_x2", ints(8, 4, lo=-9, hi=10), lambda a: jnp.prod(a, axis=0), (2,), ("x",), ("x",),
          ())
reduction("jit_argmax_ties_x8", ints(16, 5, lo=0, hi=4), lambda a: jnp.argmax(a, axis=0), (8,), ("x",),
          ("x",), ())
reduction("jit_argmin_f32_2d_y", normal(4, 16), lambda a: jnp.argmin(a, axis=1), (2, 4), ("x", "y"),
          ("x", "y"), ("x",))
reduction("jit_any_all_x4", lambda rng: (rng.random((8, 6)) < 0.2,),
          lambda a: (jnp.any(a, axis=0), jnp.all(a, axis=0), jnp.any(a), jnp.all(~a | a)),
          (4,), ("x",), ("x",), ())
reduction("jit_mean_f32_x4", normal(16, 3), lambda a: jnp.mean(a, axis=0), (4,), ("x",), ("x",), (),
          terms=17)  # 16 terms, then one division
reduction("jit_reduce_f32_2d_replicated_x", normal(8, 8), lambda a: jnp.sum(a, axis=0), (2, 4),
          ("x", "y"), (None, "y"), ("y",), terms=8)


@program("jit_gather_rows_x4", lambda rng: (rng.standard_normal((16, 3)).astype(np.float32),
                                             rng.integers(0, 16, (10,)).astype(np.int32)))
def _(devs, a, idx):
    m = mesh(devs, (4,), ("x",))
    return jit_on(devs, lambda a, i: a[i], (ns(m, "x"), ns(m)), ns(m), put(a, m, "x"), put(idx, m))


@program("jit_gather_sharded_idx_2d", lambda rng: (rng.integers(-99, 99, (8, 12)).astype(np.int32),
                                                    rng.integers(-12, 12, (8, 4)).astype(np.int32)))
def _(devs, a, idx):
    # negative indices wrap; rows of a on "x", columns on "y"; idx rows on "x"
    m = mesh(devs, (2, 4), ("x", "y"))
    f = lambda a, i: jnp.take_along_axis(a, i, axis=1)
    return jit_on(devs, f, (ns(m, "x", "y"), ns(m, "x")), ns(m, "x"), put(a, m, "x", "y"), put(idx, m, "x"))


@program("jit_scatter_add_i32_dups_x8", lambda rng: (rng.integers(-9, 9, (16, 3)).astype(np.int32),
                                                       rng.integers(0, 16, (24,)).astype(np.int32),
                                                       rng.integers(-9, 9, (24, 3)).astype(np.int32)))
def _(devs, a, idx, v):
    m = mesh(devs, (8,), ("x",))
    f = lambda a, i, v: a.at[i].add(v)
    return jit_on(devs, f, (ns(m, "x"), ns(m, "x"), ns(m, "x")), ns(m, "x"),
                  put(a, m, "x"), put(idx, m, "x"), put(v, m, "x"))


def _scatter_f32_inputs(rng):
    return (rng.standard_normal((8, 4)).astype(np.float32),
            np.array([0, 3, 3, 7, 0, 3, 5, 1], np.int32),  # index 3 three times
            rng.standard_normal((8, 4)).astype(np.float32))


@program("jit_scatter_add_f32_dups_x4", _scatter_f32_inputs, terms=4)  # a[3] + three updates
def _(devs, a, idx, v):
    m = mesh(devs, (4,), ("x",))
    f = lambda a, i, v: a.at[i].add(v)
    return jit_on(devs, f, (ns(m, "x"), ns(m), ns(m, "x")), ns(m, "x"),
                  put(a, m, "x"), put(idx, m), put(v, m, "x"))


@program("jit_scatter_set_unique_2d", lambda rng: (rng.standard_normal((8, 8)).astype(np.float32),
                                                    rng.permutation(8)[:4].astype(np.int32),
                                                    rng.standard_normal((4, 8)).astype(np.float32)))
def _(devs, a, idx, v):
    m = mesh(devs, (2, 4), ("x", "y"))
    f = lambda a, i, v: a.at[i].set(v)
    return jit_on(devs, f, (ns(m, "x", "y"), ns(m), ns(m, None, "y")), ns(m, "x", "y"),
                  put(a, m, "x", "y"), put(idx, m), put(v, m, None, "y"))


reduction("jit_cumsum_f32_x4", normal(16, 3), lambda a: jnp.cumsum(a, axis=0), (4,), ("x",), ("x",),
          ("x",), terms=16)
reduction("jit_cumsum_i32_2d_y", ints(4, 16), lambda a: jnp.cumsum(a, axis=1), (2, 4), ("x", "y"),
          ("x", "y"), ("x", "y"))
reduction("jit_cummax_f32_x8", normal(16, 2), lambda a: lax.cummax(a, axis=0), (8,), ("x",), ("x",),
          ("x",))
def _sort_inputs(rng):
    # duplicates, both zeros, NaN and infinities: jnp.sort's total order
    x = np.round(rng.standard_normal((16, 5)), 1).astype(np.float32)
    x.flat[rng.permutation(x.size)[:8]] = [np.nan, -0.0, 0.0, -0.0, np.inf, -np.inf, np.nan, 0.0]
    return (x,)


reduction("jit_sort_f32_x4", _sort_inputs,
          lambda a: jnp.sort(a, axis=0), (4,), ("x",), ("x",), ("x",))
reduction("jit_argsort_i32_stable_x8", ints(16, 3, lo=0, hi=5), lambda a: jnp.argsort(a, axis=0, stable=True),
          (8,), ("x",), ("x",), ("x",))
reduction("jit_sort_2d_y_other_x", ints(8, 8), lambda a: jnp.sort(a, axis=1), (2, 4), ("x", "y"),
          ("x", "y"), ("x", "y"))
reduction("jit_topk_sharded_x4", normal(4, 32), lambda a: lax.top_k(a, 5), (4,), ("x",), (None, "x"),
          ())


def _conv(lhs, rhs):
    return lax.conv_general_dilated(lhs, rhs, (1, 1), "SAME", dimension_numbers=("NCHW", "OIHW", "NCHW"),
                                    precision=lax.Precision.HIGHEST)


def conv_program(name, mesh_shape, names, lhs_spec, rhs_spec, out_spec, cin):
    @program(name, lambda rng: (rng.standard_normal((8, cin, 6, 5)).astype(np.float32),
                                rng.standard_normal((8, cin, 3, 3)).astype(np.float32)),
             terms=cin * 9)
    def _(devs, lhs, rhs):
        m = mesh(devs, mesh_shape, names)
        return jit_on(devs, _conv, (ns(m, *lhs_spec), ns(m, *rhs_spec)), ns(m, *out_spec),
                      put(lhs, m, *lhs_spec), put(rhs, m, *rhs_spec))


conv_program("jit_conv_batch_sharded_x4", (4,), ("x",), ("x",), (), ("x",), 3)
conv_program("jit_conv_out_feature_sharded_x8", (8,), ("x",), (), ("x",), (None, "x"), 2)
conv_program("jit_conv_in_feature_sharded_x4", (4,), ("x",), (None, "x"), (None, "x"), (), 8)
conv_program("jit_conv_batch_and_feature_2d", (2, 4), ("x", "y"), ("x",), ("y",), ("x", "y"), 4)


def dot_program(name, shapes, eq, mesh_shape, names, specs, out_spec, terms):
    @program(name, lambda rng: tuple(rng.standard_normal(s).astype(np.float32) for s in shapes),
             terms=terms)
    def _(devs, a, b):
        m = mesh(devs, mesh_shape, names)
        return jit_on(devs, lambda a, b: jnp.einsum(eq, a, b, precision="highest"),
                      (ns(m, *specs[0]), ns(m, *specs[1])), ns(m, *out_spec),
                      put(a, m, *specs[0]), put(b, m, *specs[1]))


dot_program("jit_dot_contract_sharded_x8", [(4, 64), (64, 5)], "ij,jk->ik", (8,), ("x",),
            [(None, "x"), ("x",)], (), 64)
dot_program("jit_dot_batch_sharded_2d", [(4, 8, 6), (4, 6, 3)], "bij,bjk->bik", (2, 4), ("x", "y"),
            [("x", "y"), ("x",)], ("x", "y"), 6)
dot_program("jit_dot_free_dims_2d", [(8, 7), (7, 12)], "ij,jk->ik", (2, 4), ("x", "y"),
            [("x",), (None, "y")], ("x", "y"), 7)
dot_program("jit_dot_contract_2d_both", [(6, 16), (16, 8)], "ij,jk->ik", (2, 4), ("x", "y"),
            [(None, ("x", "y")), (("x", "y"), None)], (None, "y"), 16)
dot_program("jit_dot_contract_x2_out_sharded", [(8, 10), (10, 4)], "ij,jk->ik", (2,), ("x",),
            [(None, "x"), ("x",)], ("x",), 10)


@program("jit_while_sharded_carry_x4", ints(8, 3, lo=0, hi=100))
def _(devs, x):
    m = mesh(devs, (4,), ("x",))

    def f(a):
        def body(c):
            i, v = c
            return i + 1, (v * 3 + jnp.sum(v, axis=0) + jnp.roll(v, 1, axis=0)) % 1009
        return lax.while_loop(lambda c: c[0] < 6, body, (0, a))[1]
    return jit_on(devs, f, ns(m, "x"), ns(m, "x"), put(x, m, "x"))


@program("jit_scan_sharded_carry_2d", lambda rng: (rng.integers(-5, 5, (8, 8)).astype(np.int32),
                                                    rng.integers(-5, 5, (5, 8, 8)).astype(np.int32)))
def _(devs, c0, xs):
    m = mesh(devs, (2, 4), ("x", "y"))

    def f(c, xs):
        def step(c, t):
            c = (c @ t) % 97 + c.T
            return c, jnp.max(c, axis=0)
        return lax.scan(step, c, xs)
    return jit_on(devs, f, (ns(m, "x", "y"), ns(m, None, "x", "y")), (ns(m, "x", "y"), ns(m, None, "y")),
                  put(c0, m, "x", "y"), put(xs, m, None, "x", "y"))


@program("jit_fori_sharded_f32_x2", normal(4, 6), terms=18)
def _(devs, x):
    # x <- x + x.sum(0) / 8, 3 times: each step is 4 terms, a division and an
    # add (6 roundings); to first order the steps' errors add, each at most
    # gamma_6 times that step's |terms|, which the same loop on |x| bounds.
    m = mesh(devs, (2,), ("x",))
    f = lambda a: lax.fori_loop(0, 3, lambda i, v: v + jnp.sum(v, axis=0) / 8, a)
    return jit_on(devs, f, ns(m, "x"), ns(m, "x"), put(x, m, "x"))


@program("jit_dynamic_slice_sharded_x4", lambda rng: (rng.standard_normal((16, 4)).astype(np.float32),
                                                       np.array(5, np.int32)))
def _(devs, x, start):
    m = mesh(devs, (4,), ("x",))
    f = lambda a, s: (lax.dynamic_slice_in_dim(a, s, 6, axis=0), lax.dynamic_slice_in_dim(a, s + 9, 6, axis=0))
    return jit_on(devs, f, (ns(m, "x"), ns(m)), ns(m), put(x, m, "x"), put(start, m))


@program("jit_dynamic_update_slice_sharded_2d", lambda rng: (rng.integers(0, 9, (8, 8)).astype(np.int32),
                                                              rng.integers(10, 99, (3, 5)).astype(np.int32),
                                                              np.array([3, 2], np.int32)))
def _(devs, x, u, pos):
    m = mesh(devs, (2, 4), ("x", "y"))
    f = lambda a, u, p: lax.dynamic_update_slice(a, u, (p[0], p[1]))
    return jit_on(devs, f, (ns(m, "x", "y"), ns(m), ns(m)), ns(m, "x", "y"),
                  put(x, m, "x", "y"), put(u, m), put(pos, m))


@program("jit_reshape_merge_sharded_x8", ints(8, 4, 3))
def _(devs, x):
    m = mesh(devs, (8,), ("x",))
    return jit_on(devs, lambda a: a.reshape(32, 3) * 2, ns(m, "x"), ns(m, "x"), put(x, m, "x"))


@program("jit_reshape_split_2d", ints(16, 6))
def _(devs, x):
    m = mesh(devs, (2, 4), ("x", "y"))
    return jit_on(devs, lambda a: a.reshape(4, 4, 6).sum(axis=1), ns(m, ("x", "y")), ns(m, "x"),
                  put(x, m, ("x", "y")))


@program("jit_reshape_across_dims_x4", normal(4, 8))
def _(devs, x):
    # (4, 8) sharded on the columns -> (8, 4) -> (32,): the sharded dim is split
    m = mesh(devs, (4,), ("x",))
    return jit_on(devs, lambda a: (a.reshape(8, 4), a.reshape(32)), ns(m, None, "x"),
                  (ns(m, "x"), ns(m, "x")), put(x, m, None, "x"))


@program("jit_transpose_2d", ints(8, 12))
def _(devs, x):
    m = mesh(devs, (2, 4), ("x", "y"))
    return jit_on(devs, lambda a: (a.T, a.T + 1), ns(m, "x", "y"), (ns(m, "y", "x"), ns(m, "x", None)),
                  put(x, m, "x", "y"))


@program("jit_concat_sharded_x4", lambda rng: (rng.integers(0, 9, (8, 3)).astype(np.int32),
                                                rng.integers(0, 9, (4, 3)).astype(np.int32)))
def _(devs, a, b):
    m = mesh(devs, (4,), ("x",))
    f = lambda a, b: (jnp.concatenate([a, b], axis=0), jnp.concatenate([a, a], axis=1))
    return jit_on(devs, f, (ns(m, "x"), ns(m, "x")), (ns(m, "x"), ns(m, "x")), put(a, m, "x"), put(b, m, "x"))


@program("jit_uneven_wsc_6_rows_x4", ints(8, 5))
def _(devs, x):
    # 6 rows on 4 devices: an uneven intermediate, a replicated result
    m = mesh(devs, (4,), ("x",))

    def f(a):
        b = lax.with_sharding_constraint(a[1:7] * 3, ns(m, "x"))
        return jnp.cumsum(b, axis=0), jnp.max(b, axis=0)
    return jit_on(devs, f, ns(m, "x"), (ns(m), ns(m)), put(x, m, "x"))


@program("jit_uneven_pad_10_rows_x8", normal(8, 3))
def _(devs, x):
    m = mesh(devs, (8,), ("x",))

    def f(a):
        b = lax.with_sharding_constraint(jnp.pad(a, ((1, 1), (0, 0))), ns(m, "x"))
        return jnp.sort(b, axis=0)
    return jit_on(devs, f, ns(m, "x"), ns(m), put(x, m, "x"))


@program("jit_reshard_out_2d", ints(8, 8))
def _(devs, x):
    # in on (x, y), out on (y, x) and fully replicated: the result moves between devices
    m = mesh(devs, (2, 4), ("x", "y"))
    return jit_on(devs, lambda a: (a + 1, a * 2), ns(m, "x", "y"), (ns(m, "y", "x"), ns(m)),
                  put(x, m, "x", "y"))


@program("jit_default_out_sharding_2d", ints(8, 8))
def _(devs, x):
    # out_shardings left to the compiler: the sharding it chose must match XLA's
    m = mesh(devs, (2, 4), ("x", "y"))
    with jax.default_device(devs[0]):
        return jax.jit(lambda a: (a * 2, jnp.sum(a, axis=1), a.T))(put(x, m, "x", "y"))


@program("jit_numpy_arg_sharding_chosen_x4", ints(8, 3))
def _(devs, x):
    # a NumPy argument's sharding is left to the compiler
    # (allow_spmd_sharding_propagation_to_parameters): propagation shards it
    # as the constraint on its use, JAX transfers it that way, and shard_alike
    # returns it as it arrived
    from jax.experimental.shard_alike import shard_alike
    s = ns(mesh(devs, (4,), ("x",)), "x")

    def f(a):
        b = lax.with_sharding_constraint(a, s)
        return shard_alike(a, b * 2)
    return jax.jit(f)(x)


@program("jit_2d_mesh_replicated_dims", normal(8, 8), terms=2)
def _(devs, x):
    # operands sharded only on x, only on y, and not at all, in one program
    m = mesh(devs, (2, 4), ("x", "y"))
    f = lambda a, b, c: (a + b) * c
    return jit_on(devs, f, (ns(m, "x"), ns(m, None, "y"), ns(m)), ns(m, "x", "y"),
                  put(x, m, "x"), put(x, m, None, "y"), put(x, m))


# --------------------------------------------------------------------------
# Batched linalg over a sharded batch dimension (pjrtx: the Shardy path with
# a batch sharding rule on its linalg custom calls). LAPACK and pjrtx's
# kernels round differently, so the programs return what both must agree on
# exactly: pivots and permutations, eigenvalues rounded to 1/16.

@program("jit_lu_pivots_batch_x4", normal(8, 5, 5))
def _(devs, x):
    m = mesh(devs, (4,), ("x",))
    f = lambda a: lax.linalg.lu(a)[1:]
    return jit_on(devs, f, ns(m, "x"), ns(m, "x"), put(x, m, "x"))


@program("jit_eigvalsh_rounded_batch_2x4", normal(8, 6, 6))
def _(devs, x):
    m = mesh(devs, (2, 4), ("x", "y"))
    f = lambda a: jnp.round(jnp.linalg.eigvalsh(a + jnp.swapaxes(a, -1, -2)) * 16)
    return jit_on(devs, f, ns(m, ("x", "y")), ns(m, ("x", "y")), put(x, m, ("x", "y")))


@program("jit_qr_r_rounded_matrix_dim_sharded_x2", normal(4, 6, 6))
def _(devs, x):
    # a sharded matrix dimension: gathered, then each device factors
    m = mesh(devs, (2,), ("x",))
    f = lambda a: jnp.round(jnp.abs(jnp.linalg.qr(a)[1]) * 16)
    return jit_on(devs, f, ns(m, None, "x"), ns(m), put(x, m, None, "x"))


# --------------------------------------------------------------------------
# Host callbacks under jit with shardings run once per call, on one device

@program("jit_io_callback_runs_once_x8", ints(8, 4))
def _(devs, x):
    from jax.experimental import io_callback
    m = mesh(devs, (8,), ("x",))
    seen = []

    def cb(v):
        seen.append(np.asarray(v).copy())
        return (np.asarray(v) * 3).astype(np.int32)

    def f(a):
        b = io_callback(cb, jax.ShapeDtypeStruct(a.shape, jnp.int32), a, ordered=True)
        c = jax.pure_callback(lambda v: np.asarray(v) + 1, jax.ShapeDtypeStruct(a.shape, a.dtype),
                              a, sharding=jax.sharding.SingleDeviceSharding(devs[5]))
        jax.debug.callback(lambda v: seen.append(np.asarray(v).copy()), a)
        return b + c

    out = jit_on(devs, f, ns(m, "x"), ns(m, "x"), put(x, m, "x"))
    out.block_until_ready()
    jax.effects_barrier()
    return out, np.int32(len(seen)), np.stack(seen).sum(0)


# --------------------------------------------------------------------------
# pmap

def pmapped(devs, k, f, *args, **kw):
    return jax.pmap(f, devices=devs[:k], **kw)(*args)


@program("pmap_psum_pmax_x8", normal(8, 5), terms=[8, None])  # the pmax is exact
def _(devs, x):
    return pmapped(devs, 8, lambda a: (lax.psum(a, "i"), lax.pmax(a, "i")), x, axis_name="i")


@program("pmap_ppermute_axis_index_x4", ints(4, 3))
def _(devs, x):
    f = lambda a: lax.ppermute(a, "i", [(0, 3), (3, 1), (1, 0)]) + lax.axis_index("i")
    return pmapped(devs, 4, f, x, axis_name="i")


@program("pmap_all_gather_in_axes_none_x2", lambda rng: (rng.integers(0, 9, (2, 3)).astype(np.int32),
                                                          rng.integers(0, 9, (3,)).astype(np.int32)))
def _(devs, x, y):
    f = lambda a, b: lax.all_gather(a * b, "i")
    return pmapped(devs, 2, f, x, y, axis_name="i", in_axes=(0, None))


@program("pmap_psum_scatter_all_to_all_x4", ints(4, 4, 4))
def _(devs, x):
    f = lambda a: (lax.psum_scatter(a, "i", tiled=True), lax.all_to_all(a, "i", 0, 0, tiled=True))
    return pmapped(devs, 4, f, x, axis_name="i")


@program("pmap_scan_psum_x8", ints(8, 2))
def _(devs, x):
    f = lambda a: lax.scan(lambda c, _: (lax.psum(c, "i") % 101, c), a, None, length=3)
    return pmapped(devs, 8, f, x, axis_name="i")


# --------------------------------------------------------------------------
# Placement: device_put, shards, arrays from callbacks, donation

def put_program(name, shape, mesh_shape, names, spec):
    @program(name, ints(*shape))
    def _(devs, x):
        m = mesh(devs, mesh_shape, names)
        a = put(x, m, *spec)
        # the shards read back and reassembled, then a program over them
        shards = [s.data for s in a.addressable_shards]
        b = jax.make_array_from_single_device_arrays(a.shape, a.sharding, shards)
        with jax.default_device(devs[0]):
            c = jax.jit(lambda v: v * 2 + 1)(b)
        return a, b, c


put_program("put_1d_x8", (16, 3), (8,), ("x",), ("x",))
put_program("put_2d_xy", (4, 8), (2, 4), ("x", "y"), ("x", "y"))
put_program("put_2d_yx", (8, 2), (2, 4), ("x", "y"), ("y", "x"))
put_program("put_replicated_x4", (3, 5), (4,), ("x",), ())
put_program("put_partially_replicated_2d", (6, 8), (2, 4), ("x", "y"), (None, "y"))
put_program("put_multi_axis_dim_2d", (16, 2), (2, 4), ("x", "y"), (("y", "x"),))


@program("put_reshard_device_to_device_2d", normal(8, 8))
def _(devs, x):
    m = mesh(devs, (2, 4), ("x", "y"))
    m2 = mesh(devs[4:] + devs[:4], (4, 2), ("a", "b"))  # other devices at each position
    a = put(x, m, "x", "y")
    return a, jax.device_put(a, ns(m, "y")), jax.device_put(a, ns(m2, "b", "a")), jax.device_put(a, ns(m))


@program("make_array_from_callback_2d")
def _(devs):
    m = mesh(devs, (2, 4), ("x", "y"))
    glob = np.arange(8 * 12, dtype=np.float32).reshape(8, 12) / 7
    a = jax.make_array_from_callback(glob.shape, ns(m, "y", "x"), lambda idx: glob[idx])
    with jax.default_device(devs[0]):
        return a, jax.jit(lambda v: v.T, out_shardings=ns(m, "x"))(a)


@program("make_array_from_callback_replicated_x2")
def _(devs):
    m = mesh(devs, (2,), ("x",))
    glob = np.arange(10, dtype=np.int32)
    return jax.make_array_from_callback(glob.shape, ns(m), lambda idx: glob[idx])


@program("donate_sharded_x4", ints(16, 4))
def _(devs, x):
    m = mesh(devs, (4,), ("x",))
    a = put(x, m, "x")
    b = put(x, m, "x")
    with jax.default_device(devs[0]):
        out = jax.jit(lambda v, w: (v * 3 + w, w - 1), donate_argnums=0,
                      in_shardings=(ns(m, "x"), ns(m, "x")), out_shardings=(ns(m, "x"), ns(m, "x")))(a, b)
    # the donated input is gone on both backends; the other is still readable
    return out, np.array([a.is_deleted(), b.is_deleted()]), b


@program("donate_sharded_2d_reshard", normal(8, 8))
def _(devs, x):
    m = mesh(devs, (2, 4), ("x", "y"))
    a = put(x, m, "x", "y")
    with jax.default_device(devs[0]):
        out = jax.jit(lambda v: v[::-1] * 2, donate_argnums=0, out_shardings=ns(m, "x", "y"))(a)
    return out, np.array(a.is_deleted())


# --------------------------------------------------------------------------
# A small MLP training step, data-parallel and tensor-parallel.
# Inputs in {-1, 0, 1}, targets in {-1, 0, 1}, weights multiples of 1/4 in
# [-1, 1], 8 rows, 4 -> 8 -> 2, learning rate 1/4: every value the step makes
# is a multiple of 2^-11 below 2^11 in magnitude, so float32 holds each sum
# exactly and any summation order gives the same bits (checked: dyadic=True).

def _mlp_inputs(rng):
    return (rng.integers(-1, 2, (8, 4)).astype(np.float32),
            rng.integers(-1, 2, (8, 2)).astype(np.float32),
            rng.integers(-4, 5, (4, 8)).astype(np.float32) / 4,
            rng.integers(-4, 5, (8, 2)).astype(np.float32) / 4)


def _loss(params, x, y):
    w1, w2 = params
    h = jax.nn.relu(jnp.dot(x, w1, precision="highest"))
    out = jnp.dot(h, w2, precision="highest")
    return jnp.mean((out - y) ** 2)


def _step(params, x, y):
    loss, grads = jax.value_and_grad(_loss)(params, x, y)
    return loss, jax.tree_util.tree_map(lambda p, g: p - g / 4, params, grads)


def mlp_jit(devs, x, y, w1, w2, mesh_shape, names, data, w1_spec, w2_spec):
    m = mesh(devs, mesh_shape, names)
    params = (put(w1, m, *w1_spec), put(w2, m, *w2_spec))
    ins = ((ns(m, *w1_spec), ns(m, *w2_spec)), ns(m, *data), ns(m, *data))
    outs = (ns(m), (ns(m, *w1_spec), ns(m, *w2_spec)))
    return jit_on(devs, _step, ins, outs, params, put(x, m, *data), put(y, m, *data))


@program("mlp_step_data_parallel_jit_x8", _mlp_inputs, dyadic=True)
def _(devs, x, y, w1, w2):
    return mlp_jit(devs, x, y, w1, w2, (8,), ("data",), ("data",), (), ())


@program("mlp_step_tensor_parallel_jit_x4", _mlp_inputs, dyadic=True)
def _(devs, x, y, w1, w2):
    # hidden units split: w1 by columns, w2 by rows (a psum in the forward)
    return mlp_jit(devs, x, y, w1, w2, (4,), ("model",), (), (None, "model"), ("model",))


@program("mlp_step_dp_tp_jit_2d", _mlp_inputs, dyadic=True)
def _(devs, x, y, w1, w2):
    return mlp_jit(devs, x, y, w1, w2, (2, 4), ("data", "model"), ("data",), (None, "model"), ("model",))


@program("mlp_step_data_parallel_shard_map_x4", _mlp_inputs, dyadic=True)
def _(devs, x, y, w1, w2):
    m = mesh(devs, (4,), ("data",))

    def step(params, x, y):
        loss, grads = jax.value_and_grad(_loss)(params, x, y)
        loss, grads = lax.pmean((loss, grads), "data")
        return loss, jax.tree_util.tree_map(lambda p, g: p - g / 4, params, grads)
    f = smap(step, m, ((P(), P()), P("data"), P("data")), (P(), (P(), P())))
    with jax.default_device(devs[0]):
        return jax.jit(f)((put(w1, m), put(w2, m)), put(x, m, "data"), put(y, m, "data"))


@program("mlp_step_tensor_parallel_shard_map_2d", _mlp_inputs, dyadic=True)
def _(devs, x, y, w1, w2):
    # Megatron-style: hidden split on "model" with an explicit psum, batch on "data"
    m = mesh(devs, (2, 4), ("data", "model"))

    def loss(params, x, y):
        w1, w2 = params
        h = jax.nn.relu(jnp.dot(x, w1, precision="highest"))
        out = lax.psum(jnp.dot(h, w2, precision="highest"), "model")
        return jnp.mean((out - y) ** 2)

    def step(params, x, y):
        l, g = jax.value_and_grad(loss)(params, x, y)
        l, g = lax.pmean((l, g), "data")
        return l, jax.tree_util.tree_map(lambda p, d: p - d / 4, params, g)
    specs = (P(None, "model"), P("model"))
    f = smap(step, m, (specs, P("data"), P("data")), (P(), specs))
    with jax.default_device(devs[0]):
        return jax.jit(f)((put(w1, m, None, "model"), put(w2, m, "model")), put(x, m, "data"), put(y, m, "data"))


# --------------------------------------------------------------------------
# Unreduced values (JAX explicit sharding): each device's partial value, as
# XLA:CPU leaves it, compared shard by shard

def emesh(devs, shape, names):
    n = int(np.prod(shape))
    return Mesh(np.asarray(devs[:n], dtype=object).reshape(shape), names,
                axis_types=(jax.sharding.AxisType.Explicit,) * len(names))


def shards(out):
    """Every device's piece, in device order, stacked."""
    return np.stack([np.asarray(s.data) for s in sorted(out.addressable_shards, key=lambda s: s.device.id)])


@program("unreduced_einsum_shards", ints(4, 8, lo=-8, hi=8))
def _(devs, x):
    m = emesh(devs, (2, 4), ("x", "y"))
    with jax.set_mesh(m):
        f = jax.jit(lambda a, b: jnp.einsum("ab,bc->ac", a, b, out_sharding=P(None, None, unreduced={"y"})))
        out = f(put(x, m, None, "y"), put(x.T.copy(), m, "y", None))
        return shards(out), jax.sharding.reshard(out, P())


@program("sharded_to_unreduced_shards", ints(4, 8))
def _(devs, x):
    m = emesh(devs, (2, 4), ("x", "y"))
    with jax.set_mesh(m):
        out = jax.jit(lambda a: jax.sharding.reshard(a + 1, P("x", None, unreduced={"y"})))(put(x, m, "x", "y"))
        return shards(out), jax.sharding.reshard(out, P("x", "y"))


@program("reduced_input_grad_unreduced", normal(8), dyadic=False, terms=1)
def _(devs, x):
    # the cotangent of a reduced input is unreduced: XLA keeps it on one
    # device of the group and zeros on the others
    m = emesh(devs, (2,), ("x",))
    with jax.set_mesh(m):
        body = jax.shard_map(lambda a: a * a, out_specs=P(reduced={"x"}))
        g = jax.jit(jax.grad(lambda a: body(a).sum()))(jax.device_put(x, P(reduced={"x"})))
        return shards(g), jax.sharding.reshard(g, P())


# --------------------------------------------------------------------------
# Callbacks XLA's partitioner makes into Python

@program("custom_partitioning_psum", ints(4, 2, lo=-20, hi=20))
def _(devs, x):
    from jax.experimental.custom_partitioning import custom_partitioning

    def partition(mesh_, arg_shapes, result_shape):
        def lower_fn(a, b):
            return lax.psum(a.reshape((4,)) + b, "y")
        return mesh_, lower_fn, result_shape.sharding, jax.tree.map(lambda s: s.sharding, arg_shapes)

    @custom_partitioning
    def f(a, b):
        return (a.reshape((8,)) + b) * 4

    f.def_partition(infer_sharding_from_operands=None, propagate_user_sharding=None,
                    partition=partition, sharding_rule="(i k) j, (i k j) -> (i k j)",
                    i=2, k=2, need_replication_factors=("k",))
    m = mesh(devs, (2, 4), ("x", "y"))
    y = x.reshape(8) * 3
    return jax.jit(lambda a, b: f(a, b) - 1)(put(x, m, "x", None), put(y, m, "x"))


@program("inspect_sharding_in_jit", normal(8, 4), terms=1)
def _(devs, x):
    m = mesh(devs, (2, 4), ("x", "y"))
    seen = []

    def f(a):
        b = jnp.sin(a)
        jax.debug.inspect_array_sharding(b, callback=lambda s: seen.append((str(s.spec), len(s.device_set))))
        return b * 2

    out = jax.jit(f)(put(x, m, "x", "y"))
    report = np.frombuffer(repr(seen).encode(), np.uint8)
    return out, report



# --------------------------------------------------------------------------
# Comparison

def gamma2(terms, dtype) -> float:
    """2 * gamma_terms: two summation orders of `terms` terms differ by at
    most this times the sum of |terms| (Higham 3.1, 4.2)."""
    u = float(np.finfo(dtype).eps) / 2
    return 2 * terms * u / (1 - terms * u)


def leaves(tree):
    return jax.tree_util.tree_flatten(tree)


def pos_map(devs):
    return {d: i for i, d in enumerate(devs)}


def norm_index(index, shape):
    out = []
    for sl, n in zip(index, shape):
        if isinstance(sl, slice):
            out.append(sl.indices(n)[:2])
        else:
            out.append((int(sl), int(sl) + 1))
    return tuple(out)


def describe_sharding(arr, devs):
    """The sharding with devices replaced by their position in the backend's
    device list, so pjrtx's and XLA's can be compared."""
    s = arr.sharding
    pos = pos_map(devs)
    d = {"type": type(s).__name__, "fully_replicated": s.is_fully_replicated,
         "memory_kind": s.memory_kind,
         "map": sorted((pos[dev], norm_index(idx, arr.shape))
                       for dev, idx in s.devices_indices_map(arr.shape).items())}
    if isinstance(s, NamedSharding):
        spec = list(s.spec)
        while spec and spec[-1] is None:
            spec.pop()
        d["mesh"] = (tuple(s.mesh.axis_names), tuple(s.mesh.devices.shape),
                     tuple(pos[x] for x in s.mesh.devices.flat))
        d["spec"] = str(P(*spec))
    return d


def host(leaf):
    return np.asarray(leaf)


def compare(name, got, want, bound, test_devs, oracle_devs) -> list[str]:
    errs = []
    gl, gt = leaves(got)
    wl, wt = leaves(want)
    if gt != wt:
        return [f"result structure {gt} != XLA's {wt}"]
    bl = (jax.tree_util.tree_flatten(bound, is_leaf=lambda x: x is None)[0] if bound is not None
          else [None] * len(wl))
    for k, (g, w, b) in enumerate(zip(gl, wl, bl)):
        where = f"result {k}"
        gn, wn = host(g), host(w)
        if gn.dtype != wn.dtype or gn.shape != wn.shape:
            errs.append(f"{where}: {gn.dtype}{list(gn.shape)} != XLA's {wn.dtype}{list(wn.shape)}")
            continue
        bleaf = b if (b is not None and gn.dtype.kind in "fc") else None
        errs += [f"{where}: {e}" for e in compare_values(gn, wn, bleaf)]
        if isinstance(g, jax.Array) != isinstance(w, jax.Array):
            errs.append(f"{where}: a {type(g).__name__}, XLA's a {type(w).__name__}")
            continue
        if not isinstance(g, jax.Array):
            continue
        gs, ws = describe_sharding(g, test_devs), describe_sharding(w, oracle_devs)
        if gs != ws:
            diff = {key: (gs.get(key), ws.get(key)) for key in set(gs) | set(ws) if gs.get(key) != ws.get(key)}
            errs.append(f"{where}: sharding differs (pjrtx, XLA): {diff}")
            continue
        errs += [f"{where}: {e}" for e in compare_shards(g, w, bleaf, test_devs, oracle_devs)]
    return errs


def compare_values(g, w, bound, what="value") -> list[str]:
    if bound is None:
        same = np.array_equal(g, w, equal_nan=g.dtype.kind in "fc")
        # -0.0 == 0.0 for array_equal; XLA's zero signs count too. A NaN's
        # sign is not a value (IEEE leaves it to the operation; XLA:CPU's own
        # differs between its reduce and its all-reduce): NaN positions must
        # match, their sign bits need not.
        def sign_differs(a, b):
            return (np.signbit(a) != np.signbit(b)) & ~(np.isnan(a) & np.isnan(b))
        if g.dtype.kind in "fc":
            same = same and not sign_differs(g, w).any()
        if not same:
            bad = ~((g == w) | ((g != g) & (w != w)))
            if g.dtype.kind in "fc":
                bad |= sign_differs(g, w)
            return [f"{what}: {int(bad.sum())} of {bad.size} elements differ (exact comparison); "
                    f"e.g. at {np.argwhere(bad)[:3].tolist()} got {g[bad][:3].tolist()} "
                    f"XLA {w[bad][:3].tolist()}"]
        return []
    gw, ww = g.astype(np.float64), w.astype(np.float64)
    with np.errstate(invalid="ignore"):
        err = np.where(gw == ww, 0.0, np.abs(gw - ww))
    bad = ~((err <= bound) | (np.isnan(gw) & np.isnan(ww)))
    if bad.any():
        return [f"{what}: {int(bad.sum())} of {bad.size} elements differ by more than the summation "
                f"bound; e.g. got {gw[bad][:3].tolist()} XLA {ww[bad][:3].tolist()} "
                f"bound {np.broadcast_to(bound, err.shape)[bad][:3].tolist()}"]
    return []


def compare_shards(g, w, bound, test_devs, oracle_devs) -> list[str]:
    errs = []
    gpos, wpos = pos_map(test_devs), pos_map(oracle_devs)
    gsh = sorted(g.addressable_shards, key=lambda s: gpos[s.device])
    wsh = sorted(w.addressable_shards, key=lambda s: wpos[s.device])
    if [gpos[s.device] for s in gsh] != [wpos[s.device] for s in wsh]:
        return [f"addressable shards on devices {[gpos[s.device] for s in gsh]}, "
                f"XLA's on {[wpos[s.device] for s in wsh]}"]
    replicas = {}
    for a, b in zip(gsh, wsh):
        p = gpos[a.device]
        if a.data.devices() != {a.device}:
            errs.append(f"shard {p}: its data is on {a.data.devices()}, not on {a.device}")
        ia, ib = norm_index(a.index, g.shape), norm_index(b.index, w.shape)
        if ia != ib:
            errs.append(f"shard {p}: index {ia}, XLA's {ib}")
            continue
        da, db = host(a.data), host(b.data)
        if da.dtype != db.dtype or da.shape != db.shape:
            errs.append(f"shard {p}: {da.dtype}{list(da.shape)}, XLA's {db.dtype}{list(db.shape)}")
            continue
        sb = None if bound is None else np.broadcast_to(bound, g.shape)[a.index]
        errs += compare_values(da, db, sb, what=f"shard {p} (index {ia})")
        # replicas of one slice must agree bit for bit (a psum's result is
        # the same on every device, as JAX assumes when it picks any one)
        if ia in replicas and not np.array_equal(replicas[ia][1], da, equal_nan=True):
            errs.append(f"shard {p} (index {ia}) differs from its replica on device {replicas[ia][0]}")
        replicas.setdefault(ia, (p, da))
    return errs


def materialize(tree):
    """Wait for every result (so errors surface here) and keep the arrays."""
    jax.block_until_ready([x for x in leaves(tree)[0] if isinstance(x, jax.Array)])
    for x in leaves(tree)[0]:
        host(x)
    return tree


def float_leaves_f64(tree):
    return [host(x).astype(np.float64) for x in leaves(tree)[0]]


def inject_fault(name, tree):
    """PJRTX_BATTERY_FAULT=NAME:KIND makes program NAME's pjrtx side crash
    (abort), hang, or come out wrong (one element changed), so the harness's
    own reporting can be tested (tests/test_multidevice.py does)."""
    spec = os.environ.get("PJRTX_BATTERY_FAULT", "")
    faults = dict(f.split(":", 1) for f in spec.split(",") if f)
    kind = faults.get(name)
    if kind == "crash":
        os.abort()
    if kind == "hang":
        time.sleep(10**6)
    if kind == "wrong":
        ls, tdef = leaves(tree)
        a = ls[0]
        shards = [s.data for s in a.addressable_shards]
        shards[0] = jax.device_put(host(shards[0]) + np.ones((), host(shards[0]).dtype), shards[0].device)
        ls[0] = jax.make_array_from_single_device_arrays(a.shape, a.sharding, shards)
        return jax.tree_util.tree_unflatten(tdef, ls)
    return tree


class NeedsMoreDevices(Exception):
    pass


def run_program(p: Program, test_devs, oracle_devs) -> list[str]:
    rng = np.random.default_rng(seed_of(p.name))
    inputs = p.inputs(rng)
    try:
        want = materialize(p.fn(oracle_devs, *inputs))
    except Exception as e:
        if len(oracle_devs) < FULL:  # the program's mesh is larger than NDEV devices
            raise NeedsMoreDevices(f"needs more than {len(oracle_devs)} devices "
                                   f"(PJRTX_BATTERY_DEVICES): on XLA:CPU it raised "
                                   f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
        return ["the oracle (XLA:CPU) raised; the program itself is wrong:\n" + traceback.format_exc(limit=4)]
    bound = None
    if p.terms is not None or p.dyadic:
        with jax.enable_x64(True):
            if p.terms is not None:  # the same program on |inputs| in float64
                f64 = [np.abs(a).astype(np.float64) if a.dtype.kind == "f" else a for a in inputs]
            else:
                f64 = [a.astype(np.float64) if a.dtype.kind == "f" else a for a in inputs]
            ref = p.fn(oracle_devs, *f64)
            ref_leaves = float_leaves_f64(ref)
        if p.terms is not None:
            per_leaf = p.terms if isinstance(p.terms, list) else [p.terms] * len(ref_leaves)
            assert len(per_leaf) == len(ref_leaves), (p.name, per_leaf)
            bound = jax.tree_util.tree_unflatten(
                leaves(want)[1], [None if t is None else gamma2(t, np.float32) * r
                                  for t, r in zip(per_leaf, ref_leaves)])
        else:
            for k, (w, r) in enumerate(zip(leaves(want)[0], ref_leaves)):
                wn = host(w)
                if wn.dtype.kind == "f" and not np.array_equal(wn.astype(np.float64), r):
                    return [f"result {k}: the program's premise fails: XLA's float32 result is not "
                            "exact (differs from float64), so it cannot be compared exactly"]
    try:
        got = materialize(inject_fault(p.name, p.fn(test_devs, *inputs)))
    except Exception:
        return ["raised:\n" + traceback.format_exc(limit=6)]
    return compare(p.name, got, want, bound, test_devs, oracle_devs)


def devices_for(backend):
    devs = jax.devices(backend)
    if len(devs) < NDEV:
        raise RuntimeError(f"{backend} has {len(devs)} devices, the battery needs {NDEV} "
                           f"(PJRTX_DEVICES={os.environ.get('PJRTX_DEVICES')}, "
                           f"XLA_FLAGS={os.environ.get('XLA_FLAGS')!r})")
    return devs[:NDEV]


def _knows_pjrtx_devices() -> bool:
    from pjrtx import env
    return "PJRTX_DEVICES" in {v.name for v in env.variables()}


def emit(**msg):
    sys.stdout.write(MARK + json.dumps(msg) + "\n")
    sys.stdout.flush()


def main(argv):
    if "--list" in argv:
        print("\n".join(PROGRAMS))
        return 0
    names = [a for a in argv if not a.startswith("-")] or list(PROGRAMS)
    unknown = [n for n in names if n not in PROGRAMS]
    if unknown:
        raise SystemExit(f"unknown programs: {unknown}; --list shows them")
    backend = backend_under_test()
    if backend == "pjrtx":
        from pjrtx import jax_plugin
        jax_plugin.ensure_registered()
    try:
        test_devs, oracle_devs = devices_for(backend), devices_for("cpu")
        if backend == "cpu":
            # oracle vs oracle: the "pjrtx" side takes the host devices in
            # reverse, so each side compiles for its own devices and the
            # comparison by mesh position is exercised, not trivially true
            test_devs = test_devs[::-1]
    except Exception as e:
        # A pjrtx that does not know PJRTX_DEVICES yet (the variable is not
        # in its table) predates multi-device support: the parent skips.
        emit(event="setup_error", message=str(e),
             unsupported=backend == "pjrtx" and not _knows_pjrtx_devices())
        return 3
    emit(event="ready", backend=backend, devices=[str(d) for d in test_devs])
    failed = 0
    for name in names:
        emit(event="start", name=name)
        t0 = time.monotonic()
        try:
            errs, skipped = run_program(PROGRAMS[name], test_devs, oracle_devs), None
        except NeedsMoreDevices as e:
            errs, skipped = [], str(e)
        failed += bool(errs)
        emit(event="done", name=name, ok=not errs, messages=errs, skipped=skipped,
             seconds=round(time.monotonic() - t0, 3))
        if sys.stderr.isatty():
            print(f"{'ok  ' if not errs else 'FAIL'} {name}" + "".join("\n    " + e for e in errs),
                  file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
