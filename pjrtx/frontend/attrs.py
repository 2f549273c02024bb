"""MLIR attributes -> plan attribute values.

Scalars become bool/int/float/str, integer arrays become lists, dense
elements become :class:`pjrtx._pjrtx.Dense` (raw bytes), and StableHLO's
structured attributes become dicts that the walker flattens into
``"<attr>.<field>"`` keys (e.g. ``dot_dimension_numbers.lhs_batching_dimensions``).
Anything else is kept as its text.
"""
from __future__ import annotations

import re

import ml_dtypes
import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir._mlir_libs import _stablehlo as _sh

from pjrtx import _pjrtx

# MLIR element type -> (plan dtype, numpy dtype)
_ELEMENT_TYPES = {
    "i1": ("pred", np.bool_),
    "i2": ("s2", ml_dtypes.int2),
    "i4": ("s4", ml_dtypes.int4),
    "i8": ("s8", np.int8),
    "i16": ("s16", np.int16),
    "i32": ("s32", np.int32),
    "i64": ("s64", np.int64),
    "ui2": ("u2", ml_dtypes.uint2),
    "ui4": ("u4", ml_dtypes.uint4),
    "ui8": ("u8", np.uint8),
    "ui16": ("u16", np.uint16),
    "ui32": ("u32", np.uint32),
    "ui64": ("u64", np.uint64),
    "f16": ("f16", np.float16),
    "bf16": ("bf16", ml_dtypes.bfloat16),
    "f32": ("f32", np.float32),
    "f64": ("f64", np.float64),
    "complex<f32>": ("c64", np.complex64),
    "complex<f64>": ("c128", np.complex128),
    # Small floats: one byte per value (f4E2M1FN in the low nibble), as
    # ml_dtypes stores them.
    "f8E4M3FN": ("f8e4m3fn", ml_dtypes.float8_e4m3fn),
    "f8E5M2": ("f8e5m2", ml_dtypes.float8_e5m2),
    "f8E4M3": ("f8e4m3", ml_dtypes.float8_e4m3),
    "f8E3M4": ("f8e3m4", ml_dtypes.float8_e3m4),
    "f8E4M3FNUZ": ("f8e4m3fnuz", ml_dtypes.float8_e4m3fnuz),
    "f8E5M2FNUZ": ("f8e5m2fnuz", ml_dtypes.float8_e5m2fnuz),
    "f8E4M3B11FNUZ": ("f8e4m3b11fnuz", ml_dtypes.float8_e4m3b11fnuz),
    "f8E8M0FNU": ("f8e8m0fnu", ml_dtypes.float8_e8m0fnu),
    "f4E2M1FN": ("f4e2m1fn", ml_dtypes.float4_e2m1fn),
}
_SMALL_FLOATS = {plan for plan, _ in _ELEMENT_TYPES.values() if plan.startswith(("f8", "f4"))}

# Same-width unsigned ints, to read hex bit patterns of float components.
_BITS_OF = {np.float16: np.uint16, ml_dtypes.bfloat16: np.uint16, np.float32: np.uint32,
            np.float64: np.uint64,
            **{npdt: np.uint8 for plan, npdt in _ELEMENT_TYPES.values() if plan.startswith(("f8", "f4"))}}


class UnsupportedType(ValueError):
    pass


def element_info(element_type) -> tuple[str, type]:
    name = str(element_type)
    if name not in _ELEMENT_TYPES:
        raise UnsupportedType(f"pjrtx: unsupported element type {name}")
    return _ELEMENT_TYPES[name]


def tensor_type(t) -> tuple[str, list[int]]:
    """MLIR type -> (plan dtype, shape)."""
    s = str(t)
    if s == "!stablehlo.token":
        return ("token", [])
    if not isinstance(t, ir.RankedTensorType):
        raise UnsupportedType(f"pjrtx: unsupported type {s} (only ranked tensors and tokens)")
    rt = ir.RankedTensorType(t)
    if not rt.has_static_shape:
        raise UnsupportedType(f"pjrtx: dynamic shapes are not supported: {s}")
    dtype, _ = element_info(rt.element_type)
    return (dtype, list(rt.shape))


# ---- dense elements ------------------------------------------------------------

_DENSE_TEXT = re.compile(r"dense<(.*)>\s*:\s*tensor<", re.S)
_TOKEN = re.compile(r"0x[0-9A-Fa-f]+|[-+]?(?:inf|nan)|[-+]?[0-9.]+(?:[eE][-+]?[0-9]+)?|true|false")


def _parse_dense_text(text: str, dtype: str, npdt, shape: list[int]) -> tuple[bytes, bool]:
    """Fallback for element types the buffer protocol does not cover (bf16,
    complex, i4/ui4): MLIR prints large attributes as raw hex, small ones as
    decimal literals (non-finite floats as hex bit patterns). i4 hex holds one
    byte per value, the value in the low nibble (-1 is 0F) as ml_dtypes
    stores int4; a numpy constant whose bytes have a high nibble set keeps it
    (0x13 for 3), and XLA and the back end ignore that nibble."""
    m = _DENSE_TEXT.search(text)
    if not m:
        raise ValueError(f"pjrtx: cannot read dense elements {text[:80]}")
    body = m.group(1).strip()
    count = int(np.prod(shape)) if shape else 1
    itemsize = np.dtype(npdt).itemsize
    if body.startswith('"0x'):
        raw = bytes.fromhex(body[3:-1])
        splat = len(raw) == itemsize and count != 1
        return raw, splat
    comp = {np.complex64: np.float32, np.complex128: np.float64}.get(npdt, npdt)
    vals = []
    for tok in _TOKEN.findall(body):
        if tok.startswith("0x"):
            bits = np.array(int(tok, 16), dtype=_BITS_OF.get(comp, np.uint64))
            vals.append(float(bits.view(comp)) if comp in _BITS_OF else int(tok, 16))
        elif tok in ("true", "false"):
            vals.append(tok == "true")
        else:
            vals.append(float(tok) if comp in _BITS_OF else int(tok))
    if npdt in (np.complex64, np.complex128):
        # Reinterpret (re, im) pairs: re + 1j * im would turn an infinite
        # imaginary part into nan + inf*j.
        arr = np.ascontiguousarray(np.array(vals, dtype=comp).reshape(-1, 2)).view(npdt).reshape(-1)
    else:
        arr = np.array(vals, dtype=npdt)
    splat = arr.size == 1 and count != 1
    return arr.tobytes(), splat


