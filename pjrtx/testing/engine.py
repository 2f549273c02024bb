"""The pytest engine under `python -m pjrtx conformance` and `python -m
pjrtx compare`: run_pytest runs one pytest selection in a child process,
with pytest_events.py streaming per-test events, until every collected test
has an outcome (a Result). A test that kills its process is recorded as
CRASH, one that runs past the timeout as TIMEOUT, and pytest starts again
without the tests that have one. child_env is the environment of a child
process that runs JAX tests on the device under test."""
from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

PASSED, FAILED, ERROR, CRASH, TIMEOUT, SKIPPED = (
    "passed", "failed", "error", "crash", "timeout", "skipped")
# ERROR: a file (or class) that failed to import or collect. It counts as
# failing, one per collection error, so a file that cannot load never reads
# as 0 passed / 0 failed.
FAILING = (FAILED, ERROR, CRASH, TIMEOUT)
OUTCOMES = (PASSED, FAILED, ERROR, CRASH, TIMEOUT, SKIPPED)


@dataclasses.dataclass
class Result:
    """One test's outcome (one of OUTCOMES) in a run."""
    id: str
    file: str
    outcome: str
    duration: float = 0.0
    error: str = ""
    # The same test's outcome on XLA:CPU when a failing test was run there
    # again (conformance --reference); "" when it was not.
    reference: str = ""


@dataclasses.dataclass
class PytestRun:
    """One pytest selection run to the end: cmd is the pytest command line;
    run_pytest adds the events plugin and its options."""
    cmd: list
    cwd: Path
    env: dict
    file: str = ""  # Result.file of every result ("": the test id's file)
    timeout: float = 300.0  # seconds one test may run before TIMEOUT
    deadline: float | None = None  # time.monotonic() at which the whole run stops
    log: object = sys.stderr
    tag: str = "conformance"  # the prefix of the lines on log
    output: Path | None = None  # a file to append pytest's output to
    # filled by run_pytest:
    results: list = dataclasses.field(default_factory=list)
    collected: list = dataclasses.field(default_factory=list)
    events: list = dataclasses.field(default_factory=list)  # events of other kinds
    stopped: bool = False  # the deadline passed: tests in collected without a result did not run


# xdist's report for a test whose worker process died (dsession.py).
_XDIST_CRASH = re.compile(r"^worker '(\w+)' crashed while running")


