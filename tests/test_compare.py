"""`python -m pjrtx compare -- pytest ARGS` on a tiny suite written here:
tests that pass on both backends, one that fails only on pjrtx, one that
aborts its process and one that hangs only on pjrtx, and a conftest.py that
pins JAX to the CPU (as numpyro's does), which the pjrtx run must undo."""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import pjrtx
from pjrtx.compare import runner as compare
from pjrtx.conformance import expectations
from pjrtx.testing.engine import PytestRun, Result, run_pytest

SUITE = '''
import os
import time

import jax
import jax.numpy as jnp
import pytest


def on_pjrtx():
    return jax.default_backend() == "pjrtx"


def test_add():
    assert float(jax.jit(lambda x: x + 1)(jnp.float32(1))) == 2.0


@pytest.mark.parametrize("n", [1, 3])
def test_sum(n):
    assert int(jnp.arange(n).sum()) == n * (n - 1) // 2


def test_backend_is_cpu():
    assert jax.default_backend() == "cpu"


def test_abort():
    if on_pjrtx():
        os.abort()


def test_hang():
    if on_pjrtx():
        time.sleep(120)


def test_skipped():
    pytest.skip("not here")


def test_after():  # runs after the crash and the hang: the run went on
    assert jnp.ones(3).sum() == 3
'''

CONFTEST = '''
import jax

jax.config.update("jax_platform_name", "cpu")
'''

MODULE_SKIP = '''
import jax
import pytest

if jax.default_backend() != "cpu":
    pytest.skip("only on cpu (synthetic)", allow_module_level=True)


def test_only_cpu():
    pass
'''

KNOWN = '''
# reason: the suite skips this module on other backends (synthetic)
test/test_modskip.py::test_only_cpu
# reason: the process aborts on pjrtx (synthetic)
test/test_suite.py::test_abort
# reason: hangs on pjrtx (synthetic)
test/test_suite.py::test_hang
# reason: stale: matches XLA:CPU
test/test_suite.py::test_add
'''


