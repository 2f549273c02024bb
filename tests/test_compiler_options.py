"""compiler_options (XLA DebugOptions overrides) on pjrtx: applied by none
of pjrtx's passes, but refused exactly where XLA:CPU refuses them, with
XLA's message (pjrtx/jax_plugin.py, _validate_compiler_options)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest


def f(x):
    return jnp.sqrt(x ** 2) + 1.0


def _error(device, options):
    try:
        jax.jit(f, device=device, compiler_options=options)(np.float32(1.5))
    except jax.errors.JaxRuntimeError as e:
        return str(e)
    return None


@pytest.mark.parametrize("options", [
    {"invalid_key": "invalid_value"},
    {"exec_time_compilation_effort": 0.0},  # misspelt exec_time_optimization_effort
    {"xla_embed_ir_in_executable": "invalid_value"},
    {"xla_cpu_enable_fast_math": 3.5},
], ids=["unknown", "misspelt", "bad_bool_string", "bad_bool_float"])
def test_refused_as_on_xla_cpu(pjrtx_device, cpu_device, options):
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # jit(device=...)
        want = _error(cpu_device, options)
        got = _error(pjrtx_device, options)
    assert want is not None, "XLA:CPU accepted the options: pick another bad option"
    assert got == want


@pytest.mark.parametrize("options", [
    {"xla_embed_ir_in_executable": True},
    {"xla_cpu_enable_fast_math": False},
    {"exec_time_optimization_effort": 0.5},
])
def test_valid_options_compile_and_change_nothing(pjrtx_device, options):
    x = jax.device_put(np.float32(-2.25), pjrtx_device)
    plain = jax.jit(f)(x)
    with_options = jax.jit(f, compiler_options=options)(x)
    assert with_options.devices() == {pjrtx_device}
    np.testing.assert_array_equal(np.asarray(with_options), np.asarray(plain))


def test_valid_then_invalid_still_refused(pjrtx_device):
    x = jax.device_put(np.float32(3.0), pjrtx_device)
    jax.jit(f, compiler_options={"xla_embed_ir_in_executable": False})(x)
    with pytest.raises(jax.errors.JaxRuntimeError, match="No such compile option: 'invalid_key'"):
        jax.jit(f, compiler_options={"invalid_key": "invalid_value"})(x)


def test_lowered_cost_analysis_is_xla_cpus(pjrtx_device, cpu_device):
    # JAX answers None for any PJRT plugin; flax's module summary counts
    # FLOPs with it. pjrtx gives XLA:CPU's cost model of the same HLO.
    import jax.numpy as jnp

    def dense(w, b, x):
        return jnp.tanh(x @ w + b).sum()

    shapes = [(784, 96), (96,), (4, 784)]
    costs = {}
    for name, dev in (("pjrtx", pjrtx_device), ("cpu", cpu_device)):
        args = [jax.device_put(np.ones(s, np.float32), dev) for s in shapes]
        costs[name] = jax.jit(dense).lower(*args).cost_analysis()
    assert costs["pjrtx"] is not None
    # 2*4*784*96 for the dot, then bias adds, tanh and the sum per element
    assert costs["pjrtx"]["flops"] >= 2 * 4 * 784 * 96
    assert costs["pjrtx"]["flops"] == costs["cpu"]["flops"]
    assert costs["pjrtx"]["transcendentals"] == costs["cpu"]["transcendentals"] == 4 * 96
