"""JAX plugin registration (entry point group ``jax_plugins``).

JAX imports this module while discovering plugins and calls initialize();
exceptions there are only logged by JAX, so they carry a clear message.
"""
from __future__ import annotations

import logging
import os

from pjrtx import PLATFORM

logger = logging.getLogger(__name__)


def library_path() -> str:
    """The shared object that exports GetPjrtApi (the extension module itself)."""
    from pjrtx._contract import load_extension

    return os.path.abspath(load_extension().__file__)


def initialize():
    from jax._src import xla_bridge

    if PLATFORM in xla_bridge._backend_factories:
        # ensure_registered() ran first (a script or conftest); JAX's entry
        # point discovery then calls us again, and a second register_plugin
        # fails with ALREADY_EXISTS.
        return

    from pjrtx import env
    from pjrtx._contract import load_extension

    ext = load_extension()  # also installs the frontend hook used by Compile
    # Our parser is jaxlib's own, so it reads whatever StableHLO version jaxlib
    # writes: ask for jaxlib's newest.
    from jaxlib.mlir.dialects import stablehlo

    ext.set_stablehlo_version(*(int(x) for x in stablehlo.get_current_version().split(".")))
    priority = int(env.get("PJRTX_PRIORITY"))
    xla_bridge.register_plugin(PLATFORM, priority=priority, library_path=ext.__file__)
    _register_lowerings()
    _enable_donation()
    _enable_persistent_cache()
    _show_plan_as_text()
    _clear_with_jax_caches(ext)


class _CompileCacheClearer:
    """jax.clear_caches() calls cache_clear() on every object registered with
    jax._src.util.register_cache: it then also empties pjrtx's executable
    cache, so dropping JAX's executables frees their constants."""

    def __init__(self, ext):
        self._ext = ext

    def cache_clear(self):
        self._ext.clear_compile_cache()


_clearer = None  # register_cache holds it weakly


def _clear_with_jax_caches(ext):
    global _clearer
    from jax._src import util

    if _clearer is not None:
        return
    if not callable(getattr(util, "register_cache", None)):
        raise RuntimeError(
            f"pjrtx: jax._src.util.register_cache is gone in jax {_jax_version()}")
    _clearer = _CompileCacheClearer(ext)
    util.register_cache(_clearer, "pjrtx executable cache")


def ensure_registered():
    """Registers the plugin unless JAX already knows it. Installed packages
    are discovered through the jax_plugins entry point; a source checkout on
    PYTHONPATH (development, benchmarks, the conformance runner) is not."""
    from jax._src import xla_bridge

    if "pjrtx" not in xla_bridge._backend_factories:
        initialize()


def _enable_donation():
    # JAX 0.10.2 writes `tf.aliasing_output` / `jax.buffer_donor` only for the
    # platforms in this list and otherwise drops donate_argnums with a
    # warning; the runtime honours both attributes (LoadedExecutable::execute).
    # A renamed list must fail here, not silently turn donation off.
    from jax._src.interpreters import mlir

    platforms = getattr(mlir, "_platforms_with_donation", None)
    if not isinstance(platforms, list):
        raise RuntimeError(
            "pjrtx: jax._src.interpreters.mlir._platforms_with_donation is gone or not a "
            f"list in jax {_jax_version()}; donation cannot be enabled for pjrtx")
    if PLATFORM not in platforms:
        platforms.append(PLATFORM)


class _AsCachingPlatform:
    """A backend seen as "cpu" by jax's persistent-cache gate, which is a
    fixed list of platform names; every other attribute is the backend's."""

    platform = "cpu"

    def __init__(self, backend):
        self._backend = backend

    def __getattr__(self, name):
        return getattr(self._backend, name)


def _enable_persistent_cache():
    # JAX 0.10.2 writes and reads `jax_compilation_cache_dir` only for
    # backends whose platform is in a list local to
    # compilation_cache.is_cache_used (tpu, gpu, cpu, neuron); pjrtx
    # implements PJRT_Executable_Serialize / DeserializeAndLoad, so let it
    # through that gate and leave the rest of the function (its once-per-task
    # bookkeeping) as JAX wrote it. A renamed function must fail here.
    from jax._src import compilation_cache

    original = getattr(compilation_cache, "is_cache_used", None)
    if not callable(original):
        raise RuntimeError(
            "pjrtx: jax._src.compilation_cache.is_cache_used is gone in jax "
            f"{_jax_version()}; the persistent compilation cache cannot be enabled for pjrtx")
    if getattr(original, "_pjrtx_wrapped", False):
        return

    def is_cache_used(backend):
        if getattr(backend, "platform", None) == PLATFORM:
            backend = _AsCachingPlatform(backend)
        return original(backend)

    is_cache_used._pjrtx_wrapped = True
    is_cache_used.__wrapped__ = original
    compilation_cache.is_cache_used = is_cache_used


def _show_plan_as_text():
    # jax.jit(f).lower(x).compile().as_text() asks jaxlib for the HLO text of
    # the executable, which jaxlib builds by parsing what
    # PJRT_Executable_OptimizedProgram returns as HLO or StableHLO and
    # printing it as HLO: it cannot carry pjrtx's plan, which is what pjrtx
    # runs (after inlining, dead-code removal and constant folding). So for
    # pjrtx executables, as_text() returns the plan's text, found by the
    # executable's fingerprint (csrc/python/cache_bindings.cc); other
    # backends keep jaxlib's answer.
    from jax._src import stages

    original = getattr(stages.Executable, "as_text", None)
    if not callable(original):
        raise RuntimeError(
            f"pjrtx: jax._src.stages.Executable.as_text is gone in jax {_jax_version()}")
    if getattr(original, "_pjrtx_wrapped", False):
        return

    def as_text(self):
        exe = self.xla_extension_executable()
        client = getattr(exe, "client", None)
        if getattr(client, "platform", None) == PLATFORM:
            from pjrtx._contract import load_extension

            fingerprint = exe.fingerprint
            if isinstance(fingerprint, bytes):
                fingerprint = fingerprint.decode()
            text = load_extension().plan_text(fingerprint or "")
            if text is not None:
                return text
        return original(self)

    as_text._pjrtx_wrapped = True
    as_text.__wrapped__ = original
    stages.Executable.as_text = as_text


def _jax_version() -> str:
    import jax

    return jax.__version__


def _register_lowerings():
    # A failure here must be seen: without these rules linalg and callbacks
    # fail later with JAX's "MLIR translation rule ... not found".
    from pjrtx import lowerings

    lowerings.register_all()
