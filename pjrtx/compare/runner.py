"""Runs one pytest selection on pjrtx and on XLA:CPU and compares per-test
outcomes.

pjrtx side: JAX_PLATFORMS unset, as users run it (pjrtx, registered at a
higher priority than XLA:CPU, is the default backend; a pjrtx that is not
installed is made discoverable through discovery/jax_plugins), and a
suite's pin of JAX to the CPU undone (pytest_plugin.py). XLA:CPU side:
JAX_PLATFORMS=cpu. Each side is one pjrtx.testing.engine.run_pytest:
a crash or a hang is recorded for the test that was running and pytest
starts again without the tests that have an outcome.
"""
from __future__ import annotations

import collections
import dataclasses
import importlib.util
import json
import os
import re
import site
import sys
import time
from importlib import metadata
from pathlib import Path

from pjrtx.compare.pytest_plugin import PIN_FLAGS, PIN_VARS, pins_cpu
from pjrtx.conformance import expectations, report
from pjrtx.testing.engine import (
    CRASH, FAILING, OUTCOMES, TIMEOUT, PytestRun, Result, run_pytest,
)

SIDES = ("pjrtx", "cpu")
NAME = {"pjrtx": "pjrtx", "cpu": "XLA:CPU"}
NOT_RUN = "not run"  # in one run's results but not the other's (a total timeout)
WORD = {CRASH: "CRASHED", TIMEOUT: "HUNG (timeout)", NOT_RUN: "NOT RUN"}
DISCOVERY = Path(__file__).resolve().parent / "discovery"


@dataclasses.dataclass
class Options:
    pytest_args: list
    out: Path
    timeout: float = 300.0  # seconds per test
    total_timeout: float | None = None  # seconds per side
    jobs: int = 0  # pytest-xdist -n (0: none)
    cwd: Path = dataclasses.field(default_factory=Path.cwd)
    log: object = sys.stderr


def _pjrtx_entry_point() -> bool:
    return any(ep.value.split(":")[0].split(".")[0] == "pjrtx"
               for ep in metadata.entry_points(group="jax_plugins"))


def side_env(side: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in PIN_VARS}
    env["PJRTX_COMPARE_SIDE"] = side
    paths = []
    # The workers load this pjrtx's plugins (-p): a source checkout is on
    # sys.path here but not necessarily in the suite's folder.
    here = str(Path(__file__).resolve().parents[2])
    if here not in site.getsitepackages() + [site.getusersitepackages()]:
        paths.append(here)
    if side == "cpu":
        env["JAX_PLATFORMS"] = "cpu"
    elif not _pjrtx_entry_point():
        paths.insert(0, str(DISCOVERY))
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    if paths:
        env["PYTHONPATH"] = os.pathsep.join(paths)
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def run_side(opts: Options, side: str) -> tuple[PytestRun, float]:
    cmd = [sys.executable, "-m", "pytest", *opts.pytest_args,
           "-p", "pjrtx.compare.pytest_plugin", "-p", "no:cacheprovider",
           # a module that fails to import (on one side or both) costs its
           # own tests, not the whole selection
           "--continue-on-collection-errors"]
    if opts.jobs:
        cmd += ["-n", str(opts.jobs)]
    t0 = time.monotonic()
    deadline = t0 + opts.total_timeout if opts.total_timeout else None
    run = PytestRun(cmd, opts.cwd, side_env(side), timeout=opts.timeout, deadline=deadline,
                    log=opts.log, tag=f"compare {side}", output=opts.out / f"{side}.log")
    run.output.write_text("")
    run_pytest(run)
    return run, time.monotonic() - t0


# A pin of JAX to the CPU in source: jax.config.update("jax_platform_name",
# "cpu"), os.environ["JAX_PLATFORMS"] = "cpu", os.environ.setdefault(...).
_PIN_SOURCE = re.compile(r"""\b(%s)['"]?\s*[,:=\]]\s*(?:=\s*)?['"]([^'"]*)['"]"""
                         % "|".join(PIN_FLAGS + PIN_VARS))
_SKIP_DIRS = {"node_modules", "site-packages", "build", "dist", "__pycache__", "venv"}


def scan_pins(rootdir: Path, most_files: int = 2000) -> list[dict]:
    """Pins of JAX to the CPU in the conftest.py files under rootdir."""
    found, seen = [], 0
    for folder, dirs, files in os.walk(rootdir):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in _SKIP_DIRS)
        if "conftest.py" not in files:
            continue
        seen += 1
        if seen > most_files:
            break
        path = Path(folder) / "conftest.py"
        try:
            lines = path.read_text(errors="replace").splitlines()
        except OSError:
            continue
        for n, line in enumerate(lines, 1):
            if line.lstrip().startswith("#"):
                continue
            for m in _PIN_SOURCE.finditer(line):
                if pins_cpu(m.group(2)):
                    found.append({"file": str(path), "line": n, "name": m.group(1),
                                  "value": m.group(2)})
    return found


