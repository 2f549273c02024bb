"""stablehlo.convert (ops/convert.cc) against XLA:CPU: every source dtype to
every target dtype in one jit per source, over the source's edge values.

Float -> int saturates with NaN -> 0 (a raw x86 cast gives INT_MIN or
garbage), float -> bool is x != 0 (NaN -> true), complex -> real keeps the
real part, and narrowing float conversions round to nearest even.
"""
import warnings

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax import lax
from jax.extend.core import Primitive
from jax.interpreters import mlir
from jaxlib.mlir.dialects import stablehlo

from oracle import assert_same
from pjrtx import versions
from test_ops_elementwise import FLOATS, INTS, check, float_edges, int_edges, name, x64_for

TARGETS = [bool] + INTS + FLOATS + [np.complex64]


def to_all(x):
    return {name(t): lax.convert_element_type(x, t) for t in TARGETS}


def float_sources(dt):
    """Edge values plus the saturation boundaries of every integer type."""
    bounds = []
    for t in INTS:
        info = np.iinfo(t)
        for v in (float(info.min), float(info.max), float(info.max) + 1, float(info.min) - 1,
                  float(info.max) * 2, -0.5, -0.99, 0.99, 255.5, 127.5, -128.5):
            # No neighbours of 0: denormal inputs read as 0 on XLA:CPU (DAZ).
            bounds += [v] if v == 0 else [v, np.nextafter(v, np.inf), np.nextafter(v, -np.inf)]
    with np.errstate(over="ignore"):
        extra = np.array(bounds, np.float64).astype(dt)
    return np.concatenate([float_edges(dt), extra])


@pytest.mark.parametrize("dt", FLOATS, ids=name)
def test_convert_from_float(dt):
    with x64_for(dt, np.int64):
        check(to_all, float_sources(dt))


@pytest.mark.parametrize("dt", INTS, ids=name)
def test_convert_from_int(dt):
    # Wrapping truncation to narrower ints, sign/zero extension to wider ones,
    # rounding of large values (2^24 + 1, INT64_MAX) to floats, and
    # overflow of large ones to inf in f16.
    info = np.iinfo(dt)
    extra = [v for v in [2 ** 24 + 1, 2 ** 53 + 1, 65519, 65520, 2 ** 31 - 1, -2 ** 31, 257, 4095,
                         2 ** 63 - 1, -2 ** 63, 2 ** 64 - 1, 2 ** 62 + 2 ** 40 + 1, -129, 128]
             if info.min <= v <= info.max]
    x = np.concatenate([int_edges(dt), np.array(extra, dt)])
    with x64_for(dt, np.int64):
        check(to_all, x)


def test_convert_from_bool():
    with x64_for(np.int64):
        check(to_all, np.array([False, True]))


# JAX lowers convert_element_type(complex -> real type) as stablehlo.real
# followed by a convert; bind a primitive that emits the direct
# stablehlo.convert from complex so that path is compared too.
raw_convert_p = Primitive("stablehlo_raw_convert")
raw_convert_p.def_abstract_eval(lambda x, *, dtype: jax.core.ShapedArray(x.shape, dtype))
mlir.register_lowering(raw_convert_p, lambda ctx, x, *, dtype: [
    stablehlo.convert(versions.aval_to_ir_type(ctx.module_context, ctx.avals_out[0]), x)])


def test_convert_from_complex64():
    x = np.zeros(10, np.complex64)
    x.real = [0.0, -0.0, 1.5, -2.5, 1e10, np.nan, np.inf, 0.0, 3e38, -0.0]
    x.imag = [0.0, 1.0, -1.0, 2.0, 0.0, 0.0, 1.0, np.nan, -1.0, np.inf]

    def f(x):
        out = {"jax_" + k: v for k, v in to_all(x).items()}
        for t in TARGETS:
            out["raw_" + name(t)] = raw_convert_p.bind(x, dtype=np.dtype(t))
        return out

    with x64_for(np.int64), warnings.catch_warnings():
        warnings.simplefilter("ignore", np.exceptions.ComplexWarning)  # JAX warns on complex -> real
        check(f, x)