def _env():
    env = dict(os.environ)
    root = str(Path(pjrtx.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    return env


@pytest.fixture(scope="module")
def compared(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("suite")
    (tmp / "pyproject.toml").write_text('[project]\nname = "synthetic"\n')
    (tmp / "test").mkdir()
    (tmp / "test" / "conftest.py").write_text(CONFTEST)
    (tmp / "test" / "test_suite.py").write_text(SUITE)
    (tmp / "test" / "test_modskip.py").write_text(MODULE_SKIP)
    (tmp / "known.txt").write_text(KNOWN)
    out = tmp / "report"
    proc = subprocess.run(
        [sys.executable, "-m", "pjrtx", "compare", "--out", str(out), "--timeout", "8",
         "--check", "known.txt", "--", "pytest", "test", "-q"],
        cwd=tmp, env=_env(), capture_output=True, text=True, timeout=240)
    summary = json.loads((out / "compare.json").read_text())
    return proc, summary, out


def test_outcomes_per_backend(compared):
    _, s, _ = compared
    got = {side: {r["id"].split("::")[1]: r for r in rs} for side, rs in s["results"].items()}
    assert {t: r["outcome"] for t, r in got["cpu"].items()} == {
        "test_add": "passed", "test_sum[1]": "passed", "test_sum[3]": "passed",
        "test_backend_is_cpu": "passed", "test_abort": "passed", "test_hang": "passed",
        "test_skipped": "skipped", "test_after": "passed", "test_only_cpu": "passed"}
    pj = got["pjrtx"]
    assert {t: r["outcome"] for t, r in pj.items()} == {
        "test_add": "passed", "test_sum[1]": "passed", "test_sum[3]": "passed",
        "test_backend_is_cpu": "failed", "test_abort": "crash", "test_hang": "timeout",
        "test_skipped": "skipped", "test_after": "passed", "test_only_cpu": "skipped"}
    # Skipped at collection: no test reported it, the other side's ids do.
    assert pj["test_only_cpu"]["error"] == "only on cpu (synthetic) (module skipped)"
    assert "SIGABRT" in pj["test_abort"]["error"]
    assert "assert 'pjrtx' == 'cpu'" in pj["test_backend_is_cpu"]["error"]
    assert s["sides"]["pjrtx"]["backend"].startswith("pjrtx")
    assert s["sides"]["cpu"]["backend"].startswith("cpu")


def test_differences_are_clustered_and_named(compared):
    _, s, out = compared
    clusters = {d["id"].split("::")[1]: d["cluster"] for d in s["differences"]}
    assert set(clusters) == {"test_backend_is_cpu", "test_abort", "test_hang", "test_only_cpu"}
    assert clusters["test_only_cpu"].startswith("pjrtx SKIPPED, XLA:CPU PASSED")
    assert clusters["test_abort"].startswith("pjrtx CRASHED, XLA:CPU PASSED")
    assert clusters["test_hang"].startswith("pjrtx HUNG (timeout), XLA:CPU PASSED")
    assert clusters["test_backend_is_cpu"].startswith("pjrtx FAILED, XLA:CPU PASSED: pjrtx: AssertionError")
    md = (out / "report.md").read_text()
    assert "## Differences: 4 tests" in md and "CRASHED" in md and "HUNG" in md


def test_cpu_pin_is_overridden_and_said(compared):
    proc, s, out = compared
    line = "synthetic pins jax_platform_name=cpu in test/conftest.py:4; overridden for the pjrtx run"
    assert s["pins"] == [line]
    assert line in (out / "report.md").read_text() and line in proc.stdout


def test_check(compared):
    proc, s, out = compared
    assert proc.returncode == 1, proc.stdout + proc.stderr
    problems = [l for l in proc.stdout.splitlines() if l.startswith(("differs", "now matches"))]
    assert len(problems) == 2, proc.stdout
    assert problems[0].startswith("differs, not in known.txt: test/test_suite.py::test_backend_is_cpu")
    assert problems[1].startswith("now matches XLA:CPU, remove from known.txt (stale: matches "
                                  "XLA:CPU): test/test_suite.py::test_add")
    # The drafted file lists exactly today's differences: --check with it passes.
    known = expectations.read_reasoned_ids(out / "known_differences.txt")
    results = {side: [Result(**r) for r in rs] for side, rs in s["results"].items()}
    assert len(known) == 4
    assert compare.check(s["differences"], results, known, "known_differences.txt") == []
    # A `# flaky:` entry may match or differ: test_add matches, and listed
    # under a reason it is stale; listed as flaky it is not.
    add = "test/test_suite.py::test_add"
    assert compare.check(s["differences"], results, {**known, add: "stale"}, "k")[0].startswith(
        "now matches XLA:CPU")
    assert compare.check(s["differences"], results, {**known, add: expectations.FLAKY + "draws"}, "k") == []


def test_scan_finds_environment_pins(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "conftest.py").write_text(textwrap.dedent('''
        import os
        os.environ["JAX_PLATFORMS"] = "cpu"
        os.environ.setdefault('JAX_PLATFORM_NAME', 'cpu')
        # jax.config.update("jax_platforms", "cpu")  (a comment)
        jax.config.update("jax_platforms", "pjrtx,cpu")
    '''))
    pins = compare.scan_pins(tmp_path)
    assert [(p["name"], p["line"]) for p in pins] == [("JAX_PLATFORMS", 3), ("JAX_PLATFORM_NAME", 4)]


def test_total_timeout_stops_the_run(tmp_path):
    (tmp_path / "test_t.py").write_text(textwrap.dedent('''
        import time
        def test_a(): pass
        def test_b(): time.sleep(60)
        def test_c(): pass
    '''))
    import time

    run = run_pytest(PytestRun([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
                               tmp_path, _env(), timeout=60, deadline=time.monotonic() + 8,
                               log=open(os.devnull, "w")))
    got = {r.id: r.outcome for r in run.results}
    assert got == {"test_t.py::test_a": "passed", "test_t.py::test_b": "timeout"}
    assert run.stopped and run.collected[-1] == "test_t.py::test_c"


def test_suite_that_turns_warnings_into_errors(tmp_path):
    # numpyro's pytest config has filterwarnings = error: loading the compare
    # plugins must not warn (a module imported before pytest registers it
    # cannot be assertion-rewritten), or neither side runs a test.
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "strict"\n[tool.pytest.ini_options]\nfilterwarnings = ["error"]\n')
    (tmp_path / "test_s.py").write_text("def test_a():\n    assert 1 + 1 == 2\n")
    out = tmp_path / "report"
    proc = subprocess.run(
        [sys.executable, "-m", "pjrtx", "compare", "--out", str(out), "--", "pytest", "-q"],
        cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=240)
    s = json.loads((out / "compare.json").read_text())
    for side in ("pjrtx", "cpu"):
        assert [(r["id"], r["outcome"]) for r in s["results"][side]] == [
            ("test_s.py::test_a", "passed")], proc.stdout + proc.stderr


def test_keyword_selection_lists_only_selected_tests(tmp_path):
    # -k deselects in pytest's own collection hook: the collected list the
    # runner checks results against must not include the deselected tests,
    # or they read as lost to a crash.
    (tmp_path / "test_k.py").write_text("def test_keep(): pass\ndef test_drop(): pass\n")
    run = run_pytest(PytestRun([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                                "-k", "keep"], tmp_path, _env(), timeout=60,
                               log=open(os.devnull, "w")))
    assert {r.id: r.outcome for r in run.results} == {"test_k.py::test_keep": "passed"}
    assert run.collected == ["test_k.py::test_keep"]
