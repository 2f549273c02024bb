"""Run a function on pjrtx and on XLA:CPU and compare the results."""
from __future__ import annotations

import jax
import numpy as np


def run_on(device, f, *args, **jit_kwargs):
    """jit(f) on `device`, inputs committed there; returns NumPy pytrees."""
    placed = [jax.device_put(a, device) for a in args]
    # default_device too: a function of no (or only constant) inputs would
    # otherwise run on the default backend, pjrtx, for both sides.
    with jax.default_device(device):
        out = jax.jit(f, **jit_kwargs)(*placed)
    return jax.tree_util.tree_map(np.asarray, out)


def unit_roundoff(dtype) -> float:
    """u = 2^-p for a float (or complex) type with p significand bits."""
    dtype = np.dtype(dtype)
    if dtype.kind == "c":
        dtype = np.dtype(np.float32 if dtype.itemsize == 8 else np.float64)
    return float(jnp_finfo(dtype).eps) / 2


def jnp_finfo(dtype):
    import jax.numpy as jnp
    return jnp.finfo(dtype)


def sum_bound(f, *args, terms: int, dtype=np.float32):
    """Per-element bound on |pjrtx - XLA:CPU| for an f whose every result
    is a sum of at most `terms` terms (products count as terms: a dot, a
    pooling window, a scatter-add). Any summation order errs by at most
    gamma_(terms) * sum|term| (Higham, Accuracy and Stability, 3.1 and 4.2),
    so two orders differ by at most twice that; sum|term| is f applied to
    |args|, computed in float64 on XLA:CPU (f must be monotone in each
    argument's magnitude, as sums and dots of |x| are). The bound scales
    with the sum of |terms|, not with the result, which cancellation can
    make arbitrarily small."""
    u = unit_roundoff(dtype)
    gamma = terms * u / (1 - terms * u)
    with jax.enable_x64(True):
        cpu = jax.devices("cpu")[0]
        mags = [jax.device_put(np.abs(np.asarray(a)).astype(np.float64), cpu) for a in args]
        return 2 * gamma * np.asarray(jax.jit(f)(*mags), dtype=np.float64)


def assert_same(f, *args, rtol=0.0, atol=0.0, equal_nan=True, bound=None, **jit_kwargs):
    """f on pjrtx must equal f on XLA:CPU (dtype, shape and values).
    `bound`: an absolute error allowed per element (e.g. sum_bound(...)),
    for results whose rounding depends on the order of a summation."""
    got = run_on(jax.devices("pjrtx")[0], f, *args, **jit_kwargs)
    want = run_on(jax.devices("cpu")[0], f, *args, **jit_kwargs)
    got_leaves, got_tree = jax.tree_util.tree_flatten(got)
    want_leaves, want_tree = jax.tree_util.tree_flatten(want)
    assert got_tree == want_tree
    for g, w in zip(got_leaves, want_leaves):
        assert g.dtype == w.dtype, (g.dtype, w.dtype)
        assert g.shape == w.shape, (g.shape, w.shape)
        if bound is not None:
            gw = g.astype(np.complex128 if g.dtype.kind == "c" else np.float64)
            ww = w.astype(gw.dtype)
            with np.errstate(invalid="ignore"):
                err = np.where(gw == ww, 0.0, np.abs(gw - ww))  # equal infinities agree
            both_nan = np.isnan(gw) & np.isnan(ww) if equal_nan else False
            bad = ~((err <= bound) | both_nan)
            assert not bad.any(), (
                f"{bad.sum()} of {bad.size} elements differ by more than the summation bound; "
                f"worst excess {np.max(np.where(bad, err - bound, 0)):.3g}, e.g. got "
                f"{gw[bad][:4]} want {ww[bad][:4]} bound {np.broadcast_to(bound, err.shape)[bad][:4]}")
        elif rtol == 0 and atol == 0 and g.dtype.kind in "biu":
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(
                g.astype(np.complex128 if g.dtype.kind == "c" else np.float64),
                w.astype(np.complex128 if w.dtype.kind == "c" else np.float64),
                rtol=rtol, atol=atol, equal_nan=equal_nan)
    return got


def run_mlir_on(device, text, *args):
    """Compile StableHLO text (a `module`) for `device` and run it on args."""
    from jax._src import compiler
    from jax._src.interpreters import mlir as jax_mlir
    from jax._src.lib import xla_client as xc
    from jaxlib.mlir import ir

    with jax_mlir.make_ir_context():
        module = ir.Module.parse(text)
        exe = compiler.backend_compile_and_load(device.client, module, xc.DeviceList((device,)),
                                                xc.CompileOptions(), [])
    return [_to_numpy(o) for o in exe.execute([jax.device_put(a, device) for a in args])]


def _to_numpy(out):
    """A result as NumPy; a token result (no data) as an empty bool array."""
    try:
        return np.asarray(out)
    except Exception as e:
        if "token" not in str(e):
            raise
        return np.zeros(0, bool)


def assert_same_mlir(text, *args):
    """A hand-written StableHLO program: pjrtx must match XLA:CPU exactly
    (for ops JAX never emits in this form, e.g. variadic scatter)."""
    got = run_mlir_on(jax.devices("pjrtx")[0], text, *args)
    want = run_mlir_on(jax.devices("cpu")[0], text, *args)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, g.shape, w.dtype, w.shape)
        np.testing.assert_array_equal(g, w)
    return got


def primitives_per_call(f, *args) -> dict:
    """The MLX primitives one call of jit(f) on pjrtx evaluates, by name
    (pjrtx._pjrtx.primitive_histogram); the compile and first run are left
    out. Callers pin PJRTX_COMPILE when they count a particular tier."""
    from pjrtx import _pjrtx
    dev = jax.devices("pjrtx")[0]
    jf = jax.jit(f)
    placed = [jax.device_put(a, dev) for a in args]
    jax.block_until_ready(jf(*placed))
    _pjrtx.count_primitives(True)
    try:
        _pjrtx.primitive_histogram(reset=True)
        jax.block_until_ready(jf(*placed))
        return _pjrtx.primitive_histogram(reset=True)
    finally:
        _pjrtx.count_primitives(False)
