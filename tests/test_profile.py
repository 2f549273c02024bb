"""PJRTX_PROFILE=FILE: a Chrome/Perfetto trace-event file of compile phases,
executes (graph build, eval), transfers and waits. The variable is read once
per process, so the traced program runs in a child process."""
import json
import os
import subprocess
import sys
import textwrap
from collections import defaultdict
from pathlib import Path

import pjrtx
from pjrtx import _pjrtx

PKG_PARENT = Path(pjrtx.__file__).resolve().parents[1]

CHILD = textwrap.dedent("""
    import json, sys
    import jax, jax.numpy as jnp, numpy as np
    from pjrtx import _pjrtx

    dev = jax.devices("pjrtx")[0]
    CALLS = 4

    @jax.jit
    def step(a, b):
        # Long enough (a 256^3 matmul chain) that reading the result right
        # after dispatch blocks on it.
        for _ in range(4):
            a = jnp.tanh(a @ b)
        return a

    a = jax.device_put(np.random.default_rng(0).standard_normal((256, 256), np.float32), dev)
    b = jax.device_put(np.eye(256, dtype=np.float32) * 0.5, dev)
    for _ in range(CALLS):
        out = step(a, b)
    host = np.asarray(out)                      # device-to-host, waits for the last run
    path = _pjrtx.profile_flush()               # valid JSON in the middle of a run
    mid = len(json.load(open(path))["traceEvents"])
    step(a, b).block_until_ready()              # after the flush: in the file at exit
    print(json.dumps({"path": path, "mid": mid, "calls": CALLS + 1,
                      "out_bytes": host.nbytes}))
""")


def run_child(tmp_path, **env):
    e = {k: v for k, v in os.environ.items() if not k.startswith("PJRTX_")}
    e["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PKG_PARENT), os.environ.get("PYTHONPATH")]))
    e["JAX_PLATFORMS"] = "pjrtx,cpu"
    e.update(env)
    r = subprocess.run([sys.executable, "-c", CHILD], cwd=tmp_path, env=e, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_trace_file_has_compile_execute_transfer_and_wait_events(tmp_path):
    trace = tmp_path / "trace.json"
    info = run_child(tmp_path, PJRTX_PROFILE=str(trace))
    assert info["path"] == str(trace)
    doc = json.loads(trace.read_text())  # valid JSON after a normal exit
    events = doc["traceEvents"]
    complete = [e for e in events if e["ph"] == "X"]
    # The final file holds the flushed events and those recorded after.
    assert 0 < info["mid"] < len(events)
    for e in complete:
        assert {"name", "cat", "ts", "dur", "pid", "tid", "args"} <= e.keys(), e
        assert e["dur"] >= 0 and e["ts"] >= 0, e
    by_cat = defaultdict(list)
    for e in complete:
        by_cat[e["cat"]].append(e)

    compiles = [e for e in by_cat["compile"] if e["name"] == "compile jit_step"]
    assert len(compiles) == 1, [e["name"] for e in by_cat["compile"]]
    assert compiles[0]["args"]["instructions"] > 0
    phases = {e["name"] for e in by_cat["compile"] if e["tid"] == compiles[0]["tid"]}
    assert {"frontend (parse, plan)", "parse StableHLO", "build plan", "lower to MLX"} <= phases

    executes = [e for e in by_cat["execute"] if e["name"] == "execute jit_step"]
    assert len(executes) == info["calls"]
    for e in executes:
        assert e["args"]["executable"] == "jit_step"
        assert e["args"]["bytes"] == info["out_bytes"]
        # 4 x (matmul, tanh) at least.
        assert e["args"]["prims"] >= 8, e
        assert e["args"]["queued_us"] >= 0
    # Each execute has its graph build and eval dispatch inside it (checked
    # below); the wait for its evaluation ends in "ready" on the completion
    # thread, after the execute began.
    executor = executes[0]["tid"]
    assert {e["tid"] for e in executes} == {executor}
    assert sum(e["name"] == "eval dispatch" and e["tid"] == executor
               for e in by_cat["execute"]) >= len(executes)
    thread_names = {e["tid"]: e["args"]["name"] for e in events
                    if e["ph"] == "M" and e["name"] == "thread_name"}
    assert thread_names[executor] == "pjrtx executor"
    readies = sorted((e for e in by_cat["execute"] if e["name"] == "ready jit_step"),
                     key=lambda e: e["ts"])
    assert len(readies) == len(executes)
    for ex, rd in zip(sorted(executes, key=lambda e: e["ts"]), readies):
        assert thread_names[rd["tid"]] == "pjrtx completion"
        assert rd["ts"] + rd["dur"] >= ex["ts"]

    h2d = [e for e in by_cat["transfer"] if e["name"] == "h2d f32[256,256]"]
    # np.asarray reads a host-readable buffer through a zero-copy view
    # ("d2h view"), other backends copy ("d2h").
    d2h = [e for e in by_cat["transfer"] if e["name"] in ("d2h f32[256,256]",
                                                          "d2h view f32[256,256]")]
    assert len(h2d) == 2 and all(e["args"]["bytes"] == 256 * 256 * 4 for e in h2d)
    assert d2h and all(e["args"]["bytes"] == info["out_bytes"] for e in d2h), d2h
    # np.asarray and block_until_ready block caller threads on results the
    # executor is still computing.
    waits = by_cat["wait"]
    assert waits and all(e["tid"] != executor for e in waits)

    # Viewers draw events on one thread as a stack: any two either do not
    # overlap or one lies inside the other (0.002 us: ts/dur are printed to
    # 1 ns and rounded).
    eps = 0.002
    per_thread = defaultdict(list)
    for e in complete:
        per_thread[(e["pid"], e["tid"])].append(e)
    for evs in per_thread.values():
        evs.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack = []
        for e in evs:
            while stack and e["ts"] >= stack[-1]["ts"] + stack[-1]["dur"] - eps:
                stack.pop()
            if stack:
                parent = stack[-1]
                assert e["ts"] + e["dur"] <= parent["ts"] + parent["dur"] + eps, (parent, e)
            stack.append(e)
    # graph build / eval are children of an execute on the executor thread.
    for child in (e for e in by_cat["execute"] if e["name"] in ("graph build", "eval dispatch")):
        assert any(p["tid"] == child["tid"] and p["name"].startswith("execute ") and
                   p["ts"] - eps <= child["ts"] and
                   child["ts"] + child["dur"] <= p["ts"] + p["dur"] + eps
                   for p in by_cat["execute"]), child
    for phase in (e for e in by_cat["compile"] if not e["name"].startswith("compile ")):
        assert any(p["tid"] == phase["tid"] and p["name"].startswith("compile ") and
                   p["ts"] - eps <= phase["ts"] and
                   phase["ts"] + phase["dur"] <= p["ts"] + p["dur"] + eps
                   for p in by_cat["compile"]), phase


def test_off_by_default(tmp_path):
    # The test process itself runs without PJRTX_PROFILE (conftest leaves it
    # unset): nothing is recorded and flush writes nothing.
    if os.environ.get("PJRTX_PROFILE"):
        return
    assert not _pjrtx.profile_enabled()
    assert _pjrtx.profile_flush() == ""
    table = {name: default for name, default, _ in _pjrtx.env_vars()}
    assert table["PJRTX_PROFILE"] == ""
