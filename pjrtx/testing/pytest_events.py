"""pytest plugin that streams one JSON line per test event to --pjrtx-events
(collected ids, collection errors, test start, test end with outcome,
duration and first error line), so a parent process sees which test was
running when pytest crashed or hung (engine.run_pytest). Used by the
conformance runner and by `python -m pjrtx compare`; it knows nothing of JAX.

Under pytest-xdist the controller writes start and end (it hears of both
from the workers, and reports a crashed worker's test as failed), and the
workers, which collect, write the collected ids.
"""
from __future__ import annotations

import json
import os
import re
import zlib

import pytest

_fd = None
_worker = False
_pending: list = []  # events before pytest_configure opened the file


def pytest_addoption(parser):
    g = parser.getgroup("pjrtx")
    g.addoption("--pjrtx-events", default=None, help="JSON-lines event file")
    g.addoption("--pjrtx-deselect", default=None, help="file of test ids not to run")
    g.addoption("--pjrtx-shard", default=None, help="i/n: run the ids that hash to shard i")


def emit(**event):
    """One line in one write(2) with O_APPEND: xdist workers and the
    controller share the file, and the parent may read it after we crash."""
    if _fd is None:
        _pending.append(event)
        return
    os.write(_fd, (json.dumps(event) + "\n").encode())


def pytest_configure(config):
    global _fd, _worker
    _worker = hasattr(config, "workerinput")
    path = config.getoption("--pjrtx-events")
    if path:
        _fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        while _pending:
            emit(**_pending.pop(0))


# Last: pytest's own -k / -m deselection (and any suite's) runs first, so
# "collected" lists only what will run; listed tests without a result count
# as lost to a crash.
@pytest.hookimpl(trylast=True)
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
    emit(event="collected", ids=[it.nodeid for it in keep])


def pytest_collectreport(report):
    # A module that fails to import (or a class that fails to build its
    # parameters) still lets collection finish with the other items; without
    # this the file would read 0 passed / 0 failed.
    if report.skipped:
        # pytest.skip(allow_module_level=True): the module's tests are never
        # collected, so no test reports them.
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        emit(event="collect_skip", id=report.nodeid,
             reason=first_line(reason).removeprefix("Skipped: "))
    if report.failed:
        emit(event="collect_error", id=report.nodeid or "<collection>",
             error=first_line(getattr(report, "longreprtext", "") or str(report.longrepr)),
             text=str(getattr(report, "longreprtext", ""))[-2000:])


def pytest_runtest_logstart(nodeid, location):
    if not _worker:
        emit(event="start", id=nodeid)


def first_line(text: str) -> str:
    for line in str(text).splitlines():
        if line.strip():
            return line.strip()[:500]
    return ""


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if call.excinfo is not None and report.failed:
        # The exception's own line ("AssertionError: ..."), not the
        # traceback's first; a plain attribute, so xdist carries it across.
        report.pjrtx_error = first_line(call.excinfo.exconly())


_state: dict = {}
# xdist starts a failure's text with the worker's platform line.
_XDIST_HEADER = re.compile(r"^\[gw\d+\] .*\n", re.M)


def pytest_runtest_logreport(report):
    if _worker:
        return
    state = _state.setdefault(report.nodeid, {"outcome": "passed", "duration": 0.0, "error": ""})
    state["duration"] += report.duration
    if report.skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        state.update(outcome="skipped", error=first_line(reason).removeprefix("Skipped: "))
    elif report.failed and state["outcome"] != "failed":
        state.update(outcome="failed", error=getattr(report, "pjrtx_error", "") or
                     first_line(_XDIST_HEADER.sub("", getattr(report, "longreprtext", ""))))
    # xdist reports a test whose worker died as one failed report with
    # when="???" ("worker 'gw0' crashed while running ..."), no teardown.
    if report.when not in ("setup", "call"):
        emit(event="end", id=report.nodeid, **_state.pop(report.nodeid))
