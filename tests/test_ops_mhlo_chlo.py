"""custom_call @mhlo.<op>: the CHLO ops jaxlib 0.8.0 to 0.9.0 serialize with
no decomposition (erf, acos, asin, acosh, atanh, sinh, cosh; 0.9.1 and later
send a composite with its decomposition instead).

The programs are hand-written StableHLO, so every JAX release runs them. The
oracle is NumPy/SciPy on the operand widened to float64/complex128, not
XLA:CPU: XLA's own decompositions of these ops err by up to 97 ulp in f64
(atanh; sinh and cosh 16, measured against mpmath at jax 0.8.0), where the C
library pjrtx calls documents 1-2 ulp. Bounds:
- f32 against the f64 reference: the library's <= 2 ulp plus the
  reference's rounding: 4 ulp of the result;
- f64 against NumPy's f64 (the platform's libm, or its own kernels): two
  results each within 2 ulp of the truth: 4 ulp;
- f16 and bf16 are computed in f32 and rounded once: 1 ulp of their type
  (the f32 result's few f32 ulps can move a near-tie);
- complex, normwise: each part of a complex libm result is within a few ulp
  of its part's magnitude and NumPy's own kernels likewise, so 16 eps of |w|;
  complex sinh and cosh are XLA's formula (e^z -+ e^-z) / 2, so 16 eps of
  the terms' magnitudes;
- special values exactly: NaN where the reference is NaN, the same infinity,
  and the sign of a zero result.
"""
from __future__ import annotations

import os
import zlib

os.environ.setdefault("JAX_PLATFORMS", "pjrtx,cpu")

import jax  # noqa: E402
import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import scipy.special  # noqa: E402

from oracle import primitives_per_call, run_mlir_on  # noqa: E402,F401

MLIR_TYPE = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64", np.dtype(np.float16): "f16",
             np.dtype(ml_dtypes.bfloat16): "bf16", np.dtype(np.complex64): "complex<f32>",
             np.dtype(np.complex128): "complex<f64>"}

REFERENCE = {"erf": scipy.special.erf, "acos": np.arccos, "asin": np.arcsin, "acosh": np.arccosh,
             "atanh": np.arctanh, "sinh": np.sinh, "cosh": np.cosh}

EDGES = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1e-30, -1e-30, 2.0, 10.0, -10.0, 88.0, 89.5, -89.5,
         1000.0, np.inf, -np.inf, np.nan]


def program(op: str, dtype, n: int) -> str:
    t = f"tensor<{n}x{MLIR_TYPE[np.dtype(dtype)]}>"
    return f"""module @m {{
  func.func public @main(%x: {t}) -> {t} {{
    %0 = stablehlo.custom_call @mhlo.{op}(%x) {{mhlo.attributes = {{}}, mhlo.version = 1 : i64}} : ({t}) -> {t}
    return %0 : {t}
  }}
}}"""


def on_pjrtx(text, *args):
    with jax.enable_x64(True):
        return run_mlir_on(jax.devices("pjrtx")[0], text, *args)


def real_inputs(op: str, dtype) -> np.ndarray:
    rng = np.random.default_rng(zlib.crc32(f"{op} {np.dtype(dtype).name}".encode()))
    lo, hi = {"acos": (-1, 1), "asin": (-1, 1), "atanh": (-1, 1), "acosh": (1, 50),
              "erf": (-6, 6), "sinh": (-20, 20), "cosh": (-20, 20)}[op]
    x = np.concatenate([rng.uniform(lo, hi, 400), rng.uniform(-3, 3, 100) * 10.0 ** rng.integers(-6, 3, 100),
                        EDGES])
    return x.astype(dtype)


def ulp(ref: np.ndarray, dtype) -> np.ndarray:
    fi = ml_dtypes.finfo(dtype) if np.dtype(dtype) == ml_dtypes.bfloat16 else np.finfo(dtype)
    tiny = float(fi.smallest_normal)
    mag = np.maximum(np.abs(ref), tiny)
    return 2.0 ** np.floor(np.log2(mag)) * float(fi.eps)


