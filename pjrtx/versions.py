"""Everything that differs between the JAX releases pjrtx supports, in one place.

One pjrtx build serves every jax/jaxlib release in RELEASES: the extension
links MLX and Python, not jaxlib; it speaks the PJRT C API of the newest
(csrc/pjrt/pjrt_abi.h) and reads only as much of each argument struct as
the caller sent (its C++ twin, csrc/pjrt/pjrt_versions.h, lists the structs
that grew since the oldest caller); and the frontend reads StableHLO through
the installed jaxlib's own MLIR bindings. What still differs is here:

- RELEASES: per jax/jaxlib release, the PJRT C API minor its jaxlib speaks
  (measured: jaxlib's own log line "The framework PJRT API version is 0.N"),
  the commit of its upstream tag (the conformance runner's tests), and which
  Shardy localiser its MLIR bindings carry.
- SHARDY: the Shardy pipeline pjrtx runs per localiser generation, with the
  defects known in it (pjrtx/frontend/partition/ reads it).
- Small shims for jaxlib/JAX API drift (attribute_names, aval_to_ir_type,
  set_sharding, kwargs_for), each saying which releases differ, and the
  PJRT features older jaxlibs lack (SHARDINGS_EXTENSION_MINOR).
- What the tests need to know: features a JAX release must have for a test
  program to be writable (UNSORTED_BROADCAST_DIMS, ...) and the oracle's own
  defects per jaxlib (XLA_CPU_FIXED, XLA_CPU_CBRT_EPS_BEFORE).
- The support check (check(), message()) for import time and `doctor`.
"""
from __future__ import annotations

import dataclasses
import re
import warnings

OLDEST = "0.8.0"
NEWEST = "0.10.2"  # the default install (pyproject.toml) and the README's test command


@dataclasses.dataclass(frozen=True)
class Release:
    jax: str              # jax == jaxlib release
    pjrt_minor: int       # PJRT C API 0.<pjrt_minor> that this jaxlib speaks
    jax_commit: str       # commit of upstream tag jax-v<jax> (conformance tests)
    shardy: str | None    # key of SHARDY: the localiser its jaxlib carries, or None

    @property
    def tag(self) -> str:
        return f"jax-v{self.jax}"


# Measured on Linux x86_64 with each release installed from PyPI (see the
# README's version table for install/tests/smoke results).
RELEASES = {r.jax: r for r in (
    Release("0.8.0", 80, "403977d2e252539d2df33cf26d9aeb9dd587e8bf", None),
    Release("0.8.1", 81, "8fc84ad2edc63fb3ac99abd56cae33653c8dc86e", None),
    Release("0.8.2", 85, "3f125024ecd17a1d90789a69c59962de4ff6af53", None),
    Release("0.8.3", 85, "2184c1ecb765eb5ab1063c1d59bd491f7f235542", None),
    Release("0.9.0", 90, "2de5b8b070b3cfb31c0cca5b8107d62574bddbd1", None),
    Release("0.9.1", 96, "58cb6e556c996bf0361bca9e64890a551e513280", None),
    Release("0.9.2", 100, "a659757d768587a81d095a9fab5f0c36f8beb218", None),
    Release("0.10.0", 104, "a33ed614c58ee8a10d0b7536c50c2609c38500c1", "0.10"),
    Release("0.10.1", 108, "619764c15117fbefc4ba13ab941871cb514c23f6", "0.10"),
    Release("0.10.2", 112, "990e6a0b84138346e6a38785412f36356e0e5dc3", "0.10"),
)}


def parse(version: str) -> tuple[int, ...]:
    """'0.10.2' -> (0, 10, 2); a dev/rc suffix is dropped ('0.11.0.dev2026' -> (0, 11, 0))."""
    nums = []
    for part in version.split(".")[:3]:
        m = re.match(r"\d+", part)
        if not m:
            break
        nums.append(int(m.group()))
    return tuple(nums)


def release(version: str | None = None) -> Release:
    """The table row for `version` (default: the installed jax). A release
    newer than NEWEST gets NEWEST's row (the best try); one between two
    tested releases gets the older neighbour's."""
    if version is None:
        version = installed_jax()
    if version in RELEASES:
        return RELEASES[version]
    key = parse(version)
    older = [r for v, r in RELEASES.items() if parse(v) <= key]
    if not older:
        raise ValueError(message(version))
    return max(older, key=lambda r: parse(r.jax))


def installed_jax() -> str:
    from importlib import metadata

    try:
        return metadata.version("jax")
    except metadata.PackageNotFoundError:
        import jax

        return jax.__version__


# ---- the support check -----------------------------------------------------

SUPPORTED, NEWER, UNSUPPORTED = "supported", "newer", "unsupported"


def status(version: str) -> str:
    key = parse(version)
    if key < parse(OLDEST):
        return UNSUPPORTED
    if key > parse(NEWEST):
        return NEWER
    return SUPPORTED


