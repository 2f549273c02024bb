"""pytest plugin loaded into each upstream test file's process.

It makes pjrtx the device under test the way JAX's harness reads it
(jax_test_dut through jax.config). The runner loads
pjrtx/testing/pytest_events.py beside it, which streams one JSON line per
event to --pjrtx-events so the parent runner sees which test was running
when a process crashed or hung.
"""
from __future__ import annotations

import fnmatch
import importlib.abc
import importlib.util
import json
import os
import re
import sys
from pathlib import Path

import pytest



def first_line(text: str) -> str:
    # Imported when used, for the reason given in pjrtx/compare/pytest_plugin.py.
    from pjrtx.testing import pytest_events

    return pytest_events.first_line(text)


def pytest_configure(config):
    # The tests folder's parent is the upstream checkout (git clone of jax).
    sys.meta_path.append(CheckoutTestUtils(Path(config.rootpath).parent))
    import jax

    from pjrtx import jax_plugin

    jax_plugin.ensure_registered()
    # JAX's test_util.device_under_test() reads this flag (defined in
    # test_util); the environment variable alone is not enough.
    import jax._src.test_util  # noqa: F401

    dut = os.environ.get("PJRTX_CONFORMANCE_DUT", "pjrtx")
    jax.config.update("jax_test_dut", dut)
    if dut == "pjrtx" and os.environ.get("PJRTX_CONFORMANCE_STRICT_TAGS") != "1":
        _add_device_class_tag()


class CheckoutTestUtils(importlib.abc.MetaPathFinder):
    """Imports jax._src.*test_util modules that the jax wheel does not ship
    (jax-v0.10.2 leaves out hypothesis_test_util, which state_test.py and
    hypothesis_test_util_test.py import) from the upstream checkout's own
    sources. It sits last on sys.meta_path, so a module the installed jax has
    always comes from the wheel; only test helpers are taken, never the
    checkout's library code."""

    def __init__(self, checkout: Path):
        self.src = checkout / "jax" / "_src"

    def find_spec(self, name, path=None, target=None):
        prefix, _, leaf = name.rpartition(".")
        if prefix != "jax._src" or not leaf.endswith("test_util"):
            return None
        file = self.src / f"{leaf}.py"
        return importlib.util.spec_from_file_location(name, file) if file.is_file() else None


def device_class() -> str:
    """'cpu' when pjrtx runs on MLX's CPU device, 'gpu' on Metal or CUDA."""
    from pjrtx import _pjrtx

    return "cpu" if _pjrtx.device_backend(os.environ.get("PJRTX_DEVICE", "auto")) == "CPU" else "gpu"


# The device tags of the test about to run. jtu._get_device_tags and the
# harness filter read this one set; pytest_runtest_setup refills it.
_tags: set = set()
_base_tags: set = set()
_tag_rules: list = []


def _add_device_class_tag():
    # Upstream restricts hundreds of tests with jtu.run_on_devices("cpu") or
    # ("cpu", "gpu") for speed or for what XLA supports, not because they
    # test XLA internals. Tagging the device with its MLX class as well as
    # "pjrtx" runs them (and honours skip_on_devices("cpu") the same way);
    # device_under_test() stays "pjrtx". --strict-tags turns this off.
    from jax._src import test_util as jtu

    # selection.txt's `tag` lines, each with its reason: [pattern, [tag or
    # -tag, ...]] for this file, pattern "*" for every test in it.
    _base_tags.update({"pjrtx", device_class()})
    _tag_rules.extend(json.loads(os.environ.get("PJRTX_CONFORMANCE_EXTRA_TAGS") or "[]"))
    _tags.update(tags_for(""))
    jtu._get_device_tags = lambda: set(_tags)
    _harness_limitations_follow_tags(_tags)


def tags_for(test: str) -> set:
    """The device tags for test ("Class::method"; "" for the file's own,
    which collection-time filters see): the base tags, then each matching
    rule in selection.txt's order adds its tags and removes its -tags."""
    tags = set(_base_tags)
    for pattern, names in _tag_rules:
        if pattern == "*" or (test and fnmatch.fnmatchcase(test, pattern)):
            for name in names:
                if name.startswith("-"):
                    tags.discard(name[1:])
                else:
                    tags.add(name)
    return tags


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    # jtu.run_on_devices / skip_on_devices and test_device_matches read the
    # tags when the test runs, so a rule for one test applies to it alone.
    if any(pattern != "*" for pattern, _ in _tag_rules):
        _tags.clear()
        _tags.update(tags_for(item.nodeid.split("::", 1)[-1]))


def _harness_limitations_follow_tags(tags):
    # test_harnesses (shape_poly's primitive harnesses) drops a harness that
    # JAX marks unimplemented on the device under test by name, e.g. bf16
    # eig/svd/qr/lu on ("cpu", "gpu"): XLA's LAPACK kernels have no bf16,
    # and neither do pjrtx's. With device_under_test() "pjrtx" those names
    # never match, so the limitation must follow the tags as run_on_devices
    # does: a harness runs only if no tag of the device is limited.
    try:
        from jax._src.internal_test_util import test_harnesses as th
    except ImportError:
        return
    plain = th.Harness.filter

    def tagged_filter(self, device_under_test, **kwargs):
        if device_under_test != "pjrtx":
            return plain(self, device_under_test, **kwargs)
        return all(plain(self, tag, **kwargs) for tag in sorted(tags))

    th.Harness.filter = tagged_filter


# A test that asks JAX for an accelerator backend by name (jax.devices("gpu"))
# on a machine without one fails with these messages. Upstream skips such
# cases where it expects no GPU (`jax.default_backend() == "cpu"`), a check
# pjrtx, the default backend, does not meet; what is missing is hardware, so
# the test is reported as a skip that says so, not as a pjrtx failure.
_NO_BACKEND = re.compile(
    r"^RuntimeError: (Unknown backend: '(?P<a>gpu|cuda|rocm|tpu)' requested, but no platforms"
    r"|Backend '(?P<b>gpu|cuda|rocm|tpu)' failed to initialize)")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if call.excinfo is not None and report.failed:
        missing = _NO_BACKEND.match(first_line(call.excinfo.exconly()))
        if missing and call.when == "call":
            backend = missing.group("a") or missing.group("b")
            report.outcome = "skipped"
            report.longrepr = (str(item.path), item.location[1] or 0,
                               f"Skipped: hardware: the test asks for JAX's {backend} backend "
                               f"(jax.devices({backend!r})) and this machine has none")
