"""jax_smoke/'s end-to-end programs, each in its own process as a user runs
it: each trains (or transforms) on pjrtx and on XLA:CPU side by side and
exits non-zero when the results differ beyond the bound it states."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

SMOKE = Path(__file__).resolve().parent.parent / "jax_smoke"
# Each ends its output with "N passed, M failed". A script named here that
# is missing fails its case (a rename must not silently drop it).
SCRIPTS = ["data_parallel.py", "f64_stages.py", "gp_regression.py", "rnn_scan.py", "smoke.py", "spectral.py",
           "train_cnn.py", "train_mlp.py"]
# jax_smoke/'s other programs: the test that runs each, or why none does.
ELSEWHERE = {
    "op_suite.py": ("tests/test_op_suite.py", "imports it and runs every program"),
    "bench.py": ("tests/test_bench.py", "runs it with --quick"),
    "bench_donation.py": ("tests/test_bench.py", "runs it on a small buffer"),
    "bench_dispatch.py": (None, "timings only; needs MLX's own Python package (mlx.core)"),
    "bench_loop.py": (None, "a benchmark against MLX's own Python package (mlx.core)"),
    "bench_loop_engines.py": ("tests/test_bench.py", "runs it; it checks its answers against XLA:CPU"),
    "bench_loop_placement.py": ("tests/test_bench.py", "runs it on two sizes; it checks its answers"),
    "bench_first_call.py": ("tests/test_bench.py", "runs its newton row; it checks its answers"),
    "bench_collectives.py": (None, "timings only: pjrtx against mx.distributed across processes "
                             "(tests/test_multiprocess.py checks the values)"),
    "loop_dot_rounding.py": (None, "a measurement of how often XLA:CPU's dot order is pjrtx's; "
                             "tests/test_host_loops.py asserts pjrtx's order itself"),
}


def test_every_jax_smoke_script_is_run_or_accounted_for():
    present = {p.name for p in SMOKE.glob("*.py") if not p.name.startswith("_")}
    assert not set(SCRIPTS) & set(ELSEWHERE)
    assert present == set(SCRIPTS) | set(ELSEWHERE), (
        f"in jax_smoke/ but not listed: {sorted(present - set(SCRIPTS) - set(ELSEWHERE))}; "
        f"listed but not in jax_smoke/: {sorted((set(SCRIPTS) | set(ELSEWHERE)) - present)}")
    for script, (test, _why) in ELSEWHERE.items():
        if test is not None:
            assert script in (SMOKE.parent / test).read_text(), (script, test)


@pytest.mark.parametrize("script", SCRIPTS)
def test_smoke_script(script):
    assert (SMOKE / script).is_file(), f"jax_smoke/{script} is missing (renamed? update SCRIPTS)"
    env = dict(os.environ, JAX_PLATFORMS="pjrtx,cpu")
    proc = subprocess.run([sys.executable, script], cwd=SMOKE, env=env, capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    # At least one check ran and none failed.
    last = proc.stdout.splitlines()[-1] if proc.stdout.strip() else ""
    m = re.fullmatch(r"(\d+) passed, 0 failed", last.strip())
    assert m and int(m.group(1)) > 0, proc.stdout[-2000:]
