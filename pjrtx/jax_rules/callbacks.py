"""Host callbacks on pjrtx: jax.pure_callback, jax.experimental.io_callback,
jax.debug.callback, jax.debug.print and checkify's check.

JAX 0.10.2 emits Python callbacks only for cpu/cuda/rocm/tpu
(``callback.emit_python_callback`` raises for other platforms, and the debug
and check primitives have rules for those platforms only). Here each becomes

    custom_call @pjrtx_callback(token?, operands...) {backend_config = "<id>"}

with result types = the primitive's avals_out (a token first when ordered)
and has_side_effect for everything but pure_callback. ``<id>`` names an
entry of ``_table``; the back end (csrc/backend/mlx/ops/callback.cc) runs it
as a host kernel on MLX's CPU stream, in stream order, through _invoke.

Lifetime of an entry. The lowering hands a _Keepalive to
``module_context.add_host_callback``: JAX passes that list to
``compile_and_load`` and jaxlib's executable owns it, so it lives as long as
the executable can be called (and marks the executable as having host
callbacks, so it runs with tokens and jax.effects_barrier() waits for it,
and it never enters the persistent compilation cache). A run already queued
may outlive the Python executable, so the compiled program also holds the id
(a count in C++, no GIL needed to drop it). An entry goes when both are gone:
the keepalive's __del__ frees it at once if no program holds it, else it
becomes an orphan that the next lowering (or keepalive death) collects from
the queue of released ids. A program compiled in a loop therefore frees the
entries of the executables already dropped, and a lowering that is never
compiled frees its entry when the lowering dies.
"""
from __future__ import annotations

import functools
import itertools
import traceback
from typing import Any, Callable, Sequence

import ml_dtypes
import numpy as np
from jax._src import callback as cb
from jax._src import config, core, dtypes
from jax._src import debugging
from jax._src import effects
from jax._src import sharding_impls
from jax._src.interpreters import mlir
from jax._src.lib.mlir.dialects import hlo
from jax._src.sharding_impls import SdyArray, SdyArrayList

from pjrtx import PLATFORM, versions
from pjrtx._contract import load_extension

TARGET = "pjrtx_callback"

# Plan dtype names (compiler::dtype_name) -> NumPy dtypes.
_NUMPY_DTYPES = {
    "pred": np.bool_, "s8": np.int8, "s16": np.int16, "s32": np.int32, "s64": np.int64,
    "u8": np.uint8, "u16": np.uint16, "u32": np.uint32, "u64": np.uint64,
    "f16": np.float16, "bf16": ml_dtypes.bfloat16, "f32": np.float32, "f64": np.float64,
    "c64": np.complex64, "c128": np.complex128,
    "s2": ml_dtypes.int2, "u2": ml_dtypes.uint2,
    "s4": ml_dtypes.int4, "u4": ml_dtypes.uint4,
    # Small floats are stored one encoding per byte, as ml_dtypes stores them.
    "f8e4m3fn": ml_dtypes.float8_e4m3fn, "f8e5m2": ml_dtypes.float8_e5m2,
    "f8e4m3": ml_dtypes.float8_e4m3, "f8e3m4": ml_dtypes.float8_e3m4,
    "f8e4m3fnuz": ml_dtypes.float8_e4m3fnuz, "f8e5m2fnuz": ml_dtypes.float8_e5m2fnuz,
    "f8e4m3b11fnuz": ml_dtypes.float8_e4m3b11fnuz, "f8e8m0fnu": ml_dtypes.float8_e8m0fnu,
    "f4e2m1fn": ml_dtypes.float4_e2m1fn,
}
# MLX keeps 2- and 4-bit values one per byte, sign-extended for s2/s4.
_BYTE_OF_4BIT = {"s2": np.int8, "u2": np.uint8, "s4": np.int8, "u4": np.uint8}


class CallbackError(RuntimeError):
    """A callback raised or returned something other than its declared
    results; the message names the callback and holds the original error."""


