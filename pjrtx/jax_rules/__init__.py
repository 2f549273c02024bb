"""JAX lowering rules for platform 'pjrtx' where JAX has none (or only a
slow generic one, or one that refuses a platform outside its fixed lists)
for an unknown platform: linear algebra, host callbacks.
jax_plugin.initialize() calls register_all() right after
register_plugin('pjrtx'), since register_lowering for a plugin platform
raises before that.

Every module in this package that defines register() is registered, so a
family adds a file and nothing here."""
from __future__ import annotations

import importlib
import pkgutil

_registered = False


def register_all() -> None:
    global _registered
    if _registered:
        return
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        register = getattr(module, "register", None)
        if callable(register):
            register()
    _registered = True
