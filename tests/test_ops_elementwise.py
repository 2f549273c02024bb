"""Elementwise ops (ops/elementwise.cc) against XLA:CPU.

Each case jits one function returning a dict of several ops over one dtype
(XLA:CPU's compile, ~50-100 ms per op, dominates the run time; sharing one
jit saves its fixed cost), applied to every pair of a dtype's edge values. `check` names the failing op and also compares the
sign of zero results, which assert_allclose treats as equal.

XLA:CPU runs with denormals flushed to zero (FTZ/DAZ) and MLX does not, so
float comparisons allow an absolute error of the smallest normal number
(`tiny`): a result that underflows is 0 on XLA:CPU and a denormal on MLX.
"""
import contextlib

import jax
import ml_dtypes
import numpy as np
import pytest
from jax import lax
from jax.extend.core import Primitive
from jax.interpreters import mlir
from jaxlib.mlir.dialects import stablehlo

from oracle import assert_same, primitives_per_call, run_on
from pjrtx import versions

SIGNED = [np.int8, np.int16, np.int32, np.int64]
UNSIGNED = [np.uint8, np.uint16, np.uint32, np.uint64]
INTS = SIGNED + UNSIGNED
FLOATS = [np.float16, ml_dtypes.bfloat16, np.float32, np.float64]


def x64_for(*dtypes):
    """x64 mode when any dtype is 64-bit (else JAX narrows it to 32 bits)."""
    wide = any(np.dtype(d).itemsize == 8 and np.dtype(d).kind != "c" for d in dtypes)
    return jax.enable_x64(True) if wide else contextlib.nullcontext()


def name(dt):
    return np.dtype(dt).name


def check(f, *args, rtol=0.0, atol=0.0, tols=None):
    """f returns a dict of outputs; compare each on pjrtx vs XLA:CPU.

    tols maps an output name to its own (rtol, atol)."""
    got = run_on(jax.devices("pjrtx")[0], f, *args)
    want = run_on(jax.devices("cpu")[0], f, *args)
    assert got.keys() == want.keys()
    for k in want:
        g, w = got[k], want[k]
        assert g.dtype == w.dtype and g.shape == w.shape, (k, g.dtype, g.shape, w.dtype, w.shape)
        r, a = (tols or {}).get(k, (rtol, atol))
        if g.dtype.kind in "biu":
            np.testing.assert_array_equal(g, w, err_msg=f"op {k}")
            continue
        wide = np.complex128 if g.dtype.kind == "c" else np.float64
        np.testing.assert_allclose(g.astype(wide), w.astype(wide), rtol=r, atol=a,
                                   equal_nan=True, err_msg=f"op {k}")
        if g.dtype.kind == "f":
            g64, w64 = g.astype(np.float64), w.astype(np.float64)
            zero = (g64 == 0) & (w64 == 0)
            np.testing.assert_array_equal(np.signbit(g64[zero]), np.signbit(w64[zero]),
                                          err_msg=f"op {k}: sign of zero")


def tiny(dt):
    return float((ml_dtypes.finfo(dt) if dt is ml_dtypes.bfloat16 else np.finfo(dt)).tiny)


def int_edges(dt):
    info = np.iinfo(dt)
    vals = [0, 1, 2, 3, 7, 8, 31, 100, info.max, info.max - 1, info.min, info.min + 1,
            info.max // 2, -1, -2, -3, -7, -8, -100, info.bits - 1, info.bits, info.bits + 1]
    vals = sorted({v for v in vals if info.min <= v <= info.max})
    return np.array(vals, dt)


def float_edges(dt):
    fi = ml_dtypes.finfo(dt) if dt is ml_dtypes.bfloat16 else np.finfo(dt)
    # No denormal inputs: XLA:CPU reads them as zero (DAZ).
    vals = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 3.0, -7.0, 0.1, -0.3,
            100.75, -1000.0, 2.0 ** 20, float(fi.max), -float(fi.max), float(fi.tiny),
            np.inf, -np.inf, np.nan]
    with np.errstate(over="ignore"):
        return np.array(vals, np.float64).astype(dt)


def pairs(v):
    """Every (x, y) combination of the values, as two flat arrays."""
    return np.repeat(v, len(v)), np.tile(v, len(v))


