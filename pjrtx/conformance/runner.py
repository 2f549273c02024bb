"""Runs upstream JAX test files on pjrtx, one pytest process per file (or
per shard of a file), files in parallel; the files of tests/multiprocess/
go to multiprocess.py, which runs their own launcher.

Each pytest process is one run of pjrtx.testing.engine.run_pytest: a test
that kills its process is recorded as CRASH and a test that runs past
--timeout as TIMEOUT; the file's run then resumes after it, so one bad test
costs one test, not the file.
"""
from __future__ import annotations

import dataclasses
import fnmatch
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from pjrtx.conformance import multiprocess
from pjrtx.testing.engine import (
    CRASH, ERROR, FAILED, FAILING, OUTCOMES, PASSED, SKIPPED, TIMEOUT, PytestRun, Result,
    child_env, run_pytest,
)

# Result.reference of a failing test that the rerun on XLA:CPU did not
# collect (the id exists only on pjrtx's run).
NOT_COLLECTED = "not collected"



@dataclasses.dataclass
class Options:
    """What `python -m pjrtx conformance` runs, and how."""
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


def run_unit(opts: Options, file: str, shard: tuple[int, int] | None) -> list[Result]:
    """Runs one file (or one shard of it) until every test has an outcome."""
    if multiprocess.is_multiprocess(file):  # its own launcher of several processes
        return multiprocess.run_unit(opts, file)
    extra = [f"--pjrtx-shard={shard[0]}/{shard[1]}"] if shard else []
    return _run_targets(opts, file, [file, *extra])


def _run_targets(opts: Options, file: str, targets: list[str]) -> list[Result]:
    """One pytest selection (a file, a shard of it, or test ids of one
    file) in child processes on opts.platform, until each test has an outcome."""
    with tempfile.TemporaryDirectory(prefix="pjrtx-conf-") as tmp:
        ini = Path(tmp) / "pytest.ini"
        ini.write_text("[pytest]\n")
        # -s: upstream's jtu.capture_stdout redirects file descriptor 1 and
        # reads what print() wrote there; pytest's own capture would take
        # sys.stdout first and the test would see nothing (it fails that
        # way on XLA:CPU too). Output goes to the pipe run_pytest reads.
        cmd = [sys.executable, "-m", "pytest", *targets, "-q", "-s",
               "-p", "pjrtx.conformance.pytest_plugin", "-p", "no:cacheprovider",
               "-c", str(ini), "--rootdir", str(opts.jax_tests),
               "--confcutdir", str(opts.jax_tests), *opts.extra_pytest_args]
        run = run_pytest(PytestRun(cmd, opts.jax_tests, child_env(opts, file), file=file,
                                   timeout=opts.timeout, log=opts.log))
    return run.results


REFERENCE = "cpu"  # the platform that reruns pjrtx's failures (--reference)


def rerun_failures_on_reference(opts: Options, results: list[Result]) -> int:
    """Runs each failing test again on XLA:CPU (the same file of the same
    tag, with the same devices and x64 setting) and records that outcome in
    its Result.reference: a test that fails there too is the tag's own
    (its NumPy/hypothesis expectations, say), not pjrtx's. Tests of
    tests/multiprocess/ and collection errors are not rerun. Returns how
    many were rerun."""
    ref = dataclasses.replace(opts, platform=REFERENCE)
    by_file: dict[str, list[Result]] = {}
    for r in results:
        if r.outcome in FAILING and "::" in r.id and not multiprocess.is_multiprocess(r.file):
            by_file.setdefault(r.file, []).append(r)

    def one(item):
        file, failing = item
        got = {x.id: x for x in _run_targets(ref, file, [r.id for r in failing])}
        for r in failing:
            x = got.get(r.id)
            r.reference = x.outcome if x is not None else NOT_COLLECTED
        print(f"[conformance] {file}: {len(failing)} failing test(s) rerun on XLA:CPU, "
              f"{sum(r.reference in FAILING for r in failing)} fail there too",
              file=opts.log, flush=True)

    with ThreadPoolExecutor(max_workers=max(1, opts.jobs)) as pool:
        list(pool.map(one, sorted(by_file.items())))
    return sum(len(v) for v in by_file.values())


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
