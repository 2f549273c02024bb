"""dynamic_slice, dynamic_update_slice, gather, scatter and pad against
XLA:CPU. MLX does no bounds checks, so out-of-range indices of every integer
type are the point: clamped starts (slice, gather), dropped windows
(scatter), and never a crash."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from oracle import assert_same

X = np.arange(24, dtype=np.float32).reshape(4, 6)
STARTS = [-3, 0, 2, 5, 100]


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.uint8, np.uint32])
def test_dynamic_slice_clamps_every_index_type(dtype):
    for s in STARTS:
        if np.issubdtype(dtype, np.unsignedinteger) and s < 0:
            s = np.iinfo(dtype).max  # huge unsigned: must clamp high, not wrap
        i = np.array(s).astype(dtype)
        assert_same(lambda x, i: lax.dynamic_slice(x, (i, i), (2, 3)), X, i)
        assert_same(lambda x, i: lax.dynamic_update_slice(x, jnp.full((2, 3), -1.0), (i, i)), X, i)


def test_dynamic_slice_scalar_and_zero_size():
    assert_same(lambda x, i: lax.dynamic_slice(x, (i, i), (0, 2)), X, np.int32(3))
    assert_same(lambda x, i: lax.dynamic_update_slice(x, jnp.ones((0, 2)), (i, i)), X, np.int32(3))
    assert_same(lambda x: lax.dynamic_slice(x, (), ()), np.float32(3.5))


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_, np.float16])
def test_gather_numpy_indexing(dtype):
    x = (X % 5).astype(dtype)
    idx = np.array([0, 3, -1, 7, 2], np.int32)
    assert_same(lambda x, i: x[i], x, idx)                       # clamps 7, wraps -1 (numpy)
    assert_same(lambda x, i: x[:, i % 6], x, idx)
    assert_same(lambda x, i: jnp.take(x, i, axis=1, mode="clip"), x, idx)
    assert_same(lambda x, i: x[i[:2], i[2:4] % 6], x, idx)
    assert_same(lambda x, i: lax.gather(x, i[:, None], lax.GatherDimensionNumbers(
        offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,)), (1, 6),
        mode=lax.GatherScatterMode.CLIP), x, idx)


def test_gather_batching_dims_and_empty():
    xb = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    ib = np.array([[0, 1], [3, 3], [2, 0]], np.int32)
    assert_same(jax.vmap(lambda x, i: x[i]), xb, ib)
    assert_same(lambda x, i: x[i], X, np.zeros((0,), np.int32))


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_scatter_update_kinds(dtype):
    x = X.astype(dtype)
    assert_same(lambda x, i: x.at[i].set(-1), x, np.array([0, 3, 2], np.int32))
    assert_same(lambda x, i: x.at[i].add(10), x, np.array([0, 1, 1, 3], np.int32))
    assert_same(lambda x, i: x.at[i, 2].mul(3), x, np.array([0, 1, 1, 2], np.int32))
    assert_same(lambda x, i: x.at[i].max(7), x, np.array([0, 1, 2], np.int32))
    assert_same(lambda x, i: x.at[:, i].min(-2), x, np.array([0, 5, 2], np.int32))


def test_scatter_drops_out_of_bounds_windows():
    # mode=drop keeps out-of-range updates away; XLA drops a window that does
    # not fit entirely.
    idx = np.array([0, 9, -7, 3, 4], np.int32)
    assert_same(lambda x, i: x.at[i].add(100.0, mode="drop"), X, idx)
    dn = lax.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,),
                                     scatter_dims_to_operand_dims=(0, 1))
    starts = np.array([[0, 0], [1, 4], [2, 5], [3, -1], [1, 3]], np.int32)  # windows of 3 cols
    assert_same(lambda x, i: lax.scatter_add(x, i, jnp.ones((5, 3), x.dtype), dn), X, starts)
    assert_same(lambda x, i: lax.scatter(x, i, jnp.full((3, 3), -5.0, x.dtype), dn,
                                         unique_indices=True), X, starts[[0, 1, 3]])


def test_scatter_batching_dims():
    xb = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    ib = np.array([[0, 1], [3, 3], [2, 0]], np.int32)
    assert_same(jax.vmap(lambda x, i: x.at[i].add(1.0)), xb, ib)


def test_scatter_grad_of_gather():
    assert_same(jax.grad(lambda x, i: (x[i] ** 2).sum()), X, np.array([0, 2, 2, 3], np.int32),
                rtol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.bool_, np.uint16])
def test_pad_negative_and_interior(dtype):
    x = (X % 7).astype(dtype)
    v = np.array(1).astype(dtype)
    assert_same(lambda x, v: lax.pad(x, v, ((1, 2, 0), (0, 3, 0))), x, v)
    assert_same(lambda x, v: lax.pad(x, v, ((1, -2, 1), (-1, 2, 2))), x, v)
    assert_same(lambda x, v: lax.pad(x, v, ((-2, -2, 0), (-6, 0, 0))), x, v)
    assert_same(lambda x, v: lax.pad(x, v, ((0, 0, 3), (2, 2, 0))), x[:0], v)
    assert_same(lambda x: jnp.pad(x, ((1, 2), (0, 3)), mode="reflect"), x)