# ---- floats --------------------------------------------------------------

# Transcendental ops use different approximations in XLA:CPU and MLX (a few
# f32 ulps ~ 2e-6); in f16/bf16 both compute in f32 and round once, and one
# f32 ulp can flip the last bit of an f16 (2^-11 ~ 4.9e-4) or bf16
# (2^-8 ~ 3.9e-3) result. IEEE-rounded ops (+ - * / rem sqrt) are exact.
TRANSC_RTOL = {np.float16: 1e-3, ml_dtypes.bfloat16: 8e-3, np.float32: 2e-6, np.float64: 1e-13}


@pytest.mark.parametrize("dt", FLOATS, ids=name)
def test_float_binary(dt):
    x, y = pairs(float_edges(dt))
    rt = TRANSC_RTOL[dt]

    def f(x, y):
        return dict(add=lax.add(x, y), sub=lax.sub(x, y), mul=lax.mul(x, y),
                    div=lax.div(x, y), rem=lax.rem(x, y), max=lax.max(x, y),
                    min=lax.min(x, y), pow=lax.pow(x, y), atan2=lax.atan2(x, y))

    at = tiny(dt)
    with x64_for(dt):
        check(f, x, y, atol=at, tols=dict(pow=(rt, at), atan2=(rt, at)))


@pytest.mark.parametrize("dt", [np.float32, np.float64], ids=name)
def test_float_pow_integer_exponent(dt):
    # lax.pow(float, int) converts the exponent: negative, zero and huge ones.
    x, _ = pairs(float_edges(dt))
    e = np.tile(np.array([0, 1, 2, 3, -1, -2, -3, 127, -128, 2 ** 31 - 1, -2 ** 31], np.int32),
                len(x) // 11 + 1)[:len(x)]
    with x64_for(dt):
        check(lambda x, e: dict(pow=lax.pow(x, e)), x, e, rtol=TRANSC_RTOL[dt], atol=tiny(dt))


@pytest.mark.parametrize("dt", FLOATS, ids=name)
def test_float_unary(dt):
    x = float_edges(dt)
    rt = TRANSC_RTOL[dt]
    at = tiny(dt)

    def f(x):
        return dict(
            neg=lax.neg(x), abs=lax.abs(x), sign=lax.sign(x), floor=lax.floor(x),
            ceil=lax.ceil(x), is_finite=lax.is_finite(x),
            round_afz=lax.round(x, lax.RoundingMethod.AWAY_FROM_ZERO),
            round_even=lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN),
            sqrt=lax.sqrt(x), rsqrt=lax.rsqrt(x), exp=lax.exp(x), expm1=lax.expm1(x),
            log=lax.log(x), log1p=lax.log1p(x), sin=lax.sin(x), cos=lax.cos(x),
            tan=lax.tan(x), tanh=lax.tanh(x), logistic=lax.logistic(x))

    exact = ["neg", "abs", "sign", "floor", "ceil", "is_finite", "round_afz", "round_even",
             "sqrt"]
    with x64_for(dt):
        check(f, x, rtol=rt, atol=at, tols={k: (0.0, 0.0) for k in exact})


@pytest.mark.parametrize("dt", [ml_dtypes.bfloat16, np.float32, np.float64], ids=name)
def test_transcendental_ranges(dt):
    # Dense sweeps: near the overflow edge of exp (88.7 in f32/bf16, 709.8
    # in f64), near multiples of pi/2 where sin/cos cross zero (relative
    # error there is what float32-precision range reduction gets wrong), and
    # huge arguments to sin/cos.
    lim = 750.0 if dt is np.float64 else 89.0
    x = np.concatenate([np.linspace(-lim, lim, 1201), np.linspace(-3, 3, 301),
                        np.arange(-40, 41) * (np.pi / 2), [1e6, -3e6, 1e10, 1e22, 1e300]])
    with np.errstate(over="ignore"):
        x = x.astype(dt)
    fi = ml_dtypes.finfo(dt) if dt is ml_dtypes.bfloat16 else np.finfo(dt)
    x = x[np.isfinite(x)]

    def f(x):
        return dict(exp=lax.exp(x), expm1=lax.expm1(x), logistic=lax.logistic(x),
                    tanh=lax.tanh(x), sin=lax.sin(x), cos=lax.cos(x), tan=lax.tan(x),
                    log=lax.log(lax.abs(x)), log1p=lax.log1p(lax.abs(x)))

    # sin/cos at x ~ k*pi/2 are ~1e-16 (f64) / ~1e-8 (f32): a few ulps of
    # the reduced argument, not of the result. tan near its poles amplifies
    # the argument's rounding: relative 1e-5 in f32.
    rt = TRANSC_RTOL[dt]
    at = {np.float64: 1e-15, np.float32: 1e-7}.get(dt, 0.0)
    tols = {"sin": (rt, at), "cos": (rt, at), "tan": (max(rt, 1e-5 if dt is np.float32 else 1e-12), at)}
    with x64_for(dt):
        check(f, x, rtol=rt, atol=float(fi.tiny), tols=tols)


