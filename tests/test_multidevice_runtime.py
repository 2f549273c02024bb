"""The multi-device runtime under concurrency and failure (4 pjrtx devices in
a child process): two threads launching different collective programs at
once neither deadlock nor mix up their results (every multi-device run is
posted to all devices in one order), and a run that fails on one device
makes the others raise at once, naming that failure, instead of waiting in
their collective until PJRTX_COLLECTIVE_TIMEOUT_S."""
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def test_concurrent_runs_and_a_failing_device():
    env = dict(os.environ)
    # The pjrtx this test process imported (the installed one in CI, the
    # checkout with its built extension in development).
    import pjrtx
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(os.path.dirname(pjrtx.__file__)),
                                         env.get("PYTHONPATH", "")])
    env.pop("XLA_FLAGS", None)
    p = subprocess.run([sys.executable, os.path.join(HERE, "_multidevice_runtime_worker.py")],
                       env=env, capture_output=True, text=True, timeout=300)
    out = p.stdout
    assert p.returncode == 0, p.stderr[-3000:]
    # 2 x 60 calls, each result compared exactly with NumPy in its thread.
    assert "ALIVE [False, False] ERRS []" in out, out + p.stderr[-3000:]
    m = re.search(r"^RAISED (\S+) (\w+): .*another device's run failed.*device-specific failure"
                  r".* after ([\d.]+)$", out, re.M)
    assert m, out + p.stderr[-3000:]
    assert m.group(2) in ("ABORTED", "INTERNAL")
    # Far below the 60 s collective timeout the worker sets.
    assert float(m.group(3)) < 30, out
