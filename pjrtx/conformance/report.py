"""results.json and report.md: per-file counts, skip reasons, and failures
clustered by normalized error message (the to-do list, largest first)."""
from __future__ import annotations

import collections
import dataclasses
import json
import re
from pathlib import Path

from pjrtx.conformance.runner import CRASH, FAILED, FAILING, PASSED, SKIPPED, TIMEOUT, Result

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
    return {k: c.get(k, 0) for k in (PASSED, FAILED, CRASH, TIMEOUT, SKIPPED)}


def pass_rate(c: dict) -> float:
    ran = c[PASSED] + c[FAILED] + c[CRASH] + c[TIMEOUT]
    return 100.0 * c[PASSED] / ran if ran else 0.0


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
    lines += ["| file | passed | failed | crashed | timed out | skipped | pass rate (of non-skipped) |",
              "|---|---:|---:|---:|---:|---:|---:|"]
    for f in sorted(by_file):
        c = counts(by_file[f])
        lines.append(f"| {f} | {c[PASSED]} | {c[FAILED]} | {c[CRASH]} | {c[TIMEOUT]} | {c[SKIPPED]} "
                     f"| {pass_rate(c):.2f}% |")
    total = counts(results)
    lines.append(f"| **total** | {total[PASSED]} | {total[FAILED]} | {total[CRASH]} | {total[TIMEOUT]} "
                 f"| {total[SKIPPED]} | {pass_rate(total):.2f}% |")
    lines += ["", "## Failure clusters (largest first)", ""]
    for key, members in clusters(results):
        lines.append(f"- **{len(members)}** `{key}`  \n  e.g. `{members[0].id}`")
    lines += ["", "## Skip reasons", ""]
    skips = collections.Counter((r.file, normalize(r.error)) for r in results if r.outcome == SKIPPED)
    for (f, reason), n in skips.most_common(40):
        lines.append(f"- {n} in {f}: {reason}")
    (out / "report.md").write_text("\n".join(lines) + "\n")
    return total
