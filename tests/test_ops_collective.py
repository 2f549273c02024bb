"""Collectives, ids and tokens on one pjrtx device: pmap/psum over a
size-1 axis and programs that pass tokens, against XLA:CPU. (Several
devices: tests/test_multidevice.py.)"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from oracle import assert_same_mlir, run_mlir_on
from pjrtx import versions

X = np.arange(6, dtype=np.float32).reshape(1, 6)


def pmapped(device):
    def f(x):
        return (lax.psum(x, "i"), lax.pmax(x, "i"), lax.all_gather(x, "i"), lax.axis_index("i"),
                lax.ppermute(x, "i", [(0, 0)]), lax.psum_scatter(x, "i", tiled=True),
                lax.all_to_all(x[None], "i", 0, 0, tiled=True))
    out = jax.pmap(f, axis_name="i", devices=[device])(X)
    return [np.asarray(o) for o in out]


def test_single_device_collectives_match_cpu():
    got = pmapped(jax.devices("pjrtx")[0])
    want = pmapped(jax.devices("cpu")[0])
    assert len(got) == len(want) == 7
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)


def test_tokens_in_and_out():
    f = jax.jit(lambda t, x: (lax.create_token(), x + 1))
    tok, y = f(lax.create_token(), 2.0)
    from jax._src.core import Token
    assert float(y) == 3.0 and isinstance(tok, Token)


TWO_DEVICE_PSUM = """module @m attributes {mhlo.num_replicas = 2 : i32} {
func.func public @main(%x: tensor<3xf32>) -> tensor<3xf32> {
  %0 = "stablehlo.all_reduce"(%x) ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = stablehlo.add %a, %b : tensor<f32>
      stablehlo.return %s : tensor<f32>
  }) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<3xf32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}
}"""


def test_wider_replica_group_is_a_compile_error():
    # A psum over two replicas compiled for one device (no device
    # assignment names a second): refused when compiling, naming the op.
    with pytest.raises(Exception, match=r"stablehlo.all_reduce.*names id 1 but the program runs 1 "
                                        r"replica"):
        run_mlir_on(jax.devices("pjrtx")[0], TWO_DEVICE_PSUM, np.ones(3, np.float32))


def _permute_module(pairs: str, pair_type: str) -> str:
    return f"""module @m {{
func.func public @main(%x: tensor<3xf32>) -> tensor<3xf32> {{
  %0 = "stablehlo.collective_permute"(%x) {{source_target_pairs = {pairs} : {pair_type}}}
    : (tensor<3xf32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}}
}}"""


def test_collective_permute_reads_splat_pairs():
    # MLIR stores [[0, 0]] as a splat (one element for two): the pairs must
    # be expanded, not read past the stored bytes. Device 0 sends to itself,
    # so the operand comes back, as on XLA:CPU.
    x = np.array([1.0, -2.0, 3.5], np.float32)
    text = _permute_module("dense<[[0, 0]]>", "tensor<1x2xi64>")
    (got,) = run_mlir_on(jax.devices("pjrtx")[0], text, x)
    (want,) = run_mlir_on(jax.devices("cpu")[0], text, x)
    np.testing.assert_array_equal(got, want)


def test_collective_permute_to_another_device_is_a_compile_error():
    with pytest.raises(Exception, match=r"collective_permute.*pair \(0, 1\) names an id outside"):
        run_mlir_on(jax.devices("pjrtx")[0], _permute_module("dense<[[0, 1]]>", "tensor<1x2xi64>"),
                    np.ones(3, np.float32))


# JAX's async collectives (parallel.psum_start(...).done()) lower to
# async_start/async_done around the collective, and shard_alike adds
# sdy.sharding_group.
ASYNC_PSUM = """module @m {
func.func public @main(%x: tensor<4xf32>, %y: tensor<2x3xi32>) -> (tensor<4xf32>, tensor<2x3xi32>) {
  sdy.sharding_group %x group_id=0 : tensor<4xf32>
  %f = "stablehlo.async_start"(%x) ({
  ^bb0(%a: tensor<4xf32>):
    %r = "stablehlo.all_reduce"(%a) <{replica_groups = dense<0> : tensor<1x1xi64>}> ({
    ^bb0(%p: tensor<f32>, %q: tensor<f32>):
      %s = stablehlo.add %p, %q : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) : (tensor<4xf32>) -> tensor<4xf32>
    stablehlo.return %r : tensor<4xf32>
  }) : (tensor<4xf32>) -> !stablehlo.future<tensor<4xf32>>
  %r = "stablehlo.async_done"(%f) : (!stablehlo.future<tensor<4xf32>>) -> tensor<4xf32>
  %z = stablehlo.add %r, %x : tensor<4xf32>
  %m = stablehlo.multiply %y, %y : tensor<2x3xi32>
  return %z, %m : tensor<4xf32>, tensor<2x3xi32>
}
}"""


@pytest.mark.skipif(not versions.jax_at_least(versions.STABLEHLO_ASYNC),
                    reason="this jaxlib's StableHLO has no async_start or !stablehlo.future "
                           "(added in 0.10.0): no program it sends holds one")
def test_async_start_done_and_sharding_group_match_cpu():
    assert_same_mlir(ASYNC_PSUM, np.array([1.5, -2.0, 0.0, 3.25], np.float32),
                     np.arange(-3, 3, dtype=np.int32).reshape(2, 3))


def test_pbroadcast_on_one_device_is_its_operand():
    # lax.pbroadcast lowers for 'gpu' only in JAX (XLA:CPU has no
    # collective_broadcast); pjrtx registers JAX's rule. Over a size-1 axis
    # the source's value is everyone's, and its transpose sums the cotangent
    # back to the source.
    x = np.arange(12, dtype=np.float32).reshape(1, 3, 4) - 5.5
    f = jax.pmap(lambda v: lax.pbroadcast(v, source=0, axis_name="i"), "i",
                 devices=[jax.devices("pjrtx")[0]])
    np.testing.assert_array_equal(np.asarray(f(x)), x)
    # (JAX's transpose rule takes scalars: jnp.full of the cotangent)
    g = jax.pmap(jax.grad(lambda v: 3 * lax.pbroadcast(v, source=0, axis_name="i")), "i",
                 devices=[jax.devices("pjrtx")[0]])
    np.testing.assert_array_equal(np.asarray(g(np.float32([2.5]))), np.float32([3.0]))
    from jax._src.interpreters import mlir
    from jax._src.lax import parallel
    # fails if JAX renames the rule pjrtx borrows
    assert parallel.pbroadcast_p in mlir._platform_specific_lowerings["pjrtx"]