def check_real(got: np.ndarray, x: np.ndarray, op: str, dtype, ulps: float):
    with np.errstate(all="ignore"):
        ref = REFERENCE[op](x.astype(np.float64))
    if np.dtype(dtype) != np.float64:
        with np.errstate(over="ignore"):
            ref = ref.astype(dtype).astype(np.float64)  # overflow to inf where the type does
    g = got.astype(np.float64)
    assert got.dtype == np.dtype(dtype) and got.shape == x.shape
    nan = np.isnan(ref)
    assert np.array_equal(np.isnan(g), nan), (op, x[np.isnan(g) != nan], g[np.isnan(g) != nan])
    inf = np.isinf(ref)
    assert np.array_equal(g[inf], ref[inf]), (op, x[inf], g[inf], ref[inf])
    zero = ref == 0
    assert np.array_equal(np.signbit(g[zero]), np.signbit(ref[zero])), (op, x[zero], g[zero])
    fin = np.isfinite(ref)
    err = np.abs(g[fin] - ref[fin]) / ulp(ref[fin], dtype)
    worst = int(np.argmax(err)) if err.size else 0
    assert err.size == 0 or err[worst] <= ulps, (
        f"{op} {np.dtype(dtype).name}: {err[worst]:.2f} ulp at x={x[fin][worst]!r}: "
        f"got {g[fin][worst]!r}, want {ref[fin][worst]!r}")


@pytest.mark.parametrize("op", sorted(REFERENCE))
@pytest.mark.parametrize("dtype,ulps", [(np.float32, 4), (np.float64, 4), (np.float16, 1),
                                        (ml_dtypes.bfloat16, 1)],
                         ids=["f32", "f64", "f16", "bf16"])
def test_real_operands_match_the_reference(op, dtype, ulps):
    x = real_inputs(op, dtype)
    (got,) = on_pjrtx(program(op, dtype, x.size), x)
    check_real(got, x, op, dtype, ulps)


def complex_inputs(dtype) -> np.ndarray:
    rng = np.random.default_rng(7)
    parts = np.concatenate([rng.uniform(-3, 3, 300), [0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5]])
    re, im = rng.permutation(parts), rng.permutation(parts)
    # The branch cuts, approached from either side by the sign of a zero part.
    cuts = [complex(a, b) for a in (-2.0, -1.5, 1.5, 2.0) for b in (0.0, -0.0)]
    cuts += [complex(b, a) for a in (-2.0, -0.5, 0.5, 2.0) for b in (0.0, -0.0)]
    z = np.concatenate([re + 1j * im, np.array(cuts)])
    # Built part by part: 1j * -0.0 would lose the zero's sign.
    out = np.empty(z.size, dtype)
    out.real, out.imag = z.real, np.concatenate([im, [c.imag for c in cuts]])
    return out


@pytest.mark.parametrize("op", sorted(set(REFERENCE) - {"erf"}))
@pytest.mark.parametrize("dtype", [np.complex64, np.complex128], ids=["c64", "c128"])
def test_complex_operands_match_numpy(op, dtype):
    z = complex_inputs(dtype)
    (got,) = on_pjrtx(program(op, dtype, z.size), z)
    assert got.dtype == np.dtype(dtype) and got.shape == z.shape
    ref = REFERENCE[op](z.astype(np.complex128))
    eps = float(np.finfo(np.float32 if dtype == np.complex64 else np.float64).eps)
    err = np.abs(got.astype(np.complex128) - ref)
    zz = z.astype(np.complex128)
    if op in ("sinh", "cosh"):
        # XLA's formula, (e^z -+ e^-z) / 2: a sum of two terms each a few
        # ulp off, so the bound scales with the terms (sinh of a small z
        # cancels), not with the result.
        bound = 16 * eps * (np.abs(np.exp(zz)) + np.abs(np.exp(-zz))) / 2
    else:
        bound = 16 * eps * np.abs(ref)
    bad = err > bound
    assert not bad.any(), (op, z[bad][:4], got[bad][:4], ref[bad][:4])


def test_erf_of_a_complex_operand_fails_at_compile_time_naming_the_target():
    z = np.ones(3, np.complex64)
    with pytest.raises(Exception, match=r"mhlo\.erf.*real operand"):
        on_pjrtx(program("erf", np.complex64, 3), z)


def test_an_empty_operand():
    (got,) = on_pjrtx(program("acos", np.float32, 0), np.zeros(0, np.float32))
    assert got.shape == (0,) and got.dtype == np.float32


