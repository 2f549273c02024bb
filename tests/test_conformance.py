"""The conformance runner on a small self-written suite shaped like JAX's
tests/ folder: a passing, failing, crashing, hanging and skipped test."""
import dataclasses
import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from pjrtx.conformance import expectations, report, runner
from pjrtx.testing.engine import Result

FAKE_OPS_TEST = '''
import os, time, unittest
from absl.testing import absltest


class FakeOpsTest(absltest.TestCase):
  def testPasses(self):
    self.assertEqual(1 + 1, 2)

  def testFails(self):
    self.assertEqual(1 + 1, 3, "arithmetic is broken")

  def testCrashes(self):
    os.abort()

  def testHangs(self):
    time.sleep(600)

  def testSkipped(self):
    raise unittest.SkipTest("float64 is not supported on this device")

  def testAsksForGpu(self):
    # what jax.devices("gpu") raises where JAX has no GPU backend
    raise RuntimeError("Unknown backend: 'gpu' requested, but no platforms that are "
                       "instances of gpu are present. Platforms present are: cpu,pjrtx")

  def testOtherBackendError(self):
    raise RuntimeError("Unknown backend: 'pjrtx' requested, but no platforms that are "
                       "instances of pjrtx are present.")

  def testZLast(self):
    # runs after the crash and the hang: the run must resume past them
    self.assertTrue(True)


if __name__ == "__main__":
  absltest.main()
'''

FAKE_BROKEN_TEST = '''
import a_module_that_does_not_exist_anywhere  # noqa: F401


def test_never_collected():
  pass
'''

FAKE_TAGS_TEST = '''
import unittest

import jax._src.test_util as jtu


class TagsTest(unittest.TestCase):
  @jtu.run_on_devices("cpu")
  def test_cpu_only(self):
    assert jtu.test_device_matches(["cpu"]) and jtu.test_device_matches(["pjrtx"])

  @jtu.skip_on_devices("cpu")
  def test_not_on_cpu(self):
    pass

  def test_two_devices(self):
    raise unittest.SkipTest("Test requires at least 2 devices")

  def test_tpu_or_gpu(self):
    if not jtu.test_device_matches(["tpu", "gpu"]):
      raise unittest.SkipTest("Memories do not work on CPU backend yet.")

  @jtu.skip_on_devices("cpu")
  def test_rule_not_on_cpu(self):
    assert not jtu.test_device_matches(["cpu"])

  @jtu.run_on_devices("tpu")
  def test_rule_tpu_only(self):
    assert jtu.test_device_matches(["tpu"])
'''

FAKE_API_TEST = '''
import jax
import jax._src.test_util as jtu


def test_device_under_test_is_pjrtx():
  assert jtu.device_under_test() == "pjrtx"
  assert jax.default_backend() == "pjrtx"
  # A test may still ask for XLA:CPU as its own reference.
  assert jax.devices("cpu")
'''


FAKE_REFERENCE_TEST = '''
import jax
import numpy as np


def test_wrong_on_pjrtx_only():
  # a pjrtx defect: right on XLA:CPU, wrong on the device under test
  x = jax.jit(lambda a: a + 1)(np.float32(1))
  assert float(x) == 2.0 and jax.default_backend() != "pjrtx", jax.default_backend()


def test_wrong_everywhere():
  # the tag's own failure (an expectation no backend meets)
  assert float(jax.jit(lambda a: a + 1)(np.float32(1))) == 3.0


def test_right_everywhere():
  assert float(jax.jit(lambda a: a * 2)(np.float32(2))) == 4.0
'''


FAKE_CHECKOUT_TEST = '''
from jax._src import fake_checkout_test_util
from jax._src import test_util


def test_helper_missing_from_wheel_comes_from_checkout():
  assert fake_checkout_test_util.FROM_CHECKOUT


def test_wheel_module_is_not_shadowed_by_checkout():
  assert not hasattr(test_util, "FROM_CHECKOUT")
'''


