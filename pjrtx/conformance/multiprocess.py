"""Upstream's tests/multiprocess/ files under the conformance runner
(runner.run_unit hands them here).

Each such file is its own launcher (jax._src.test_multiprocess):
``python FILE --num_processes=N`` starts N workers that join
jax.distributed on localhost and run the file's absltest cases, each worker
writing its log to $TEST_UNDECLARED_OUTPUTS_DIR/jax_{i}_stderr.log. The
runner starts that launcher with pjrtx as the device under test (a
sitecustomize.py on the workers' path registers the plugin and tags the
device as the pytest plugin does), reads every worker's log and merges:
a test passed when it passed in every process, failed (with the first
process's error) when it failed in any, and crashed or timed out when a
worker ended or stopped before reporting it.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from pjrtx.testing.engine import CRASH, FAILED, PASSED, SKIPPED, TIMEOUT, Result, child_env

# Processes and devices per process: 8 devices in all, what upstream's
# multi-host array tests ask for ("requires 8 global devices").
NUM_PROCESSES = 2
DEVICES_PER_PROCESS = 4

_BOOT = '''\
import os
if os.environ.get("PJRTX_CONFORMANCE_MP") == "1":
    from pjrtx.conformance.multiprocess import boot_worker
    boot_worker()
'''

# One multi-process file at a time: upstream's launcher takes JAX's
# coordinator port from portpicker where installed, else always 9876.
_ONE_AT_A_TIME = threading.Lock()

# "[  SKIPPED ] Class.test_name (parameters) - reason"
_LINE = re.compile(r"^\[ *(RUN|OK|FAILED|SKIPPED) *\] (\w+)\.(\w+)(?: \(.*?\))?(?: - (.*))?$")
_HEADER = re.compile(r"^(ERROR|FAIL): (\w+) \(__main__\.(\w+)")


def is_multiprocess(file: str) -> bool:
    return file.replace(os.sep, "/").startswith("multiprocess/")


def boot_worker() -> None:
    """In each worker (and the launcher) at start-up: pjrtx registered, and
    once the test file imports JAX's test_util, the device under test set
    and tagged as the pytest plugin does for the other files. (Importing
    test_util here, before the file's absl flags are parsed, would define
    JAX's flags twice.)"""
    import importlib.abc
    import importlib.util

    from pjrtx import jax_plugin

    jax_plugin.ensure_registered()

    def configure():
        import jax

        jax.config.update("jax_test_dut", os.environ.get("PJRTX_CONFORMANCE_DUT", "pjrtx"))
        if os.environ.get("PJRTX_CONFORMANCE_STRICT_TAGS") != "1":
            # the device class tag as pytest_plugin._add_device_class_tag
            # gives it (without its shape_poly harness patch, whose import
            # would define JAX's absl flags before the file's main does)
            import json

            from jax._src import test_util as jtu

            from pjrtx.conformance import pytest_plugin as pp

            pp._base_tags.update({"pjrtx", pp.device_class()})
            pp._tag_rules.extend(json.loads(os.environ.get("PJRTX_CONFORMANCE_EXTRA_TAGS") or "[]"))
            pp._tags.update(pp.tags_for(""))
            jtu._get_device_tags = lambda: set(pp._tags)

    class AfterTestUtil(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name != "jax._src.test_util":
                return None
            sys.meta_path.remove(self)
            spec = importlib.util.find_spec(name)
            loader = spec.loader
            run = loader.exec_module

            def exec_module(module):
                run(module)
                configure()

            loader.exec_module = exec_module
            return spec

    sys.meta_path.insert(0, AfterTestUtil())


def parse_worker_log(text: str) -> tuple[dict, dict, bool]:
    """-> ({test: (outcome, reason)}, {test: first error line}, finished);
    test is "Class::method"; outcome passed/failed/skipped, or "running"
    for a test that started and never reported."""
    results, errors = {}, {}
    for line in text.splitlines():
        m = _LINE.match(line.strip())
        if m:
            kind, cls, meth, reason = m.groups()
            test = f"{cls}::{meth}"
            results[test] = {"RUN": ("running", ""), "OK": ("passed", ""),
                             "FAILED": ("failed", ""), "SKIPPED": ("skipped", reason or "")}[kind]
    # The traceback sections after the run: "ERROR: test (__main__.Class...)"
    # then the traceback; its last exception line is the message.
    current = None
    for line in text.splitlines():
        h = _HEADER.match(line)
        if h:
            current = f"{h.group(3)}::{h.group(2)}"
            continue
        if current and re.match(r"^[\w.]+(Error|Exception|Exit)\b.*:", line):
            errors[current] = line.strip()[:300]
        if line.startswith("-" * 20) and current and current in errors:
            current = None
    finished = bool(re.search(r"^Ran \d+ tests? in", text, re.M))
    return results, errors, finished


def run_unit(opts, file: str) -> list:
    with _ONE_AT_A_TIME:
        return _run_unit(opts, file)


def _run_unit(opts, file: str) -> list:
    with tempfile.TemporaryDirectory(prefix="pjrtx-mp-") as tmp:
        boot = Path(tmp) / "boot"
        boot.mkdir()
        (boot / "sitecustomize.py").write_text(_BOOT)
        logs = Path(tmp) / "logs"
        logs.mkdir()
        mp_opts = _devices(opts, DEVICES_PER_PROCESS)
        env = child_env(mp_opts, file)
        env["PJRTX_CONFORMANCE_MP"] = "1"
        env["TEST_UNDECLARED_OUTPUTS_DIR"] = str(logs)
        # the pjrtx being tested, for the workers' sitecustomize
        env["PYTHONPATH"] = os.pathsep.join(
            [str(boot), str(Path(__file__).resolve().parents[2]),
             env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        cmd = [sys.executable, str(opts.jax_tests / file), f"--num_processes={NUM_PROCESSES}"]
        timed_out = False
        try:
            subprocess.run(cmd, cwd=str(opts.jax_tests / "multiprocess"), env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           timeout=opts.timeout * 4, start_new_session=True)
        except subprocess.TimeoutExpired:
            timed_out = True
        per_worker = []
        for i in range(NUM_PROCESSES):
            path = logs / f"jax_{i}_stderr.log"
            text = path.read_text(errors="replace") if path.exists() else ""
            per_worker.append(parse_worker_log(text))
    tests = sorted({t for res, _, _ in per_worker for t in res})
    out = []
    for t in tests:
        outcomes = [w[0].get(t, ("missing", "")) for w in per_worker]
        kinds = [o for o, _ in outcomes]
        error = ""
        if all(k == "passed" for k in kinds):
            outcome = PASSED
        elif all(k == "skipped" for k in kinds):
            outcome, error = SKIPPED, outcomes[0][1]
        elif "failed" in kinds:
            outcome = FAILED
            for i, k in enumerate(kinds):
                if k == "failed":
                    error = f"process {i}: " + per_worker[i][1].get(t, "failed")
                    break
        elif "running" in kinds or "missing" in kinds:
            outcome = TIMEOUT if timed_out else CRASH
            who = [i for i, k in enumerate(kinds) if k in ("running", "missing")]
            error = (f"process {who[0]} {'timed out' if timed_out else 'ended'} before the "
                     f"test reported")
        else:  # passed in some, skipped in others
            outcome, error = SKIPPED, next(r for o, r in outcomes if o == "skipped")
        out.append(Result(id=f"{file}::{t}", file=file, outcome=outcome, error=error))
    if not out:
        out.append(Result(id=f"{file}::<launch>", file=file,
                          outcome=TIMEOUT if timed_out else CRASH,
                          error="no worker reported a test (see the file's launcher)"))
    return out


def _devices(opts, n):
    import dataclasses

    return dataclasses.replace(opts, devices=n)