class _Entry:
    __slots__ = ("fn", "name", "result_avals", "x64")

    def __init__(self, fn: Callable, name: str, result_avals: Sequence[core.ShapedArray]):
        self.fn = fn
        self.name = name
        self.result_avals = tuple(result_avals)
        # The callable runs on MLX's stream thread, where a thread-local
        # jax.enable_x64 context of the caller is not in effect.
        self.x64 = config.enable_x64.value

    def results(self, out) -> list[np.ndarray]:
        """The callable's results checked against the declared types (the
        same checks and words as JAX's CPU callbacks: Python literals become
        the canonical dtype, anything else must match), as flat bytes."""
        out = tuple(out)
        want = self.result_avals
        if len(out) != len(want):
            raise CallbackError(
                f"{self.name}: Mismatched number of outputs from callback. "
                f"Expected: {len(want)}, Actual: {len(out)}")
        flat = []
        for i, (value, aval) in enumerate(zip(out, want)):
            a = dtypes.canonicalize_value(np.asarray(value))
            if a.shape != aval.shape:
                raise CallbackError(
                    f"{self.name}: Incorrect output shape for return value #{i}: "
                    f"Expected: {aval.shape}, Actual: {a.shape}")
            if a.dtype != aval.dtype:
                raise CallbackError(
                    f"{self.name}: Incorrect output dtype for return value #{i}: "
                    f"Expected: {aval.dtype}, Actual: {a.dtype}")
            # Bytes, because NumPy cannot export ml_dtypes types (bf16, int4)
            # through the buffer protocol.
            flat.append(np.ascontiguousarray(a).reshape(-1).view(np.uint8))
        return flat


_table: dict[int, _Entry] = {}
_orphans: set[int] = set()
_ids = itertools.count(1)


def _collect_released() -> None:
    for cb_id in load_extension()._take_released_callbacks():
        if cb_id in _orphans:
            _orphans.discard(cb_id)
            _table.pop(cb_id, None)


def _drop(cb_id: int) -> None:
    _collect_released()
    # In use means a program holds it: its release is queued later, and
    # the orphan mark (set before that release can be collected) frees it.
    if load_extension()._callback_in_use(cb_id):
        _orphans.add(cb_id)
    else:
        _table.pop(cb_id, None)


class _Keepalive:
    """The host callback object JAX hands to compile_and_load; jaxlib
    accepts callables only, so calling it calls the entry."""
    __slots__ = ("id",)

    def __init__(self, cb_id: int):
        self.id = cb_id

    def __call__(self, *args):
        return _table[self.id].fn(*args)

    def __del__(self):
        try:
            _drop(self.id)
        except Exception:  # interpreter shutdown: modules already torn down
            pass


def live_callbacks() -> int:
    """How many callables the table holds (for tests of the lifetime)."""
    _collect_released()
    return len(_table)


def _to_numpy(buf: bytearray, dtype: str, shape: tuple) -> np.ndarray:
    if dtype in _BYTE_OF_4BIT:
        a = np.frombuffer(buf, _BYTE_OF_4BIT[dtype]).astype(_NUMPY_DTYPES[dtype])
    elif dtype == "f4e2m1fn":  # the encoding sits in the low nibble
        a = (np.frombuffer(buf, np.uint8) & 0x0F).view(_NUMPY_DTYPES[dtype])
    else:
        a = np.frombuffer(buf, _NUMPY_DTYPES[dtype])
    return a.reshape(shape)


def _invoke(cb_id: int, args: list, num_results: int) -> list[np.ndarray]:
    """Called by the back end (csrc/python/callback_hook.cc) under the GIL."""
    entry = _table.get(cb_id)
    if entry is None:
        raise CallbackError(
            f"host callback {cb_id} was freed with the executable that lowered it")
    arrays = [_to_numpy(*a) for a in args]
    try:
        with config.enable_x64(entry.x64):
            out = entry.results(entry.fn(*arrays))
    except CallbackError:
        raise
    except BaseException as e:
        text = "".join(traceback.format_exception(e)).rstrip()
        raise CallbackError(f"{entry.name} raised {type(e).__name__}: {e}\n{text}") from None
    if len(out) != num_results:  # the lowering declared them: a pjrtx bug
        raise CallbackError(f"{entry.name}: {len(out)} results for {num_results} outputs")
    return out


def _name(kind: str, fn: Any) -> str:
    fn = getattr(fn, "callback_func", fn)  # callback._FlatCallback
    while isinstance(fn, functools.partial):
        fn = fn.func
    return f"{kind}({getattr(fn, '__qualname__', None) or type(fn).__name__})"