@pytest.fixture(scope="module")
def fake_suite(tmp_path_factory):
    checkout = tmp_path_factory.mktemp("jax")
    root = checkout / "tests"
    root.mkdir()
    (root / "fake_ops_test.py").write_text(FAKE_OPS_TEST)
    (root / "fake_api_test.py").write_text(FAKE_API_TEST)
    (root / "fake_broken_test.py").write_text(FAKE_BROKEN_TEST)
    (root / "fake_tags_test.py").write_text(FAKE_TAGS_TEST)
    # jax-v0.10.2's wheel leaves out jax/_src/hypothesis_test_util.py; the
    # runner takes such helpers from the checkout beside tests/, and only those.
    src = checkout / "jax" / "_src"
    src.mkdir(parents=True)
    (src / "fake_checkout_test_util.py").write_text("FROM_CHECKOUT = True\n")
    (src / "test_util.py").write_text("FROM_CHECKOUT = True\n")
    (root / "fake_checkout_test.py").write_text(FAKE_CHECKOUT_TEST)
    (root / "fake_reference_test.py").write_text(FAKE_REFERENCE_TEST)
    return root


@pytest.fixture(scope="module")
def results(fake_suite):
    opts = runner.Options(jax_tests=fake_suite, files=["fake_ops_test.py", "fake_api_test.py"],
                          jobs=2, timeout=5.0)
    return {r.id.split("::")[-1]: r for r in runner.run(opts)}


def test_outcomes(results):
    assert results["testPasses"].outcome == "passed"
    assert results["testFails"].outcome == "failed"
    assert "arithmetic is broken" in results["testFails"].error
    assert results["testCrashes"].outcome == "crash"
    assert "SIGABRT" in results["testCrashes"].error
    assert results["testHangs"].outcome == "timeout"
    assert results["testSkipped"].outcome == "skipped"
    assert "float64" in results["testSkipped"].error
    assert results["testZLast"].outcome == "passed"
    # a test that needs JAX's GPU backend on a machine without one is a
    # hardware skip; the same error for the device under test is a failure
    assert results["testAsksForGpu"].outcome == "skipped"
    assert results["testAsksForGpu"].error.startswith("hardware:")
    assert report.skip_kind(results["testAsksForGpu"].error) == "filter"
    assert results["testOtherBackendError"].outcome == "failed"
    assert results["test_device_under_test_is_pjrtx"].outcome == "passed"
    assert len(results) == 9


def test_test_helpers_missing_from_the_wheel_come_from_the_checkout(fake_suite):
    opts = runner.Options(jax_tests=fake_suite, files=["fake_checkout_test.py"], timeout=60.0)
    res = {r.id.split("::")[-1]: r for r in runner.run(opts)}
    assert {k: r.outcome for k, r in res.items()} == {
        "test_helper_missing_from_wheel_comes_from_checkout": "passed",
        "test_wheel_module_is_not_shadowed_by_checkout": "passed"}, res


def test_report_and_clusters(results, tmp_path):
    total = report.write(list(results.values()), tmp_path, "header line")
    assert total == {"passed": 3, "failed": 2, "error": 0, "crash": 1, "timeout": 1, "skipped": 2}
    data = json.loads((tmp_path / "results.json").read_text())
    assert {d["outcome"] for d in data} == {"passed", "failed", "crash", "timeout", "skipped"}
    md = (tmp_path / "report.md").read_text()
    assert "| fake_ops_test.py | 2 | 2 | 0 | 1 | 1 | 2 (1 / 0 / 1) | 33.33% |" in md
    assert "CRASH: process died" in md and "TIMEOUT" in md


def test_normalize_groups_messages_that_differ_in_numbers_and_locations():
    a = report.normalize("pjrtx: unsupported op stablehlo.fft at loc(\"x.py\":12:4)")
    b = report.normalize("pjrtx: unsupported op stablehlo.fft at loc(\"y.py\":99:1)")
    c = report.normalize("shape f32[2,3] != f32[4,5]")
    assert a == b
    assert c == report.normalize("shape f32[7,8] != f32[1,1]")
    assert a != c


