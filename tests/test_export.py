"""jax.export on pjrtx: serialized programs that use pjrtx's own custom-call
targets (linear algebra), with and without shape polymorphism, round-trip
and run; results are checked against XLA:CPU running the same function."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import export

from pjrtx import _pjrtx
from pjrtx.jax_rules import export_targets


def _spd(n, batch=()):
    rng = np.random.default_rng(7)
    a = rng.standard_normal(batch + (n, n)).astype(np.float32)
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n, dtype=np.float32)


def _round_trip(f, *specs):
    exp = export.export(jax.jit(f), platforms=("pjrtx",))(*specs)
    return export.deserialize(exp.serialize())


def test_every_linalg_target_is_declared_stable():
    from jax._src.export import _export
    ours = {op.split("@", 1)[1] for op in _pjrtx.supported_ops()
            if op.startswith("custom_call @pjrtx_")} - {"pjrtx_callback"}
    assert ours == set(export_targets.STABLE_TARGETS)
    assert ours <= _export._CUSTOM_CALL_TARGETS_GUARANTEED_STABLE


def test_exported_eigh_runs_after_serialization(pjrtx_device, cpu_device):
    a = _spd(6)
    exp = _round_trip(jnp.linalg.eigvalsh, jax.ShapeDtypeStruct(a.shape, a.dtype))
    assert "pjrtx_eigh" in exp.mlir_module()
    got = np.asarray(exp.call(jax.device_put(a, pjrtx_device)))
    want = np.asarray(jax.jit(jnp.linalg.eigvalsh)(jax.device_put(a, cpu_device)))
    # Eigenvalues of a symmetric matrix are perturbed by at most ~ n eps ||A||.
    tol = 6 * 4 * np.finfo(np.float32).eps * np.linalg.norm(a, 2)
    np.testing.assert_allclose(got, want, rtol=0, atol=tol)


def test_exported_svd_with_a_symbolic_batch(pjrtx_device, cpu_device):
    a = np.random.default_rng(3).standard_normal((3, 5, 4)).astype(np.float32)
    b, = export.symbolic_shape("b")
    f = lambda x: jnp.linalg.svd(x, compute_uv=False)
    exp = _round_trip(f, jax.ShapeDtypeStruct((b, 5, 4), np.float32))
    assert "pjrtx_svd" in exp.mlir_module()
    got = np.asarray(exp.call(jax.device_put(a, pjrtx_device)))
    want = np.asarray(jax.jit(f)(jax.device_put(a, cpu_device)))
    assert got.shape == want.shape == (3, 4)
    # Singular values move by at most ~ max(m, n) eps ||A|| (Weyl).
    tol = 5 * 4 * np.finfo(np.float32).eps * np.linalg.norm(a, 2, axis=(1, 2))[:, None]
    assert np.all(np.abs(got - want) <= tol)


def test_exported_eig_eigenvalues(pjrtx_device):
    # A real matrix with known eigenvalues 1..4 (similar to a diagonal one).
    rng = np.random.default_rng(5)
    s = rng.standard_normal((4, 4)).astype(np.float64)
    a = (s @ np.diag([1.0, 2.0, 3.0, 4.0]) @ np.linalg.inv(s)).astype(np.float32)
    f = lambda x: jnp.linalg.eigvals(x)
    exp = _round_trip(f, jax.ShapeDtypeStruct(a.shape, a.dtype))
    assert "pjrtx_eig" in exp.mlir_module()
    got = np.sort_complex(np.asarray(exp.call(jax.device_put(a, pjrtx_device))))
    # Eigenvalue error ~ cond(S) eps ||A|| for a diagonalizable matrix.
    tol = np.linalg.cond(s) * 16 * np.finfo(np.float32).eps * np.linalg.norm(a, 2)
    np.testing.assert_allclose(got, [1, 2, 3, 4], rtol=0, atol=tol)


def test_callbacks_stay_unexportable():
    def f(x):
        return jax.pure_callback(lambda v: v, jax.ShapeDtypeStruct((2,), np.float32), x)
    with pytest.raises(Exception, match="callback|custom call"):
        export.export(jax.jit(f), platforms=("pjrtx",))(jax.ShapeDtypeStruct((2,), np.float32))


def test_exported_svd_with_symbolic_rows_and_columns(pjrtx_device, cpu_device):
    # min(m, n) stays symbolic in the lowering; the constraint makes it n.
    a = np.random.default_rng(4).standard_normal((6, 4)).astype(np.float32)
    m, n = export.symbolic_shape("m, n", constraints=["n <= m"])
    f = lambda x: jnp.linalg.svd(x, full_matrices=False)[1]
    exp = _round_trip(f, jax.ShapeDtypeStruct((m, n), np.float32))
    got = np.asarray(exp.call(jax.device_put(a, pjrtx_device)))
    want = np.asarray(jax.jit(f)(jax.device_put(a, cpu_device)))
    assert got.shape == want.shape == (4,)
    tol = 6 * 4 * np.finfo(np.float32).eps * np.linalg.norm(a, 2)
    np.testing.assert_allclose(got, want, rtol=0, atol=tol)


def test_exported_solve_with_a_symbolic_batch(pjrtx_device, cpu_device):
    # jnp.linalg.solve factors through lu_p (custom_call @LuDecomposition),
    # whose results must carry their shapes for refinement to make them static.
    a = _spd(5, batch=(3,))
    rhs = np.random.default_rng(8).standard_normal((3, 5)).astype(np.float32)
    b, = export.symbolic_shape("b")
    f = lambda x, y: jnp.linalg.solve(x, y[..., None])[..., 0]
    exp = _round_trip(f, jax.ShapeDtypeStruct((b, 5, 5), np.float32),
                      jax.ShapeDtypeStruct((b, 5), np.float32))
    assert "LuDecomposition" in exp.mlir_module()
    got = np.asarray(exp.call(jax.device_put(a, pjrtx_device), jax.device_put(rhs, pjrtx_device)))
    want = np.asarray(jax.jit(f)(jax.device_put(a, cpu_device), jax.device_put(rhs, cpu_device)))
    # Backward-stable solve: relative error <= ~ n cond(A) eps per system.
    cond = np.linalg.cond(a.astype(np.float64))[:, None]
    scale = np.linalg.norm(want, axis=-1, keepdims=True)
    assert np.all(np.abs(got - want) <= 4 * 5 * cond * np.finfo(np.float32).eps * scale)


def test_exported_tridiagonal_solve_with_a_symbolic_batch(pjrtx_device, cpu_device):
    rng = np.random.default_rng(9)
    dl, du = (rng.uniform(-1, 1, (4, 6)).astype(np.float32) for _ in range(2))
    d = (4 + rng.uniform(0, 1, (4, 6))).astype(np.float32)  # diagonally dominant
    dl[:, 0] = 0
    du[:, -1] = 0
    rhs = rng.standard_normal((4, 6, 2)).astype(np.float32)
    b, = export.symbolic_shape("b")
    spec = jax.ShapeDtypeStruct((b, 6), np.float32)
    f = jax.lax.linalg.tridiagonal_solve
    exp = _round_trip(f, spec, spec, spec, jax.ShapeDtypeStruct((b, 6, 2), np.float32))
    assert "pjrtx_tridiagonal_solve" in exp.mlir_module()
    args = (dl, d, du, rhs)
    got = np.asarray(exp.call(*(jax.device_put(x, pjrtx_device) for x in args)))
    want = np.asarray(jax.jit(f)(*(jax.device_put(x, cpu_device) for x in args)))
    # Diagonal dominance bounds cond(T) by (4 + 1) / (4 - 2); error ~ n cond eps |x|.
    tol = 4 * 6 * 2.5 * np.finfo(np.float32).eps * np.abs(want).max()
    np.testing.assert_allclose(got, want, rtol=0, atol=tol)
