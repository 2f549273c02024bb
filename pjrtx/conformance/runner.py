"""Runs upstream JAX test files on pjrtx, one pytest process per file (or
per shard of a file), files in parallel.

A test that kills its process is recorded as CRASH and a test that runs past
--timeout as TIMEOUT; the file's run then resumes after it, so one bad test
costs one test, not the file.
"""
from __future__ import annotations

import dataclasses
import fnmatch
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
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
    id: str
    file: str
    outcome: str
    duration: float = 0.0
    error: str = ""


@dataclasses.dataclass
class Options:
    jax_tests: Path
    files: list[str]
    jobs: int = 1
    shards: int = 1
    # file -> seconds of a previous run (third_party/jax_upstream/durations.txt):
    # the longest units start first, and a file longer than split_above
    # seconds is split into shards of about that length, so -j 2 keeps both
    # workers busy to the end.
    durations: dict = dataclasses.field(default_factory=dict)
    split_above: float = 300.0
    x64: bool = False
    # Devices of the device under test (PJRTX_DEVICES) and of the XLA:CPU
    # reference (--xla_force_host_platform_device_count): upstream's
    # multi-device tests skip "for want of devices" with one.
    devices: int = 8
    timeout: float = 300.0
    platform: str = "pjrtx"
    strict_tags: bool = False
    # file -> [(test pattern, [tag or -tag, ...])] (selection.txt `tag`
    # lines; not with strict_tags)
    file_tags: dict = dataclasses.field(default_factory=dict)
    extra_pytest_args: tuple = ()
    log: object = sys.stderr


def resolve_files(jax_tests: Path, patterns: list[str]) -> list[str]:
    """Patterns are file names or globs relative to the tests folder."""
    found = []
    for pat in patterns:
        matches = sorted(str(p.relative_to(jax_tests)) for p in jax_tests.rglob("*.py")
                         if fnmatch.fnmatch(str(p.relative_to(jax_tests)), pat))
        if not matches:
            raise FileNotFoundError(f"pjrtx conformance: no test file matches {pat!r} in {jax_tests}")
        found.extend(m for m in matches if m not in found)
    return found


def _child_env(opts: Options, file: str = "") -> dict:
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


def run_unit(opts: Options, file: str, shard: tuple[int, int] | None) -> list[Result]:
    """Runs one file (or one shard of it) until every test has an outcome."""
    from pjrtx.conformance import multiprocess

    if multiprocess.is_multiprocess(file):  # its own launcher of several processes
        return multiprocess.run_unit(opts, file)
    with tempfile.TemporaryDirectory(prefix="pjrtx-conf-") as tmp:
        ini = Path(tmp) / "pytest.ini"
        ini.write_text("[pytest]\n")
        # -s: upstream's jtu.capture_stdout redirects file descriptor 1 and
        # reads what print() wrote there; pytest's own capture would take
        # sys.stdout first and the test would see nothing (it fails that
        # way on XLA:CPU too). Output goes to the pipe run_pytest reads.
        cmd = [sys.executable, "-m", "pytest", file, "-q", "-s",
               "-p", "pjrtx.conformance.pytest_plugin", "-p", "no:cacheprovider",
               "-c", str(ini), "--rootdir", str(opts.jax_tests),
               "--confcutdir", str(opts.jax_tests), *opts.extra_pytest_args]
        if shard:
            cmd.append(f"--pjrtx-shard={shard[0]}/{shard[1]}")
        run = run_pytest(PytestRun(cmd, opts.jax_tests, _child_env(opts, file), file=file,
                                   timeout=opts.timeout, log=opts.log))
    return run.results


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
            cmd = [*run.cmd, "-p", "pjrtx.conformance.pytest_events",
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


def plan_units(opts: Options) -> list[tuple[str, tuple[int, int] | None]]:
    """(file, shard) units, longest expected first."""
    units, expect = [], {}
    for f in opts.files:
        n = opts.shards
        est = float(opts.durations.get(f, 60.0))
        if n <= 1 and opts.split_above > 0 and est > opts.split_above:
            n = min(8, int(-(-est // opts.split_above)))
        for i in range(n):
            unit = (f, (i, n) if n > 1 else None)
            units.append(unit)
            expect[unit] = est / n
    return sorted(units, key=lambda u: -expect[u])


def read_durations(path: Path) -> dict:
    """`file seconds` lines (# comments) -> {file: seconds}."""
    out = {}
    if path.exists():
        for line in path.read_text().splitlines():
            parts = line.split("#", 1)[0].split()
            if len(parts) == 2:
                out[parts[0]] = float(parts[1])
    return out


def run(opts: Options, file_seconds: dict | None = None) -> list[Result]:
    """All results; file_seconds, if given, gets each file's wall time
    (summed over its shards), the input of the next run's durations."""
    units = plan_units(opts)
    all_results: list[Result] = []
    wall: dict = {}
    lock = threading.Lock()

    def one(unit):
        t0 = time.monotonic()
        res = run_unit(opts, *unit)
        with lock:
            all_results.extend(res)
            n = {k: sum(r.outcome == k for r in res) for k in OUTCOMES}
            shard = f" shard {unit[1][0]}/{unit[1][1]}" if unit[1] else ""
            wall[unit] = time.monotonic() - t0
            print(f"[conformance] {unit[0]}{shard}: {n[PASSED]} passed, {n[FAILED]} failed, "
                  f"{n[ERROR]} errors, "
                  f"{n[CRASH]} crashed, {n[TIMEOUT]} timed out, {n[SKIPPED]} skipped "
                  f"({time.monotonic() - t0:.0f} s)", file=opts.log, flush=True)
        return res

    with ThreadPoolExecutor(max_workers=max(1, opts.jobs)) as pool:
        list(pool.map(one, units))
    all_results.sort(key=lambda r: (r.file, r.id))
    if file_seconds is not None:
        for (f, _), sec in wall.items():
            file_seconds[f] = file_seconds.get(f, 0.0) + sec
    return all_results
