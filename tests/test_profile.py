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
    import json, shutil, sys, threading, time
    import jax, jax.numpy as jnp, numpy as np
    from pjrtx import _pjrtx

    dev = jax.devices("pjrtx")[0]
    CALLS = 4
    now = _pjrtx.profile_now_us
    windows = []


    def window(name, t0):
        # The caller's own span, recorded on this thread on the trace's clock:
        # the parent checks what pjrtx recorded against when it was asked for.
        _pjrtx.profile_event("test", name, t0, now() - t0)
        windows.append(name)


    @jax.jit
    def step(a, b):
        for _ in range(4):
            a = jnp.tanh(a @ b)
        return a


    t = now(); a = jax.device_put(np.random.default_rng(0).standard_normal((256, 256), np.float32), dev); window("put a", t)
    t = now(); b = jax.device_put(np.eye(256, dtype=np.float32) * 0.5, dev); window("put b", t)
    outs = []
    for i in range(CALLS):
        t = now(); outs.append(step(a, b)); window(f"call {i}", t)
    t = now(); host = np.asarray(outs[-1]); window("asarray", t)   # device-to-host
    t_flush = now()
    path = _pjrtx.profile_flush()                   # valid JSON in the middle of a run
    shutil.copy(path, path + ".mid")
    t = now(); step(a, b).block_until_ready(); window(f"call {CALLS}", t)  # after the flush

    # A run held by a host callback until `gate` opens: with PJRTX_SPIN_US=0 the
    # caller (execute waits for runs that call the host) blocks, which is a wait.
    gate = threading.Event()
    release = {}


    def held(x):
        gate.wait(60)
        return x


    gated = jax.jit(lambda x: jax.pure_callback(held, jax.ShapeDtypeStruct(x.shape, x.dtype), x))
    gate.set()
    t = now(); small = jax.device_put(np.arange(4, dtype=np.float32), dev); window("put small", t)
    t = now(); gated(small).block_until_ready(); window("gated warm-up", t)  # compiled
    gate.clear()
    calling = threading.Event()


    def opener():
        calling.wait(60)
        time.sleep(0.5)
        release["us"] = now()
        gate.set()


    th = threading.Thread(target=opener)
    th.start()
    calling.set()
    t = now(); g = np.asarray(gated(small)); window("gated", t)
    th.join(60)
    assert (g == np.arange(4)).all(), g
    print(json.dumps({"path": path, "calls": CALLS + 1, "out_bytes": host.nbytes,
                      "t_flush": t_flush, "t_release": release["us"], "windows": windows}))
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


EPS = 0.002  # ts/dur are printed to 1 ns and rounded


def inside(e, outer, slack=0.0):
    """e's [ts, ts+dur] lies within outer's (slack us earlier allowed)."""
    return (outer["ts"] - slack - EPS <= e["ts"] and
            e["ts"] + e["dur"] <= outer["ts"] + outer["dur"] + EPS)


