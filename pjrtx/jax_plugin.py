"""JAX plugin registration (entry point group ``jax_plugins``).

JAX imports this module while discovering plugins and calls initialize();
exceptions there are only logged by JAX, so they carry a clear message.
"""
from __future__ import annotations

import logging
import os
import re

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

    from pjrtx import env, versions
    from pjrtx._contract import load_extension

    # A jax older than any pjrtx supports gets a warning naming the versions
    # and no pjrtx device (jax itself keeps working); a newer one, a warning
    # and a best try (pjrtx/versions.py).
    if not versions.check(_jax_version(), _jaxlib_version()):
        return
    ext = load_extension()  # also installs the frontend hook used by Compile
    # Our parser is jaxlib's own, so it reads whatever StableHLO version jaxlib
    # writes: ask for jaxlib's newest.
    from jaxlib.mlir.dialects import stablehlo

    ext.set_stablehlo_version(*(int(x) for x in stablehlo.get_current_version().split(".")))
    priority = int(env.get("PJRTX_PRIORITY"))
    xla_bridge.register_plugin(PLATFORM, priority=priority, library_path=ext.__file__)
    _register_jax_rules()
    if versions.release().pjrt_minor < versions.SHARDINGS_EXTENSION_MINOR:
        _shardings_from_the_plan()
    _enable_donation()
    _enable_persistent_cache()
    _show_plan_as_text()
    _lowered_cost_analysis()
    _enable_dlpack()
    _validate_compiler_options()
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


def _wrap_once(owner, name: str, label: str, consequence: str = ""):
    """Replace the JAX internal `owner.<name>` with a pjrtx wrapper, once.

    Returns (install, original): decorate the wrapper with `install`, which
    marks it and puts it in place. A renamed internal raises here, naming it
    (pjrtx must fail loudly, not run without the fix); a second call (a
    re-import of the plugin) returns install=None and leaves the first
    wrapper in place."""
    original = getattr(owner, name, None)
    if not callable(original):
        raise RuntimeError(f"pjrtx: {label} is gone in jax {_jax_version()}"
                           + (f"; {consequence}" if consequence else ""))
    if getattr(original, "_pjrtx_wrapped", False):
        return None, original

    def install(wrapper):
        wrapper._pjrtx_wrapped = True
        wrapper.__wrapped__ = original
        setattr(owner, name, wrapper)
        return wrapper

    return install, original


def _shardings_from_the_plan():
    # jaxlib before PJRT C API 0.91 (jax 0.9.0 and older) has no Shardings
    # extension: it reads an executable's argument and result shardings from
    # its HLO, which a plugin does not have, and JAX then gives each output
    # it left to the compiler an UnspecifiedValue sharding, which fails when
    # read. For pjrtx executables pxla gets the shardings the extension
    # would report (the plan's, by fingerprint); other backends keep
    # jaxlib's answer.
    from jax._src.interpreters import pxla
    from jax._src.lib import xla_client as xc

    install, original = _wrap_once(pxla, "get_op_sharding_from_executable",
                                   "pxla.get_op_sharding_from_executable")
    if install is None:
        return

    def proto(data: bytes):
        s = xc.OpSharding()
        s.ParseFromString(data)
        return s

    @install
    def get_op_sharding_from_executable(executable):
        ins, outs = original(executable)
        if ins and outs:
            return ins, outs
        if getattr(getattr(executable, "client", None), "platform", None) != PLATFORM:
            return ins, outs
        from pjrtx._contract import load_extension

        fingerprint = executable.fingerprint
        if isinstance(fingerprint, bytes):
            fingerprint = fingerprint.decode()
        got = load_extension().plan_shardings(fingerprint or "")
        if got is None:
            return ins, outs
        args, results = got
        return (list(ins) or [proto(b) for b in args]), (list(outs) or [proto(b) for b in results])


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

    install, original = _wrap_once(
        compilation_cache, "is_cache_used", "jax._src.compilation_cache.is_cache_used",
        "the persistent compilation cache cannot be enabled for pjrtx")
    if install is None:
        return

    @install
    def is_cache_used(backend):
        if getattr(backend, "platform", None) == PLATFORM:
            backend = _AsCachingPlatform(backend)
        return original(backend)


# Plan opcodes of the collectives -> their HLO text names.
_HLO_COLLECTIVE_NAMES = {
    "stablehlo.all_gather": "all-gather",
    "stablehlo.all_reduce": "all-reduce",
    "stablehlo.all_to_all": "all-to-all",
    "stablehlo.reduce_scatter": "reduce-scatter",
    "stablehlo.collective_permute": "collective-permute",
    "stablehlo.collective_broadcast": "collective-broadcast",
}
_HLO_COLLECTIVE_RE = re.compile(
    r"\b(" + "|".join(re.escape(k) for k in _HLO_COLLECTIVE_NAMES) + r")(?=\()")


def hlo_spelled_collectives(plan_text: str) -> str:
    """The plan's text with each collective opcode in its HLO spelling."""
    return _HLO_COLLECTIVE_RE.sub(lambda m: _HLO_COLLECTIVE_NAMES[m.group(1)], plan_text)


