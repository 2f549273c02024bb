"""Loaded (-p) into the pytest processes of `python -m pjrtx compare`, beside
pjrtx.testing.pytest_events.

On the pjrtx side (PJRTX_COMPARE_SIDE=pjrtx) it undoes a suite's pin of JAX
to the CPU, which would otherwise make the "pjrtx" run a second XLA:CPU run:
numpyro's test/conftest.py, for one, calls
jax.config.update("jax_platform_name", "cpu"). Such a call (to
jax_platform_name or jax_platforms, first platform "cpu") is skipped, and a
JAX_PLATFORMS / JAX_PLATFORM_NAME=cpu that the suite put into os.environ is
removed before JAX reads it; each is reported as a "pin" event with where
it came from. It must be in place before conftest.py files import jax, and
must not import jax itself (a conftest may set JAX_* variables first), so it
watches for jax._src.config to be imported.

On both sides it reports the default backend the tests ran on.
"""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys

import pytest


def emit(**fields) -> None:
    # Imported when first used: pytest imports pytest_events itself (-p, after
    # this plugin), and a module imported before that cannot be
    # assertion-rewritten: a PytestAssertRewriteWarning, which a suite with
    # filterwarnings = error (numpyro's setup.cfg) turns into a failed start.
    from pjrtx.testing import pytest_events

    pytest_events.emit(**fields)


SIDE = os.environ.get("PJRTX_COMPARE_SIDE", "")
PIN_FLAGS = ("jax_platform_name", "jax_platforms")
PIN_VARS = ("JAX_PLATFORMS", "JAX_PLATFORM_NAME")


def pins_cpu(value) -> bool:
    """A value of jax_platforms / jax_platform_name that makes the CPU the
    default backend: "cpu", or a list whose first platform is cpu."""
    return isinstance(value, str) and value.split(",")[0].strip().lower() == "cpu"


def _drop_env_pins():
    # The runner removed these variables from the pjrtx run's environment,
    # so one that is here now was set by the suite.
    for var in PIN_VARS:
        if pins_cpu(os.environ.get(var)):
            emit(event="pin", kind="env", name=var, value=os.environ.pop(var))


def _guard_config(module):
    cls = type(module.config)
    original = cls.update
    if getattr(original, "_pjrtx_compare", False):
        return

    def update(self, name, val, *args, **kwargs):
        if name in PIN_FLAGS and pins_cpu(val):
            caller = sys._getframe(1)
            emit(event="pin", kind="config", name=name, value=val,
                 file=caller.f_code.co_filename, line=caller.f_lineno)
            return None
        return original(self, name, val, *args, **kwargs)

    update._pjrtx_compare = True
    cls.update = update


class _WatchJaxConfig(importlib.abc.MetaPathFinder):
    """Runs _drop_env_pins just before jax._src.config executes (it reads
    JAX_PLATFORMS then) and _guard_config just after."""

    def find_spec(self, name, path=None, target=None):
        if name != "jax._src.config":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def run(module):
            _drop_env_pins()
            exec_module(module)
            _guard_config(module)

        spec.loader.exec_module = run
        return spec


if SIDE == "pjrtx":
    if "jax._src.config" in sys.modules:  # another plugin imported jax before us
        _guard_config(sys.modules["jax._src.config"])
    else:
        sys.meta_path.insert(0, _WatchJaxConfig())


def pytest_configure(config):
    emit(event="session", rootdir=str(config.rootpath),
         inifile=str(config.inipath) if config.inipath else "")


_backend_reported = False


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item):
    # After the first test that imported JAX: the backend it ran on.
    global _backend_reported
    if _backend_reported or "jax" not in sys.modules:
        return
    _backend_reported = True
    try:
        import jax

        emit(event="backend", side=SIDE, backend=jax.default_backend(),
             device=str(jax.devices()[0].device_kind))
    except Exception as e:  # reported, never fatal to the test run
        emit(event="backend", side=SIDE, backend="", device=f"unavailable: {e}")