def _op_sharding(ctx, sharding, with_token: bool):
    """The sharding annotation JAX puts on its own callback custom call
    (callback._callback_op_sharding): maximal on the callback's device, with
    one more entry for a token result. XLA partitioners read it; pjrtx runs
    one device and ignores it, but lowered text matches XLA's."""
    op_sharding = cb._callback_op_sharding(ctx.module_context.axis_context, sharding,
                                           ctx.avals_out)
    if (with_token and config.use_shardy_partitioner.value and ctx.avals_out
            and isinstance(op_sharding, SdyArrayList)):
        first = op_sharding.shardings[0]
        ids = first.logical_device_ids \
            if versions.jax_at_least(versions.CALLBACK_TOKEN_ON_DEVICE) else ()
        op_sharding = SdyArrayList((SdyArray(mesh_shape=(), dim_shardings=(),
                                             logical_device_ids=ids),
                                    *op_sharding.shardings))
    return op_sharding


def _debug_op_sharding(ctx):
    """The annotation JAX's debug_callback_lowering puts on an unordered
    debug callback: maximal on device 0 under jit (it runs once, on the
    whole value), manual inside a fully manual shard_map (once per device).
    A partially manual shard_map gets none: JAX wraps the callback in a cond
    on the auto axes' index there, which pjrtx does not (it runs on every
    device, as before)."""
    axis_context = ctx.module_context.axis_context
    if isinstance(axis_context, sharding_impls.SPMDAxisContext):
        if set(axis_context.mesh.axis_names) != set(axis_context.manual_axes):
            return None
        return cb._callback_op_sharding(axis_context, None, ctx.avals_out)
    if isinstance(axis_context, sharding_impls.ShardingContext):
        return cb._callback_op_sharding(axis_context, None, ctx.avals_out)
    return None


def emit_callback(ctx, fn: Callable, name: str, operands: Sequence, *,
                  has_side_effect: bool, token=None, annotate=False, sharding=None):
    """custom_call @pjrtx_callback calling fn(*numpy operands) -> results
    of types ctx.avals_out. Returns (results, token out or None)."""
    return _emit(ctx, fn, name, operands, ctx.avals_out, has_side_effect, token,
                 annotate=annotate, sharding=sharding)[:2]


def _emit(ctx, fn, name, operands, result_avals, has_side_effect, token, annotate=False,
          sharding=None):
    _collect_released()
    cb_id = next(_ids)
    _table[cb_id] = _Entry(fn, name, result_avals)
    keepalive = _Keepalive(cb_id)
    ctx.module_context.add_host_callback(keepalive)
    result_types = [versions.aval_to_ir_type(ctx.module_context, a) for a in result_avals]
    operands = list(operands)
    if token is not None:
        operands = [token, *operands]
        result_types = [hlo.TokenType.get(), *result_types]
    op = mlir.custom_call(TARGET, result_types=result_types, operands=operands,
                          backend_config=str(cb_id), has_side_effect=has_side_effect)
    if annotate == "debug":
        op_sharding = _debug_op_sharding(ctx)
        if op_sharding is not None:
            versions.set_sharding(ctx.module_context, op, op_sharding)
    elif annotate:
        versions.set_sharding(ctx.module_context, op, _op_sharding(ctx, sharding, token is not None))
    results = list(op.results)
    if token is not None:
        token, *results = results
    return results, token, keepalive


_jax_emit_python_callback = cb.emit_python_callback


def emit_python_callback(ctx, callback, token, operands, operand_avals, result_avals, *,
                         has_side_effect, returns_token=True, partitioned=False, sharding=None):
    """JAX's own helper for custom primitives that call Python
    (jax._src.callback.emit_python_callback, also reached as
    mlir.emit_python_callback), which raises for any platform outside
    cpu/cuda/rocm/tpu: on pjrtx it emits our callback target; on others it
    is JAX's. Same contract: (results, token out, host callback object)."""
    platforms = tuple(ctx.module_context.platforms)
    if platforms != (PLATFORM,):
        return _jax_emit_python_callback(
            ctx, callback, token, operands, operand_avals, result_avals,
            **versions.kwargs_for(
                _jax_emit_python_callback, has_side_effect=has_side_effect,
                returns_token=returns_token, partitioned=partitioned, sharding=sharding))
    del operand_avals, returns_token, sharding  # one device; the token is threaded iff given
    if partitioned and result_avals:
        raise ValueError("Partitioned callback not supported with return values.")
    return _emit(ctx, callback, _name("emit_python_callback", callback), operands,
                 result_avals, has_side_effect, token or None)