@pytest.mark.parametrize("dt", [np.float32, np.float64], ids=name)
def test_rounding_halfway_cases(dt):
    # Halfway points and their neighbours, where floor(|x| + 0.5) style
    # rounding goes wrong (0.49999997f, 2^23 + 1).
    below_half = np.nextafter(dt(0.5), dt(0))
    with np.errstate(over="ignore"):  # 1e300 is inf in f32
        x = np.array([0.5, -0.5, 1.5, -1.5, 2.5, -2.5, 3.5, below_half, -below_half,
                      2.0 ** 23 + 1, -(2.0 ** 23 + 1), 2.0 ** 52 + 1, 1e300, -0.0, 0.0,
                      np.nan, np.inf, -np.inf], np.float64).astype(dt)

    def f(x):
        return dict(afz=lax.round(x, lax.RoundingMethod.AWAY_FROM_ZERO),
                    even=lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN))

    with x64_for(dt):
        check(f, x)


def test_float32_shapes_and_strided_inputs():
    rng = np.random.default_rng(0)
    base = rng.standard_normal((6, 8)).astype(np.float32)
    f = lambda x, y: lax.add(lax.mul(x, y), lax.div(x, lax.add(y, np.float32(4))))
    assert_same(f, base[::2, 1::3], base[1::2, ::3], rtol=1e-6)  # strided views
    assert_same(f, base.T, base.T.copy(), rtol=1e-6)  # transposed (Fortran-order) input
    assert_same(f, np.float32(3.5), np.float32(-2.0), rtol=1e-6)  # scalars
    z = np.zeros((0, 3), np.float32)
    assert_same(f, z, z)  # zero-size
    x3 = rng.standard_normal((2, 3, 4)).astype(np.float32)
    assert_same(lambda x: lax.tanh(lax.exp(x)), x3, rtol=2e-6)


# ---- complex64 -----------------------------------------------------------


def test_complex64():
    re = np.array([0.0, 1.0, -1.0, 0.5, -2.5, 3.0, 0.0, -0.75], np.float32)
    im = np.array([0.0, 0.0, 2.0, -0.5, 1.5, -4.0, 1.0, -0.25], np.float32)
    x, y = pairs((re + 1j * im).astype(np.complex64))

    def f(x, y):
        return dict(add=lax.add(x, y), sub=lax.sub(x, y), mul=lax.mul(x, y),
                    div=lax.div(x, y), neg=lax.neg(x), abs=lax.abs(x), sign=lax.sign(x),
                    real=lax.real(x), imag=lax.imag(x), exp=lax.exp(x), sqrt=lax.sqrt(x),
                    log=lax.log(y), complex=lax.complex(lax.real(y), lax.imag(x)))

    # Complex abs/div/exp/sqrt/log are composed from several f32 ops with
    # different orderings in XLA and MLX: a few f32 ulps. Finite inputs only:
    # products that overflow depend on XLA:CPU contracting a*c - b*d into an
    # FMA (-inf + inf*j instead of nan + inf*j), so they are hardware-specific.
    check(f, x, y, rtol=1e-5, atol=1e-6)