def test_trace_file_has_compile_execute_transfer_and_wait_events(tmp_path):
    trace = tmp_path / "trace.json"
    # No polling before a block: a caller waiting on an unfinished run
    # records a wait however short the run.
    info = run_child(tmp_path, PJRTX_PROFILE=str(trace), PJRTX_SPIN_US="0")
    assert info["path"] == str(trace)
    doc = json.loads(trace.read_text())  # valid JSON after a normal exit
    events = doc["traceEvents"]
    complete = [e for e in events if e["ph"] == "X"]
    for e in complete:
        assert {"name", "cat", "ts", "dur", "pid", "tid", "args"} <= e.keys(), e
    by_cat = defaultdict(list)
    for e in complete:
        by_cat[e["cat"]].append(e)
    thread_names = {e["tid"]: e["args"]["name"] for e in events
                    if e["ph"] == "M" and e["name"] == "thread_name"}

    # The child's own spans (profile_event on its main thread), in the order
    # it made the calls: what pjrtx recorded is checked against them.
    windows = {e["name"]: e for e in by_cat["test"]}
    assert list(windows) == info["windows"], list(windows)
    main = windows["call 0"]["tid"]
    assert {e["tid"] for e in by_cat["test"]} == {main}

    # The flushed file, written mid-run, holds only events recorded before
    # the flush, and all of them are in the final file; the final file also
    # holds the run made after the flush.
    mid = json.loads((tmp_path / "trace.json.mid").read_text())["traceEvents"]
    mid_x = [e for e in mid if e["ph"] == "X"]
    assert mid_x and all(e["ts"] <= info["t_flush"] + EPS for e in mid_x), mid_x
    final = {json.dumps(e, sort_keys=True) for e in complete}
    assert [e for e in mid_x if json.dumps(e, sort_keys=True) not in final] == []
    assert any(e["ts"] > info["t_flush"] for e in complete)

    compiles = [e for e in by_cat["compile"] if e["name"] == "compile jit_step"]
    assert len(compiles) == 1, [e["name"] for e in by_cat["compile"]]
    assert compiles[0]["args"]["instructions"] > 0
    # jit compiles on the first call, so its compile lies inside that call.
    assert compiles[0]["dur"] > 0 and inside(compiles[0], windows["call 0"]), compiles[0]
    phases = {e["name"] for e in by_cat["compile"] if e["tid"] == compiles[0]["tid"]}
    assert {"frontend (parse, plan)", "parse StableHLO", "build plan", "lower to MLX"} <= phases

    # One execute per call, on the executor thread, one after another in
    # call order. Each was posted (ts - queued_us, queued_us truncated to
    # whole us) during the call that made it, and did work (dur > 0; the
    # file clamps a negative duration to 0).
    executes = sorted((e for e in by_cat["execute"] if e["name"] == "execute jit_step"),
                      key=lambda e: e["ts"])
    assert len(executes) == info["calls"]
    executor = executes[0]["tid"]
    assert thread_names[executor] == "pjrtx executor"
    for i, e in enumerate(executes):
        assert e["tid"] == executor
        assert e["args"]["executable"] == "jit_step"
        assert e["args"]["bytes"] == info["out_bytes"]
        # 4 x (matmul, tanh) at least.
        assert e["args"]["prims"] >= 8, e
        assert e["dur"] > 0, e
        posted = e["ts"] - e["args"]["queued_us"]
        call = windows[f"call {i}"]
        assert call["ts"] - 1 - EPS <= posted <= call["ts"] + call["dur"] + EPS, (i, e, call)
        if i:
            prev = executes[i - 1]
            assert e["ts"] >= prev["ts"] + prev["dur"] - EPS, (prev, e)

    # Each execute holds exactly one graph build and then one eval dispatch.
    dispatch_end = []
    for e in executes:
        kids = sorted((k for k in by_cat["execute"] if k["tid"] == executor and
                       k["name"] in ("graph build", "eval dispatch") and inside(k, e)),
                      key=lambda k: k["ts"])
        assert [k["name"] for k in kids] == ["graph build", "eval dispatch"], (e, kids)
        assert all(k["dur"] > 0 for k in kids), kids
        assert kids[1]["ts"] >= kids[0]["ts"] + kids[0]["dur"] - EPS, kids
        dispatch_end.append(kids[1]["ts"] + kids[1]["dur"])

    # The wait for each run's evaluation ("ready NAME") starts after its eval
    # dispatch, on the completion thread (or inline on the executor, inside
    # the execute, when nothing else is in flight), and the readies run one
    # after another in call order.
    readies = sorted((e for e in by_cat["execute"] if e["name"] == "ready jit_step"),
                     key=lambda e: e["ts"])
    assert len(readies) == len(executes)
    for i, (ex, rd) in enumerate(zip(executes, readies)):
        assert rd["ts"] >= dispatch_end[i] - EPS, (ex, rd)
        if rd["tid"] == executor:
            assert inside(rd, ex), (ex, rd)
        else:
            assert thread_names[rd["tid"]] == "pjrtx completion", rd
        if i:
            prev = readies[i - 1]
            assert rd["ts"] >= prev["ts"] + prev["dur"] - EPS, (prev, rd)

    h2d = [e for e in by_cat["transfer"] if e["name"] == "h2d f32[256,256]"]
    assert len(h2d) == 2 and all(e["args"]["bytes"] == 256 * 256 * 4 for e in h2d)
    assert inside(h2d[0], windows["put a"]) and inside(h2d[1], windows["put b"]), h2d
    assert all(e["dur"] > 0 for e in h2d), h2d
    # np.asarray reads a host-readable buffer through a zero-copy view
    # ("d2h view"), other backends copy ("d2h").
    d2h = [e for e in by_cat["transfer"] if e["name"] in ("d2h f32[256,256]",
                                                          "d2h view f32[256,256]")]
    assert d2h and all(e["args"]["bytes"] == info["out_bytes"] for e in d2h), d2h
    # A view is taken on the caller's thread, inside the call; a copy runs on
    # the executor and may end just after the caller wakes, so only its
    # start is bound to the call.
    asarray = windows["asarray"]
    assert all(inside(e, asarray) if e["name"].startswith("d2h view") else
               asarray["ts"] <= e["ts"] <= asarray["ts"] + asarray["dur"] for e in d2h), (d2h, asarray)

    # Waits are callers blocking: on the child's thread, inside one of its
    # calls. The gated run cannot finish before its host callback's gate
    # opens (t_release), and its caller blocks on it until then.
    waits = by_cat["wait"]
    for w in waits:
        assert w["tid"] == main and any(inside(w, c) for c in windows.values()), w
    gated = windows["gated"]
    assert gated["ts"] + gated["dur"] >= info["t_release"]
    # (Its ready event starts inside the call; it may end after the call
    # returns, as the caller wakes once the outputs are marked ready.)
    gated_ready = [e for e in by_cat["execute"] if e["name"] == "ready jit__lambda"
                   and gated["ts"] <= e["ts"] <= gated["ts"] + gated["dur"]]
    assert len(gated_ready) == 1, gated_ready
    assert gated_ready[0]["ts"] + gated_ready[0]["dur"] >= info["t_release"], gated_ready
    assert any(inside(w, gated) and w["ts"] + w["dur"] >= info["t_release"] for w in waits), \
        ("no wait spans the gate's opening (the caller was not blocked 0.5 s after "
         "starting the call?)", waits, gated, info["t_release"])

    # Viewers draw events on one thread as a stack: any two either do not
    # overlap or one lies inside the other.
    per_thread = defaultdict(list)
    for e in complete:
        per_thread[(e["pid"], e["tid"])].append(e)
    for evs in per_thread.values():
        evs.sort(key=lambda e: (e["ts"], -e["dur"]))
        stack = []
        for e in evs:
            while stack and e["ts"] >= stack[-1]["ts"] + stack[-1]["dur"] - EPS:
                stack.pop()
            if stack:
                parent = stack[-1]
                assert e["ts"] + e["dur"] <= parent["ts"] + parent["dur"] + EPS, (parent, e)
            stack.append(e)
    # graph build / eval are children of an execute on the executor thread.
    for child in (e for e in by_cat["execute"] if e["name"] in ("graph build", "eval dispatch")):
        assert any(p["tid"] == child["tid"] and p["name"].startswith("execute ") and
                   inside(child, p) for p in by_cat["execute"]), child
    for phase in (e for e in by_cat["compile"] if not e["name"].startswith("compile ")):
        assert any(p["tid"] == phase["tid"] and p["name"].startswith("compile ") and
                   inside(phase, p) for p in by_cat["compile"]), phase


def test_off_by_default(tmp_path):
    # Without PJRTX_PROFILE nothing is recorded and flush writes nothing. A
    # child process, so that the check runs even when the suite itself runs
    # with PJRTX_PROFILE set (the variable is read once per process).
    e = {k: v for k, v in os.environ.items() if not k.startswith("PJRTX_")}
    e["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PKG_PARENT), os.environ.get("PYTHONPATH")]))
    code = ("import json; from pjrtx import _pjrtx; "
            "print(json.dumps([_pjrtx.profile_enabled(), _pjrtx.profile_flush()]))")
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=e, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    assert json.loads(r.stdout.strip().splitlines()[-1]) == [False, ""]
    assert list(tmp_path.iterdir()) == []
    table = {name: default for name, default, _ in _pjrtx.env_vars()}
    assert table["PJRTX_PROFILE"] == ""
