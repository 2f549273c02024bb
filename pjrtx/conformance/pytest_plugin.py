"""pytest plugin loaded into each upstream test file's process.

It makes pjrtx the device under test the way JAX's harness reads it
(jax_test_dut through jax.config), and streams one JSON line per event to
--pjrtx-events so the parent runner sees which test was running when a
process crashed or hung.
"""
from __future__ import annotations

import fnmatch
import importlib.abc
import importlib.util
import json
import os
import re
import sys
import zlib
from pathlib import Path

import pytest

_events = None


def pytest_addoption(parser):
    g = parser.getgroup("pjrtx")
    g.addoption("--pjrtx-events", default=None, help="JSON-lines event file")
    g.addoption("--pjrtx-deselect", default=None, help="file of test ids not to run")
    g.addoption("--pjrtx-shard", default=None, help="i/n: run the ids that hash to shard i")


def _emit(**event):
    if _events is not None:
        _events.write(json.dumps(event) + "\n")
        _events.flush()  # the parent may read it after we crash


def pytest_configure(config):
    global _events
    path = config.getoption("--pjrtx-events")
    if path:
        _events = open(path, "a", buffering=1)
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


def pytest_collection_modifyitems(config, items):
    skip = set()
    path = config.getoption("--pjrtx-deselect")
    if path and os.path.exists(path):
        with open(path) as f:
            skip = {line.strip() for line in f if line.strip()}
    shard = config.getoption("--pjrtx-shard")
    keep, drop = [], []
    for item in items:
        in_shard = True
        if shard:
            i, n = (int(x) for x in shard.split("/"))
            in_shard = zlib.crc32(item.nodeid.encode()) % n == i
        (keep if in_shard and item.nodeid not in skip else drop).append(item)
    items[:] = keep
    if drop:
        config.hook.pytest_deselected(items=drop)
    _emit(event="collected", ids=[it.nodeid for it in keep])


def pytest_collectreport(report):
    # A module that fails to import (or a class that fails to build its
    # parameters) still lets collection finish with the other items; without
    # this the file would read 0 passed / 0 failed.
    if report.failed:
        _emit(event="collect_error", id=report.nodeid or "<collection>",
              error=_first_line(getattr(report, "longreprtext", "") or str(report.longrepr)),
              text=str(getattr(report, "longreprtext", ""))[-2000:])


def pytest_runtest_logstart(nodeid, location):
    _emit(event="start", id=nodeid)


def _first_line(text: str) -> str:
    for line in str(text).splitlines():
        if line.strip():
            return line.strip()[:500]
    return ""


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
        report.pjrtx_error = _first_line(call.excinfo.exconly())
        missing = _NO_BACKEND.match(report.pjrtx_error)
        if missing and call.when == "call":
            backend = missing.group("a") or missing.group("b")
            report.outcome = "skipped"
            report.longrepr = (str(item.path), item.location[1] or 0,
                               f"Skipped: hardware: the test asks for JAX's {backend} backend "
                               f"(jax.devices({backend!r})) and this machine has none")


def pytest_runtest_logreport(report):
    state = _state.setdefault(report.nodeid, {"outcome": "passed", "duration": 0.0, "error": ""})
    state["duration"] += report.duration
    if report.skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        state.update(outcome="skipped", error=_first_line(reason).removeprefix("Skipped: "))
    elif report.failed and state["outcome"] != "failed":
        state.update(outcome="failed", error=getattr(report, "pjrtx_error", "") or
                     _first_line(getattr(report, "longreprtext", "")))
    if report.when == "teardown":
        _emit(event="end", id=report.nodeid, **_state.pop(report.nodeid))


_state: dict = {}