def message(version: str, jaxlib: str | None = None) -> str:
    """One paragraph for a jax outside the tested range: the installed
    version, the tested range, what to do. '' for a supported one."""
    st = status(version)
    lib = f", jaxlib {jaxlib}" if jaxlib and jaxlib != version else ""
    tested = f"pjrtx is tested with jax/jaxlib {OLDEST} to {NEWEST}"
    if st == UNSUPPORTED:
        return (f"pjrtx: jax {version}{lib} is older than any release pjrtx supports; {tested}. "
                f"The pjrtx device is not registered. Install a supported JAX: "
                f"pip install 'jax>={OLDEST},<={NEWEST}' 'jaxlib>={OLDEST},<={NEWEST}' "
                f"(pip install -U jax jaxlib takes {NEWEST} or newer).")
    if st == NEWER:
        return (f"pjrtx: jax {version}{lib} is newer than any release pjrtx was tested with; "
                f"{tested}. pjrtx registers its device and tries; if something fails, install "
                f"jax=={NEWEST} jaxlib=={NEWEST} (pip install 'jax=={NEWEST}' 'jaxlib=={NEWEST}') "
                f"or a newer pjrtx.")
    return ""


class VersionWarning(UserWarning):
    """jax outside the tested range (older: not registered; newer: a best try)."""


_warned: set = set()


def check(version: str | None = None, jaxlib: str | None = None) -> bool:
    """Warns (once per process) for a jax outside the tested range; False
    when pjrtx must not register its device (older than OLDEST). Runs at
    `import pjrtx` and again when JAX loads the plugin."""
    if version is None:
        version = installed_jax()
    st = status(version)
    if st != SUPPORTED and version not in _warned:
        _warned.add(version)
        warnings.warn(message(version, jaxlib), VersionWarning, stacklevel=2)
    return st != UNSUPPORTED


# ---- Shardy, per localiser generation -------------------------------------

@dataclasses.dataclass(frozen=True)
class Shardy:
    """Shardy's passes as jaxlib ships them. localize: pjrtx partitions with
    Shardy's own localiser (propagation, export with explicit collectives,
    global-to-local); without it every sharded program takes the global path
    (each device runs the whole program on gathered arguments: correct, N
    times the compute)."""
    propagate: str            # propagation only (global path, custom_partitioning)
    localize: tuple[str, str] | None  # (partition pipeline, local pipeline) or None
    defects: tuple[str, ...]  # what pjrtx/frontend/partition/checks.py guards against


_PROPAGATE = "builtin.module(sdy-propagation-pipeline)"
SHARDY = {
    # jaxlib 0.8.x: no sdy-convert-global-to-local or sdy-drop-sharding-and-mesh.
    # jaxlib 0.9.x: sdy-convert-global-to-local without its options
    # (per-dim-all-gather, enable-rgv3) and no sdy-drop-sharding-and-mesh; its
    # results are not checked against XLA:CPU, so not used.
    None: Shardy(propagate=_PROPAGATE, localize=None, defects=(
        "sdy-convert-global-to-local missing (0.8.x) or unverified (0.9.x): global path",)),
    "0.10": Shardy(
        propagate=_PROPAGATE,
        localize=("builtin.module(sdy-propagation-pipeline,"
                  "sdy-export-pipeline{enable-insert-explicit-collectives=true})",
                  "builtin.module(sdy-convert-global-to-local,sdy-drop-sharding-and-mesh)"),
        defects=(
            "reduce_window (cumsum) and gather over a sharded dim: LLVM CHECK abort",
            "while/case/if: region types not converted (pass error)",
            "dynamic_slice on a sharded dim: sizes not localized",
            "all_reduce it inserts always has an add body (max/min reductions)",
            "reshard of an unreduced argument exported as a doubled reduction",
        )),
}


def shardy(version: str | None = None) -> Shardy:
    return SHARDY[release(version).shardy]


# ---- shims for jaxlib / JAX API drift --------------------------------------

def attribute_names(attributes) -> list[str]:
    """The names in an op's attribute map. Iterating the map yields
    NamedAttributes in jaxlib 0.8.0's MLIR bindings and names from 0.8.1 on;
    indexing by position yields a NamedAttribute in both."""
    return [attributes[i].name for i in range(len(attributes))]


# JAX internals the lowering rules and callbacks touch whose signatures
# changed inside the supported range (read with inspect, so a release
# between two tested ones gets whichever it has):
#   jax.interpreters.mlir.aval_to_ir_type(ctx, aval)     ctx from 0.10.1 (before: aval)
#   jax.interpreters.mlir.set_sharding(ctx, op, sharding) ctx from 0.10.1 (before: op, sharding)
#   jax._src.callback.emit_python_callback(returns_token=) from 0.8.2
#   (OPTIONAL_KWARGS below)
# and primitive parameters the rules take with a default for releases that
# do not pass them (pjrtx/jax_rules/linalg_*.py):
#   eigh_p `algorithm` (0.9.2 and older pass none), eig_p
#   `enable_eigvec_derivs` (from 0.10.1), tridiagonal_solve_p
#   `perturb_singular` (from 0.10.0).
# Everything else pjrtx patches or reads (jax_plugin.py: donation list,
# persistent-cache gate, Executable.as_text, MeshComputation.cost_analysis,
# ArrayImpl.__dlpack__, compiler.backend_compile_and_load, util.register_cache;
# coordinator.py: jax._src.distributed / _jax; export_targets.py:
# export._export's custom-call list) is the same from 0.8.0 to 0.10.2.

