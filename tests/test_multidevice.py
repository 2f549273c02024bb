"""pjrtx on 8 devices against XLA:CPU on 8 host devices: a differential
battery of sharded programs (shard_map collectives, jit with NamedShardings
that the partitioner splits, pmap, placement, donation, MLP training steps).

The programs live in _multidevice_worker.py and run in one worker process
per session: the device counts (PJRTX_DEVICES, XLA's
--xla_force_host_platform_device_count) are read when JAX creates its
clients, which this process (conftest imports jax) has already done. Each
test below checks one program's comparison. A worker that crashes or hangs
fails the program it was running (named in the message, with the worker's
last stderr lines) and a fresh worker goes on with the rest.

Knobs:
    PJRTX_BATTERY_BACKEND=cpu      run the pjrtx side on XLA:CPU too (checks the harness)
    PJRTX_BATTERY_PROGRAM=a,b      only these programs (or use -k)
    PJRTX_BATTERY_TIMEOUT=60       seconds one program may take before it counts as hung
    PJRTX_BATTERY_DEVICES=8        devices on each side; with fewer, the programs whose
                                   meshes do not fit skip, naming the count they need
"""
from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

import _multidevice_worker as worker

WORKER = Path(__file__).with_name("_multidevice_worker.py")
STARTUP_TIMEOUT = 180  # importing jax and creating 8 + 8 devices on a loaded 2-core machine
# A crash costs a worker restart (seconds), a hang its whole timeout: after
# this many of either, the programs left are reported as not run.
MAX_CRASHES = 30
MAX_HANGS = 3

_only = [n for n in os.environ.get("PJRTX_BATTERY_PROGRAM", "").split(",") if n]
NAMES = _only or list(worker.PROGRAMS)


def _program_timeout() -> float:
    # the largest program compiles and runs in about a second on XLA:CPU
    return float(os.environ.get("PJRTX_BATTERY_TIMEOUT", "60"))


def _stderr_tail(path: Path, start: int, lines: int = 25) -> str:
    with open(path, "rb") as f:
        f.seek(start)
        text = f.read().decode(errors="replace")
    tail = text.strip().splitlines()[-lines:]
    return "\n".join("    | " + t for t in tail) if tail else "    (no stderr)"


def _describe_exit(rc: int) -> str:
    if rc < 0:
        try:
            return f"killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"killed by signal {-rc}"
    return f"exited with status {rc}"


def run_battery(names, env=None, timeout=None) -> dict:
    """Run `names` in worker processes; {"results": {name: {"ok", "messages"}},
    "backend", "setup_error", "unsupported"}. A crash or hang fails the
    program being run and a new worker continues after it."""
    timeout = _program_timeout() if timeout is None else timeout
    env = {**os.environ, **(env or {})}
    # the worker sets its own JAX_PLATFORMS from PJRTX_BATTERY_BACKEND
    env.pop("JAX_PLATFORMS", None)
    # the worker imports the pjrtx this process imported (a source checkout
    # on PYTHONPATH or an installed wheel), not whichever comes first for it
    pjrtx = sys.modules.get("pjrtx")
    if pjrtx is not None and getattr(pjrtx, "__file__", None):
        root = str(Path(pjrtx.__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in [env.get("PYTHONPATH")] if p])
    out = {"results": {}, "backend": env.get("PJRTX_BATTERY_BACKEND", "pjrtx"),
           "setup_error": None, "unsupported": False}
    results = out["results"]
    remaining = list(names)
    died = {"crashed": 0, "hung": 0}
    with tempfile.TemporaryDirectory(prefix="pjrtx-battery-") as tmp:
        err_path = Path(tmp) / "stderr"
        while remaining:
            if died["crashed"] > MAX_CRASHES or died["hung"] > MAX_HANGS:
                for n in remaining:
                    results[n] = {"ok": False, "messages": [
                        f"not run: earlier programs crashed {died['crashed']} and hung "
                        f"{died['hung']} times (the limits are {MAX_CRASHES} and {MAX_HANGS})"]}
                break
            with open(err_path, "ab") as err:
                status = _run_worker(remaining, env, err, err_path, timeout, results, out)
            if status == "setup":
                break
            if status in died:
                died[status] += 1
    return out


