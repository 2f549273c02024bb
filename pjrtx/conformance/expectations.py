"""Expectations as data (third_party/jax_upstream/): the pinned upstream tag,
the file selection, and known failures grouped under their reasons.

known_failures.txt:
    # reason: <why these fail>
    lax_test.py::LaxTest::testFoo
    # flaky: <why these pass in some runs and fail in others>
    ode_test.py::ODETest::testBar
--check fails when an unlisted test fails or a listed one passes, so the
list can only shrink. A test under `# flaky:` may do either; the reason
must say what its outcome depends on.
"""
from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from pjrtx.testing.engine import FAILING, PASSED, Result


def data_dir() -> Path:
    # An installed wheel carries a copy as pjrtx/jax_upstream (CMakeLists.txt
    # installs it); a source checkout reads <repo>/third_party/jax_upstream.
    installed = Path(__file__).resolve().parents[1] / "jax_upstream"
    if installed.is_dir():
        return installed
    return Path(__file__).resolve().parents[2] / "third_party" / "jax_upstream"


def read_pin(d: Path) -> dict:
    pin = {}
    for line in (d / "PIN").read_text().splitlines():
        if "=" in line and not line.lstrip().startswith("#"):
            k, v = line.split("=", 1)
            pin[k.strip()] = v.strip()
    return pin


@dataclasses.dataclass
class Selection:
    include: list[str]
    exclude: dict[str, str]  # file or glob -> reason
    # file -> [(test pattern, [tag, ...]), ...] from `tag` lines, in file
    # order: the device tags a test runs with besides "pjrtx" and the MLX
    # device class. Pattern "*" is the whole file; "-name" removes a tag.
    tags: dict = dataclasses.field(default_factory=dict)


_TAG_NAME = re.compile(r"-?[a-z][a-z0-9_]*")
TAG_LINE = "tag FILE[::CLASS::TEST_GLOB] TAG[,TAG] -- reason (a TAG of -name removes that tag)"


def _read_tag_line(raw: str, rest: str, sel: Selection) -> None:
    spec, _, reason = rest.partition("--")
    parts = spec.split()
    if len(parts) != 2 or not reason.strip():
        raise ValueError(f"selection.txt: a tag line is `{TAG_LINE}`: {raw!r}")
    file, _, pattern = parts[0].partition("::")
    names = [t for t in parts[1].split(",") if t]
    bad = [t for t in names if not _TAG_NAME.fullmatch(t)]
    if not names or bad:
        raise ValueError(f"selection.txt: bad device tag {bad or parts[1]!r} in {raw!r}")
    sel.tags.setdefault(file, []).append((pattern or "*", sorted(names)))


def read_selection(d: Path) -> Selection:
    sel = Selection([], {})
    for raw in (d / "selection.txt").read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        kind, _, rest = line.partition(" ")
        if kind == "include":
            sel.include.append(rest.strip())
        elif kind == "exclude":
            name, _, reason = rest.partition("--")
            sel.exclude[name.strip()] = reason.strip()
        elif kind == "tag":
            _read_tag_line(raw, rest, sel)
        else:
            raise ValueError(f"selection.txt: cannot read line {raw!r}")
    return sel


def read_known_failures(d: Path, x64: bool = False) -> dict[str, str]:
    """test id -> reason. An x64 run (JAX_ENABLE_X64=1) has its own list,
    known_failures_x64.txt: with 64-bit types on, other tests run (and
    fail for other reasons, e.g. complex128), so neither list is a subset
    of the other."""
    path = d / ("known_failures_x64.txt" if x64 else "known_failures.txt")
    return read_reasoned_ids(path) if path.exists() else {}


FLAKY = "flaky: "


def read_reasoned_ids(path: Path) -> dict[str, str]:
    """Test ids grouped under `# reason: ...` (or `# flaky: ...`) lines ->
    {id: reason} (a flaky one's reason starts with FLAKY; other `#` lines
    are comments); an id with no reason above it is an error."""
    known, reason = {}, None
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if line.startswith("# reason:"):
            reason = line[len("# reason:"):].strip()
        elif line.startswith("# flaky:"):
            reason = FLAKY + line[len("# flaky:"):].strip()
        elif line and not line.startswith("#"):
            if reason is None:
                raise ValueError(f"{path.name}: {line} has no '# reason:' above it")
            known[line] = reason
    return known


def check(results: list[Result], known: dict[str, str]) -> list[str]:
    """Problems that make --check fail: new failures and stale entries. A
    failure that failed on XLA:CPU too (--reference) is the tag's own, not
    new for pjrtx."""
    problems = []
    ran = {r.id: r for r in results}
    for r in results:
        if r.outcome in FAILING and r.id not in known and r.reference not in FAILING:
            problems.append(f"new failure: {r.id}: {r.outcome}: {r.error}")
    for test_id, reason in known.items():
        r = ran.get(test_id)
        if r is not None and r.outcome == PASSED and not reason.startswith(FLAKY):
            problems.append(f"now passes, remove from known failures ({reason}): {test_id}")
    return problems
