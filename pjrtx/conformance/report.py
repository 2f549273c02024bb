"""results.json and report.md: per-file counts, skip reasons, and failures
clustered by normalized error message (the to-do list, largest first)."""
from __future__ import annotations

import collections
import dataclasses
import json
import re
from pathlib import Path

from pjrtx.testing.engine import FAILED, FAILING, OUTCOMES, PASSED, SKIPPED, Result

_NORMALIZE = [
    (re.compile(r"0x[0-9a-fA-F]+"), "0x?"),
    (re.compile(r"'[^']*'"), "'?'"),
    (re.compile(r'"[^"]*"'), '"?"'),
    (re.compile(r" at loc\(.*"), " at loc(...)"),
    (re.compile(r"\b\d+(\.\d+)?(e[-+]?\d+)?\b"), "N"),
    (re.compile(r"\[[N, ]*\]"), "[...]"),
]


def normalize(message: str) -> str:
    msg = message.strip()
    for pattern, repl in _NORMALIZE:
        msg = pattern.sub(repl, msg)
    return msg[:200] or "(no message)"


def counts(results: list[Result]) -> dict:
    c = collections.Counter(r.outcome for r in results)
    return {k: c.get(k, 0) for k in OUTCOMES}


def pass_rate(c: dict) -> float:
    ran = sum(c[k] for k in OUTCOMES if k != SKIPPED)
    return 100.0 * c["passed"] / ran if ran else 0.0


def fails_on_reference(r: Result) -> bool:
    """A failing test that failed on XLA:CPU too when run there again
    (conformance --reference): the tag's own failure, not pjrtx's."""
    return r.outcome in FAILING and r.reference in FAILING


def own_rate(results: list[Result]) -> float:
    """The pass rate without the tests that fail on XLA:CPU too: passed /
    (passed + pjrtx's own failures). A failure not rerun counts as pjrtx's."""
    passed = sum(r.outcome == PASSED for r in results)
    own = sum(r.outcome in FAILING and not fails_on_reference(r) for r in results)
    return 100.0 * passed / (passed + own) if passed + own else 0.0


# Why a test was skipped, in three kinds, so a skip that hides a missing
# feature is not lost among those that cannot apply:
#   filter: upstream's device filter (jtu.run_on_devices / skip_on_devices,
#           or a reason naming another platform: TPU, GPU, CUDA, ROCm)
#   devices: the test needs more devices than pjrtx's one
#   other:  everything else (x64 mode, optional packages, the test's own
#           conditions): read these.
_SKIP_KINDS = [
    ("devices", re.compile(r"(\d+|more|multiple|enough|at least \w+|two|several|>=? ?\d+)\s+"
                           r"(\w+\s+)?(devices|device|chips|cores|processes)|device_count|"
                           r"devices? count|requires? .*devices|need(s)? .*devices|"
                           r"too few devices|single device|more than (one|\d+) device", re.I)),
    ("filter", re.compile(r"devices with tags|\b(tpu|gpu|cuda|rocm|cudnn|triton|mosaic|"
                          r"sm_?\d+|h100|a100|metal)\b|only (runs|works) on|on cpu backends?\b",
                          re.I)),
]


def skip_kind(reason: str) -> str:
    for kind, pattern in _SKIP_KINDS:
        if pattern.search(reason or ""):
            return kind
    return "other"


def skip_counts(results: list[Result]) -> dict:
    c = collections.Counter(skip_kind(r.error) for r in results if r.outcome == SKIPPED)
    return {k: c.get(k, 0) for k in ("filter", "devices", "other")}


def clusters(results: list[Result]) -> list[tuple[str, list[Result]]]:
    groups: dict[str, list[Result]] = collections.defaultdict(list)
    for r in results:
        if r.outcome in FAILING:
            key = f"{r.outcome.upper()}: {normalize(r.error)}" if r.outcome != FAILED else normalize(r.error)
            groups[key].append(r)
    return sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))


def write(results: list[Result], out: Path, header: str = "") -> dict:
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps([dataclasses.asdict(r) for r in results], indent=1))
    by_file: dict[str, list[Result]] = collections.defaultdict(list)
    for r in results:
        by_file[r.file].append(r)
    lines = ["# pjrtx conformance report", ""]
    if header:
        lines += [header, ""]
    lines += ["| file | passed | failed | errors | crashed | timed out | skipped "
              "(filter / devices / other) | pass rate (of non-skipped) |",
              "|---|---:|---:|---:|---:|---:|---:|---:|"]

    def row(name, rs):
        c, k = counts(rs), skip_counts(rs)
        return (f"| {name} | {c['passed']} | {c['failed']} | {c['error']} | {c['crash']} "
                f"| {c['timeout']} | {c['skipped']} ({k['filter']} / {k['devices']} / {k['other']}) "
                f"| {pass_rate(c):.2f}% |")

    for f in sorted(by_file):
        lines.append(row(f, by_file[f]))
    lines.append(row("**total**", results))
    total = counts(results)
    rerun = [r for r in results if r.reference]
    if rerun:
        theirs = [r for r in rerun if fails_on_reference(r)]
        lines += ["", f"Failing tests rerun on XLA:CPU (--reference): {len(rerun)}; "
                  f"{len(theirs)} fail there too. Pass rate without them (pjrtx's own "
                  f"failures only): {own_rate(results):.2f}%."]
    lines += ["", "Skips: *filter* = upstream's device filter or another platform named; "
              "*devices* = needs more devices than one; *other* = the rest (read them).",
              "", "## Failure clusters (largest first)", ""]
    for key, members in clusters(results):
        lines.append(f"- **{len(members)}** `{key}`  \n  e.g. `{members[0].id}`")
    if any(fails_on_reference(r) for r in results):
        lines += ["", "## Failures that fail on XLA:CPU too (the tag's own)", ""]
        lines += [f"- `{r.id}` (XLA:CPU: {r.reference})" for r in results if fails_on_reference(r)]
    lines += ["", "## Skip reasons per file (kind, count, normalized reason)", ""]
    for f in sorted(by_file):
        skips = collections.Counter(normalize(r.error) for r in by_file[f] if r.outcome == SKIPPED)
        if not skips:
            continue
        kinds = {normalize(r.error): skip_kind(r.error) for r in by_file[f] if r.outcome == SKIPPED}
        lines.append(f"- **{f}**")
        for reason, n in skips.most_common(12):
            lines.append(f"  - {kinds[reason]} {n}: {reason}")
        if len(skips) > 12:
            lines.append(f"  - ... {len(skips) - 12} more reasons")
    (out / "report.md").write_text("\n".join(lines) + "\n")
    return total
