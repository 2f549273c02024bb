"""python -m pjrtx launch, and what a multi-process run does when it goes
wrong: a failing worker stops the others, a dead peer fails the survivors'
collectives with a clear error at once, and processes that disagree on
their device or process count are refused when the client is created."""
import os
import re
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "_launch_worker.py")
sys.path.insert(0, HERE)
from _procs import child_env, free_port  # noqa: E402


def _launch(*args, timeout=240, **extra):
    t0 = time.monotonic()
    # From the tests folder: from the repository root `python -m pjrtx`
    # would import the source checkout, not the installed package.
    p = subprocess.run([sys.executable, "-m", "pjrtx", "launch", *args], env=child_env(**extra),
                       capture_output=True, text=True, timeout=timeout, cwd=HERE)
    return p, time.monotonic() - t0


def _pair(mode, timeout=240, **extra):
    """Two workers started directly (no launcher), so each one's own
    outcome is visible."""
    port = free_port()
    procs = [subprocess.Popen([sys.executable, WORKER, mode, str(port), str(i)],
                              env=child_env(JAX_PLATFORMS="pjrtx,cpu", **extra),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(2)]
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


def test_launch_runs_every_process_with_rank_prefixes():
    p, _ = _launch("-n", "2", "--devices", "2", WORKER, "ok")
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    for rank in range(2):
        line = [ln for ln in p.stdout.splitlines() if ln.startswith(f"[{rank}] process")]
        assert line, p.stdout[-3000:]
        # 4 devices over 2 processes; psum of 1 + 2 + 3 + 4
        assert line[0] == f"[{rank}] process {rank} of 2 devices 4 psum 10.0", line


def test_launch_across_nodes_numbers_processes_from_the_node_rank():
    # Two launchers, as on two machines: node 1's 2 processes are 2 and 3
    # of 4, and all four meet in one psum (1 + 2 + 3 + 4 over 4 devices).
    coordinator = f"127.0.0.1:{free_port()}"
    cmds = [[sys.executable, "-m", "pjrtx", "launch", "-n", "2", "--coordinator", coordinator,
             "--nodes", "2", "--node-rank", str(node), WORKER, "ok"] for node in (1, 0)]
    procs = [subprocess.Popen(c, env=child_env(), cwd=HERE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for c in cmds]
    try:
        outs = [p.communicate(timeout=240) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, out[-3000:] + err[-3000:]
    for node, (out, _) in zip((1, 0), outs):
        for rank in (2 * node, 2 * node + 1):
            line = [ln for ln in out.splitlines() if ln.startswith(f"[{rank}] process")]
            assert line == [f"[{rank}] process {rank} of 4 devices 4 psum 10.0"], out[-3000:]


def test_launch_stops_everyone_when_one_fails():
    p, seconds = _launch("-n", "2", WORKER, "one_fails")
    assert p.returncode == 3, p.stdout[-3000:]
    assert "process 1 exited with status 3; stopping the others" in p.stdout
    assert seconds < 100  # the other worker sleeps 120 s unless stopped


def test_a_dead_peer_fails_the_survivors_collective_with_a_clear_error():
    (rc0, out0, err0), (rc1, _, _) = _pair("peer_dies")
    assert rc1 == 9
    assert "first 3.0" in out0, out0 + err0[-3000:]
    m = re.search(r"RAISED after ([\d.]+)s (\w+): (.*)", out0)
    assert m, out0 + err0[-3000:]
    assert float(m.group(1)) < 60, m.group(0)
    assert "UNAVAILABLE" in m.group(3) and "other processes" in m.group(3), m.group(0)


def test_a_stuck_peer_fails_the_collective_after_the_timeout():
    (rc0, out0, err0), _ = _pair("peer_stuck", PJRTX_COLLECTIVE_TIMEOUT_S="4")
    assert "first 3.0" in out0, out0 + err0[-3000:]
    m = re.search(r"RAISED after ([\d.]+)s (\w+): (.*)", out0)
    assert m, out0 + err0[-3000:]
    assert 3 < float(m.group(1)) < 30, m.group(0)
    assert "did not complete the exchange within 4 s" in m.group(3), m.group(0)


def test_processes_with_different_device_counts_are_refused():
    outs = _pair("devices_mismatch")
    for rc, out, err in outs:
        assert rc == 0, err[-3000:]
        assert "RAISED" in out, out + err[-2000:]
        assert "every process needs the same PJRTX_DEVICES" in out, out


def test_processes_with_different_process_counts_are_refused_at_once():
    # Process 1 says 3 processes, process 0 (whose coordination service
    # counts 2) says 2: both fail at client creation naming the counts,
    # at once rather than after PJRTX_DISTRIBUTED_TIMEOUT_S (a process
    # waiting for a third process that never comes). (A process that counts
    # fewer than the coordinator's service is stopped by jaxlib's own
    # connect, before pjrtx is loaded.)
    t0 = time.monotonic()
    outs = _pair("processes_mismatch", PJRTX_DISTRIBUTED_TIMEOUT_S="100")
    assert time.monotonic() - t0 < 90
    for pid, (rc, out, err) in enumerate(outs):
        assert rc == 0, err[-3000:]
        assert "RAISED" in out and "INVALID_ARGUMENT" in out, out + err[-2000:]
        other, counts = (1, (3, 2)) if pid == 0 else (0, (2, 3))
        assert (f"process {other} was started with {counts[0]} processes and this one "
                f"(process {pid}) with {counts[1]}") in out, out


def test_a_busy_ring_port_is_a_clear_error():
    # Process 0's ring port (PJRTX_DISTRIBUTED_PORT) is held by this test:
    # its client creation fails naming the port in use. (Process 1 then
    # loses its coordinator, process 0; what it does next is jaxlib's.)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        outs = _pair("port_in_use", timeout=120, PJRTX_DISTRIBUTED_PORT=str(busy.getsockname()[1]))
    rc, out, err = outs[0]
    assert rc == 0, err[-3000:]
    assert "RAISED" in out and "UNAVAILABLE" in out, out + err[-2000:]
    assert "ring port is in use" in out, out


def _single(mode, address, pid, wait=4, timeout=120, **extra):
    p = subprocess.run([sys.executable, WORKER, mode, address, str(pid), str(wait)],
                       env=child_env(JAX_PLATFORMS="pjrtx,cpu", **extra),
                       capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def test_a_coordinator_address_nobody_serves_is_a_clear_error():
    # Process 1 of 2, and nothing listens at the address: after the
    # initialization_timeout (4 s) it raises naming the address, where
    # jaxlib's own connect ends the process. The process goes on working.
    port = free_port()
    t0 = time.monotonic()
    rc, out, err = _single("wrong_address", f"127.0.0.1:{port}", 1)
    assert rc == 0, err[-3000:]
    m = re.search(r"RAISED after ([\d.]+)s RuntimeError: (.*)", out)
    assert m, out + err[-2000:]
    assert 3.5 <= float(m.group(1)) < 30, m.group(0)
    assert f"process 1 found no coordinator at 127.0.0.1:{port} within 4 s" in m.group(2)
    assert "SUM 6.0" in out, out
    assert time.monotonic() - t0 < 100


def test_a_coordinator_host_that_does_not_resolve_fails_at_once():
    # A name that cannot resolve is not retried: the error comes long before
    # the 60 s initialization_timeout (a slow resolver may take seconds).
    rc, out, err = _single("wrong_address", "no-such-host.invalid:4321", 1, wait=60)
    assert rc == 0, err[-3000:]
    m = re.search(r"RAISED after ([\d.]+)s RuntimeError: (.*)", out)
    assert m, out + err[-2000:]
    assert float(m.group(1)) < 30, m.group(0)
    assert "coordinator address no-such-host.invalid:4321 does not resolve" in m.group(2)


def test_a_busy_coordinator_port_is_a_clear_error():
    # Process 0 serves the coordinator on a port this test holds: jaxlib's
    # service would crash the process (SIGSEGV) failing to bind it (with
    # the port held on 127.0.0.1 only, it raises "Failed to start RPC server").
    with socket.socket() as busy:
        busy.bind(("0.0.0.0", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        rc, out, err = _single("coordinator_port_busy", f"127.0.0.1:{port}", 0)
    assert rc == 0, (rc, err[-3000:])
    assert "RAISED" in out and "RuntimeError" in out, out + err[-2000:]
    assert f"port {port} is in use on this machine" in out, out
    assert "SUM 6.0" in out, out