def test_bf16_f16_rounding():
    # Halfway cases between adjacent bf16/f16 values round to even; values
    # past f16's max (65504) round to inf from 65520 on.
    b = np.float32(1.0) + np.float32(2.0 ** -8) * np.array([0, 0.5, 1, 1.5, 2, 2.5, 3], np.float32)
    h = np.float32(1.0) + np.float32(2.0 ** -11) * np.array([0.5, 1.5, 2.5], np.float32)
    big = np.array([65504, 65519, 65520, 3.3e38, 3.4e38, -65520], np.float32)
    x = np.concatenate([b, h, big, np.float32([1e-8, 6e-5])])

    def f(x):
        return dict(bf16=lax.convert_element_type(x, ml_dtypes.bfloat16),
                    f16=lax.convert_element_type(x, np.float16),
                    bf16_f16=lax.convert_element_type(
                        lax.convert_element_type(x, ml_dtypes.bfloat16), np.float16),
                    f16_bf16=lax.convert_element_type(
                        lax.convert_element_type(x, np.float16), ml_dtypes.bfloat16))

    check(f, x, atol=6.2e-5)  # f16 denormals (< 6.1e-5) are flushed by XLA:CPU


def test_convert_shapes():
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((4, 6)) * 300).astype(np.float32)
    assert_same(lambda x: lax.convert_element_type(x, np.int8), x.T)  # transposed
    assert_same(lambda x: lax.convert_element_type(x, np.uint8), x[::2, 1::2])  # strided
    assert_same(lambda x: lax.convert_element_type(x, np.int16), np.float32(-1e9))  # scalar
    assert_same(lambda x: lax.convert_element_type(x, bool), np.zeros((0, 3), np.float32))
    assert_same(lambda x: lax.convert_element_type(x, np.float16),
                rng.integers(-70000, 70000, (2, 3, 4)).astype(np.int32))


# ---- int4 / uint4 -----------------------------------------------------------
# MLX stores them one per byte (s4 sign-extended); XLA wraps integers into 4
# bits, saturates floats (NaN -> 0), and reads 4-bit sources as their value.

INT4S = [ml_dtypes.int4, ml_dtypes.uint4]
# int2/uint2 live the same way (one value per byte, s2 sign-extended).
SUBBYTE = INT4S + [ml_dtypes.int2, ml_dtypes.uint2]
ALL4 = np.arange(16, dtype=np.uint8)  # every nibble: s4 -8..7, u4 0..15 (2 bits: each 4 times)


def to_int4(x):
    # Also read each result back as s32 in the same program: a host transfer
    # only shows the low nibble, a later op sees the whole stored byte.
    out = {}
    for t in SUBBYTE:
        out[name(t)] = lax.convert_element_type(x, t)
        out[name(t) + "_s32"] = lax.convert_element_type(out[name(t)], np.int32)
    return out


@pytest.mark.parametrize("dt", INTS, ids=name)
def test_convert_int_to_int4_wraps(dt):
    # 8 -> s4 -8, 16 -> 0, -9 -> s4 7 / u4 7, 0x..f3 -> 3 or -13 -> 3.
    info = np.iinfo(dt)
    extra = [v for v in [8, 9, 15, 16, 17, 23, 24, -9, -16, -17, 0x7ff3, 2 ** 31 - 13, 2 ** 63 - 9]
             if info.min <= v <= info.max]
    x = np.concatenate([int_edges(dt), np.array(extra, dt)])
    with x64_for(dt):
        check(to_int4, x)