def run_pytest(run: PytestRun) -> PytestRun:
    """Runs pytest until every collected test has an outcome: a test that
    kills its process is a CRASH, one that runs past run.timeout a TIMEOUT,
    and pytest starts again without the tests that have one."""
    results: dict[str, Result] = {}
    collected: dict[str, None] = {}

    def result(tid, outcome, duration=0.0, error=""):
        results[tid] = Result(tid, run.file or tid.split("::")[0], outcome, duration, error)

    with tempfile.TemporaryDirectory(prefix="pjrtx-run-") as tmp:
        tmp = Path(tmp)
        deselect = tmp / "deselect.txt"
        deselect.touch()
        attempt = 0
        while True:
            attempt += 1
            before = len(results)
            events_path = tmp / f"events{attempt}.jsonl"
            cmd = [*run.cmd, "-p", "pjrtx.testing.pytest_events",
                   f"--pjrtx-events={events_path}", f"--pjrtx-deselect={deselect}"]
            proc = subprocess.Popen(cmd, cwd=run.cwd, env=run.env, stdout=subprocess.PIPE,
                                    stderr=subprocess.STDOUT, start_new_session=True)
            output: list[bytes] = []
            reader = threading.Thread(target=lambda: output.extend(proc.stdout), daemon=True)
            reader.start()
            offset, seen_collection, xdist_crash, broken = 0, False, False, []
            running: dict[str, float] = {}  # test id -> when it started
            killed_for = ""  # "timeout" or "deadline"
            while True:
                done = proc.poll() is not None
                events, offset = _read_events(events_path, offset)
                for ev in events:
                    kind = ev["event"]
                    if kind == "collected":
                        seen_collection = True
                        collected.update(dict.fromkeys(ev["ids"]))
                    elif kind == "start":
                        running[ev["id"]] = time.monotonic()
                    elif kind == "collect_error":
                        broken.append(ev["id"])
                        result(ev["id"], ERROR, 0.0, f"collection error: {_error_line(ev)}")
                    elif kind == "end":
                        running.pop(ev["id"], None)
                        outcome, error = ev["outcome"], ev["error"]
                        m = _XDIST_CRASH.match(error)
                        if m and outcome == FAILED:
                            outcome, error = CRASH, f"process died (xdist worker {m.group(1)})"
                            xdist_crash = True
                        result(ev["id"], outcome, ev["duration"], error)
                    else:
                        run.events.append(ev)
                if done:
                    break
                now = time.monotonic()
                late = [t for t, t0 in running.items() if now - t0 > run.timeout]
                if late or (run.deadline is not None and now > run.deadline):
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                    killed_for = "timeout" if late else "deadline"
                    break
                time.sleep(0.2)
            reader.join(timeout=5)
            text = b"".join(output).decode(errors="replace")
            if run.output is not None:
                with open(run.output, "a") as f:
                    f.write(f"===== {' '.join(cmd)}\n{text}\n")
            now = time.monotonic()
            for tid, t0 in running.items():
                if killed_for == "deadline":
                    result(tid, TIMEOUT, now - t0, "no result when the run's total timeout ran out")
                elif killed_for == "timeout":
                    if now - t0 > run.timeout:
                        result(tid, TIMEOUT, run.timeout, f"no result after {run.timeout:.0f} s")
                    # (tests that ran beside it under xdist run again)
                else:
                    # The process died (or was killed) inside this test.
                    code = proc.returncode
                    sig = (f"signal {-code} ({signal.Signals(-code).name})" if code < 0
                           else f"exit code {code}")
                    lines = text.strip().splitlines()
                    # faulthandler's "Fatal Python error: Aborted" says more
                    # than the module list it prints last.
                    fatal = [l for l in lines if l.startswith("Fatal Python error")]
                    tail = (fatal or lines or [""])[-1]
                    result(tid, CRASH, now - t0, f"process died: {sig}; last output: {tail[:200]}")
                if tid in results:
                    r = results[tid]
                    print(f"[{run.tag}] {tid}: {r.outcome.upper()} ({r.error})", file=run.log)
            if not seen_collection and attempt == 1:
                # pytest itself failed before collecting (bad arguments, a
                # conftest that does not import): one error for the run.
                err = next((l for l in text.splitlines() if "Error" in l), text.strip()[-300:])
                label = run.file or "<pytest>"
                results.setdefault(label, Result(label, label, ERROR, 0.0,
                                                 f"collection error: {err[:300]}"))
                break
            remaining = [i for i in collected if i not in results]
            if killed_for == "deadline":
                run.stopped = bool(remaining)
                break
            died = killed_for or running or xdist_crash
            if not remaining or not died or len(results) == before:
                for i in remaining:
                    if broken:  # pytest stops before any test when collection fails
                        result(i, ERROR, 0.0, f"not run: pytest stopped at a collection "
                                              f"error ({broken[0]})")
                    else:  # finished without reporting them: treat as crash
                        result(i, CRASH, 0.0, "no result reported (process ended)")
                break
            with open(deselect, "a") as f:
                for i in results:
                    f.write(i + "\n")
    run.results = list(results.values())
    run.collected = list(collected)
    return run


def _read_events(path: Path, offset: int):
    """New complete JSON lines since offset -> (events, new offset)."""
    if not path.exists():
        return [], offset
    with open(path) as f:
        f.seek(offset)
        data = f.read()
    end = data.rfind("\n") + 1
    events = [json.loads(line) for line in data[:end].splitlines() if line.strip()]
    return events, offset + len(data[:end].encode())


def _error_line(ev: dict) -> str:
    """The most telling line of a collection error: the exception, not the
    first line of the traceback."""
    lines = [l.strip() for l in ev.get("text", "").splitlines() if l.strip()]
    exc = [l.removeprefix("E").strip() for l in lines if l.startswith("E ")]
    return (exc[-1] if exc else ev.get("error", ""))[:300]


def child_env(opts, file: str = "") -> dict:
    """The environment of a child process that runs JAX tests (of `file`)
    on the device under test: this process's, with what opts (a
    pjrtx.conformance.runner.Options: platform, devices, x64, strict_tags,
    file_tags) asks for."""
    env = dict(os.environ)
    # The device under test first; CPU stays available for tests that ask
    # for it explicitly as a reference.
    env["JAX_PLATFORMS"] = f"{opts.platform},cpu" if opts.platform != "cpu" else "cpu"
    env["PJRTX_CONFORMANCE_DUT"] = opts.platform
    if opts.devices > 1:
        env["PJRTX_DEVICES"] = str(opts.devices)
        flag = f"--xla_force_host_platform_device_count={opts.devices}"
        env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " " + flag).strip()
    if opts.x64:
        env["JAX_ENABLE_X64"] = "1"
    if opts.strict_tags:
        env["PJRTX_CONFORMANCE_STRICT_TAGS"] = "1"
    elif opts.file_tags.get(file):
        env["PJRTX_CONFORMANCE_EXTRA_TAGS"] = json.dumps(opts.file_tags[file])
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env
