"""Test setup: both the pjrtx backend (under test) and XLA:CPU (the oracle)
are live in one process; pjrtx is the default backend."""
import os

os.environ.setdefault("JAX_PLATFORMS", "pjrtx,cpu")

import jax  # noqa: E402
import pytest  # noqa: E402


from pjrtx import jax_plugin  # noqa: E402

jax_plugin.ensure_registered()


@pytest.fixture(scope="session")
def pjrtx_device():
    return jax.devices("pjrtx")[0]


@pytest.fixture(scope="session")
def cpu_device():
    return jax.devices("cpu")[0]
