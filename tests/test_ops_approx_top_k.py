"""custom_call @ApproxTopK (lax.approx_max_k / approx_min_k) against XLA:CPU,
which computes it exactly (a sort along reduction_dim, cut to the result's
size): max and min, every float dtype, reduction dims 0/1/last, and
aggregate_to_topk=False, whose result keeps more than k sorted entries.
Values are distinct (a permutation), so the order, indices included, is
fully defined; ties are tested separately on the values alone."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from oracle import assert_same, run_on


def distinct(shape, dtype, seed=0):
    # A permutation of 0..n-1 scaled into [-4, 4): distinct in every float
    # dtype for n <= 256 (bf16 holds 8 significant bits).
    n = int(np.prod(shape))
    v = np.random.default_rng(seed).permutation(n).astype(np.float64)
    return ((v - n / 2) * (8.0 / n)).reshape(shape).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, jnp.bfloat16, np.float64])
@pytest.mark.parametrize("is_max", [True, False])
def test_top_k_each_dtype(dtype, is_max):
    # f64 runs with x64 on (otherwise JAX would narrow it to f32), not skipped.
    with jax.enable_x64(dtype == np.float64):
        x = distinct((6, 40), dtype)
        op = lax.approx_max_k if is_max else lax.approx_min_k
        got = assert_same(lambda x: op(x, 5), x)
    assert got[0].dtype == dtype, got[0].dtype


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_reduction_dims(dim):
    x = distinct((7, 9, 11), np.float32, seed=1)
    assert_same(lambda x: lax.approx_max_k(x, 3, reduction_dimension=dim), x)
    assert_same(lambda x: lax.approx_min_k(x, 4, reduction_dimension=dim), x)


@pytest.mark.parametrize("recall", [0.5, 0.95])
def test_not_aggregated_keeps_more_sorted(recall):
    # 300 along the dim: the result keeps N >= k entries (N from XLA's
    # ApproxTopKReductionOutputSize, e.g. 256), all sorted.
    x = distinct((3, 300), np.float32, seed=2)
    f = lambda x: lax.approx_max_k(x, 10, recall_target=recall, aggregate_to_topk=False)
    assert_same(f, x)
    g = lambda x: lax.approx_min_k(x, 10, recall_target=recall, aggregate_to_topk=False,
                                   reduction_input_size_override=1200)
    assert_same(g, x)


def test_ties_values_and_k_equal_to_size():
    x = np.float32([[2, 1, 2, 3, 1, 3, 0, 2]])
    f = lambda x: lax.approx_max_k(x, 8)
    got = run_on(jax.devices("pjrtx")[0], f, x)
    want = run_on(jax.devices("cpu")[0], f, x)
    np.testing.assert_array_equal(got[0], want[0])
    # Tied indices may come in any order; each points at the value it reports.
    np.testing.assert_array_equal(np.take_along_axis(x, got[1], 1), got[0])
    assert sorted(got[1][0]) == list(range(8))


def test_vmap_and_grad():
    x = distinct((4, 5, 16), np.float32, seed=3)
    assert_same(jax.vmap(lambda r: lax.approx_max_k(r, 3)), x)
    assert_same(jax.grad(lambda r: lax.approx_min_k(r, 3)[0].sum()), x)