def project_name(rootdir: Path) -> str:
    text = ""
    try:
        text = (rootdir / "pyproject.toml").read_text()
    except OSError:
        pass
    m = re.search(r"^\[project\][^\[]*?^name\s*=\s*['\"]([^'\"]+)", text, re.M | re.S)
    return m.group(1) if m else rootdir.name


def pin_lines(rootdir: Path, scanned: list[dict], seen: list[dict]) -> list[str]:
    """What was pinned where and what was done about it, one line each."""
    def rel(p):
        try:
            return str(Path(p).resolve().relative_to(rootdir.resolve()))
        except ValueError:
            return str(p)

    project = project_name(rootdir)
    used, lines = set(), []
    for pin in scanned:
        hit = next((i for i, ev in enumerate(seen) if ev["name"] == pin["name"] and (
            ev["kind"] == "env" or (Path(ev["file"]).resolve() == Path(pin["file"]).resolve()
                                    and ev["line"] == pin["line"]))), None)
        where = f"{project} pins {pin['name']}={pin['value']} in {rel(pin['file'])}:{pin['line']}"
        if hit is None:
            lines.append(f"{where}; not reached on the pjrtx run (not in this selection, "
                         f"or set after JAX read it)")
        else:
            used.add(hit)
            lines.append(f"{where}; overridden for the pjrtx run")
    for i, ev in enumerate(seen):
        if i not in used:
            where = f"{rel(ev['file'])}:{ev['line']}" if ev["kind"] == "config" else "os.environ"
            lines.append(f"{project} pins {ev['name']}={ev['value']} ({where}, at run time); "
                         f"overridden for the pjrtx run")
    return lines


def _unique(events: list[dict], kind: str) -> list[dict]:
    out = []
    for ev in events:  # xdist workers and the controller may each report one
        if ev["event"] == kind and {k: v for k, v in ev.items() if k != "side"} not in [
                {k: v for k, v in o.items() if k != "side"} for o in out]:
            out.append(ev)
    return out


def outcome_of(r: Result | None) -> str:
    return r.outcome if r is not None else NOT_RUN


def message_key(r: Result) -> str:
    if r.outcome == CRASH:  # "process died: signal 6 (SIGABRT); last output: ..."
        return r.error.split(";")[0]
    if r.outcome == TIMEOUT:
        return "no result in time"
    return report.normalize(r.error)


def differences(results: dict) -> list[dict]:
    by_side = {s: {r.id: r for r in results[s]} for s in SIDES}
    diffs = []
    for tid in sorted(set(by_side["pjrtx"]) | set(by_side["cpu"])):
        rp, rc = by_side["pjrtx"].get(tid), by_side["cpu"].get(tid)
        op, oc = outcome_of(rp), outcome_of(rc)
        if op == oc:
            continue
        # The message of the side that did worse tells why.
        telling = rp if rp is not None and (op in FAILING or rc is None or oc not in FAILING) else rc
        head = f"pjrtx {WORD.get(op, op.upper())}, XLA:CPU {WORD.get(oc, oc.upper())}"
        msg = message_key(telling) if telling is not None else ""
        side = "pjrtx" if telling is rp else "XLA:CPU"
        diffs.append({"id": tid, "pjrtx": dataclasses.asdict(rp) if rp else None,
                      "cpu": dataclasses.asdict(rc) if rc else None,
                      "cluster": f"{head}: {side}: {msg}" if msg else head})
    return diffs


def clusters(diffs: list[dict]) -> list[tuple[str, list[dict]]]:
    groups = collections.defaultdict(list)
    for d in diffs:
        groups[d["cluster"]].append(d)
    return sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))


def check(diffs: list[dict], results: dict, known: dict, name: str) -> list[str]:
    """--check: a difference not listed in the known-differences file, and a
    listed test that ran on both and now matches XLA:CPU. A test listed under
    `# flaky:` (a test that draws its own random inputs, passing or failing
    on either backend by the draw) may do either."""
    problems, differing = [], {d["id"]: d for d in diffs}
    for d in diffs:
        if d["id"] not in known:
            problems.append(f"differs, not in {name}: {d['id']}: {d['cluster']}")
    ran_both = set.intersection(*({r.id for r in results[s]} for s in SIDES))
    for tid, reason in known.items():
        if reason.startswith(expectations.FLAKY):
            continue
        if tid in ran_both and tid not in differing:
            problems.append(f"now matches XLA:CPU, remove from {name} ({reason}): {tid}")
    return problems


def add_module_skips(runs: dict, results: dict) -> None:
    """A module skipped at collection (pytest.skip(allow_module_level=True),
    e.g. equinox's "Skipping tests on non-CPU backend") reports no tests: its
    tests that ran on the other side count as skipped here, with its reason,
    not as "not run"."""
    for s in SIDES:
        have = {r.id for r in results[s]}
        for ev in _unique(runs[s].events, "collect_skip"):
            prefix = ev["id"] + "::"
            for o in SIDES:
                for r in list(results[o]):
                    if r.id.startswith(prefix) and r.id not in have:
                        results[s].append(Result(r.id, r.file, "skipped", 0.0,
                                                 f"{ev['reason']} (module skipped)"))
                        have.add(r.id)


