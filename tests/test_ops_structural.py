"""Shape and data-movement ops (ops/structural.cc) against XLA:CPU:
broadcast_in_dim, reshape, transpose, slice, concatenate, reverse, iota.
All of them move values without arithmetic, so every comparison is exact."""
import jax
import ml_dtypes
import numpy as np
import pytest
import jax.numpy as jnp
from jax import lax

from oracle import assert_same, primitives_per_call
from pjrtx import versions
from test_ops_elementwise import FLOATS, INTS, check, name, x64_for

ALL = [bool] + INTS + FLOATS + [np.complex64]


def sample(dt, shape, seed=0):
    rng = np.random.default_rng(seed)
    if dt is bool:
        return rng.integers(0, 2, shape).astype(bool)
    if np.dtype(dt).kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dt)
    if np.dtype(dt).kind in "iu":
        info = np.iinfo(dt)
        return rng.integers(info.min, info.max, shape, dtype=dt, endpoint=True)
    x = rng.standard_normal(shape).astype(dt)
    flat = x.reshape(-1)
    flat[:3] = [np.nan, -0.0, np.inf][: flat.size]  # moved bit-for-bit
    return x


# jax before 0.10.0 refuses unsorted broadcast_dimensions in lax (pjrtx/versions.py).
UNSORTED_BCAST = versions.jax_at_least(versions.UNSORTED_BROADCAST_DIMS)


def movers(x):
    """Every structural op on one rank-3 operand of shape (2, 3, 4)."""
    unsorted = dict(bcast_unsorted=lax.broadcast_in_dim(x, (4, 5, 2, 3), (2, 3, 0))) \
        if UNSORTED_BCAST else {}
    return dict(
        **unsorted,
        bcast_plain=lax.broadcast_in_dim(x, (2, 3, 4, 2), (0, 1, 2)),
        bcast_size1=lax.broadcast_in_dim(x[:, :1], (2, 7, 3, 4), (0, 2, 3)),
        reshape=lax.reshape(x, (4, 6)),
        reshape_dims=lax.reshape(x, (6, 4), dimensions=(2, 0, 1)),
        transpose=lax.transpose(x, (2, 0, 1)),
        slice_strided=lax.slice(x, (0, 1, 0), (2, 3, 4), (1, 2, 3)),
        slice_empty=lax.slice(x, (1, 2, 0), (1, 3, 4)),
        concat=lax.concatenate([x, x[:, :1], x[:, 1:2] * 0 if x.dtype != bool else x[:, 1:2]], 1),
        rev=lax.rev(x, (0, 2)),
        rev_none=lax.rev(x, ()),
        expand=lax.expand_dims(x, (1, 3)),
        squeeze=lax.squeeze(x[:1], (0,)),
    )


@pytest.mark.parametrize("dt", ALL, ids=name)
def test_structural_all_dtypes(dt):
    x = sample(dt, (2, 3, 4))
    with x64_for(dt):
        check(movers, x)


def test_structural_strided_and_transposed_inputs():
    base = sample(np.float32, (4, 6, 8), seed=1)
    check(movers, base[::2, ::2, ::2])  # strided view
    check(movers, base.transpose(2, 1, 0)[:4, :3, :2].transpose(2, 1, 0))  # non-contiguous
    check(movers, np.asfortranarray(base[:2, :3, :4]))


def test_structural_scalars_and_zero_size():
    s = np.float32(2.5)

    def on_scalar(s):
        return dict(bcast=lax.broadcast_in_dim(s, (2, 3), ()), reshape=lax.reshape(s, (1, 1)),
                    transpose=lax.transpose(s, ()), concat=lax.concatenate([s[None], s[None]], 0),
                    rev=lax.rev(s, ()))

    check(on_scalar, s)
    z = np.zeros((0, 3), np.int32)

    def on_empty(z):
        return dict(bcast=lax.broadcast_in_dim(z, (4, 0, 3), (1, 2)),
                    reshape=lax.reshape(z, (3, 0)), transpose=lax.transpose(z, (1, 0)),
                    slice=lax.slice(z, (0, 1), (0, 3)),
                    concat=lax.concatenate([z, z], 0), concat_nonempty=lax.concatenate(
                        [z, np.ones((2, 3), np.int32)], 0), rev=lax.rev(z, (0, 1)))

    check(on_empty, z)


def test_broadcast_in_dim_rank4_permutations():
    # Every order of mapping a rank-3 operand's dims into rank 4.
    x = sample(np.int16, (2, 3, 4), seed=2)

    def f(x):
        out = {}
        for dims in [(0, 1, 2), (0, 2, 1), (1, 0, 2), (1, 2, 0), (2, 0, 1), (2, 1, 0),
                     (3, 1, 0), (0, 3, 2)]:
            if not UNSORTED_BCAST and list(dims) != sorted(dims):
                continue
            shape = [5, 5, 5, 5]
            for i, d in enumerate(dims):
                shape[d] = x.shape[i]
            out[str(dims)] = lax.broadcast_in_dim(x, shape, dims)
        return out

    check(f, x)


