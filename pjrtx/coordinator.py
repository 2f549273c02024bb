"""Clear errors for the two coordinator mistakes jaxlib does not survive.

``jax.distributed.initialize`` hands the coordinator address to jaxlib's
coordination service and client, which end the whole process on the two
commonest mistakes, on every backend (XLA:CPU included):

- an address nobody serves (a wrong host or port, or process 0 never
  started): the client's connect gives up after ``initialization_timeout``
  and its error handler aborts the process (``Terminating process because
  the JAX distributed service detected fatal errors``);
- a coordinator port already in use on process 0's machine: the service
  fails to bind and the process dies with a segmentation fault.

Once pjrtx is imported (the ``python -m pjrtx launch`` bootstrap imports
it; so does a script that imports pjrtx before calling initialize), JAX's
distributed module gets its service and client through checks made first,
in Python: the port must be free to bind, and the address must resolve and
accept a TCP connection within ``initialization_timeout`` (retried, since
process 0 may start later). Either failure raises a RuntimeError naming the
address, the port and the process, and jaxlib is not called.
"""
from __future__ import annotations

import errno
import importlib.machinery
import socket
import sys
import time

_MODULE = "jax._src.distributed"
JAX_DEFAULT_INIT_TIMEOUT_S = 300  # jax.distributed.initialize's own default


def _split(address: str) -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"jax.distributed.initialize: coordinator address {address!r} "
                         f"is not HOST:PORT")
    return host.strip("[]"), int(port)


def check_bindable(bind_address: str) -> None:
    """Raises when process 0 could not serve the coordinator on bind_address."""
    host, port = _split(bind_address)
    if host in ("", "::", "0.0.0.0"):
        candidates = [(socket.AF_INET6, "::"), (socket.AF_INET, "0.0.0.0")]
    else:
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except socket.gaierror as e:
            raise RuntimeError(f"jax.distributed.initialize: process 0's coordinator address "
                               f"{bind_address} does not resolve ({e.strerror})") from None
        candidates = [(info[0], info[4][0]) for info in infos]
    last = None
    for family, addr in candidates:
        try:
            with socket.socket(family, socket.SOCK_STREAM) as s:
                # as gRPC binds: a closed connection's TIME_WAIT does not count
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind((addr, port))
            return
        except OSError as e:
            last = e
            if e.errno == errno.EAFNOSUPPORT:  # no IPv6 here: try the next
                continue
            break
    if last is None:
        return
    if last.errno == errno.EADDRINUSE:
        what = f"port {port} is in use on this machine; choose a free port"
    else:
        what = (f"it cannot be bound here ({last.strerror}); the coordinator's host must "
                f"be an address of process 0's machine")
    raise RuntimeError(f"jax.distributed.initialize: process 0 serves JAX's coordinator on "
                       f"{bind_address}, but {what}")


def wait_reachable(address: str, timeout_s: float, process_id: int) -> None:
    """Returns once something accepts TCP connections at address; raises
    after timeout_s (or at once when the host does not resolve)."""
    host, port = _split(address)
    try:
        socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as e:
        raise RuntimeError(f"jax.distributed.initialize: the coordinator address {address} "
                           f"does not resolve ({e.strerror}); process {process_id}") from None
    deadline = time.monotonic() + timeout_s
    while True:
        left = deadline - time.monotonic()
        try:
            with socket.create_connection((host, port), timeout=max(0.1, min(2.0, left))):
                return
        except OSError as e:
            reason = e.strerror or type(e).__name__
        if time.monotonic() >= deadline:
            raise RuntimeError(
                f"jax.distributed.initialize: process {process_id} found no coordinator at "
                f"{address} within {timeout_s:g} s ({reason}). Process 0 serves it there: check "
                f"the host and port, and that process 0 has started (initialization_timeout "
                f"sets the wait)")
        time.sleep(max(0.0, min(0.25, deadline - time.monotonic())))


class _CheckedJax:
    """jaxlib's _jax module as JAX's distributed module sees it: the same,
    but for the two factories, which check first."""

    def __init__(self, real):
        self._real = real

    def __getattr__(self, name):
        return getattr(self._real, name)

    def get_distributed_runtime_service(self, address, *args, **kwargs):
        check_bindable(address)
        return self._real.get_distributed_runtime_service(address, *args, **kwargs)

    def get_distributed_runtime_client(self, address, node_id, *args, **kwargs):
        timeout = kwargs.get("init_timeout")
        wait_reachable(address, JAX_DEFAULT_INIT_TIMEOUT_S if timeout is None else timeout,
                       node_id)
        return self._real.get_distributed_runtime_client(address, node_id, *args, **kwargs)


def _patch(module) -> None:
    real = getattr(module, "_jax", None)
    if real is not None and not isinstance(real, _CheckedJax):
        module._jax = _CheckedJax(real)


class _Finder:
    """Patches jax's distributed module when it is first imported."""

    def find_spec(self, name, path=None, target=None):
        if name != _MODULE:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            _patch(module)

        spec.loader.exec_module = exec_module
        return spec


def install() -> None:
    """Idempotent: patches jax's distributed module now or when imported."""
    module = sys.modules.get(_MODULE)
    if module is not None:
        _patch(module)
    elif not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