# Every target in a loop body: the host-loop engine calls the same C library
# functions as the host kernels, so the loop placed on the host and the loop
# left on MLX agree bit for bit. Values stay inside each function's domain.
LOOP = """module @m {
  func.func public @main(%x: tensor<16xT>) -> tensor<16xT> {
    %c0 = stablehlo.constant dense<0> : tensor<i32>
    %n = stablehlo.constant dense<7> : tensor<i32>
    %one = stablehlo.constant dense<1> : tensor<i32>
    %half = stablehlo.constant dense<0.5> : tensor<16xT>
    %r:2 = stablehlo.while(%i = %c0, %v = %x) : tensor<i32>, tensor<16xT>
     cond {
      %p = stablehlo.compare LT, %i, %n : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %p : tensor<i1>
    } do {
      %a = stablehlo.custom_call @mhlo.erf(%v) : (tensor<16xT>) -> tensor<16xT>
      %ah = stablehlo.multiply %a, %half : tensor<16xT>
      %b = stablehlo.custom_call @mhlo.atanh(%ah) : (tensor<16xT>) -> tensor<16xT>
      %c = stablehlo.custom_call @mhlo.asin(%b) : (tensor<16xT>) -> tensor<16xT>
      %d = stablehlo.custom_call @mhlo.sinh(%c) : (tensor<16xT>) -> tensor<16xT>
      %e = stablehlo.custom_call @mhlo.cosh(%d) : (tensor<16xT>) -> tensor<16xT>
      %e1 = stablehlo.add %e, %half : tensor<16xT>
      %e2 = stablehlo.add %e1, %half : tensor<16xT>
      %g = stablehlo.custom_call @mhlo.acosh(%e2) : (tensor<16xT>) -> tensor<16xT>
      %f = stablehlo.custom_call @mhlo.acos(%d) : (tensor<16xT>) -> tensor<16xT>
      %s = stablehlo.add %d, %g : tensor<16xT>
      %t = stablehlo.subtract %s, %f : tensor<16xT>
      %u = stablehlo.multiply %t, %half : tensor<16xT>
      %i1 = stablehlo.add %i, %one : tensor<i32>
      stablehlo.return %i1, %u : tensor<i32>, tensor<16xT>
    }
    return %r#1 : tensor<16xT>
  }
}"""


def loop_in_numpy(x: np.ndarray) -> np.ndarray:
    v = x.astype(np.float64)
    for _ in range(7):
        d = np.sinh(np.arcsin(np.arctanh(scipy.special.erf(v) * 0.5)))
        v = (d + np.arccosh(np.cosh(d) + 1.0) - np.arccos(d)) * 0.5
    return v


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_every_target_in_a_loop_body_on_the_host_and_on_mlx(dtype):
    text = LOOP.replace("xT>", f"x{MLIR_TYPE[np.dtype(dtype)]}>")
    x = np.linspace(-1, 1, 16).astype(dtype)
    old = os.environ.get("PJRTX_LOOPS")
    got = {}
    try:
        for mode in ("host", "mlx"):
            os.environ["PJRTX_LOOPS"] = mode
            (got[mode],) = on_pjrtx(text, x)
    finally:
        if old is None:
            os.environ.pop("PJRTX_LOOPS", None)
        else:
            os.environ["PJRTX_LOOPS"] = old
    np.testing.assert_array_equal(got["host"], got["mlx"])
    # Against the same map in float64: the map's slope is below 1.5 on
    # [-1, 1] (|v| stays under 0.7), so the per-step rounding (a few ulp
    # each of ~10 ops) stays within 7 * 1.5^7 * 10 ulp < 2,000 ulp of 1.
    eps = float(np.finfo(dtype).eps)
    np.testing.assert_allclose(got["host"].astype(np.float64), loop_in_numpy(x), rtol=0,
                               atol=2000 * eps)


def test_complex_sinh_and_cosh_at_infinities_follow_xla():
    # C99's ccosh(-inf + inf i) is inf + nan i; XLA's decomposition (what
    # jaxlib 0.9.1 and later send, and JAX's accuracy tests expect) gives
    # nan + nan i. The formula below is that decomposition, in NumPy.
    vals = [complex(a, b) for a in (-np.inf, np.inf, 0.0, 1.0) for b in (-np.inf, np.inf, 0.0, 2.0)]
    z = np.array(vals, np.complex64)
    half = np.log(np.complex64(0.5))

    def xla_exp(w):
        a, b = w.real.astype(np.float32), w.imag.astype(np.float32)
        with np.errstate(all="ignore"):
            ea = np.exp(a)
            re = np.where(b == 0, ea, ea * np.cos(b))
            im = np.where(b == 0, b, ea * np.sin(b))
        return re, im

    with np.errstate(all="ignore"):
        up = xla_exp((z.real + half.real) + 1j * (z.imag + np.float32(0)))
        down = xla_exp((half.real - z.real) + 1j * (np.float32(0) - z.imag))
    for op, sign in (("cosh", 1), ("sinh", -1)):
        (got,) = on_pjrtx(program(op, np.complex64, z.size), z)
        with np.errstate(all="ignore"):
            want_re, want_im = up[0] + sign * down[0], up[1] + sign * down[1]
        for part, want in ((got.real, want_re), (got.imag, want_im)):
            assert np.array_equal(np.isnan(part), np.isnan(want)), (op, z, got)
            fin = np.isfinite(want)
            assert np.array_equal(part[~fin & ~np.isnan(want)], want[~fin & ~np.isnan(want)]), (op, z, got)
            np.testing.assert_allclose(part[fin], want[fin], rtol=8 * np.finfo(np.float32).eps, atol=0)