def dense(attr, text: str | None = None) -> "_pjrtx.Dense":
    dtype, shape = tensor_type(attr.type)
    if 0 in shape:  # MLIR calls an empty attribute a splat; it holds no bytes
        return _pjrtx.Dense(dtype, shape, b"", False)
    _, npdt = element_info(ir.ShapedType(attr.type).element_type)
    if dtype in ("bf16", "c64", "c128", "s2", "u2", "s4", "u4") or dtype in _SMALL_FLOATS \
            or text is not None:
        data, splat = _parse_dense_text(text or str(attr), dtype, npdt, shape)
        return _pjrtx.Dense(dtype, shape, data, splat)
    if attr.is_splat:
        value = np.asarray(attr).reshape(-1)[:1].astype(npdt)
        # One element is stored as is, as the text path does (same plan dumps).
        return _pjrtx.Dense(dtype, shape, value.tobytes(), int(np.prod(shape)) != 1)
    # Passed as the array itself (a view of the attribute's storage where
    # the dtype matches): Dense reads the buffer in place, without a bytes
    # copy of a large weight.
    arr = np.ascontiguousarray(np.asarray(attr), dtype=npdt)
    return _pjrtx.Dense(dtype, shape, arr, False)


# ---- StableHLO structured attributes -----------------------------------------

_STRUCTS = [
    (_sh.DotDimensionNumbers, ("lhs_batching_dimensions", "rhs_batching_dimensions",
                               "lhs_contracting_dimensions", "rhs_contracting_dimensions")),
    (_sh.GatherDimensionNumbers, ("offset_dims", "collapsed_slice_dims", "operand_batching_dims",
                                  "start_indices_batching_dims", "start_index_map",
                                  "index_vector_dim")),
    (_sh.ScatterDimensionNumbers, ("update_window_dims", "inserted_window_dims",
                                   "input_batching_dims", "scatter_indices_batching_dims",
                                   "scattered_dims_to_operand_dims", "index_vector_dim")),
    (_sh.ConvDimensionNumbers, ("input_batch_dimension", "input_feature_dimension",
                                "input_spatial_dimensions", "kernel_input_feature_dimension",
                                "kernel_output_feature_dimension", "kernel_spatial_dimensions",
                                "output_batch_dimension", "output_feature_dimension",
                                "output_spatial_dimensions")),
]
_ENUMS = [_sh.ComparisonDirectionAttr, _sh.ComparisonTypeAttr, _sh.PrecisionAttr,
          _sh.RngAlgorithmAttr, _sh.RngDistributionAttr, _sh.FftTypeAttr, _sh.TransposeAttr]


def _plain(v):
    if isinstance(v, (list, tuple)):
        return [int(x) for x in v]
    return int(v)


def convert(attr):
    """One attribute -> a plan value, or a dict for structured attributes."""
    if isinstance(attr, ir.BoolAttr):
        return bool(attr.value)
    if isinstance(attr, ir.IntegerAttr):
        return int(attr.value)
    if isinstance(attr, ir.FloatAttr):
        return float(attr.value)
    if isinstance(attr, ir.StringAttr):
        try:
            return attr.value
        except RuntimeError:  # bytes that are not UTF-8 (an opaque handle)
            return attr.value_bytes.decode("utf-8", "backslashreplace")
    if isinstance(attr, ir.FlatSymbolRefAttr):
        return attr.value
    if isinstance(attr, (ir.DenseI64ArrayAttr, ir.DenseI32ArrayAttr)):
        return [int(x) for x in attr]
    if isinstance(attr, ir.DenseBoolArrayAttr):
        return [bool(x) for x in attr]
    if isinstance(attr, ir.UnitAttr):
        return True
    if isinstance(attr, ir.DenseElementsAttr):
        return dense(attr)
    if isinstance(attr, ir.TypeAttr):
        return str(attr.value)
    if isinstance(attr, ir.ArrayAttr):
        items = [convert(a) for a in attr]
        kinds = {type(x) for x in items}
        if not items or (len(kinds) == 1 and kinds <= {int, float, str, bool}):
            return items
        return str(attr)
    if isinstance(attr, ir.DictAttr):
        # e.g. a custom_call's mhlo.backend_config {top_k = 3 : i64, ...}:
        # flattened by the walker into "mhlo.backend_config.top_k".
        # Only scalar fields; a nested structure stays text.
        fields = {}
        for named in attr:
            value = convert(named.attr)
            fields[named.name] = str(named.attr) if isinstance(value, dict) else value
        return fields
    for cls in _ENUMS:
        if cls.isinstance(attr):
            return cls(attr).value
    for cls, fields in _STRUCTS:
        if cls.isinstance(attr):
            a = cls(attr)
            return {f: _plain(getattr(a, f)) for f in fields}
    return str(attr)