def test_complex64_unary():
    # Every unary op with a complex form, on small (|z| ~ 1e-4: expm1 and
    # log1p must not cancel) and moderate values.
    re = np.array([0.0, 1e-4, -3e-4, 0.5, -1.25, 2.0, 0.0, -0.75], np.float32)
    im = np.array([0.0, 2e-4, 1e-4, -0.5, 1.5, -3.0, 1.0, 0.0], np.float32)
    z = (re + 1j * im).astype(np.complex64)

    def f(z):
        return dict(expm1=lax.expm1(z), log1p=lax.log1p(z), sin=lax.sin(z), cos=lax.cos(z),
                    tan=lax.tan(z), tanh=lax.tanh(z), rsqrt=lax.rsqrt(z + 1), exp=lax.exp(z),
                    logistic=lax.logistic(z), neg=lax.neg(z))

    check(f, z, rtol=2e-5, atol=1e-6)


def test_complex64_infinite_parts():
    # exp with an infinite or overflowing real part (MLX's own complex exp
    # gives nan + inf*j for exp(inf + 1j)), and complex(re, im) with
    # inf/nan parts, which re + im * 1j would turn into NaN real parts.
    # sign divides each part by |z| (sign(-inf + 2i) = nan + 0i); tan of an
    # infinite real part is nan + nan i.
    x = np.array([complex(np.inf, 1.0), complex(1e30, 1e30), complex(100.0, 2.0),
                  complex(-np.inf, 1.0), complex(np.inf, 0.0), complex(0.0, -0.0)], np.complex64)
    re = np.array([0.0, np.inf, -np.inf, np.nan, 1.0, -0.0], np.float32)
    im = np.array([np.inf, 0.0, -np.inf, 1.0, np.nan, -0.0], np.float32)
    check(lambda x, re, im: dict(exp=lax.exp(x), complex=lax.complex(re, im), sign=lax.sign(x),
                                 tan=lax.tan(x)), x, re, im, rtol=1e-6)


# ---- integers ------------------------------------------------------------


@pytest.mark.parametrize("dt", INTS, ids=name)
def test_int_binary(dt):
    x, y = pairs(int_edges(dt))

    def f(x, y):
        return dict(add=lax.add(x, y), sub=lax.sub(x, y), mul=lax.mul(x, y),
                    div=lax.div(x, y), rem=lax.rem(x, y), max=lax.max(x, y),
                    min=lax.min(x, y), and_=lax.bitwise_and(x, y), or_=lax.bitwise_or(x, y),
                    xor=lax.bitwise_xor(x, y), shl=lax.shift_left(x, y),
                    shr_logical=lax.shift_right_logical(x, y),
                    shr_arith=lax.shift_right_arithmetic(x, y))

    with x64_for(dt):
        check(f, x, y)


@pytest.mark.parametrize("dt", INTS, ids=name)
def test_int_unary(dt):
    x = int_edges(dt)

    def f(x):
        return dict(neg=lax.neg(x), not_=lax.bitwise_not(x), sign=lax.sign(x))

    if np.dtype(dt).kind == "i":
        f0 = f
        f = lambda x: dict(f0(x), abs=lax.abs(x))
    with x64_for(dt):
        check(f, x)


def raw_op(op_name):
    """A primitive that emits stablehlo.<op_name> as is, for operand types
    the lax wrappers reject or rewrite (the result has the first operand's
    shape and dtype)."""
    p = Primitive("stablehlo_raw_" + op_name)
    p.def_abstract_eval(lambda x, *rest: jax.core.ShapedArray(x.shape, x.dtype))
    mlir.register_lowering(p, lambda ctx, *args: [getattr(stablehlo, op_name)(*args)])
    return p.bind


# stablehlo.power on integers: lax.pow takes float bases only (jnp.power on
# ints multiplies in a loop).
int_power = raw_op("power")


@pytest.mark.parametrize("dt", INTS, ids=name)
def test_int_power(dt):
    # Small bases with every exponent (negative ones included) plus large
    # exponents that wrap; XLA gives 0 for |base| > 1 with a negative one.
    info = np.iinfo(dt)
    bases = np.array([v for v in [0, 1, -1, 2, -2, 3, -3, 7, info.max, info.min]
                      if info.min <= v <= info.max], dt)
    exps = np.array([v for v in [0, 1, 2, 3, 5, 8, 31, 63, -1, -2, -3, info.max, info.min]
                     if info.min <= v <= info.max], dt)
    x, y = np.repeat(bases, len(exps)), np.tile(exps, len(bases))
    with x64_for(dt):
        check(lambda x, y: dict(pow=int_power(x, y)), x, y)


