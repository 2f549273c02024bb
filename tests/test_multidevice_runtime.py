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

import pytest

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


_COUNT_CHILD = r"""
from pjrtx import jax_plugin; jax_plugin.ensure_registered()
import jax
print("COUNTS", len(jax.devices("pjrtx")), len(jax.devices("cpu")))
"""


@pytest.mark.parametrize("pjrtx_devices, want", [(None, 3), ("2", 2)])
def test_xla_host_device_count_flag_sets_the_default(tmp_path, pjrtx_devices, want):
    # Scripts and suites (flax's nnx tests) set XLA_FLAGS'
    # --xla_force_host_platform_device_count before importing jax to get
    # several devices; with PJRTX_DEVICES unset pjrtx lists as many.
    from _procs import child_env

    env = child_env(JAX_PLATFORMS="pjrtx,cpu",
                    XLA_FLAGS="--xla_force_host_platform_device_count=3")
    if pjrtx_devices:
        env["PJRTX_DEVICES"] = pjrtx_devices
    p = subprocess.run([sys.executable, "-c", _COUNT_CHILD], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert f"COUNTS {want} 3" in p.stdout, p.stdout + p.stderr[-2000:]


_DONOR_CHILD = r"""
from pjrtx import jax_plugin; jax_plugin.ensure_registered()
import jax, jax.numpy as jnp, numpy as np
from jax.sharding import NamedSharding, PartitionSpec as P
for platform in ("pjrtx", "cpu"):
    mesh = jax.sharding.Mesh(np.array(jax.devices(platform)[:2]), ("x",))
    s1, s2 = NamedSharding(mesh, P("x")), NamedSharding(mesh, P(None, "x", None))
    # no output of x's per-device size: x stays alive
    x = jax.device_put(np.arange(16.0).reshape(8, 2), s1)
    jax.jit(lambda a: a @ a.T, donate_argnums=0)(x)
    # same size, other shapes: every donor is taken
    a = jax.device_put(np.arange(16), s1)
    b = jax.device_put(np.arange(16).reshape(16, 1), s1)
    c = jax.device_put(np.arange(16).reshape(2, 2, 4), s1)
    outs = jax.jit(lambda a, b, c: (a, b.reshape(16), c), out_shardings=(s1, s1, s2),
                   donate_argnums=(0, 1, 2))(a, b, c)
    print("DONORS", platform, x.is_deleted(), a.is_deleted(), b.is_deleted(), c.is_deleted(),
          [np.asarray(o).sum().item() for o in outs])
"""


def test_buffer_donors_are_taken_only_by_an_output_of_their_size(tmp_path):
    # JAX marks donated arguments of sharded programs jax.buffer_donor and
    # leaves the pairing to the compiler: XLA takes a donor only for an
    # output of its per-device byte size and leaves the others alive.
    from _procs import child_env

    env = child_env(JAX_PLATFORMS="pjrtx,cpu", PJRTX_DEVICES="2",
                    XLA_FLAGS="--xla_force_host_platform_device_count=2")
    p = subprocess.run([sys.executable, "-c", _DONOR_CHILD], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    lines = {l.split()[1]: l.split(None, 2)[2] for l in p.stdout.splitlines() if l.startswith("DONORS")}
    assert set(lines) == {"pjrtx", "cpu"}, p.stdout + p.stderr[-2000:]
    assert lines["pjrtx"] == lines["cpu"], lines
    assert lines["cpu"].startswith("False True True True"), lines