@pytest.mark.parametrize("dt", INTS + FLOATS + [np.complex64], ids=name)  # no bool iota in JAX
def test_iota(dt):
    # Lengths past what narrow types hold: int8 wraps, f16 (2049 -> 2048)
    # and bf16 (257 -> 256) round.
    n = 3000 if np.dtype(dt).itemsize > 1 else 300

    def f():
        return dict(iota=lax.iota(dt, n), b0=lax.broadcasted_iota(dt, (3, 4, 2), 0),
                    b1=lax.broadcasted_iota(dt, (3, 4, 2), 1), b2=lax.broadcasted_iota(dt, (3, 4, 2), 2),
                    empty=lax.broadcasted_iota(dt, (0, 3), 1))

    with x64_for(dt):
        check(f)


@pytest.mark.parametrize("dt", ALL, ids=name)
def test_constants(dt):
    # stablehlo.constant: dense (edge values included), splat, scalar and
    # zero-size constants baked into the program, plus optimization_barrier.
    dense = sample(dt, (3, 4), seed=5)
    splat = np.full((2, 3), dense.flat[-1], dt)
    scalar = dense.flat[-2]

    def f():
        return dict(dense=dense, splat=splat, scalar=lax.add(scalar, scalar) if dt is not bool
                    else lax.bitwise_or(scalar, scalar),
                    empty=np.zeros((0, 2), dt),
                    barrier=lax.optimization_barrier((dense, splat))[0])

    with x64_for(dt):
        check(f)


def test_transposes_of_transposes_compose(monkeypatch):
    # A transpose of a transpose is one transpose of the original (none when
    # they cancel); values as on XLA:CPU, and the MLX primitives counted. Each
    # case ends in a +1, so no output is its input passed through (that gets
    # a copy of its own, as on XLA).
    monkeypatch.setenv("PJRTX_COMPILE", "never")  # count the eager graph
    x = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    cases = {
        "cancel": (lambda x: lax.transpose(lax.transpose(x, (1, 2, 0)), (2, 0, 1)) + 1, 1),
        "compose": (lambda x: lax.transpose(lax.transpose(x, (1, 2, 0)), (1, 0, 2)) + 1, 2),
    }
    for name, (f, prims) in cases.items():
        assert_same(f, x)
        n = sum(primitives_per_call(f, x).values())
        assert n == prims, (name, n)


@pytest.mark.parametrize("dt", [np.float32, ml_dtypes.bfloat16], ids=["f32", "bf16"])
def test_gradient_of_a_split_is_one_concatenate(monkeypatch, dt):
    # The gradient of slices that split an array (attention's q, k, v) is a
    # sum of zero pads that tile the axis: one concatenate plus +0, which
    # turns a -0 cotangent into +0 as XLA's adds do. Overlapping or gapped
    # slices stay pads and adds.
    from oracle import primitives_per_call
    from test_ops_elementwise import check
    monkeypatch.setenv("PJRTX_COMPILE", "never")
    monkeypatch.setenv("PJRTX_HOST", "int")  # MLX's lowering is counted, not host values
    r = np.random.default_rng(11)
    x = r.standard_normal((4, 9)).astype(dt)
    w = r.standard_normal((3, 4, 3)).astype(dt)
    w[1, 0, :] = -0.0

    def grads(x, w):
        def split(x):
            q, k, v = x[:, :3], x[:, 3:6], x[:, 6:]
            return (q * w[0]).sum() + (k * w[1]).sum() + (v * w[2]).sum()

        def overlap(x):
            return (x[:, :3] * w[0]).sum() + (x[:, 2:5] * w[1]).sum() + (x[:, 6:] * w[2]).sum()

        return {"split": jax.grad(split)(x), "overlap": jax.grad(overlap)(x)}

    check(grads, x, w)
    h = primitives_per_call(lambda x, w: grads(x, w)["split"], x, w)
    assert h.get("Concatenate") == 1 and "SliceUpdate" not in h, h
    h = primitives_per_call(lambda x, w: grads(x, w)["overlap"], x, w)
    assert "Concatenate" not in h, h


