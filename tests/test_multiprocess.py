"""pjrtx across processes (jax.distributed): 2 processes x 2 devices on
127.0.0.1, joined through MLX's distributed engine (ring). Every program of
_multiprocess_worker.py runs over all four devices on pjrtx and on XLA:CPU
(which spans the same processes with its own collectives), and each
process compares the shards it holds."""
import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import _multiprocess_worker as worker  # noqa: E402
from _procs import child_env, free_port  # noqa: E402

NPROC, NDEV = 2, 2


def _env(ndev=NDEV):
    return child_env(PJRTX_DEVICES=str(ndev),
                     XLA_FLAGS=f"--xla_force_host_platform_device_count={ndev}")


def run_processes(args_of, env, timeout=300):
    """Starts one worker per process; returns [(rc, stdout, stderr)]."""
    procs = [subprocess.Popen([sys.executable, *args_of(i)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for i in range(NPROC)]
    outs = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=timeout)
            outs.append((p.returncode, out, err))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    return outs


@pytest.fixture(scope="module")
def results():
    port = free_port()
    outs = run_processes(lambda i: [os.path.join(HERE, "_multiprocess_worker.py"), str(port),
                                    str(i), str(NPROC)], _env())
    parsed = []
    for rc, out, err in outs:
        assert rc == 0, f"worker exited {rc}:\n{out[-2000:]}\n{err[-4000:]}"
        info = [json.loads(ln[5:]) for ln in out.splitlines() if ln.startswith("INFO ")]
        res = {r["name"]: r["errors"] for r in
               (json.loads(ln[7:]) for ln in out.splitlines() if ln.startswith("RESULT "))}
        parsed.append((info[0], res))
    return parsed


def test_every_process_lists_every_device(results):
    for pid, (info, _) in enumerate(results):
        assert info["process_index"] == pid
        assert info["process_count"] == NPROC
        assert info["devices"] == list(range(NPROC * NDEV))
        assert info["device_processes"] == [p for p in range(NPROC) for _ in range(NDEV)]
        assert info["local"] == [pid * NDEV + k for k in range(NDEV)]
        assert info["cpu_devices"] == NPROC * NDEV  # the oracle spans them too


@pytest.mark.parametrize("name", list(worker.PROGRAMS))
def test_program_matches_xla_across_processes(results, name):
    for pid, (_, res) in enumerate(results):
        assert name in res, f"process {pid} did not report {name}"
        assert not res[name], f"process {pid}: {name}:\n" + "\n".join(res[name])
