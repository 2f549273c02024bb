"""``python -m pjrtx launch -n N [--devices K] script.py [args]``: a local
multi-process JAX run on pjrtx, in the spirit of ``mlx.launch`` and
``torchrun``.

It picks a free port for JAX's coordinator, starts N copies of the script
(each with PJRTX_DEVICES=K and the coordinator, process count and id in
its environment), prefixes every line a process prints with its rank, and
stops all of them as soon as one fails (exit status: the first failure's).
The script calls ``jax.distributed.initialize()`` without arguments: the
workers run under a bootstrap that registers a JAX cluster environment
(``PjrtxLaunchCluster``) reading those variables, as JAX reads SLURM's or
Open MPI's.

Across machines, run the launcher on each machine with the same
``--coordinator HOST0:PORT`` (an address of machine 0, where process 0
serves JAX's coordinator), ``--nodes M`` and that machine's ``--node-rank``:
each starts its ``-n`` processes, numbered node_rank * n onwards, of
M * n in all. (Or call ``jax.distributed.initialize("HOST0:PORT",
num_processes=N, process_id=I)`` in each process yourself.) pjrtx exchanges
the rest (its MLX ring addresses) through JAX's key-value store
(PJRTX_DISTRIBUTED_HOST names the address others reach a machine at when
its first network interface is not it). A coordinator nobody serves, or a
busy coordinator port, is a clear error (pjrtx/coordinator.py).
"""
from __future__ import annotations

import os
import runpy
import selectors
import signal
import socket
import subprocess
import sys
import time

ENV_COORDINATOR = "PJRTX_LAUNCH_COORDINATOR"
ENV_COUNT = "PJRTX_LAUNCH_NUM_PROCESSES"
ENV_RANK = "PJRTX_LAUNCH_PROCESS_ID"


def register_cluster_env() -> None:
    """Makes jax.distributed.initialize() with no arguments read the
    launcher's variables (JAX detects ClusterEnv subclasses on definition)."""
    from jax._src.clusters import ClusterEnv

    if any(c.__name__ == "PjrtxLaunchCluster" for c in ClusterEnv._cluster_types):
        return

    class PjrtxLaunchCluster(ClusterEnv):
        name = "pjrtx_launch"
        opt_in_only_method = False

        @classmethod
        def is_env_present(cls) -> bool:
            return ENV_COORDINATOR in os.environ

        @classmethod
        def get_coordinator_address(cls, timeout_secs, override_coordinator_port=None) -> str:
            return os.environ[ENV_COORDINATOR]

        @classmethod
        def get_process_count(cls) -> int:
            return int(os.environ[ENV_COUNT])

        @classmethod
        def get_process_id(cls) -> int:
            return int(os.environ[ENV_RANK])

    # keep a reference where a debugger can find it
    globals()["PjrtxLaunchCluster"] = PjrtxLaunchCluster


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def child_main(argv: list[str]) -> int:
    """Runs in each worker: the script as __main__ after the cluster
    environment is registered."""
    register_cluster_env()
    # pjrtx as JAX's plugin also where it is not installed as a distribution
    # (a source checkout on PYTHONPATH); installed, its entry point does this.
    from pjrtx import jax_plugin

    jax_plugin.ensure_registered()
    script, *args = argv
    sys.argv = [script, *args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    # A failing worker leaves at once: JAX's exit handler would otherwise
    # wait in jax.distributed's shutdown barrier for the other processes,
    # and the launcher could not tell that it failed.
    code = 0
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if e.code is not None and not isinstance(e.code, int):
            print(e.code, file=sys.stderr)
    except BaseException:  # noqa: BLE001 - report and fail like Python would
        import traceback

        traceback.print_exc()
        code = 1
    if code != 0:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return 0


def launch(nprocs: int, devices: int | None, script: str, args: list[str],
           out=sys.stdout, coordinator: str | None = None, nodes: int = 1,
           node_rank: int = 0) -> int:
    if nprocs < 1:
        raise SystemExit("pjrtx launch: -n must be at least 1")
    if not os.path.isfile(script):
        raise SystemExit(f"pjrtx launch: no such script: {script}")
    if nodes < 1 or not 0 <= node_rank < nodes:
        raise SystemExit(f"pjrtx launch: --node-rank must be in [0, {nodes}), "
                         f"got {node_rank}")
    if nodes > 1 and coordinator is None:
        raise SystemExit("pjrtx launch: --nodes > 1 needs --coordinator HOST:PORT "
                         "(an address of node 0's machine)")
    if coordinator is None:
        coordinator = f"127.0.0.1:{free_port()}"
    total, first = nodes * nprocs, node_rank * nprocs
    procs = []
    sel = selectors.DefaultSelector()
    for local in range(nprocs):
        rank = first + local
        env = dict(os.environ)
        env[ENV_COORDINATOR] = coordinator
        env[ENV_COUNT] = str(total)
        env[ENV_RANK] = str(rank)
        env["PYTHONUNBUFFERED"] = "1"
        if devices is not None:
            env["PJRTX_DEVICES"] = str(devices)
        # launch.py run as a file, not with -m: -m would put the working
        # directory first on sys.path, where a source checkout of pjrtx
        # (without its compiled extension) shadows the installed package.
        p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--child", script, *args],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             start_new_session=True)
        procs.append(p)
        sel.register(p.stdout, selectors.EVENT_READ, local)
    width = len(str(total - 1))
    status = 0
    failed_rank = None
    buffers = {r: b"" for r in range(nprocs)}
    label = {r: f"[{first + r:>{width}}] " for r in range(nprocs)}
    open_streams = nprocs

    def stop_all():
        for p in procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + 5
        for p in procs:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()

    def check_exits():
        nonlocal failed_rank, status
        for rank, p in enumerate(procs):
            rc = p.poll()
            if rc not in (None, 0) and failed_rank is None:
                failed_rank, status = rank, rc
                out.write(f"pjrtx launch: process {first + rank} exited with status {rc}; "
                          f"stopping the others\n")
                out.flush()
                stop_all()

    try:
        while open_streams:
            for key, _ in sel.select(timeout=0.5):
                rank = key.data
                chunk = os.read(key.fileobj.fileno(), 65536)
                if not chunk:
                    sel.unregister(key.fileobj)
                    open_streams -= 1
                    if buffers[rank]:
                        out.write(f"{label[rank]}{buffers[rank].decode(errors='replace')}\n")
                    continue
                buffers[rank] += chunk
                *lines, buffers[rank] = buffers[rank].split(b"\n")
                for line in lines:
                    out.write(f"{label[rank]}{line.decode(errors='replace')}\n")
                out.flush()
            check_exits()
    except KeyboardInterrupt:
        stop_all()
        return 130
    for p in procs:
        p.wait()
    check_exits()
    if failed_rank is None:
        return 0
    return status if status > 0 else 1


if __name__ == "__main__":
    # Run as a file, Python put this package's own folder first on sys.path;
    # the worker's imports must not see its modules as top-level ones.
    if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
        sys.path.pop(0)
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        sys.exit(child_main(sys.argv[2:]))
    raise SystemExit("use: python -m pjrtx launch -n N [--devices K] script.py [args]")