def _with_effect_token(ctx, effect, emit):
    """Runs emit(token) with the token of an ordered effect (None for an
    unordered one) and threads the token it returns."""
    if not effects.ordered_effects.contains(effect):
        return emit(None)[0]
    results, token = emit(ctx.tokens_in.get(effect))
    ctx.set_tokens_out(ctx.tokens_in.update_tokens(mlir.TokenSet({effect: token})))
    return results


# Each rule calls the primitive's own impl, as JAX's CPU rules do: it moves
# the operands to the CPU device and runs the user's callable there.

def _pure_callback_rule(ctx, *args, callback, sharding, **params):
    fn = lambda *a: cb.pure_callback_impl(*a, callback=callback, sharding=None, **params)
    return emit_callback(ctx, fn, _name("jax.pure_callback", callback), args,
                         has_side_effect=False, annotate=True, sharding=sharding)[0]


def _io_callback_rule(ctx, *args, callback, sharding, ordered, **params):
    fn = lambda *a: cb.io_callback_impl(*a, callback=callback, sharding=None, ordered=ordered,
                                        **params)
    effect = cb._OrderedIOEffect if ordered else cb._IOEffect
    name = _name("jax.experimental.io_callback", callback)
    return _with_effect_token(ctx, effect, lambda token: emit_callback(
        ctx, fn, name, args, has_side_effect=True, token=token, annotate=True,
        sharding=sharding))


def _debug_callback_rule(ctx, *args, callback, effect, partitioned, **params):
    def fn(*a):
        debugging.debug_callback_p.impl(*a, callback=callback, effect=effect,
                                        partitioned=partitioned, **params)
        return ()
    name = _name("jax.debug.callback", callback)
    # JAX annotates unordered debug callbacks only (debug_callback_lowering)
    return _with_effect_token(ctx, effect, lambda token: emit_callback(
        ctx, fn, name, args, has_side_effect=True, token=token,
        annotate="debug" if token is None else False))


def _debug_print_rule(ctx, *args, fmt, ordered, **params):
    def fn(*a):
        debugging.debug_print_p.impl(*a, fmt=fmt, ordered=ordered, **params)
        return ()
    effect = debugging.ordered_debug_effect if ordered else debugging.debug_effect
    name = f"jax.debug.print({fmt!r})"
    return _with_effect_token(ctx, effect, lambda token: emit_callback(
        ctx, fn, name, args, has_side_effect=True, token=token,
        annotate="debug" if token is None else False))


def _check_rule(ctx, *args, err_tree, debug):
    from jax._src import checkify

    if debug:  # a no-op until discharged, as on CPU
        return []
    if not checkify.config.xla_runtime_errors.value:
        raise checkify.functionalization_error
    fn = functools.partial(checkify.python_err, err_tree)
    return emit_callback(ctx, fn, "checkify.check", args, has_side_effect=True)[0]


def register() -> None:
    from jax._src import checkify

    # Not cacheable, as JAX's own rules: each lowering owns its table entry.
    for prim, rule in ((cb.pure_callback_p, _pure_callback_rule),
                       (cb.io_callback_p, _io_callback_rule),
                       (debugging.debug_callback_p, _debug_callback_rule),
                       (debugging.debug_print_p, _debug_print_rule),
                       (checkify.check_p, _check_rule)):
        mlir.register_lowering(prim, rule, platform=PLATFORM, cacheable=False)
    # Callers look it up as an attribute at lowering time, so replacing it
    # in both modules reaches them (a `from ... import` done before this
    # keeps JAX's, which raises as before).
    import jax.interpreters.mlir as public_mlir

    cb.emit_python_callback = emit_python_callback
    if getattr(public_mlir, "emit_python_callback", None) is _jax_emit_python_callback:
        public_mlir.emit_python_callback = emit_python_callback
