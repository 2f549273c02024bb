"""Test setup: both the pjrtx backend (under test) and XLA:CPU (the oracle)
are live in one process; pjrtx is the default backend."""
import os

os.environ.setdefault("JAX_PLATFORMS", "pjrtx,cpu")

import jax  # noqa: E402
import pytest  # noqa: E402


from pjrtx import jax_plugin  # noqa: E402

try:
    jax_plugin.ensure_registered()
except ImportError as e:
    # No compiled extension in this checkout: the pure-Python frontend tests
    # (test_partition.py runs JAX on XLA:CPU in subprocesses) still run; every
    # test that needs the pjrtx device fails on its own.
    if "no compiled extension" not in str(e):
        raise
    NO_EXTENSION = str(e)


@pytest.fixture(scope="session")
def pjrtx_device():
    return jax.devices("pjrtx")[0]


@pytest.fixture(scope="session")
def cpu_device():
    return jax.devices("cpu")[0]


@pytest.fixture
def mlx_rules_forced_off():
    """Lower as on a device where MLX's argmax and cummax/cummin do not give
    XLA's answers for NaNs (pjrtx probes that per device, mlx_rules.h): the
    programs then take the paths that do not rely on them."""
    from pjrtx import _pjrtx

    def fresh():  # programs lowered before must not be reused
        jax.clear_caches()
        _pjrtx.clear_compile_cache()

    _pjrtx._force_mlx_rules(False)
    fresh()
    try:
        yield
    finally:
        _pjrtx._force_mlx_rules(None)
        fresh()