def run(opts: Options) -> dict:
    """Both runs, the comparison, and report.md / compare.json /
    known_differences.txt in opts.out; returns the summary."""
    opts.out.mkdir(parents=True, exist_ok=True)
    notes = []
    if opts.jobs and importlib.util.find_spec("xdist") is None:
        notes.append(f"-n {opts.jobs} ignored: pytest-xdist is not installed")
        opts = dataclasses.replace(opts, jobs=0)
    runs, wall = {}, {}
    for side in SIDES:
        print(f"[compare] running on {NAME[side]}: pytest {' '.join(opts.pytest_args)}",
              file=opts.log, flush=True)
        runs[side], wall[side] = run_side(opts, side)
    results = {s: runs[s].results for s in SIDES}
    add_module_skips(runs, results)
    sessions = _unique(runs["pjrtx"].events + runs["cpu"].events, "session")
    rootdir = Path(sessions[0]["rootdir"]) if sessions else opts.cwd
    pins = pin_lines(rootdir, scan_pins(rootdir), _unique(runs["pjrtx"].events, "pin"))
    backends = {}
    for s in SIDES:
        b = _unique(runs[s].events, "backend")
        backends[s] = f"{b[0]['backend']} ({b[0]['device']})" if b else "(no test used JAX)"
        if s == "pjrtx" and b and b[0]["backend"] != "pjrtx":
            notes.append(f"WARNING: the pjrtx run's default backend was {backends[s]}, not "
                         f"pjrtx: this comparison compares XLA:CPU with itself")
        if runs[s].stopped:
            left = len([i for i in runs[s].collected if i not in {r.id for r in results[s]}])
            notes.append(f"the {NAME[s]} run stopped at its total timeout "
                         f"({opts.total_timeout:.0f} s): {left} tests not run")
    diffs = differences(results)
    summary = {
        "command": "pytest " + " ".join(opts.pytest_args), "rootdir": str(rootdir),
        "date": time.strftime("%Y-%m-%d %H:%M"), "notes": notes, "pins": pins,
        "sides": {s: {"backend": backends[s], "wall_s": round(wall[s], 1),
                      "totals": {**report.counts(results[s]),
                                 NOT_RUN: len(set(runs[s].collected) - {r.id for r in results[s]})}}
                  for s in SIDES},
        "differences": diffs,
        "results": {s: [dataclasses.asdict(r) for r in results[s]] for s in SIDES},
    }
    (opts.out / "compare.json").write_text(json.dumps(summary, indent=1))
    (opts.out / "report.md").write_text(markdown(summary))
    (opts.out / "known_differences.txt").write_text(known_differences(diffs))
    return summary


def markdown(s: dict) -> str:
    lines = ["# pjrtx compare report", "",
             f"`{s['command']}` in `{s['rootdir']}`, {s['date']}; the same selection on pjrtx "
             "(JAX_PLATFORMS unset, pjrtx the default backend) and on XLA:CPU (JAX_PLATFORMS=cpu).",
             ""]
    if s["pins"]:
        lines += ["## Platform pins", ""] + [f"- {p}" for p in s["pins"]] + [""]
    if s["notes"]:
        lines += ["## Notes", ""] + [f"- {n}" for n in s["notes"]] + [""]
    lines += ["## Totals", "", "| backend | default backend seen | " +
              " | ".join(OUTCOMES) + f" | {NOT_RUN} | wall s |",
              "|---|---|" + "---:|" * (len(OUTCOMES) + 2)]
    for side, v in s["sides"].items():
        t = v["totals"]
        lines.append(f"| {NAME[side]} | {v['backend']} | " +
                     " | ".join(str(t[k]) for k in OUTCOMES) + f" | {t[NOT_RUN]} | {v['wall_s']} |")
    diffs = s["differences"]
    lines += ["", f"## Differences: {len(diffs)} tests, by cause (largest first)", ""]
    for key, members in clusters(diffs):
        lines.append(f"### {len(members)} × {key}")
        lines.append("")
        for d in members[:50]:
            r = d["pjrtx"] if d["cluster"].split(": ")[1:2] == ["pjrtx"] else d["cpu"]
            why = (r or {}).get("error", "")
            lines.append(f"- `{d['id']}`" + (f": {why[:300]}" if why else ""))
        if len(members) > 50:
            lines.append(f"- ... {len(members) - 50} more (compare.json)")
        lines.append("")
    return "\n".join(lines) + "\n"


def known_differences(diffs: list[dict]) -> str:
    """A draft of the --check file: today's differences under their causes."""
    out = ["# Known differences between pjrtx and XLA:CPU (python -m pjrtx compare --check).",
           "# Drafted from a run: replace each reason with why the test differs.", ""]
    for key, members in clusters(diffs):
        out.append(f"# reason: {key}")
        out += [d["id"] for d in members] + [""]
    return "\n".join(out)