def _run_worker(remaining, env, err, err_path, timeout, results, out) -> str:
    """One worker over `remaining` (removing each program as it finishes).
    Returns "done", "crashed" or "hung" (a program killed it), or "setup"."""
    err_start = err.tell()
    proc = subprocess.Popen([sys.executable, str(WORKER), *remaining], stdout=subprocess.PIPE,
                            stderr=err, env=env, start_new_session=True)
    fd = proc.stdout.fileno()
    buf = b""
    current, ready = None, False
    deadline = time.monotonic() + STARTUP_TIMEOUT

    def fail_all(msg):
        for n in list(remaining):
            results[n] = {"ok": False, "messages": [msg]}
        remaining.clear()

    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                if current is None:
                    out["setup_error"] = "the worker did not start"
                    fail_all(f"the battery worker did not start within {STARTUP_TIMEOUT}s:\n"
                             + _stderr_tail(err_path, err_start))
                    return "setup"
                results[current] = {"ok": False, "messages": [
                    f"hung: program {current} gave no result within {timeout:g}s "
                    f"(PJRTX_BATTERY_TIMEOUT); the worker was killed. Its last stderr:\n"
                    + _stderr_tail(err_path, err_start)]}
                remaining.remove(current)
                return "hung"
            readable, _, _ = select.select([fd], [], [], min(left, 1.0))
            if not readable:
                continue
            chunk = os.read(fd, 65536)
            if not chunk:  # EOF: the worker is gone
                rc = proc.wait()
                if current is not None:
                    results[current] = {"ok": False, "messages": [
                        f"crashed: the worker {_describe_exit(rc)} while running program {current}. "
                        f"Its last stderr:\n" + _stderr_tail(err_path, err_start)]}
                    remaining.remove(current)
                    return "crashed"
                if remaining:
                    out["setup_error"] = out["setup_error"] or f"the worker {_describe_exit(rc)}"
                    fail_all(f"the battery worker {_describe_exit(rc)} "
                             f"{'before its first program' if not ready else 'between programs'}:\n"
                             + _stderr_tail(err_path, err_start))
                    return "setup"
                return "done"
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for line in lines:
                text = line.decode(errors="replace")
                if not text.startswith(worker.MARK):
                    continue
                msg = json.loads(text[len(worker.MARK):])
                ev = msg["event"]
                if ev == "ready":
                    ready = True
                    out["devices"] = msg["devices"]
                elif ev == "setup_error":
                    out["setup_error"] = msg["message"]
                    out["unsupported"] = msg.get("unsupported", False)
                    fail_all(f"the battery could not start: {msg['message']}")
                elif ev == "start":
                    current = msg["name"]
                    deadline = time.monotonic() + timeout
                elif ev == "done":
                    results[msg["name"]] = {"ok": msg["ok"], "messages": msg["messages"],
                                            "skipped": msg.get("skipped"),
                                            "seconds": msg["seconds"]}
                    remaining.remove(msg["name"])
                    current = None
                    deadline = time.monotonic() + timeout
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        proc.stdout.close()


def _selected_names(session) -> list[str]:
    mine = [i for i in session.items if i.module is not None and i.module.__name__ == __name__
            and getattr(i, "callspec", None) is not None and "name" in i.callspec.params]
    return [i.callspec.params["name"] for i in mine] or NAMES


@pytest.fixture(scope="session")
def battery(request, tmp_path_factory):
    names = _selected_names(request.session)
    if "PYTEST_XDIST_WORKER" not in os.environ:
        return run_battery(names)
    # Under xdist every process would start its own worker; the first one to
    # get here runs the battery once and the others read its results.
    import fcntl
    root = tmp_path_factory.getbasetemp().parent
    with open(root / "multidevice_battery.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        saved = root / "multidevice_battery.json"
        if saved.exists():
            return json.loads(saved.read_text())
        res = run_battery(names)
        saved.write_text(json.dumps(res))
        return res


# Programs pjrtx refuses today, each with the regex of the clear error it
# must give (the test fails when the refusal changes or the program starts
# to pass, so the list stays true). None at present.
REFUSED: dict = {}


@pytest.mark.parametrize("name", NAMES)
def test_program(battery, name):
    if battery["unsupported"]:
        pytest.skip(f"this pjrtx has no PJRTX_DEVICES (one device only): {battery['setup_error']}")
    r = battery["results"].get(name)
    assert r is not None, f"{name}: no result (the worker never reported it)"
    if r.get("skipped"):
        pytest.skip(f"{name}: {r['skipped']}")
    side = "XLA:CPU (oracle-vs-oracle mode)" if battery["backend"] == "cpu" else "pjrtx"
    if name in REFUSED and battery["backend"] != "cpu":
        import re
        text = "\n".join(r["messages"])
        assert not r["ok"], f"{name} now passes on pjrtx: drop it from REFUSED"
        assert re.search(REFUSED[name], text), f"{name} failed otherwise than refused:\n{text}"
        return
    assert r["ok"], f"{name} on {side} vs XLA:CPU:\n" + "\n".join(r["messages"])


def test_harness_reports_crash_hang_and_wrong_results():
    """The harness itself, in oracle-vs-oracle mode with injected faults: a
    crashed and a hung program fail with their names, a wrong shard is
    caught, and the programs after them still run."""
    names = ["sm_psum_i32_x4", "sm_pmax_u8_x4", "put_2d_xy", "jit_min_i32_2d"]
    out = run_battery(names, timeout=8, env={
        "PJRTX_BATTERY_BACKEND": "cpu", "PJRTX_BATTERY_DEVICES": str(worker.FULL),
        "PJRTX_BATTERY_FAULT": "sm_psum_i32_x4:crash,sm_pmax_u8_x4:hang,put_2d_xy:wrong"})
    r = out["results"]
    assert set(r) == set(names), r
    crash, hang, wrong, fine = (r[n] for n in names)
    assert not crash["ok"] and "crashed" in crash["messages"][0] and "sm_psum_i32_x4" in crash["messages"][0]
    assert "SIGABRT" in crash["messages"][0], crash
    assert not hang["ok"] and "hung: program sm_pmax_u8_x4" in hang["messages"][0], hang
    assert not wrong["ok"] and any("shard 0" in m for m in wrong["messages"]), wrong
    assert fine["ok"], fine