def _lowered_cost_analysis():
    # jax.jit(f).lower(x).cost_analysis() (flax's module summary counts FLOPs
    # with it) runs the HLO cost model of the backend's XLA client, and JAX
    # refuses it for every PJRT C API plugin (it then returns None). The HLO
    # is the same for every backend, so for pjrtx lowerings the answer is
    # XLA:CPU's cost model on that HLO, where the CPU backend is loaded
    # (JAX_PLATFORMS without cpu keeps JAX's None).
    from jax._src import xla_bridge
    from jax._src.interpreters import pxla
    from jax._src.lib import _jax

    if not hasattr(_jax, "hlo_module_cost_analysis"):
        raise RuntimeError(
            f"pjrtx: jaxlib's hlo_module_cost_analysis is gone in jax {_jax_version()}")
    install, original = _wrap_once(pxla.MeshComputation, "cost_analysis",
                                   "MeshComputation.cost_analysis")
    if install is None:
        return

    @install
    def cost_analysis(self):
        backend = self.compile_args["backend"]
        if getattr(backend, "platform", None) != PLATFORM:
            return original(self)
        try:
            cpu = xla_bridge.get_backend("cpu")
        except RuntimeError as e:
            raise NotImplementedError(
                "pjrtx: Lowered.cost_analysis uses XLA:CPU's cost model, and the cpu "
                f"backend is not loaded ({e})") from None
        return _jax.hlo_module_cost_analysis(cpu, self.hlo().as_hlo_module())


def _show_plan_as_text():
    # jax.jit(f).lower(x).compile().as_text() asks jaxlib for the HLO text of
    # the executable, which jaxlib builds by parsing what
    # PJRT_Executable_OptimizedProgram returns as HLO or StableHLO and
    # printing it as HLO: it cannot carry pjrtx's plan, which is what pjrtx
    # runs (after inlining, dead-code removal and constant folding). So for
    # pjrtx executables, as_text() returns the plan's text, found by the
    # executable's fingerprint (csrc/python/cache_bindings.cc); other
    # backends keep jaxlib's answer. The plan's collectives are spelled as
    # HLO text spells them (stablehlo.all_gather -> all-gather): that is the
    # name readers of as_text() look for (JAX's own tests assert an
    # "all-gather" or "all-reduce" is, or is not, in the compiled program).
    from jax._src import stages

    install, original = _wrap_once(stages.Executable, "as_text",
                                   "jax._src.stages.Executable.as_text")
    if install is None:
        return

    @install
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
                return hlo_spelled_collectives(text)
        return original(self)


