"""Helpers for tests that start Python processes of their own (jax.distributed
jobs, the launcher): a free port and the environment a child needs to import
the same pjrtx as this process."""
import os
import socket


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