def test_check_flags_new_failures_and_stale_entries(results):
    ids = {name: r.id for name, r in results.items()}
    known = {ids["testFails"]: "r", ids["testCrashes"]: "r", ids["testHangs"]: "r",
             ids["testOtherBackendError"]: "r"}
    assert expectations.check(list(results.values()), known) == []
    problems = expectations.check(list(results.values()), {ids["testFails"]: "r", ids["testPasses"]: "r"})
    assert any("new failure" in p and "testCrashes" in p for p in problems)
    assert any("now passes" in p and "testPasses" in p for p in problems)


def test_known_failures_file_format(tmp_path):
    (tmp_path / "known_failures.txt").write_text(textwrap.dedent("""\
        # header comment
        # reason: float64: no f64 on MLX GPU streams
        a_test.py::T::test1
        a_test.py::T::test2
        # reason: gather not lowered yet
        b_test.py::test3
        """))
    known = expectations.read_known_failures(tmp_path)
    assert known == {"a_test.py::T::test1": "float64: no f64 on MLX GPU streams",
                     "a_test.py::T::test2": "float64: no f64 on MLX GPU streams",
                     "b_test.py::test3": "gather not lowered yet"}


def test_flaky_entries_may_pass_or_fail(tmp_path):
    (tmp_path / "known_failures.txt").write_text(textwrap.dedent("""\
        # reason: always fails
        a_test.py::T::test1
        # flaky: depends on which fusion tier ran first
        a_test.py::T::test2
        """))
    known = expectations.read_known_failures(tmp_path)
    assert known["a_test.py::T::test2"].startswith(expectations.FLAKY)
    R = lambda i, o: Result(i, "a_test.py", o)  # noqa: E731
    both_pass = [R("a_test.py::T::test1", "passed"), R("a_test.py::T::test2", "passed")]
    problems = expectations.check(both_pass, known)
    assert len(problems) == 1 and "test1" in problems[0]
    assert expectations.check([R("a_test.py::T::test2", "failed")], known) == []


def test_x64_run_reads_its_own_known_failures(tmp_path):
    (tmp_path / "known_failures.txt").write_text("# reason: r32\na_test.py::T::test1\n")
    (tmp_path / "known_failures_x64.txt").write_text("# reason: c128\na_test.py::T::test2\n")
    assert expectations.read_known_failures(tmp_path) == {"a_test.py::T::test1": "r32"}
    assert expectations.read_known_failures(tmp_path, x64=True) == {"a_test.py::T::test2": "c128"}


def test_project_expectations_parse():
    d = expectations.data_dir()
    pin = expectations.read_pin(d)
    assert pin["tag"].startswith("jax-v") and len(pin["commit"]) == 40
    sel = expectations.read_selection(d)
    assert "lax_test.py" in sel.include
    assert all(reason for reason in sel.exclude.values())
    expectations.read_known_failures(d)
    expectations.read_known_failures(d, x64=True)


def test_cli_check_exit_code(fake_suite, tmp_path):
    exp = tmp_path / "exp"
    exp.mkdir()
    (exp / "PIN").write_text("tag = jax-v0.10.2\ncommit = " + "0" * 40 + "\n")
    (exp / "selection.txt").write_text("include fake_api_test.py\n")
    (exp / "known_failures.txt").write_text("")
    cmd = [sys.executable, "-m", "pjrtx", "conformance", "--jax-tests", str(fake_suite),
           "--expectations", str(exp), "--out", str(tmp_path / "out"), "--check"]
    ok = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "1 passed" in ok.stdout
    bad = subprocess.run(cmd + ["fake_ops_test.py", "--timeout", "5"], capture_output=True,
                         text=True, timeout=300)
    assert bad.returncode == 1
    assert "new failure" in bad.stdout


def test_collection_error_is_an_error_not_an_empty_file(fake_suite, tmp_path):
    opts = runner.Options(jax_tests=fake_suite, files=["fake_broken_test.py"], timeout=60.0)
    res = runner.run(opts)
    assert [r.outcome for r in res] == ["error"]
    assert "a_module_that_does_not_exist_anywhere" in res[0].error
    total = report.write(res, tmp_path)
    assert total["error"] == 1 and report.pass_rate(total) == 0.0


