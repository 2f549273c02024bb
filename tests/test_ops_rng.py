"""stablehlo.rng_bit_generator (ops/rng.cc) against XLA:CPU, bit for bit.

XLA:CPU expands the op into Threefry-2x32 or Philox-4x32 (DEFAULT is
PHILOX there) with a particular stream layout: which counter feeds which
output element, how 8/16/64-bit outputs are cut from the 32-bit words, how
the state advances. Every output and every returned state is compared
exactly. JAX passes the state as u32[4] (bitcast to u64[2]); a raw primitive
reaches the forms JAX does not emit (a u64[3] PHILOX state, signed and float
outputs).
"""
import contextlib

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax import lax
from jax.extend.core import Primitive
from jax.interpreters import mlir
from jaxlib.mlir.dialects import stablehlo

from oracle import run_on
from pjrtx import versions

ALGORITHMS = {"THREE_FRY": lax.RandomAlgorithm.RNG_THREE_FRY,
              "PHILOX": lax.RandomAlgorithm.RNG_PHILOX,
              "DEFAULT": lax.RandomAlgorithm.RNG_DEFAULT}
OUT_DTYPES = [np.uint8, np.uint16, np.uint32, np.uint64]

# Odd, even and unit dims in every position (Threefry's 32-bit layout splits
# the first even dim, else the largest), scalars, and zero-size shapes.
SHAPES = [(), (1,), (2,), (5,), (8,), (3, 5), (4, 3), (5, 4), (5, 7), (7, 5), (1, 9), (3, 7, 5),
          (2, 3, 1), (3, 1, 3), (1, 1, 9), (0,), (0, 3), (3, 0), (4, 0, 2)]

# u32[4] = [key lo, key hi, counter lo, counter hi] (the bitcast to u64[2] is
# little-endian): zeros, arbitrary words, and a counter 16 below 2^64 so
# that the draws wrap it (Philox carries into the high half, which for a
# u64[2] state is the key).
KEYS = np.array([[0, 0, 0, 0],
                 [0x12345678, 0x9ABCDEF0, 0x0F1E2D3C, 0x00000007],
                 [0xDEADBEEF, 0x00C0FFEE, 0xFFFFFFF0, 0xFFFFFFFF]], np.uint32)


def name(dt):
    return np.dtype(dt).name


def x64_for(dt):
    return jax.enable_x64(True) if np.dtype(dt).itemsize == 8 else contextlib.nullcontext()


def assert_bits_equal(f, *args, xla_unsigned=False):
    """Every output of f on pjrtx equals XLA:CPU's bit for bit.

    xla_unsigned: XLA:CPU hands back a signed or float rng_bit_generator
    result as an array of the same-width unsigned type (its expansion keeps
    the unsigned words it computed), although the program declares e.g.
    f32; pjrtx returns the declared type. Accept XLA's dtype there."""
    got = run_on(jax.devices("pjrtx")[0], f, *args)
    want = run_on(jax.devices("cpu")[0], f, *args)
    got_leaves, got_tree = jax.tree_util.tree_flatten_with_path(got)[0], jax.tree.structure(got)
    want_leaves, want_tree = jax.tree_util.tree_flatten_with_path(want)[0], jax.tree.structure(want)
    assert got_tree == want_tree
    for (path, g), (_, w) in zip(got_leaves, want_leaves):
        where = jax.tree_util.keystr(path)
        ut = np.dtype(f"u{w.dtype.itemsize}")
        same_type = g.dtype == w.dtype or (xla_unsigned and w.dtype == ut
                                           and g.dtype.itemsize == ut.itemsize)
        assert same_type and g.shape == w.shape, (where, g.dtype, g.shape, w.dtype, w.shape)
        np.testing.assert_array_equal(g.view(ut), w.view(ut), err_msg=where)
    return got


@pytest.mark.parametrize("dt", OUT_DTYPES, ids=name)
@pytest.mark.parametrize("alg", list(ALGORITHMS))
def test_rng_bit_generator(alg, dt):
    algorithm = ALGORITHMS[alg]

    def f(keys):
        return {f"{shape}/key{i}": lax.rng_bit_generator(keys[i], shape, dtype=dt,
                                                          algorithm=algorithm)
                for shape in SHAPES for i in range(len(KEYS))}

    with x64_for(dt):
        out = assert_bits_equal(f, KEYS)
    # The comparison above means something only if the bits do vary.
    assert len(np.unique(out["(3, 7, 5)/key1"][1])) > 1


@pytest.mark.parametrize("alg", list(ALGORITHMS))
def test_rng_bit_generator_chained_state(alg):
    # The state each call returns seeds the next, as jax.random's rbg does.
    def f(key):
        outs = []
        for shape, dt in [((5,), jnp.uint32), ((3, 4), jnp.uint8), ((7,), jnp.uint16),
                          ((2, 3), jnp.uint32), ((), jnp.uint32)]:
            key, bits = lax.rng_bit_generator(key, shape, dtype=dt, algorithm=ALGORITHMS[alg])
            outs.append(bits)
        return key, outs

    assert_bits_equal(f, KEYS[1])


def test_rng_bit_generator_large():
    # Past MLX's and the plan's small-size paths: 2^16 + 3 elements.
    def f(key):
        return [lax.rng_bit_generator(key, (257, 255), dtype=jnp.uint32, algorithm=a)
                for a in ALGORITHMS.values()]

    assert_bits_equal(f, KEYS[2])


