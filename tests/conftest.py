"""Test setup: both the pjrtx backend (under test) and XLA:CPU (the oracle)
are live in one process; pjrtx is the default backend."""
import os

os.environ.setdefault("JAX_PLATFORMS", "pjrtx,cpu")

import jax  # noqa: E402
import pytest  # noqa: E402


def _ensure_plugin():
    # Installed packages are discovered through the jax_plugins entry point;
    # a source checkout on PYTHONPATH (development) registers by hand.
    from jax._src import xla_bridge

    if "pjrtx" not in xla_bridge._backend_factories:
        from pjrtx import jax_plugin

        jax_plugin.initialize()


_ensure_plugin()


@pytest.fixture(scope="session")
def pjrtx_device():
    return jax.devices("pjrtx")[0]


@pytest.fixture(scope="session")
def cpu_device():
    return jax.devices("cpu")[0]
