"""Helpers for tests about their environment: a free port and the environment
a child process needs to import the same pjrtx as this process (jax.distributed
jobs, the launcher), and environment settings for a block of this process."""
import os
import socket
from contextlib import contextmanager


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def child_env(**extra) -> dict:
    """This environment with the imported pjrtx's parent first on PYTHONPATH
    (the installed package in CI, the checkout with its built extension in
    development), JAX_PLATFORMS and PJRTX_DEVICES left to the child, then
    `extra`."""
    import pjrtx

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(os.path.dirname(pjrtx.__file__)),
                                         env.get("PYTHONPATH", "")])
    env.pop("JAX_PLATFORMS", None)
    env.pop("PJRTX_DEVICES", None)
    env.update(extra)
    return env


@contextmanager
def scoped_env(**settings):
    """os.environ with `settings` for the block, restored after."""
    saved = {k: os.environ.get(k) for k in settings}
    os.environ.update(settings)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