def test_int_division_shapes():
    # Scalars, zero-size and a strided 3-D view, with a broadcast scalar divisor.
    x = np.arange(-30, 30, dtype=np.int32).reshape(3, 4, 5)
    f = lambda x, y: (lax.div(x, y), lax.rem(x, y))
    assert_same(f, np.int32(-7), np.int32(0))
    assert_same(f, np.int32(np.iinfo(np.int32).min), np.int32(-1))
    assert_same(f, np.zeros((0, 3), np.int32), np.zeros((0, 3), np.int32))
    assert_same(f, x[:, ::2, ::-1], np.full((3, 2, 5), -3, np.int32))
    assert_same(lambda x: lax.div(x, np.int32(-4)), x.transpose(2, 0, 1))


# ---- bool ----------------------------------------------------------------

raw_op_add, raw_op_mul = raw_op("add"), raw_op("multiply")


def test_bool():
    x, y = pairs(np.array([False, True]))

    def f(x, y):
        # add/multiply on bool are OR/AND in XLA; lax rejects them, so raw ops.
        return dict(and_=lax.bitwise_and(x, y), or_=lax.bitwise_or(x, y),
                    xor=lax.bitwise_xor(x, y), not_=lax.bitwise_not(x),
                    max=lax.max(x, y), min=lax.min(x, y), add=raw_op_add(x, y),
                    mul=raw_op_mul(x, y))

    check(f, x, y)
    check(f, np.zeros((0, 3), bool), np.ones((0, 3), bool))
    check(f, np.bool_(True), np.bool_(False))


# ---- bit ops (ops/bits.cc) and cbrt ------------------------------------------


def bit_patterns(dt, n=512, seed=0):
    """Edge values, every single bit and its complement, and random words
    (all the bits of the type) for an integer dtype."""
    info = np.iinfo(dt)
    ut = np.dtype(f"u{info.bits // 8}")
    single = np.left_shift(np.ones(info.bits, ut), np.arange(info.bits, dtype=ut))
    smeared = single | (single - ut.type(1))  # 0..01..1 of every length
    rand = np.random.default_rng(seed).integers(0, 2 ** 64, n, dtype=np.uint64).astype(ut)
    bits = np.concatenate([single, ~single, smeared, ~smeared, rand])  # ~smeared holds 0
    return np.concatenate([int_edges(dt), bits.view(dt)])


@pytest.mark.parametrize("dt", INTS, ids=name)
def test_popcnt_clz(dt):
    x = bit_patterns(dt)
    with x64_for(dt):
        check(lambda x: dict(popcnt=lax.population_count(x), clz=lax.clz(x)), x)


# XLA:CPU's cbrt is ~1 ulp in f32 and up to 3 ulps from the true root in
# f64 (measured against numpy's); pjrtx's is within 1 ulp. f16/bf16 round
# an f32 root and agree exactly over a dense sweep.
CBRT_RTOL = {np.float16: 2.0 ** -10, ml_dtypes.bfloat16: 2.0 ** -7, np.float32: 2.0 ** -22,
             np.float64: 2.0 ** -50}
# jaxlib 0.9.2 and older: XLA:CPU's own cbrt is off by up to
# XLA_CPU_CBRT_EPS_BEFORE eps (measured, pjrtx/versions.py); pjrtx's is
# within 1 ulp, so the two differ by at most that plus 1 ulp.
if not versions.jax_at_least(versions.XLA_CPU_ACCURATE_CBRT):
    for _dt in (np.float16, np.float32, np.float64):
        _eps = float(np.finfo(_dt).eps)
        CBRT_RTOL[_dt] = max(CBRT_RTOL[_dt],
                             (versions.XLA_CPU_CBRT_EPS_BEFORE[np.dtype(_dt).name] + 1) * _eps)


