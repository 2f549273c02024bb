"""Run a function on pjrtx and on XLA:CPU and compare the results."""
from __future__ import annotations

import jax
import numpy as np


def run_on(device, f, *args, **jit_kwargs):
    """jit(f) on `device`, inputs committed there; returns NumPy pytrees."""
    placed = [jax.device_put(a, device) for a in args]
    out = jax.jit(f, **jit_kwargs)(*placed)
    return jax.tree_util.tree_map(np.asarray, out)


def assert_same(f, *args, rtol=0.0, atol=0.0, equal_nan=True, **jit_kwargs):
    """f on pjrtx must equal f on XLA:CPU (dtype, shape and values)."""
    got = run_on(jax.devices("pjrtx")[0], f, *args, **jit_kwargs)
    want = run_on(jax.devices("cpu")[0], f, *args, **jit_kwargs)
    got_leaves, got_tree = jax.tree_util.tree_flatten(got)
    want_leaves, want_tree = jax.tree_util.tree_flatten(want)
    assert got_tree == want_tree
    for g, w in zip(got_leaves, want_leaves):
        assert g.dtype == w.dtype, (g.dtype, w.dtype)
        assert g.shape == w.shape, (g.shape, w.shape)
        if rtol == 0 and atol == 0 and g.dtype.kind in "biu":
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