# ---- states and output types that JAX's wrapper does not emit -----------------------

def _raw_rbg_lowering(ctx, state, *, shape, dtype, algorithm):
    state_aval, bits_aval = ctx.avals_out
    return stablehlo.RngBitGeneratorOp(
        versions.aval_to_ir_type(ctx.module_context, state_aval),
        versions.aval_to_ir_type(ctx.module_context, bits_aval),
        stablehlo.RngAlgorithmAttr.get(algorithm), state).results


raw_rbg_p = Primitive("raw_rng_bit_generator")
raw_rbg_p.multiple_results = True
raw_rbg_p.def_abstract_eval(lambda s, *, shape, dtype, algorithm: (
    jax.core.ShapedArray(s.shape, s.dtype), jax.core.ShapedArray(shape, dtype)))
mlir.register_lowering(raw_rbg_p, _raw_rbg_lowering)


def raw_rbg(state, shape, dtype, algorithm):
    return raw_rbg_p.bind(state, shape=tuple(shape), dtype=np.dtype(dtype), algorithm=algorithm)


U64_STATES = {
    "philox3": np.array([0x0123456789ABCDEF, 5, 7], np.uint64),
    # low half 2^64 - 3: the draws carry into the high half
    "philox3_carry": np.array([1, 2 ** 64 - 3, 2 ** 64 - 1], np.uint64),
    "philox2_carry": np.array([9, 2 ** 64 - 3], np.uint64),
}


@pytest.mark.parametrize("alg", ["PHILOX", "DEFAULT"])
def test_philox_u64_states(alg):
    def f(states):
        return {f"{k}/{shape}/{name(dt)}": raw_rbg(s, shape, dt, alg)
                for k, s in states.items() for shape in [(), (5,), (3, 4), (2, 3, 3)]
                for dt in [np.uint8, np.uint32, np.uint64]}

    with jax.enable_x64(True):
        assert_bits_equal(f, U64_STATES)


@pytest.mark.parametrize("alg", ["THREE_FRY", "PHILOX"])
def test_signed_and_float_outputs(alg):
    # The unsigned bits of the width, reinterpreted (XLA:CPU even returns
    # them with the unsigned type).
    dts = [np.int8, np.int16, np.int32, np.int64, np.float16, ml_dtypes.bfloat16, np.float32,
           np.float64]
    state = np.array([3, 2 ** 64 - 2], np.uint64)

    def f(s):
        return {f"{name(dt)}/{shape}": raw_rbg(s, shape, dt, alg)
                for dt in dts for shape in [(), (5,), (4, 3)]}

    with jax.enable_x64(True):
        assert_bits_equal(f, state, xla_unsigned=True)


def test_unsupported_forms_are_named_errors():
    dev = jax.devices("pjrtx")[0]
    with jax.enable_x64(True):
        s3 = jax.device_put(np.array([1, 2, 3], np.uint64), dev)
        with pytest.raises(Exception, match=r"THREE_FRY needs a u64\[2\] state.*loc\("):
            jax.jit(lambda s: raw_rbg(s, (4,), np.uint32, "THREE_FRY"))(s3)
        s4 = jax.device_put(np.array([1, 2, 3, 4], np.uint64), dev)
        with pytest.raises(Exception, match=r"PHILOX needs a u64\[2\] or u64\[3\] state"):
            jax.jit(lambda s: raw_rbg(s, (4,), np.uint32, "PHILOX"))(s4)
        # and the backend still works
        np.testing.assert_array_equal(np.asarray(jax.jit(lambda s: s + 1)(s3)), [2, 3, 4])


# ---- jax.random on the rbg key implementations ------------------------------------

@contextlib.contextmanager
def prng_impl(impl):
    old = jax.config.jax_default_prng_impl
    jax.config.update("jax_default_prng_impl", impl)
    try:
        yield
    finally:
        jax.config.update("jax_default_prng_impl", old)


@pytest.mark.parametrize("impl", ["rbg", "unsafe_rbg"])
def test_jax_random_rbg(impl):
    def f(seed):
        k = jax.random.key(seed)
        k1, k2 = jax.random.split(k)
        return dict(bits=jax.random.bits(k, (3, 5), jnp.uint32),
                    uniform=jax.random.uniform(k1, (4, 5)),
                    uniform_bf16=jax.random.uniform(k2, (9,), jnp.bfloat16, -2.0, 3.0),
                    randint=jax.random.randint(k1, (6,), -50, 100),
                    bernoulli=jax.random.bernoulli(k2, 0.3, (11,)),
                    normal=jax.random.normal(k2, (7, 3)))

    with prng_impl(impl):
        got = run_on(jax.devices("pjrtx")[0], f, np.int32(42))
        want = run_on(jax.devices("cpu")[0], f, np.int32(42))
    for k in ["bits", "uniform", "uniform_bf16", "randint", "bernoulli"]:
        assert got[k].dtype == want[k].dtype and got[k].shape == want[k].shape, k
        np.testing.assert_array_equal(got[k], want[k], err_msg=k)
    # normal maps the bits through erf_inv, whose f32 approximations differ
    # by a few ulps between XLA:CPU and MLX's log/sqrt.
    np.testing.assert_allclose(got["normal"], want["normal"], rtol=2e-6, atol=1e-7)
    assert len(np.unique(got["uniform"])) > 1