@pytest.mark.parametrize("dt", FLOATS, ids=name)
def test_cbrt(dt):
    fi = ml_dtypes.finfo(dt)
    # Log-spaced over the whole normal range (no denormals: XLA:CPU reads
    # them as 0), both signs, plus perfect cubes and the edges.
    cubes = np.array([1.0, 8.0, 27.0, 64.0, 1000.0, 0.125, 2.0 ** -30, 2.0 ** 60])
    with np.errstate(over="ignore"):
        sweep = np.logspace(np.log10(float(fi.tiny)), np.log10(float(fi.max)), 2001)
        x = np.concatenate([sweep, -sweep, cubes, -cubes]).astype(dt)
    x = np.concatenate([x[np.isfinite(x) & (np.abs(x) >= fi.tiny)], float_edges(dt)])
    with x64_for(dt):
        check(lambda x: dict(cbrt=lax.cbrt(x)), x, rtol=CBRT_RTOL[dt])


def float_bits(dt):
    return {2: np.uint16, 4: np.uint32, 8: np.uint64}[np.dtype(dt).itemsize]


def check_bits(f, x):
    """f's float outputs on pjrtx and XLA:CPU compared bit for bit (NaN
    payloads and signs included)."""
    got = run_on(jax.devices("pjrtx")[0], f, x)
    want = run_on(jax.devices("cpu")[0], f, x)
    for k in want:
        g, w = got[k], want[k]
        assert g.dtype == w.dtype and g.shape == w.shape, k
        ut = float_bits(w.dtype)
        bad = np.nonzero(g.view(ut) != w.view(ut))[0]
        assert bad.size == 0, (k, [(hex(int(x.view(ut)[i])), hex(int(g.view(ut)[i])),
                                    hex(int(w.view(ut)[i]))) for i in bad[:5]])


def reduce_precision_inputs(dt, formats):
    """Edges, the rounding ties of every target mantissa width and their
    neighbours, the overflow/underflow boundaries of every target exponent
    width, denormals, NaNs with payloads and signs, and random bit patterns."""
    fi = ml_dtypes.finfo(dt)
    ut = float_bits(dt)
    vals = [0.0, 1.0, 1.5, 2.0, 3.0, 0.1, 1 / 3, 100.75, 65504.0, 65520.0, 3.4e38, 1e-40,
            float(fi.max), float(fi.tiny), float(fi.smallest_subnormal), np.inf]
    for e, m in formats:
        if m < fi.nmant:
            ulp = 2.0 ** -m
            for k in range(1, 2 ** min(m, 3) + 1):  # 1 + (k + 1/2) ulps: ties
                vals += [1 + (k - 0.5) * ulp, 1 + k * ulp, 3 * 2.0 ** -60 * (1 + (k - 0.5) * ulp)]
        if e < fi.nexp:
            bias = 2 ** (e - 1) - 1
            top, low = 2.0 ** bias, 2.0 ** (1 - bias)
            vals += [top * (2 - 2.0 ** -max(m, 0)), top * 2, top * (2 - 2.0 ** -(m + 1)), low,
                     low * 0.75, low * (1 - 2.0 ** -(m + 1)), low / 2]
    with np.errstate(over="ignore", under="ignore"):
        x = np.array(vals, np.float64).astype(dt)
    nb = 8 * np.dtype(dt).itemsize
    exp_mask = ((1 << fi.nexp) - 1) << fi.nmant
    nans = np.array([exp_mask | 1, exp_mask | (1 << (fi.nmant - 1)),
                     exp_mask | ((1 << fi.nmant) - 1), exp_mask | 0x5], np.uint64)
    nans = nans.astype(ut)
    rand = np.random.default_rng(1).integers(0, 2 ** 64, 400, dtype=np.uint64).astype(ut)
    base = np.concatenate([x.view(ut), nans, rand])
    # both signs of everything, and the next value up and down
    allv = np.concatenate([base, base ^ ut(1 << (nb - 1))])
    return np.concatenate([allv, allv + ut(1), allv - ut(1)]).view(dt)


# Target formats: bf16, f16, e4m3- and e5m2-like fp8, one exponent bit (0
# and inf only), no mantissa bits, and widths at or above the source's.
RP_FORMATS = [(8, 7), (5, 10), (4, 3), (5, 2), (1, 0), (2, 1), (8, 0), (3, 23), (11, 4),
              (6, 12), (8, 23), (11, 52), (10, 30)]


