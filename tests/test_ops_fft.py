"""stablehlo.fft against XLA:CPU: FFT, IFFT, RFFT and IRFFT over 1-3
trailing axes, odd and even lengths (odd IRFFT output lengths too), batch
dims in front, zero-size operands and n = 0, what jnp.fft builds on top
(axes moved innermost, >3-D transforms split, norms), and autodiff through
the transforms. float64/complex128 transforms (a double-precision host
kernel) are tested in test_complex128.py.

Tolerance, from the math: a radix FFT of length N computes each output as
log2(N) stages of butterflies whose partial sums are bounded by sum|x|, each
stage rounding once in the add and once in the twiddle product, so each
result is within about 2 * eps * log2(N) * sum|x| of the exact DFT (Bluestein,
used for large prime factors, runs FFTs of length M < 4N: log2(4N) covers
it). The two implementations each carry that error, hence
4 * eps * log2(4N) * sum|x| for their difference, per batch element, with
sum|x| taken over the transformed axes; inverses scale it by 1/N, and
IRFFT's input stands for a Hermitian spectrum about twice its L1 norm."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from oracle import assert_same_mlir, run_on

rng = np.random.default_rng(0)
EPS32 = np.finfo(np.float32).eps


def rand(shape, dtype):
    if np.dtype(dtype).kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def fft_bound(x, n, kind):
    """The per-element bound on |pjrtx - XLA| for lax.fft(x, kind, n),
    shaped to broadcast against the result (batch dims kept)."""
    k = len(n)
    axes = tuple(range(x.ndim - k, x.ndim))
    total = math.prod(n)
    l1 = np.sum(np.abs(x.astype(np.complex128)), axis=axes, keepdims=True)
    if kind == "IRFFT":
        l1 = 2 * l1
    if kind in ("IFFT", "IRFFT"):
        l1 = l1 / max(total, 1)
    return 4 * EPS32 * math.log2(4 * max(total, 1)) * l1


def check_fft(x, kind, n):
    f = lambda v: lax.fft(v, kind, n)
    got = run_on(jax.devices("pjrtx")[0], f, x)
    want = run_on(jax.devices("cpu")[0], f, x)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape,
                                                                want.dtype, want.shape)
    bound = fft_bound(x, n, kind)
    err = np.abs(got.astype(np.complex128) - want.astype(np.complex128))
    assert np.all(err <= bound), (kind, n, float(np.max(err - bound)))
    return got


OUT_DTYPE_IN = {"FFT": np.complex64, "IFFT": np.complex64, "RFFT": np.float32,
                "IRFFT": np.complex64}


def operand_shape(kind, n, batch):
    shape = list(batch) + list(n)
    if kind == "IRFFT":
        shape[-1] = n[-1] // 2 + 1
    return tuple(shape)


LENGTHS = {1: [(1,), (2,), (7,), (16,), (17,), (60,), (97,)],
           2: [(4, 6), (5, 7), (1, 8), (3, 1)],
           3: [(2, 3, 4), (3, 5, 6), (4, 4, 4)]}


@pytest.mark.parametrize("kind", ["FFT", "IFFT", "RFFT", "IRFFT"])
@pytest.mark.parametrize("n", [n for k in (1, 2, 3) for n in LENGTHS[k]], ids=str)
@pytest.mark.parametrize("batch", [(), (3,), (2, 1, 3)], ids=str)
def test_fft_types_lengths_batches(kind, n, batch):
    x = rand(operand_shape(kind, n, batch), OUT_DTYPE_IN[kind])
    check_fft(x, kind, n)


@pytest.mark.parametrize("n", [(7,), (8,), (3, 5), (4, 6), (2, 3, 5)], ids=str)
def test_irfft_ignores_imaginary_dc_and_nyquist(n):
    # A real signal's spectrum has real bins 0 and (even n) n/2; XLA's c2r
    # ignores their imaginary parts, so non-Hermitian inputs must agree too.
    x = rand(operand_shape("IRFFT", n, (2,)), np.complex64)
    x[..., 0] += 5j
    x[..., -1] += 3j
    check_fft(x, "IRFFT", n)


@pytest.mark.parametrize("kind,shape,n", [
    ("FFT", (0,), (0,)), ("FFT", (3, 0), (0,)), ("FFT", (0, 4), (4,)), ("IFFT", (0, 2, 3), (2, 3)),
    ("RFFT", (0, 6), (6,)), ("RFFT", (0, 3, 4), (3, 4)), ("IRFFT", (0, 4), (6,)),
    ("IRFFT", (0, 2, 3), (2, 4)),
], ids=str)
def test_zero_size(kind, shape, n):
    check_fft(np.zeros(shape, OUT_DTYPE_IN[kind]), kind, n)


def fft_module(kind, it, ot, shin, shout, n):
    ts = lambda s, t: "tensor<" + "".join(f"{d}x" for d in s) + t + ">"
    a, b = ts(shin, it), ts(shout, ot)
    return (f"module @m {{ func.func @main(%x: {a}) -> {b} {{\n"
            f"  %0 = stablehlo.fft %x, type = {kind}, length = {list(n)} : ({a}) -> {b}\n"
            f"  return %0 : {b} }} }}")


@pytest.mark.parametrize("kind,it,ot,shin,shout,n", [
    # n = 0 along the last axis: JAX's shape rules never build these, StableHLO allows them.
    ("RFFT", "f32", "complex<f32>", (3, 0), (3, 0), (3, 0)),
    ("IRFFT", "complex<f32>", "f32", (2, 0), (2, 0), (2, 0)),
    ("IRFFT", "complex<f32>", "f32", (1,), (0,), (0,)),
], ids=str)
def test_zero_length_mlir(kind, it, ot, shin, shout, n):
    x = np.zeros(shin, np.float32 if it == "f32" else np.complex64)
    assert_same_mlir(fft_module(kind, it, ot, shin, shout, n), x)


def test_fft_length_mismatch_is_a_compile_error():
    # XLA:CPU computes FFT c64[8] with fft_length [4] on a prefix, and aborts
    # the process for other mismatches; pjrtx refuses them all.
    text = fft_module("FFT", "complex<f32>", "complex<f32>", (8,), (8,), (4,))
    with pytest.raises(Exception, match=r"\[stablehlo.fft\] FFT with fft_length \[4\] needs"):
        from oracle import run_mlir_on
        run_mlir_on(jax.devices("pjrtx")[0], text, np.zeros(8, np.complex64))


NUMPY_CASES = {
    "fft_n_pad": lambda x: jnp.fft.fft(x, n=12, axis=0),
    "fft_n_crop": lambda x: jnp.fft.ifft(x, n=3, axis=1),
    "fft2_ortho": lambda x: jnp.fft.fft2(x, norm="ortho"),
    "fftn_4axes": lambda x: jnp.fft.fftn(x),
    "rfftn_axes": lambda x: jnp.fft.rfftn(x.real, axes=(0, 2)),
    "irfftn_odd": lambda x: jnp.fft.irfftn(x, s=(5, 3, 7), axes=(1, 2, 3)),
    "irfft_forward": lambda x: jnp.fft.irfft(x, n=9, norm="forward"),
    "hfft": lambda x: jnp.fft.hfft(x, n=11, axis=2),
    "ihfft": lambda x: jnp.fft.ihfft(x.real, axis=1),
    "scipy_dct": lambda x: jax.scipy.fft.dct(x.real, axis=-1),
    "scipy_idctn": lambda x: jax.scipy.fft.idctn(x.real, norm="ortho"),
}


@pytest.mark.parametrize("name", sorted(NUMPY_CASES))
def test_numpy_and_scipy_fft(name):
    x = rand((6, 4, 5, 3), np.complex64)
    f = NUMPY_CASES[name]
    got = run_on(jax.devices("pjrtx")[0], f, x)
    want = run_on(jax.devices("cpu")[0], f, x)
    assert got.dtype == want.dtype and got.shape == want.shape
    # Every output mixes at most all 360 inputs (|x| < ~6) through at most
    # a few chained transforms of total length <= 4 * 360: the forward bound
    # with sum|x| over the whole array covers each case (norms only shrink it).
    bound = 4 * 3 * EPS32 * math.log2(4 * 4 * x.size) * np.sum(np.abs(x))
    np.testing.assert_allclose(got, want, rtol=0, atol=bound)


def test_grad_through_rfft_and_irfft():
    x = rand((4, 16), np.float32)

    def loss(v):
        spec = jnp.fft.rfft(v)
        return jnp.sum(jnp.abs(spec) ** 2) + jnp.sum(jnp.fft.irfft(spec * spec, n=16) ** 2)

    g = lambda v: jax.grad(loss)(v)
    got = run_on(jax.devices("pjrtx")[0], g, x)
    want = run_on(jax.devices("cpu")[0], g, x)
    # The gradient is a chain of length-16 transforms of products of spectra,
    # each bounded by N * sum|x| (16 * 4 * 16 * ~1): eps * log2(4N) times that
    # per transform, a handful of transforms.
    scale = 16 * np.sum(np.abs(x)) ** 2 / 4
    np.testing.assert_allclose(got, want, rtol=0, atol=8 * 4 * EPS32 * math.log2(64) * scale)


def test_nan_propagates_to_its_batch():
    x = rand((3, 8), np.complex64)
    x[1, 3] = np.nan
    got = run_on(jax.devices("pjrtx")[0], lambda v: jnp.fft.fft(v), x)
    want = run_on(jax.devices("cpu")[0], lambda v: jnp.fft.fft(v), x)
    nan = lambda a: np.isnan(a.real) | np.isnan(a.imag)
    np.testing.assert_array_equal(nan(got), nan(want))
    assert nan(got)[1].all() and not nan(got)[[0, 2]].any()