def _enable_dlpack():
    # jaxlib exports DLPack capsules only for devices whose platform it maps
    # to a DLPack device type (cpu, cuda, rocm): for pjrtx, `__dlpack__` and
    # `__dlpack_device__` fail ("Device pjrtx:0 cannot be used as a DLPack
    # device"), so np.from_dlpack(x) and torch.from_dlpack(x) do too. On
    # MLX's CPU device our buffers live in host memory and np.asarray(x)
    # reads them in place, so a pjrtx array is exported as a kDLCPU tensor
    # through that NumPy view (no copy). pjrtx storage is immutable and may
    # be shared (pooled constants, pass-through outputs), so it is exported
    # read-only: DLPack >= 1.0 carries the read-only flag; an older consumer
    # (no max_version) gets a copy, or BufferError when copy=False. Where a
    # buffer is not host memory (Metal, CUDA), NumPy's read is a copy, which
    # copy=False refuses. Other platforms keep jaxlib's behaviour.
    from jax._src import array

    impl = array.ArrayImpl
    original_device = getattr(impl, "__dlpack_device__", None)
    if not callable(original_device):
        raise RuntimeError(f"pjrtx: jax.Array.__dlpack_device__ is gone in jax {_jax_version()}")
    install, original_dlpack = _wrap_once(impl, "__dlpack__", "jax.Array.__dlpack__")
    if install is None:
        return

    def on_pjrtx(x) -> bool:
        try:
            return x.platform() == PLATFORM
        except Exception:  # deleted or sharded arrays: jaxlib's own errors
            return False

    def kdlcpu():
        from jax._src.dlpack import DLDeviceType

        return DLDeviceType.kDLCPU

    def __dlpack_device__(self):
        if not on_pjrtx(self):
            return original_device(self)
        if len(self._arrays) != 1:
            raise BufferError("__dlpack__ only supported for unsharded arrays.")
        return kdlcpu(), 0

    @install
    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if not on_pjrtx(self):
            return original_dlpack(self, stream=stream, max_version=max_version,
                                   dl_device=dl_device, copy=copy)
        import numpy as np

        if len(self.sharding.device_set) > 1:
            raise BufferError(
                "to_dlpack can only pack a dlpack tensor from an array on a singular "
                f"device, but an array with a Sharding over {len(self.sharding.device_set)} "
                "devices was provided.")
        if dl_device is not None and (int(dl_device[0]), int(dl_device[1])) != (int(kdlcpu()), 0):
            raise BufferError(
                f"pjrtx exports DLPack tensors on the CPU (kDLCPU, 0) only, not {dl_device}")
        if stream is not None and stream != -1:
            raise BufferError(
                f"pjrtx exports DLPack tensors on the CPU, which takes no stream (got {stream!r})")
        host = np.asarray(self)
        in_place = host.size == 0 or host.ctypes.data == self.unsafe_buffer_pointer()
        legacy = max_version is None or tuple(max_version) < (1, 0)
        if copy is False and not in_place:
            raise BufferError(
                f"{self.device} keeps this array outside host memory; exporting it "
                "to DLPack needs a copy, but copy=False")
        if copy is False and legacy:
            raise BufferError(
                "pjrtx arrays are immutable and a DLPack capsule older than 1.0 cannot "
                "mark them read-only; pass copy=True, or max_version=(1, 0)")
        if copy or legacy or not in_place:
            host = np.array(host, copy=True)
        if legacy:
            return host.__dlpack__()
        return host.__dlpack__(max_version=tuple(max_version))

    impl.__dlpack_device__ = __dlpack_device__

    # jax.dlpack.from_dlpack(x) of a pjrtx array would otherwise go through
    # the kDLCPU capsule above and land on XLA:CPU: a round trip keeps the
    # array on its own device, as it does on XLA's devices. (jnp.from_dlpack
    # imports jax.dlpack.from_dlpack when called, so this covers both.)
    import jax.dlpack
    from jax._src import sharding as sharding_mod

    install_from, original_from = _wrap_once(jax.dlpack, "from_dlpack", "jax.dlpack.from_dlpack")
    if install_from is None:
        return

    @install_from
    def from_dlpack(external_array, device=None, copy=None):
        if not (isinstance(external_array, impl) and on_pjrtx(external_array)
                and len(external_array.sharding.device_set) == 1):
            return original_from(external_array, device=device, copy=copy)
        import jax
        import jax.numpy as jnp

        (source,) = external_array.sharding.device_set
        target = device
        if isinstance(device, sharding_mod.Sharding):
            if len(device.device_set) != 1:
                return original_from(external_array, device=device, copy=copy)
            (target,) = device.device_set
        if target is not None and target != source:
            if copy is False:
                raise ValueError(
                    f"Specified {target=} which requires a copy since the source device "
                    f"is {source!r}, however copy=False. Set copy=True or copy=None to "
                    "perform the requested operation.")
            return jax.device_put(external_array, device)
        return jnp.array(external_array, copy=True) if copy else external_array

    from_dlpack.__doc__ = original_from.__doc__


_validated_overrides: set = set()
_validation_client = None


def _check_overrides_as_xla_does(overrides) -> None:
    """Raises XLA's own error for a compiler option XLA would refuse.

    jax.jit(f, compiler_options={...}) sends XLA DebugOptions overrides with
    the compile options. They tune XLA's passes, so pjrtx applies none of
    them, but a misspelt name or a wrong value type must fail as it does on
    XLA rather than be dropped without a word: XLA:CPU's client parses the
    same overrides while compiling an empty module (~20 ms, once per set of
    overrides), and its error is raised as is."""
    global _validation_client
    key = tuple((str(k), repr(v)) for k, v in overrides)
    if key in _validated_overrides:
        return
    from jax._src import xla_bridge
    from jax._src.lib import _jax, xla_client

    if _validation_client is None:
        try:
            _validation_client = xla_bridge.get_backend("cpu")
        except RuntimeError:  # JAX_PLATFORMS leaves cpu out: a private one
            _validation_client = xla_client.make_cpu_client()
    options = _jax.CompileOptions()
    options.env_option_overrides = list(overrides)
    devices = xla_client.DeviceList(tuple(_validation_client.local_devices()[:1]))
    _validation_client.compile_and_load(
        "module @pjrtx_option_check { func.func public @main() { return } }",
        executable_devices=devices, compile_options=options)
    _validated_overrides.add(key)


def _validate_compiler_options():
    from jax._src import compiler

    install, original = _wrap_once(compiler, "backend_compile_and_load",
                                   "jax._src.compiler.backend_compile_and_load")
    if install is None:
        return

    @install
    def backend_compile_and_load(backend, module, executable_devices, options, host_callbacks):
        overrides = getattr(options, "env_option_overrides", None)
        if overrides and getattr(backend, "platform", None) == PLATFORM:
            _check_overrides_as_xla_does(overrides)
        return original(backend, module, executable_devices, options, host_callbacks)


def _jax_version() -> str:
    import jax

    return jax.__version__


def _jaxlib_version() -> str:
    try:
        from jax._src.lib import version_str

        return version_str
    except ImportError:
        return ""


def _register_jax_rules():
    # A failure here must be seen: without these rules linalg and callbacks
    # fail later with JAX's "MLIR translation rule ... not found".
    from pjrtx import jax_rules

    jax_rules.register_all()