def test_reference_rerun_sets_apart_failures_of_xla_cpu_too(fake_suite, tmp_path):
    opts = runner.Options(jax_tests=fake_suite, files=["fake_reference_test.py"], timeout=120.0)
    res = runner.run(opts)
    assert runner.rerun_failures_on_reference(opts, res) == 2
    by = {r.id.split("::")[-1]: r for r in res}
    assert {k: (r.outcome, r.reference) for k, r in by.items()} == {
        "test_wrong_on_pjrtx_only": ("failed", "passed"),
        "test_wrong_everywhere": ("failed", "failed"),
        "test_right_everywhere": ("passed", "")}
    assert report.pass_rate(report.counts(res)) == pytest.approx(100 / 3)
    assert report.own_rate(res) == pytest.approx(50.0)  # 1 passed, 1 of pjrtx's own
    # --check: only pjrtx's own failure is new
    problems = expectations.check(res, {})
    assert len(problems) == 1 and "test_wrong_on_pjrtx_only" in problems[0], problems
    report.write(res, tmp_path)
    md = (tmp_path / "report.md").read_text()
    assert "2; 1 fail there too" in md and "50.00%" in md
    assert "fake_reference_test.py::test_wrong_everywhere` (XLA:CPU: failed)" in md


def test_device_is_tagged_with_its_mlx_class_unless_strict(fake_suite, tmp_path):
    from pjrtx.conformance.pytest_plugin import device_class

    assert device_class() in ("cpu", "gpu")
    opts = runner.Options(jax_tests=fake_suite, files=["fake_tags_test.py"], timeout=120.0)
    tagged = {r.id.split("::")[-1]: r for r in runner.run(opts)}
    strict = {r.id.split("::")[-1]: r
              for r in runner.run(dataclasses.replace(opts, strict_tags=True))}
    on_cpu = device_class() == "cpu"
    assert tagged["test_cpu_only"].outcome == ("passed" if on_cpu else "skipped")
    assert tagged["test_not_on_cpu"].outcome == ("skipped" if on_cpu else "passed")
    assert strict["test_cpu_only"].outcome == "skipped"
    assert strict["test_not_on_cpu"].outcome == "passed"
    report.write(list(tagged.values()), tmp_path)
    md = (tmp_path / "report.md").read_text()
    # skips by device filters, and one for want of devices; on a GPU the
    # test skipped on cpu passes instead
    passed = 1 if on_cpu else 2
    assert f"| {passed} | 0 | 0 | 0 | 0 | {6 - passed} ({5 - passed} / 1 / 0) |" in md
    assert "devices 1: Test requires at least N devices" in md


def test_selection_tag_lines_add_tags_for_one_file(fake_suite, tmp_path):
    from pjrtx.conformance.pytest_plugin import device_class

    # `tag FILE TAG -- reason` runs that file with the extra tag too (a gate
    # upstream sets for an XLA back end's limit pjrtx does not share), not
    # other files, and not under --strict-tags.
    (tmp_path / "selection.txt").write_text(
        "include fake_tags_test.py\n"
        "tag fake_tags_test.py gpu,tpu -- memories exist on every MLX device\n")
    sel = expectations.read_selection(tmp_path)
    assert sel.tags == {"fake_tags_test.py": [("*", ["gpu", "tpu"])]}
    opts = runner.Options(jax_tests=fake_suite, files=["fake_tags_test.py"], timeout=120.0,
                          file_tags=sel.tags)
    tagged = {r.id.split("::")[-1]: r for r in runner.run(opts)}
    assert tagged["test_tpu_or_gpu"].outcome == "passed"
    assert tagged["test_not_on_cpu"].outcome == ("skipped" if device_class() == "cpu" else "passed")
    strict = {r.id.split("::")[-1]: r
              for r in runner.run(dataclasses.replace(opts, strict_tags=True))}
    assert strict["test_tpu_or_gpu"].outcome == "skipped"
    untagged = {r.id.split("::")[-1]: r
                for r in runner.run(dataclasses.replace(opts, file_tags={"other.py": [("*", ["gpu"])]}))}
    on_cpu = device_class() == "cpu"
    assert untagged["test_tpu_or_gpu"].outcome == ("skipped" if on_cpu else "passed")
    (tmp_path / "selection.txt").write_text("tag fake_tags_test.py gpu\n")
    with pytest.raises(ValueError, match="tag FILE"):
        expectations.read_selection(tmp_path)


