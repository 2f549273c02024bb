"""custom_call targets that are identities on one device, and a clear
compile-time error for any other target."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding, PartitionSpec as P

from oracle import assert_same, run_on
from pjrtx import versions


@pytest.fixture
def gspmd():
    # Without Shardy, sharding constraints arrive as custom_call @Sharding.
    old = jax.config.jax_use_shardy_partitioner
    jax.config.update("jax_use_shardy_partitioner", False)
    yield
    jax.config.update("jax_use_shardy_partitioner", old)


@pytest.mark.parametrize("mode", ["shardy", "gspmd"])
def test_sharding_constraint_is_identity(mode, request):
    if mode == "gspmd":
        request.getfixturevalue("gspmd")
    mesh = jax.make_mesh((1,), ("x",), axis_types=(AxisType.Auto,))

    def f(x):
        x = jax.lax.with_sharding_constraint(x, NamedSharding(mesh, P("x")))
        return x * 2

    text = jax.jit(f).lower(jnp.ones(4)).as_text()
    assert ("custom_call @Sharding" in text) == (mode == "gspmd")
    # The mesh lives on pjrtx, so NumPy is the oracle here.
    x = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(run_on(jax.devices("pjrtx")[0], f, x), x * 2)


def test_unknown_target_names_it():
    def f(x):
        return jax.ffi.ffi_call("pjrtx_no_such_target", jax.ShapeDtypeStruct(x.shape, x.dtype))(x)

    with pytest.raises(Exception, match="custom_call target 'pjrtx_no_such_target'"):
        jax.jit(f)(jnp.ones(3))


@pytest.mark.skipif(not versions.jax_at_least(versions.OPTIONAL_KWARGS["prevent_mlir_dce"]),
                    reason="jax before 0.10.0 has no dce_sink(prevent_mlir_dce=): MLIR's "
                           "dead-code elimination drops the sink before any backend sees it")
def test_dce_sink_produces_nothing():
    # lax.dce_sink keeps a value alive through MLIR's dead-code elimination
    # as a custom_call with no results; the function's result is unchanged.
    x = np.arange(4, dtype=np.float32)

    def f(x):
        jax.lax.dce_sink(x * 2, prevent_mlir_dce=True)
        return x + 1

    assert "dce_sink" in jax.jit(f).lower(x).as_text()
    assert_same(f, x)