@pytest.mark.parametrize("dt", [np.float32, np.float16, np.int32])
def test_elementwise_ops_on_unit_reshapes(dt):
    # Element-wise ops whose operands are reshapes that only add 1s (and
    # one-element constants) run on the reshapes' inputs when every path
    # from them reshapes or unit-reduces back (the frontend moves the
    # reshape after them): compares, logical ops, select, arithmetic, with
    # the results read through a reshape, a reduce over the unit dim, and
    # (not moved) a reshape to another shape.
    a = (np.arange(12).reshape(6, 2)[:, :1] % 5 - 2).astype(dt)
    b = np.array([[0], [3], [7], [-1], [2], [9]], np.int32)

    def f(a, b):
        ra, rb = a.reshape(6, 1, 1), b.reshape(6, 1, 1)
        m = (ra > 0) & (rb <= 3) | (rb == -1)
        s = lax.select(m, ra * 2 + 1, -ra)  # (jnp.where is a call: not element-wise)
        kept = lax.select(~m, s, ra)
        return dict(back=s.reshape(6, 1), reduced=jnp.sum(kept, axis=2),
                    mask=jnp.all(m, axis=2), elsewhere=(ra - 1).reshape(6))

    assert_same(f, a, b)


def test_take_along_axis_fill_mask_needs_no_reshape():
    # JAX's bounds mask of take_along_axis reshapes the indices [n, 1] ->
    # [n, 1, 1] and reduces the unit dim away: with the compares moved
    # before the reshape, the two reshapes cancel (eager tier counted).
    # (80 indices: more than a host lane takes, host_small.h, so the mask is
    # MLX work as for any large index array.)
    x = np.linspace(-1, 1, 800, dtype=np.float32).reshape(80, 10)
    i = np.tile(np.array([[3], [-1], [12], [0]], np.int32), (20, 1))
    f = lambda x, i: jnp.take_along_axis(x, i, axis=1, mode="fill")  # noqa: E731
    assert_same(f, x, i)
    hist = primitives_per_call(f, x, i)
    assert "Reshape" not in hist, hist


def test_unit_dim_broadcast_of_a_reshape_is_one_reshape():
    # A KV-cache write: the new row [256] is reshaped to heads [4, 1, 64]
    # and broadcast_in_dim only adds leading 1s ([1, 1, 4, 1, 64]): that is
    # one reshape of the row (no Broadcast node), the same values.
    cache = np.zeros((2, 2, 4, 8, 64), np.float32)
    row = np.linspace(-1, 1, 256, dtype=np.float32)

    def f(cache, row, pos):
        u = lax.broadcast_in_dim(row.reshape(4, 1, 64), (1, 1, 4, 1, 64), (2, 3, 4))
        return lax.dynamic_update_slice(cache, u, (1, 0, 0, pos, 0))

    pos = np.int32(5)
    assert_same(f, cache, row, pos)
    hist = primitives_per_call(f, cache, row, pos)
    assert "Broadcast" not in hist, hist


@pytest.mark.parametrize("dt", [np.float32, np.float16, np.int32])
def test_rematerialised_binary_ops_keep_their_values(dt):
    # A subtract, add or multiply read by exactly two element-wise ops is
    # computed once per reader, the second copy written as a + (-b), b + a
    # or b * a. Those are exactly equal: zero signs, infinities and integer
    # wrap-around included (NaNs compare as NaN).
    vals = [0.0, -0.0, 1.5, -1.5, np.inf, -np.inf, 3.0, 2.0] if dt != np.int32 else \
        [0, 1, -1, 2**31 - 1, -2**31, 7, -7, 3]
    a = np.array(vals, np.float64).astype(dt) if dt != np.int32 else np.array(vals, np.int64).astype(dt)
    b = a[::-1].copy()

    def f(a, b):
        d, s, p = a - b, a + b, a * b
        return dict(d1=d * 3, d2=d + 1, s1=s - a, s2=s * s, p1=-p, p2=p - b)

    check(f, a, b)


def test_log_softmax_shift_fuses_into_both_readers(monkeypatch):
    # log_softmax's x - max(x) is read by exp and by the final subtract: one
    # copy per reader lets MLX's compile fuse it into both (fused tier).
    monkeypatch.setenv("PJRTX_COMPILE", "always")
    x = np.linspace(-4, 4, 160, dtype=np.float32).reshape(16, 10)
    # (x - m) - log(sum(exp(x - m))): x - m is exact here; the sum of ten
    # terms <= 1 is at most 10, so its log (a few ulps, from exp, the sum
    # and log) is off by a few ulps of log(10), and the last subtract adds
    # a rounding of the result.
    atol = 4 * float(np.spacing(np.float32(np.log(10))))
    assert_same(jax.nn.log_softmax, x, rtol=np.finfo(np.float32).eps, atol=atol)
    hist = primitives_per_call(jax.nn.log_softmax, x)
    assert sum(hist.values()) <= 4, hist  # max, exp(x - m), sum, (x - m) - log(sum)