def test_selection_tag_lines_for_some_tests_add_and_remove_tags(fake_suite, tmp_path):
    from pjrtx.conformance.pytest_plugin import device_class

    # `tag FILE::CLASS::GLOB TAGS -- reason` applies to the matching tests
    # only, when they run; -name takes a tag away; rules apply in order.
    (tmp_path / "selection.txt").write_text(
        "include fake_tags_test.py\n"
        "tag fake_tags_test.py::TagsTest::test_rule_not_* -cpu -- about XLA:CPU itself\n"
        "tag fake_tags_test.py::TagsTest::test_rule_tpu_only tpu -- only XLA:TPU has it\n"
        "tag fake_tags_test.py::TagsTest::test_rule_tpu_* -cpu,-tpu -- later lines win\n"
        "tag fake_tags_test.py::TagsTest::test_rule_tpu_only tpu -- and again\n")
    sel = expectations.read_selection(tmp_path)
    assert sel.tags["fake_tags_test.py"][0] == ("TagsTest::test_rule_not_*", ["-cpu"])
    opts = runner.Options(jax_tests=fake_suite, files=["fake_tags_test.py"], timeout=120.0,
                          file_tags=sel.tags)
    got = {r.id.split("::")[-1]: r for r in runner.run(opts)}
    assert got["test_rule_not_on_cpu"].outcome == "passed"
    assert got["test_rule_tpu_only"].outcome == "passed"
    # the other tests keep the device's own tags
    on_cpu = device_class() == "cpu"
    assert got["test_not_on_cpu"].outcome == ("skipped" if on_cpu else "passed")
    assert got["test_cpu_only"].outcome == ("passed" if on_cpu else "skipped")
    assert got["test_tpu_or_gpu"].outcome == ("skipped" if on_cpu else "passed")
    strict = {r.id.split("::")[-1]: r
              for r in runner.run(dataclasses.replace(opts, strict_tags=True))}
    assert strict["test_rule_tpu_only"].outcome == "skipped"
    for bad in ("tag fake_tags_test.py::X Gpu -- upper case\n",
                "tag fake_tags_test.py::X , -- no tag\n",
                "tag fake_tags_test.py::X gpu\n"):
        (tmp_path / "selection.txt").write_text(bad)
        with pytest.raises(ValueError):
            expectations.read_selection(tmp_path)


def test_plan_splits_long_files_and_starts_the_longest_first(tmp_path):
    opts = runner.Options(jax_tests=tmp_path, files=["a.py", "b.py", "c.py"],
                          durations={"a.py": 10, "b.py": 900, "c.py": 200}, split_above=300)
    units = runner.plan_units(opts)
    assert units[:3] == [("b.py", (0, 3)), ("b.py", (1, 3)), ("b.py", (2, 3))]
    assert units[3:] == [("c.py", None), ("a.py", None)]
    (tmp_path / "d.txt").write_text("# comment\na.py 12\nb.py 900 # big\n")
    assert runner.read_durations(tmp_path / "d.txt") == {"a.py": 12.0, "b.py": 900.0}


def test_harness_limitations_follow_the_device_tags(monkeypatch):
    # JAX marks bf16 svd unimplemented on ("cpu", "gpu") by name; the
    # device under test "pjrtx", tagged cpu, must be limited the same way,
    # while a harness nobody limits (f32 svd) still runs.
    from jax._src.internal_test_util import test_harnesses as th

    from pjrtx.conformance import pytest_plugin

    monkeypatch.setattr(th.Harness, "filter", th.Harness.filter)
    svd = [h for h in th.all_harnesses if h.group_name == "svd"]
    bf16 = next(h for h in svd if np.dtype(h.dtype).name == "bfloat16")
    f32 = next(h for h in svd if np.dtype(h.dtype) == np.float32)
    assert bf16.filter(device_under_test="pjrtx")  # by name alone: not limited
    pytest_plugin._harness_limitations_follow_tags({"pjrtx", "cpu"})
    assert not bf16.filter(device_under_test="pjrtx")
    assert f32.filter(device_under_test="pjrtx")