@pytest.mark.parametrize("dt", FLOATS + [np.complex64], ids=name)
def test_convert_float_to_int4_saturates(dt):
    v = [0.0, -0.0, 0.4, -0.6, 6.99, 7.0, 7.5, 7.99, 8.0, 8.5, -7.9, -8.0, -8.5, -9.0, 14.9, 15.0,
         15.5, 16.0, 17.0, 1e5, -1e5, np.inf, -np.inf, np.nan]
    with np.errstate(over="ignore"):
        x = np.array(v, np.float64).astype(dt)
    with x64_for(dt), warnings.catch_warnings():
        warnings.simplefilter("ignore", np.exceptions.ComplexWarning)
        check(to_int4, x)


def test_convert_bool_to_int4():
    check(to_int4, np.array([False, True]))


@pytest.mark.parametrize("src", SUBBYTE, ids=name)
def test_convert_from_int4(src):
    # Every 4-bit value to every type: s4 -1 is -1.0 and u32 0xffffffff, u4 15
    # is 15 everywhere.
    if versions.xla_cpu_defect("int4 convert"):
        pytest.skip(versions.xla_cpu_defect("int4 convert"))
    def f(x):
        out = {name(t): lax.convert_element_type(x, t) for t in TARGETS + SUBBYTE}
        # a 4-bit value read back after a round trip through a wide type
        out["via_s32"] = lax.convert_element_type(lax.convert_element_type(x, np.int32), src)
        return out

    with x64_for(np.int64):
        check(f, ALL4.view(src))
        check(f, ALL4.view(src).reshape(4, 4).T)  # transposed input
        check(f, ALL4.view(src)[11])  # scalar


def test_int4_constants():
    # Small constants reach the frontend as decimal text, large ones (> 100
    # elements) as hex with one byte per value; splats as one value.
    small = np.array([1, -2, 7, -8, 3], ml_dtypes.int4)
    large = np.arange(160, dtype=np.uint8).view(ml_dtypes.uint4)  # high nibbles set: 0x10 is 0

    def f(x, y):
        return dict(small=lax.convert_element_type(x + small, np.int32),
                    large=lax.convert_element_type(y * large, np.int32),
                    splat=x * np.array(-3, ml_dtypes.int4), plain=small, plain_large=large)

    check(f, np.arange(5, dtype=np.uint8).view(ml_dtypes.int4),
          np.arange(160, dtype=np.uint8).view(ml_dtypes.uint4))


# ---- 4-bit arithmetic wraps like XLA:CPU (program.cc re-wraps 4-bit results) ---------


@pytest.mark.parametrize("dt", SUBBYTE, ids=name)
def test_int4_arithmetic_wraps(dt):
    x, y = np.repeat(ALL4, 16).view(dt), np.tile(ALL4, 16).view(dt)

    def f(x, y):
        return dict(add=x + y, sub=x - y, mul=x * y, neg=-x, not_=~x, div=lax.div(x, y),
                    rem=lax.rem(x, y), and_=x & y, or_=x | y, xor=x ^ y, max=lax.max(x, y),
                    min=lax.min(x, y), shl=lax.shift_left(x, y),
                    shra=lax.shift_right_arithmetic(x, y), shrl=lax.shift_right_logical(x, y),
                    lt=x < y, eq=x == y, ge=x >= y, select=lax.select(x > y, x, y),
                    clz=lax.clz(x), popcnt=lax.population_count(x),
                    sum=jnp.sum(x, dtype=dt), cumsum=jnp.cumsum(y[:40], dtype=dt),
                    iota=lax.iota(dt, 40), chain=x * y + y * 3 - x)

    check(f, x, y)


def test_int4_sort_large():
    # More than the 4096 elements the O(n^2) fallback takes: the sort must
    # recognize its comparator on 4-bit probe values.
    x = np.random.default_rng(4).integers(0, 16, 5000).astype(np.uint8)
    for dt in INT4S:
        check(lambda a: dict(asc=jnp.sort(a), desc=jnp.sort(a, descending=True),
                             arg=jnp.argsort(a, stable=True)), x.view(dt))
