"""Multi-process JAX with pjrtx installed: jaxlib's multi-process paths call
plugin slots that abort the process when they fail (facts: pjrt-c-api.md).
Two processes join jax.distributed on 127.0.0.1 and each runs a program on
pjrtx and on XLA:CPU; both must exit cleanly with the same results as
NumPy computes."""
import json
import os
import socket
import subprocess
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))

# Slots jaxlib calls under jax.distributed and treats any error from as
# fatal (LogFatalIfPjrtError / the process-info watcher). Each must be an
# implemented entry point of the plugin, never the UNIMPLEMENTED stub.
FATAL_IF_FAILING = ["Client_UpdateGlobalProcessInfo", "Client_ProcessIndex", "Client_Devices",
                    "Client_AddressableDevices", "DeviceDescription_ProcessIndex",
                    "Device_IsAddressable", "Device_LocalHardwareId"]


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_fatal_slots_are_implemented():
    from pjrtx import _pjrtx

    implemented = set(_pjrtx.implemented_slots())
    missing = [s for s in FATAL_IF_FAILING if s not in implemented]
    assert not missing, f"slots jaxlib treats as fatal are stubs: {missing}"


def test_two_processes_under_jax_distributed():
    port = _free_port()
    env = dict(os.environ)
    # The pjrtx this test process imported (the installed one in CI, the
    # checkout with its built extension in development).
    import pjrtx
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(os.path.dirname(pjrtx.__file__)),
                                         env.get("PYTHONPATH", "")])
    env.pop("PJRTX_DEVICES", None)
    procs = [subprocess.Popen([sys.executable, os.path.join(HERE, "_distributed_worker.py"),
                               str(port), str(i)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for i in range(2)]
    outs = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=240)
            assert p.returncode == 0, f"worker exited {p.returncode}:\n{err[-3000:]}"
            line = [ln for ln in out.splitlines() if ln.startswith("RESULT ")]
            assert line, f"no result:\n{out[-2000:]}\n{err[-2000:]}"
            outs.append(json.loads(line[-1][len("RESULT "):]))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for pid, res in enumerate(outs):
        x = np.arange(6, dtype=np.float32) + pid
        want = np.tanh(x) * 2 + x.sum()
        # float32 tanh and a 6-term sum: a few ulps of the result.
        np.testing.assert_allclose(res["pjrtx"], want, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(res["cpu"], want, rtol=1e-6, atol=1e-6)
        assert res["process_index"] == pid  # XLA:CPU spans both processes
        # so does pjrtx (tests/test_multiprocess.py runs programs across them)
        assert res["pjrtx_process_index"] == pid
        assert res["pjrtx_local_devices"] == 1
