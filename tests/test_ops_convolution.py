"""stablehlo.convolution against XLA:CPU: layouts, strides, padding
(negative too), lhs/rhs dilation, window reversal (conv_transpose),
feature and batch groups (a grouped conv's weight gradient), 1-3 spatial
dims, integer and bf16 inputs."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from oracle import assert_same

rng = np.random.default_rng(0)
X = rng.standard_normal((2, 3, 9, 8)).astype(np.float32)   # NCHW
W = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)   # OIHW
TOL = dict(rtol=1e-4, atol=1e-4)

CASES = {
    "basic": lambda x, w: lax.conv(x, w, (1, 1), "SAME"),
    "strided_valid": lambda x, w: lax.conv(x, w, (2, 1), "VALID"),
    "dilated": lambda x, w: lax.conv_general_dilated(x, w, (1, 2), ((1, 0), (2, 1)), lhs_dilation=(2, 1),
                                                     rhs_dilation=(1, 2)),
    "negative_padding": lambda x, w: lax.conv_general_dilated(x, w, (1, 1), ((-1, 2), (0, -1))),
    "negative_padding_lhs_dilation": lambda x, w: lax.conv_general_dilated(
        x, w, (1, 1), ((-1, 2), (0, -1)), lhs_dilation=(2, 2)),
    "nhwc_hwio": lambda x, w: lax.conv_general_dilated(
        jnp.transpose(x, (0, 2, 3, 1)), jnp.transpose(w, (2, 3, 1, 0)), (1, 1), "SAME",
        dimension_numbers=("NHWC", "HWIO", "NHWC")),
    "grad_input": lambda x, w: jax.grad(lambda x: lax.conv(x, w, (2, 2), "SAME").sum())(x),
    "grad_kernel": lambda x, w: jax.grad(lambda w: (lax.conv(x, w, (2, 2), "SAME") ** 2).sum())(w),
    "conv_transpose": lambda x, w: lax.conv_transpose(x, jnp.transpose(w, (2, 3, 1, 0)), (2, 2), "SAME",
                                                      dimension_numbers=("NCHW", "HWIO", "NCHW")),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_conv2d(name):
    assert_same(CASES[name], X, W, **TOL)


def test_feature_and_batch_groups():
    xg = rng.standard_normal((2, 6, 9, 8)).astype(np.float32)
    wg = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    assert_same(lambda x, w: lax.conv_general_dilated(x, w, (1, 1), "SAME", feature_group_count=2),
                xg, wg, **TOL)
    # the weight gradient of a grouped conv is a batch-grouped conv
    assert_same(lambda x, w: jax.grad(lambda w: (lax.conv_general_dilated(
        x, w, (1, 1), "SAME", feature_group_count=2) ** 2).sum())(w), xg, wg, **TOL)


def test_1d_and_3d():
    x1 = rng.standard_normal((2, 3, 17)).astype(np.float32)
    w1 = rng.standard_normal((5, 3, 4)).astype(np.float32)
    assert_same(lambda x, w: lax.conv(x, w, (3,), "SAME"), x1, w1, **TOL)
    x3 = rng.standard_normal((1, 4, 5, 6, 7)).astype(np.float32)
    w3 = rng.standard_normal((4, 2, 2, 3, 2)).astype(np.float32)
    # MLX groups cover 1-D/2-D only: 3-D groups run per group
    assert_same(lambda x, w: lax.conv_general_dilated(x, w, (1, 1, 2), "SAME", feature_group_count=2),
                x3, w3, **TOL)


def test_integer_and_bf16():
    xi = rng.integers(-3, 3, (2, 3, 6, 6)).astype(np.int32)
    wi = rng.integers(-2, 2, (2, 3, 3, 3)).astype(np.int32)
    assert_same(lambda x, w: lax.conv(x, w, (1, 1), "SAME"), xi, wi)
    # bf16 inputs, f32 accumulation: bf16 rounding of the inputs dominates
    assert_same(lambda x, w: lax.conv(x, w, (1, 1), "SAME", preferred_element_type=jnp.float32),
                X.astype(jnp.bfloat16), W.astype(jnp.bfloat16), rtol=2e-2, atol=2e-2)


def test_zero_size():
    assert_same(lambda x, w: lax.conv(x, w, (1, 1), "SAME"), X[:0], W)


def test_complex64():
    xc = (X + 1j * X[:, :, ::-1]).astype(np.complex64)
    wc = (W - 0.5j * W).astype(np.complex64)
    assert_same(lambda x, w: lax.conv_general_dilated(x, w, (2, 1), ((1, 0), (-1, 2)),
                                                      rhs_dilation=(1, 2)), xc, wc, **TOL)
