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
    results: dict[str, Result] = {}
    with tempfile.TemporaryDirectory(prefix="pjrtx-conf-") as tmp:
        tmp = Path(tmp)
        deselect = tmp / "deselect.txt"
        deselect.touch()
        ini = tmp / "pytest.ini"
        ini.write_text("[pytest]\n")
        attempt = 0
        while True:
            attempt += 1
            events_path = tmp / f"events{attempt}.jsonl"
            # -s: upstream's jtu.capture_stdout redirects file descriptor 1 and
            # reads what print() wrote there; pytest's own capture would take
            # sys.stdout first and the test would see nothing (it fails that
            # way on XLA:CPU too). Output goes to the pipe read below.
            cmd = [sys.executable, "-m", "pytest", file, "-q", "-s", "-p",
                   "pjrtx.conformance.pytest_plugin", "-p", "no:cacheprovider", "-c", str(ini), "--rootdir", str(opts.jax_tests),
                   "--confcutdir", str(opts.jax_tests), f"--pjrtx-events={events_path}",
                   f"--pjrtx-deselect={deselect}", *opts.extra_pytest_args]
            if shard:
                cmd.append(f"--pjrtx-shard={shard[0]}/{shard[1]}")
            proc = subprocess.Popen(cmd, cwd=opts.jax_tests, env=_child_env(opts, file),
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    start_new_session=True)
            output: list[bytes] = []
            reader = threading.Thread(target=lambda: output.extend(proc.stdout), daemon=True)
            reader.start()
            offset, current, started_at, collected = 0, None, 0.0, None
            timed_out = False
            while True:
                done = proc.poll() is not None
                events, offset = _read_events(events_path, offset)
                for ev in events:
                    if ev["event"] == "collected":
                        collected = ev["ids"]
                    elif ev["event"] == "start":
                        current, started_at = ev["id"], time.monotonic()
                    elif ev["event"] == "collect_error":
                        cid = ev["id"]
                        results[cid] = Result(cid, file, ERROR, 0.0,
                                              f"collection error: {_error_line(ev)}")
                    elif ev["event"] == "end":
                        results[ev["id"]] = Result(ev["id"], file, ev["outcome"], ev["duration"], ev["error"])
                        current = None
                if done:
                    break
                if current and time.monotonic() - started_at > opts.timeout:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                    timed_out = True
                    break
                time.sleep(0.2)
            reader.join(timeout=5)
            if current is not None:
                # The process died (or was killed) inside `current`.
                if timed_out:
                    res = Result(current, file, TIMEOUT, opts.timeout, f"no result after {opts.timeout:.0f} s")
                else:
                    code = proc.returncode
                    sig = f"signal {-code} ({signal.Signals(-code).name})" if code < 0 else f"exit code {code}"
                    tail = b"".join(output).decode(errors="replace").strip().splitlines()[-1:] or [""]
                    res = Result(current, file, CRASH, time.monotonic() - started_at,
                                 f"process died: {sig}; last output: {tail[0][:200]}")
                results[current] = res
                print(f"[conformance] {current}: {res.outcome.upper()} ({res.error})", file=opts.log)
            if collected is None:
                # pytest itself failed before collecting (bad arguments, a
                # conftest that does not import): one error for the file.
                text = b"".join(output).decode(errors="replace")
                err = next((l for l in text.splitlines() if "Error" in l), text.strip()[-300:])
                results.setdefault(file, Result(file, file, ERROR, 0.0, f"collection error: {err[:300]}"))
                break
            remaining = [i for i in collected if i not in results]
            if not remaining or (current is None and not timed_out):
                for i in remaining:  # finished without reporting them: treat as crash
                    results[i] = Result(i, file, CRASH, 0.0, "no result reported (process ended)")
                break
            with open(deselect, "a") as f:
                for i in results:
                    f.write(i + "\n")
    return list(results.values())


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