@pytest.mark.parametrize("dt", FLOATS, ids=name)
def test_reduce_precision(dt):
    x = reduce_precision_inputs(dt, RP_FORMATS)

    def f(x):
        return {f"e{e}m{m}": lax.reduce_precision(x, exponent_bits=e, mantissa_bits=m)
                for e, m in RP_FORMATS}

    with x64_for(dt):
        check_bits(f, x)


@pytest.mark.parametrize("dt", [np.float16, ml_dtypes.bfloat16, np.float32, np.float64], ids=name)
def test_max_min_with_a_constant_operand(dt):
    # max/min against a constant take a cheaper path (one compare and one
    # select) when the constant holds no NaN and not both zeros; XLA's
    # semantics must survive it: NaN from x propagates, -0 orders below +0
    # on ties with a zero constant, either operand order. Mixed-zero and NaN
    # constants take the general path.
    nan, inf = np.nan, np.inf
    x = np.array([nan, -nan, -0.0, 0.0, 1.0, -1.0, 2.5, -2.5, inf, -inf, 1e-3, -1e-3],
                 np.float64).astype(dt)
    consts = {
        "pos_zero": np.zeros_like(x),
        "neg_zero": np.full_like(x, -0.0),
        "nonzero": np.full_like(x, 1.0),
        "mixed_nonzero": np.array([1, -1, 2.5, -2.5, 3, 0.5, 2.5, -2.5, 7, -7, 1, -1],
                                  np.float64).astype(dt),
        "pos_zero_and_values": np.array([0, 0, 0, 0, 1, -1, 0, 0, 0, 0, 0, 2],
                                        np.float64).astype(dt),
        "neg_zero_and_values": np.array([-0.0, -0.0, -0.0, -0.0, 1, -1, -0.0, 3, -0.0, -0.0,
                                         -0.0, -0.0], np.float64).astype(dt),
        "both_zeros": np.array([0.0, -0.0] * 6, np.float64).astype(dt),
        "nan": np.full_like(x, nan),
        "inf": np.full_like(x, inf),
    }

    def f(x):
        out = {}
        for k, c in consts.items():
            out[f"max_{k}"] = lax.max(x, c)
            out[f"max_{k}_first"] = lax.max(c, x)
            out[f"min_{k}"] = lax.min(x, c)
            out[f"min_{k}_first"] = lax.min(c, x)
        out["relu"] = jax.nn.relu(x)
        out["clip"] = jax.numpy.clip(x, -1.0, 2.0)
        return out

    with x64_for(dt):
        check(f, x)


def test_max_min_with_a_broadcast_zero_on_a_large_array():
    # relu on a conv activation: the zero is broadcast to more bytes than
    # pjrtx folds eagerly (1 MiB), and the broadcast must still be seen as a
    # constant. Every special value in every position class, both operand
    # orders, both zeros, alone and inside a longer (fused) chain.
    special = np.array([np.nan, -np.nan, -0.0, 0.0, 1.0, -1.0, np.inf, -np.inf, 1e-30, -1e-30],
                       np.float32)
    x = np.resize(special, (600, 1024))
    x[::7] *= 3.0

    def f(x):
        return {"relu": jax.nn.relu(x),
                "max_first": lax.max(jax.numpy.zeros_like(x), x),
                "max_neg_zero": lax.max(x, jax.numpy.full_like(x, -0.0)),
                "min_pos_zero": lax.min(x, jax.numpy.zeros_like(x)),
                "min_neg_zero_first": lax.min(jax.numpy.full_like(x, -0.0), x),
                "chain": jax.nn.relu(x * 2.0 + 1.0) - 0.5}

    check(f, x)
    for _ in range(3):  # past the tier's replay and fusion thresholds
        check(f, x)


def test_relu_is_one_maximum():
    # The cheaper path is taken: relu (max(x, 0)) evaluates one MLX maximum,
    # not the general signed-zero guard, on small and on large arrays (where
    # the broadcast zero is a lazy view rather than a folded array; 96
    # elements: 64 or fewer would be computed on the host, PJRTX_HOST).
    for n in (96, 600 * 1024):
        hist = primitives_per_call(jax.nn.relu, np.linspace(-1, 1, n, dtype=np.float32))
        assert hist.get("Maximum") == 1, (n, hist)
        assert set(hist) <= {"Maximum", "Broadcast"}, (n, hist)
