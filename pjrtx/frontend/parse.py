"""Program bytes -> MLIR module.

Accepts a StableHLO portable artifact (VHLO bytecode, what jaxlib sends),
plain MLIR bytecode, or MLIR text. Each parse gets a fresh context, so the
attributes (constants) of one program do not stay interned for the life of
the process.
"""
from __future__ import annotations

import contextlib

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import chlo, stablehlo

_BYTECODE_MAGIC = b"ML\xefR"
_REGISTRY = None


def _upstream_dialects() -> ir.DialectRegistry:
    # The registry JAX's own contexts use (func, arith, ...); built once.
    global _REGISTRY
    if _REGISTRY is None:
        from jaxlib.mlir._mlir_libs import _jax_mlir_ext

        registry = ir.DialectRegistry()
        _jax_mlir_ext.register_dialects(registry)
        _REGISTRY = registry
    return _REGISTRY


def make_context() -> ir.Context:
    ctx = ir.Context()
    # A portable artifact loads func itself when deserialized; MLIR text and
    # plain bytecode need func (and the other upstream dialects JAX emits,
    # e.g. arith in custom_call backend configs) registered up front.
    ctx.append_dialect_registry(_upstream_dialects())
    ctx.load_all_available_dialects()
    stablehlo.register_dialect(ctx)
    chlo.register_dialect(ctx)
    try:
        from jaxlib.mlir.dialects import sdy

        sdy.register_dialect(ctx)
    except Exception:  # older jaxlib without Shardy: annotations cannot occur
        pass
    ctx.allow_unregistered_dialects = True
    return ctx


@contextlib.contextmanager
def parse_module(code: bytes | str, format: str = "mlir"):
    if format not in ("mlir", "stablehlo", "hlo_with_config") and format != "":
        raise ValueError(f"pjrtx: unsupported program format {format!r} (expected 'mlir')")
    if format == "hlo_with_config":
        raise ValueError("pjrtx: HLO programs are not supported; send StableHLO (format 'mlir')")
    ctx = make_context()
    if isinstance(code, str):
        code = code.encode()
    module = None
    if code.startswith(_BYTECODE_MAGIC):
        try:
            module = stablehlo.deserialize_portable_artifact(ctx, code)
        except Exception:
            module = None  # plain MLIR bytecode, not a portable artifact
    with ctx, ir.Location.unknown():
        if module is None:
            try:
                module = ir.Module.parse(code)
            except Exception as e:
                # jaxlib registers no quant dialect, so quantized types only
                # reach us as verifier errors of the ops that carry them.
                if "!quant." in str(e):
                    raise ValueError("pjrtx: uniform quantized types (!quant.uniform) are not "
                                     f"supported: {e}") from None
                raise ValueError(f"pjrtx: cannot parse the program as MLIR: {e}") from None
        yield module
