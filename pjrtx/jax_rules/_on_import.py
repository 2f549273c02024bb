"""Runs a registration once a module has been imported.

Some JAX modules are slow to import (jax.experimental.sparse imports
scipy.sparse, about 1.3 s) and define the primitives pjrtx lowers, so their
rules are registered when the user imports the module, not at plugin start:
at once if it is already imported, else by a one-shot import hook.
"""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from typing import Callable


class _OnImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds the module as the rest of sys.meta_path would, and calls then
    with it once it has run."""

    def __init__(self, name: str, then: Callable):
        self.name, self.then = name, then

    def find_spec(self, name, path=None, target=None):
        if name != self.name:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None:
            return None
        self._loader, spec.loader = spec.loader, self
        return spec

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        sys.meta_path.remove(self)
        self.then(module)


def when_imported(name: str, then: Callable) -> None:
    """then(module) now if name is imported, else right after its import."""
    if name in sys.modules:
        then(sys.modules[name])
    else:
        sys.meta_path.insert(0, _OnImport(name, then))