def _takes(fn, name: str) -> bool:
    import inspect

    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def aval_to_ir_type(module_context, aval):
    from jax._src.interpreters import mlir

    if _takes(mlir.aval_to_ir_type, "ctx"):
        return mlir.aval_to_ir_type(module_context, aval)
    return mlir.aval_to_ir_type(aval)


def set_sharding(module_context, op, sharding):
    from jax._src.interpreters import mlir

    if _takes(mlir.set_sharding, "ctx"):
        return mlir.set_sharding(module_context, op, sharding)
    return mlir.set_sharding(op, sharding)


# Keyword arguments JAX functions gained inside the supported range (the
# release that added each): kwargs_for drops them where the installed
# release's function does not take them; any other keyword passes as given.
OPTIONAL_KWARGS = {
    "returns_token": "0.8.2",     # jax._src.callback.emit_python_callback
    "prevent_mlir_dce": "0.10.0",  # jax.lax.dce_sink
}


def kwargs_for(fn, **kwargs) -> dict:
    return {k: v for k, v in kwargs.items() if k not in OPTIONAL_KWARGS or _takes(fn, k)}


# PJRT C API features pjrtx offers that older jaxlibs do not ask for:
#   the Shardings extension (executable argument/result shardings): 0.91
#   (jaxlib 0.9.1). Older jaxlibs ask XLA's HLO for them and get none, so
#   jax_plugin answers pxla's question from the plan instead.
SHARDINGS_EXTENSION_MINOR = 91


def jax_at_least(version: str) -> bool:
    return parse(installed_jax()) >= parse(version)


# jax.lax API the tests write programs with that older releases refuse (the
# StableHLO op allows it on every release; pjrtx's lowering is tested where
# JAX can write the program):
#   lax.broadcast_in_dim with unsorted broadcast_dimensions: from 0.10.0;
#   lax.linalg.tridiagonal_solve(perturb_singular=) and eigh_tridiagonal's
#   eigenvectors: from 0.10.0;
#   stablehlo.async_start/async_done and !stablehlo.future in jaxlib's
#   StableHLO (so in programs a jaxlib can send): from 0.10.0.
UNSORTED_BROADCAST_DIMS = "0.10.0"
TRIDIAGONAL_PERTURB_SINGULAR = "0.10.0"
STABLEHLO_ASYNC = "0.10.0"
# jax before 0.9.1 lowers a strided static index (x[1:, ::2]) to a gather
# with iota indices, not a strided slice; pjrtx's small-value host path
# takes slices but not gathers, so such a loop body keeps those ops on MLX
# there (same results, more dispatches).
STRIDED_INDEX_AS_SLICE = "0.9.1"

# What JAX's own callback lowering writes, which pjrtx's mirrors so lowered
# text matches XLA's (pjrtx/jax_rules/callbacks.py): the sharding of an
# ordered callback's token result is maximal on the callback's device from
# 0.10.2 on, and on no device (empty mesh) before.
CALLBACK_TOKEN_ON_DEVICE = "0.10.2"


# The oracle (XLA:CPU of the same jaxlib) differs too. Measured against a
# long-double root on tests/test_ops_elementwise.py's cbrt inputs: jaxlib
# 0.9.2 and older compute cbrt to within these many eps of the true root
# (0.10.0 on: 0.47 f16, 0.64 f32, 2.05 f64); the tests widen their bound by
# as much there.
XLA_CPU_ACCURATE_CBRT = "0.10.0"
XLA_CPU_CBRT_EPS_BEFORE = {"float16": 1.33, "float32": 7.67, "float64": 59.23}

# Oracle defects in older jaxlibs' XLA:CPU with sub-byte types, each checked
# against NumPy/ml_dtypes (pjrtx gives the NumPy answer): the release that
# fixed it. Tests that compare with XLA:CPU there have no oracle before it.
XLA_CPU_FIXED = {
    # convert_element_type from int4/uint4 arrays reads the wrong nibbles
    "int4 convert": "0.9.0",
    # jnp.max/min/sort of float4_e2m1fn fails to compile (LLVM: invalid
    # bitcast i8 to i4)
    "float4 reduce": "0.10.1",
    # a scalar int4/float4_e2m1fn pure_callback operand reads as 0
    "sub-byte scalar callback": "0.10.2",
}


def xla_cpu_defect(name: str) -> str | None:
    """Why XLA:CPU of the installed jaxlib is no oracle for `name`, or None."""
    fixed = XLA_CPU_FIXED[name]
    if jax_at_least(fixed):
        return None
    return (f"XLA:CPU of jaxlib {installed_jax()} gets {name} wrong (fixed in {fixed}; "
            f"pjrtx/versions.py): no oracle to compare with")
