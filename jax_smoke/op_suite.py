"""One jitted program per StableHLO op family, run on pjrtx and on XLA:CPU.

Prints a table (op, dtype, max error, pass/fail) and exits non-zero on a
mismatch. tests/test_op_suite.py runs the same cases and also checks that
together they lower every op pjrtx registers (`_pjrtx.supported_ops()`).

    python jax_smoke/op_suite.py
"""
from __future__ import annotations

import dataclasses
import os
import sys
from typing import Any, Callable

os.environ.setdefault("JAX_PLATFORMS", "pjrtx,cpu")

import jax  # noqa: E402
import jax.scipy.linalg  # noqa: E402,F401 (for qr pivoting; `import jax` leaves it out)

from pjrtx import jax_plugin  # noqa: E402

jax_plugin.ensure_registered()  # a source checkout has no entry point
import jax.numpy as jnp  # noqa: E402
import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402


@dataclasses.dataclass
class Case:
    op: str                       # what the program exercises
    fn: Callable                  # jitted on each device
    args: tuple
    rtol: float = 0.0
    x64: bool = False             # run under jax.enable_x64
    mlir: str | None = None       # a hand-written StableHLO module instead of fn
    # Sharding ops need a mesh of the default device (pjrtx): fn jits
    # itself there (or mlir runs), and this NumPy function of args is the
    # oracle instead of XLA:CPU.
    numpy_oracle: Callable | None = None

    @property
    def dtype(self) -> str:
        leaves = [a for a in jax.tree_util.tree_leaves(self.args) if hasattr(a, "dtype")]
        return np.dtype(leaves[0].dtype).name if leaves else "-"


R = np.random.default_rng(0)
F32 = R.standard_normal((4, 6)).astype(np.float32)
G32 = R.standard_normal((4, 6)).astype(np.float32)
I32 = R.integers(-100, 100, (4, 6)).astype(np.int32)
J32 = R.integers(-40, 40, (4, 6)).astype(np.int32)
U8 = R.integers(0, 255, (4, 6)).astype(np.uint8)
C64 = (F32 + 1j * G32).astype(np.complex64)
BF16 = F32.astype(ml_dtypes.bfloat16)
F16 = F32.astype(np.float16)
F64 = F32.astype(np.float64)
EDGE = np.array([0.0, -0.0, 1.5, -2.5, np.inf, -np.inf, np.nan, 3e38], np.float32)
IMG = R.standard_normal((2, 8, 8, 3)).astype(np.float32)
KER = R.standard_normal((3, 3, 3, 4)).astype(np.float32)
IDX = np.array([[0], [3], [-1], [9], [3]], np.int32)  # repeats and out of range
SQ = R.standard_normal((5, 5)).astype(np.float32)

DOT_MLIR = """module @m {
func.func public @main(%a: tensor<3x4xf32>, %b: tensor<4x2xf32>) -> tensor<3x2xf32> {
  %0 = "stablehlo.dot"(%a, %b) : (tensor<3x4xf32>, tensor<4x2xf32>) -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}
}"""

# Ops JAX 0.10.2 does not emit in these forms (cond lowers to case, logistic
# to exp/divide, reshard to sharding_constraint), but other producers do.
MISC_MLIR = """module @m {
func.func public @main(%p: tensor<i1>, %x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = "stablehlo.if"(%p) ({
    %s = stablehlo.sine %x : tensor<4xf32>
    stablehlo.return %s : tensor<4xf32>
  }, {
    %c = stablehlo.cosine %x : tensor<4xf32>
    stablehlo.return %c : tensor<4xf32>
  }) : (tensor<i1>) -> tensor<4xf32>
  %1 = stablehlo.logistic %x : tensor<4xf32>
  return %0, %1 : tensor<4xf32>, tensor<4xf32>
}
}"""

# XLA:CPU rejects a hand-written sdy.reshard ("unknown mesh") and has no
# collective_broadcast: NumPy is the oracle (both are identities on one
# device).
RESHARD_MLIR = """module @m {
sdy.mesh @mesh = <["x"=1]>
func.func public @main(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %0 = sdy.reshard %x <@mesh, [{"x"}]> : tensor<4xf32>
  %1 = "stablehlo.collective_broadcast"(%x) {replica_groups = dense<[[0]]> : tensor<1x1xi64>}
    : (tensor<4xf32>) -> tensor<4xf32>
  return %0, %1 : tensor<4xf32>, tensor<4xf32>
}
}"""

# Custom-call targets that are identities on one device, and dce_sink (no
# results). XLA:CPU refuses the SPMD markers outside a partitioned module:
# NumPy is the oracle.
IDENTITY_TARGETS_MLIR = """module @m {
func.func public @main(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>,
                                            tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %0 = stablehlo.custom_call @Sharding(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %1 = stablehlo.custom_call @SPMDFullToShardShape(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %2 = stablehlo.custom_call @SPMDShardToFullShape(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %3 = stablehlo.custom_call @annotate_device_placement(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %4 = stablehlo.custom_call @MoveToHost(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %5 = stablehlo.custom_call @MoveToDevice(%x) : (tensor<4xf32>) -> tensor<4xf32>
  %6 = stablehlo.custom_call @LayoutConstraint(%x) : (tensor<4xf32>) -> tensor<4xf32>
  stablehlo.custom_call @dce_sink(%x) {has_side_effect = true} : (tensor<4xf32>) -> ()
  return %0, %1, %2, %3, %4, %5, %6 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>,
    tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}
}"""

# An async collective (lax all_gather_start emits the pair) ordered before a
# multiply by control_dep, which takes the future itself: one device, so the
# gather returns its operand; control_dep changes no value.
ASYNC_CONTROL_DEP_MLIR = """module @m {
func.func public @main(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %f = "stablehlo.async_start"(%x) ({
  ^bb0(%a: tensor<4xf32>):
    %g = "stablehlo.all_gather"(%a) <{all_gather_dim = 0 : i64,
        channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>,
        replica_groups = dense<0> : tensor<1x1xi64>, use_global_device_ids}>
        : (tensor<4xf32>) -> tensor<4xf32>
    stablehlo.return %g : tensor<4xf32>
  }) : (tensor<4xf32>) -> !stablehlo.future<tensor<4xf32>>
  %m = stablehlo.multiply %x, %x : tensor<4xf32>
  stablehlo.custom_call @control_dep(%f, %m) {has_side_effect = true, api_version = 4 : i32}
      : (!stablehlo.future<tensor<4xf32>>, tensor<4xf32>) -> ()
  %d = "stablehlo.async_done"(%f) : (!stablehlo.future<tensor<4xf32>>) -> tensor<4xf32>
  %s = stablehlo.add %d, %m : tensor<4xf32>
  return %d, %s : tensor<4xf32>, tensor<4xf32>
}
}"""

# custom_call @mhlo.topk: how jaxlib 0.9.2 and older send lax.top_k (0.10.x
# sends a composite, the case above); NaN is the largest, +0 above -0, ties in
# index order. NumPy is the oracle: a stable sort of the negated total order.
MHLO_TOPK_MLIR = """module @m {
func.func public @main(%x: tensor<2x7xf32>) -> (tensor<2x4xf32>, tensor<2x4xi32>) {
  %0:2 = stablehlo.custom_call @mhlo.topk(%x) {mhlo.attributes = {k = 4 : i64}, mhlo.version = 1 : i64}
    : (tensor<2x7xf32>) -> (tensor<2x4xf32>, tensor<2x4xi32>)
  return %0#0, %0#1 : tensor<2x4xf32>, tensor<2x4xi32>
}
}"""
# The seven CHLO ops jaxlib 0.8.0-0.9.0 send as custom_call @mhlo.<op> with no
# decomposition (0.9.1+ send composites): NumPy/SciPy in float64 is the
# oracle (the C library pjrtx calls is within 1-2 ulp: rtol 1e-6, ~8 ulp).
MHLO_CHLO_MLIR = """module @m {
func.func public @main(%x: tensor<8xf32>, %y: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %0 = stablehlo.custom_call @mhlo.erf(%x) {mhlo.attributes = {}, mhlo.version = 1 : i64} : (tensor<8xf32>) -> tensor<8xf32>
  %1 = stablehlo.custom_call @mhlo.acos(%x) {mhlo.attributes = {}, mhlo.version = 1 : i64} : (tensor<8xf32>) -> tensor<8xf32>
  %2 = stablehlo.custom_call @mhlo.asin(%x) {mhlo.attributes = {}, mhlo.version = 1 : i64} : (tensor<8xf32>) -> tensor<8xf32>
  %3 = stablehlo.custom_call @mhlo.atanh(%x) {mhlo.attributes = {}, mhlo.version = 1 : i64} : (tensor<8xf32>) -> tensor<8xf32>
  %4 = stablehlo.custom_call @mhlo.sinh(%x) {mhlo.attributes = {}, mhlo.version = 1 : i64} : (tensor<8xf32>) -> tensor<8xf32>
  %5 = stablehlo.custom_call @mhlo.cosh(%x) {mhlo.attributes = {}, mhlo.version = 1 : i64} : (tensor<8xf32>) -> tensor<8xf32>
  %6 = stablehlo.custom_call @mhlo.acosh(%y) {mhlo.attributes = {}, mhlo.version = 1 : i64} : (tensor<8xf32>) -> tensor<8xf32>
  return %0, %1, %2, %3, %4, %5, %6 : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
}
}"""
CHLO_X = np.array([-0.9, -0.5, -1e-3, 0.0, 1e-6, 0.3, 0.7, 0.95], np.float32)
CHLO_Y = np.array([1.0, 1.001, 1.5, 2.0, 3.0, 10.0, 1e3, 1e6], np.float32)


def _mhlo_chlo_oracle(x, y):
    import scipy.special
    w = x.astype(np.float64)
    out = (scipy.special.erf(w), np.arccos(w), np.arcsin(w), np.arctanh(w), np.sinh(w),
           np.cosh(w), np.arccosh(y.astype(np.float64)))
    return tuple(o.astype(np.float32) for o in out)


TOPK_ROWS = np.array([[1.0, -0.0, 0.0, 5.0, np.nan, 5.0, -3.0],
                      [-np.inf, 2.0, -1.0, 2.0, np.inf, 0.5, -0.0]], np.float32)


def _topk_oracle(x, k=4):
    bits = x.view(np.int32)
    total = np.where(bits < 0, bits ^ np.int32(0x7FFFFFFF), bits)  # IEEE total order
    idx = np.argsort(~total, axis=-1, kind="stable")[:, :k].astype(np.int32)
    return np.take_along_axis(x, idx, -1), idx


# One device: collectives over a one-device group return their operands;
# ids are 0; tokens are placeholders.
COLLECTIVE_MLIR = """module @m {
func.func public @main(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>,
                                            tensor<4xf32>, tensor<ui32>, tensor<ui32>, !stablehlo.token) {
  %0 = "stablehlo.all_reduce"(%x) ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = stablehlo.add %a, %b : tensor<f32>
      stablehlo.return %s : tensor<f32>
  }) {replica_groups = dense<[[0]]> : tensor<1x1xi64>} : (tensor<4xf32>) -> tensor<4xf32>
  %1 = "stablehlo.all_gather"(%x) {all_gather_dim = 0 : i64, replica_groups = dense<[[0]]> : tensor<1x1xi64>}
    : (tensor<4xf32>) -> tensor<4xf32>
  %2 = "stablehlo.reduce_scatter"(%x) ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = stablehlo.add %a, %b : tensor<f32>
      stablehlo.return %s : tensor<f32>
  }) {scatter_dimension = 0 : i64, replica_groups = dense<[[0]]> : tensor<1x1xi64>} : (tensor<4xf32>) -> tensor<4xf32>
  %3 = "stablehlo.all_to_all"(%x) {split_dimension = 0 : i64, concat_dimension = 0 : i64, split_count = 1 : i64,
    replica_groups = dense<[[0]]> : tensor<1x1xi64>} : (tensor<4xf32>) -> tensor<4xf32>
  %4 = "stablehlo.collective_permute"(%x) {source_target_pairs = dense<[[0, 0]]> : tensor<1x2xi64>}
    : (tensor<4xf32>) -> tensor<4xf32>
  %6 = stablehlo.replica_id : tensor<ui32>
  %7 = stablehlo.partition_id : tensor<ui32>
  %t = stablehlo.create_token : !stablehlo.token
  %t2 = stablehlo.after_all %t, %t : !stablehlo.token
  return %0, %1, %2, %3, %4, %6, %7, %t2 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>,
    tensor<4xf32>, tensor<ui32>, tensor<ui32>, !stablehlo.token
}
}"""


def _max_pool(x):
    return lax.reduce_window(x, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")


def _sharded(x):
    mesh = jax.make_mesh((1,), ("x",), axis_types=(jax.sharding.AxisType.Auto,))
    return lax.with_sharding_constraint(x, jax.sharding.NamedSharding(mesh, jax.P("x"))) * 2


def _gspmd_sharded(x):
    old = jax.config.jax_use_shardy_partitioner
    jax.config.update("jax_use_shardy_partitioner", False)
    try:
        return jax.jit(_sharded)(x)
    finally:
        jax.config.update("jax_use_shardy_partitioner", old)


@jax.jit
def _helper(x):
    return jnp.sin(x) * 2


def _calls(x):
    # A non-inlined private function: stablehlo arrives with func.call.
    return jax.jit(_helper, inline=False)(x) + 1


def cases() -> list[Case]:
    ew = [
        Case("add/subtract/multiply/divide/remainder/power", lambda a, b: (
            a + b, a - b, a * b, a / b, lax.rem(a, b), lax.pow(jnp.abs(a), b)), (F32, G32), 2e-6),
        Case("integer divide/remainder (x/0, INT_MIN/-1)", lambda a, b: (lax.div(a, b), lax.rem(a, b)),
             (np.append(I32.ravel(), [np.iinfo(np.int32).min, 5]).astype(np.int32),
              np.append(J32.ravel(), [-1, 0]).astype(np.int32))),
        Case("maximum/minimum/atan2 (NaN, -0)", lambda a, b: (
            lax.max(a, b), lax.min(a, b), lax.atan2(a, b)), (EDGE, EDGE[::-1].copy()), 2e-6),
        Case("abs/negate/sign/floor/ceil/round (NaN, -0, inf)", lambda a: (
            lax.abs(a), -a, lax.sign(a), lax.floor(a), lax.ceil(a), lax.round(a),
            lax.round(a, lax.RoundingMethod.TO_NEAREST_EVEN), lax.is_finite(a)), (EDGE,)),
        Case("exp/expm1/log/log1p/logistic", lambda a: (
            lax.exp(a), lax.expm1(a), lax.log(jnp.abs(a)), lax.log1p(jnp.abs(a)),
            lax.logistic(a)), (F32,), 2e-6),
        Case("sin/cos/tan/tanh/sqrt/rsqrt/cbrt", lambda a: (
            lax.sin(a), lax.cos(a), lax.tan(a), lax.tanh(a), lax.sqrt(jnp.abs(a)),
            lax.rsqrt(jnp.abs(a)), lax.cbrt(a)), (F32,), 4e-6),
        Case("f64 transcendentals", lambda a: (lax.exp(a), lax.sin(a * 1e3), lax.cos(a)),
             (F64,), 1e-13, x64=True),
        Case("bf16/f16 arithmetic", lambda a, b: (a * b + a, jnp.tanh(b)), (BF16, F16), 1e-2),
        Case("and/or/xor/not/shifts (counts >= width)", lambda a, b: (
            a & b, a | b, a ^ b, ~a, lax.shift_left(a, b % 40), lax.shift_right_logical(a, b % 40),
            lax.shift_right_arithmetic(a, b % 40)), (I32, J32)),
        Case("popcnt/count_leading_zeros", lambda a: (lax.population_count(a), lax.clz(a)),
             (np.append(I32.ravel(), [0, -1, np.iinfo(np.int32).min]).astype(np.int32),)),
        Case("reduce_precision", lambda a: lax.reduce_precision(a, 5, 10), (F32 * 1e3,)),
        Case("complex/real/imag and complex arithmetic", lambda a, b: (
            lax.complex(a, b), lax.real(lax.complex(a, b) * 2), lax.imag(lax.complex(a, b)),
            jnp.exp(lax.complex(a, b)) / lax.complex(b, a)), (F32, G32), 1e-5),
        Case("compare and select", lambda a, b: (
            a < b, a == b, a >= b, a != b, lax.select(a > b, a, b)), (EDGE, EDGE[::-1].copy())),
        Case("clamp", lambda a: lax.clamp(-1.0, a, 1.0), (EDGE,)),
        Case("convert (saturating float->int, NaN->0)", lambda a: (
            a.astype(jnp.int32), a.astype(jnp.uint8), a.astype(jnp.bfloat16), a.astype(bool)),
            (EDGE,)),
        Case("bitcast_convert between widths", lambda a: (
            lax.bitcast_convert_type(a, jnp.uint8), lax.bitcast_convert_type(a, jnp.int32)),
            (F32,)),
    ]
    data = [
        Case("broadcast_in_dim/reshape/transpose/slice/concatenate/reverse/iota", lambda a: (
            jnp.broadcast_to(a[:, None, :], (4, 2, 6)), a.reshape(6, 4).T, a[1:3, ::2],
            jnp.concatenate([a, a[:1]]), a[::-1], lax.iota(jnp.int32, 7) + a.shape[0]), (F32,)),
        Case("pad (negative and interior)", lambda a: lax.pad(a, 0.5, ((1, -1, 1), (-2, 3, 0))),
             (F32,)),
        Case("dynamic_slice/dynamic_update_slice (clamped)", lambda a, i: (
            lax.dynamic_slice(a, (i, i), (2, 3)), lax.dynamic_update_slice(a, a[:2, :2], (i, -i))),
            (F32, np.int32(5))),
        Case("gather (clamped)", lambda a, i: a[i[:, 0]], (F32, IDX)),
        Case("scatter set/add and a general body (repeats dropped out of range)", lambda a, i: (
            a.at[i[:, 0]].set(7.0, mode="drop"), a.at[i[:, 0]].add(1.0, mode="drop"),
            a.at[i[:, 0]].apply(lambda t: t * 2 - 1, mode="drop")), (F32, IDX)),
    ]
    contraction = [
        Case("dot_general (batch, f32)", lambda a, b: jnp.einsum("bij,bjk->bik", a, b),
             (F32.reshape(2, 2, 6), G32.reshape(2, 6, 2)), 1e-5),
        Case("dot_general (int, complex)", lambda a, b, c: (a @ b.T, c @ c.T),
             (I32, J32, C64), 1e-5),
        Case("dot (hand-written StableHLO)", None, (F32[:3, :4].copy(), G32[:4, :2].copy()), 1e-5,
             mlir=DOT_MLIR),
        Case("convolution (strides, dilation, groups)", lambda x, w: lax.conv_general_dilated(
            x, w, (2, 1), "SAME", rhs_dilation=(1, 2), dimension_numbers=("NHWC", "HWIO", "NHWC")),
            (IMG, KER), 1e-4),
    ]
    reduce = [
        Case("reduce (sum, max, general body)", lambda a: (
            a.sum(0), a.max(1), lax.reduce(a, 0.0, lambda x, y: jnp.maximum(jnp.abs(x), jnp.abs(y)),
                                          (1,))), (F32,), 1e-6),
        Case("reduce (argmax/argmin: 2-operand)", lambda a: (jnp.argmax(a, 1), jnp.argmin(a, 0)),
             (np.append(EDGE, EDGE).reshape(2, 8),)),
        Case("reduce_window (pooling, cumsum, cumlogsumexp)", lambda x: (
            _max_pool(x), jnp.cumsum(x, axis=1), lax.cumlogsumexp(x, axis=2)), (IMG,), 1e-5),
        Case("select_and_scatter (max-pool gradient)", lambda x: jax.grad(
            lambda v: _max_pool(v).sum())(x), (IMG,)),
        Case("sort (multi-operand, descending), top_k composite", lambda a: (
            lax.sort((a, -a), num_keys=1), jnp.sort(a, descending=True), lax.top_k(a, 3)),
            (EDGE.reshape(2, 4),)),
        Case("custom_call @mhlo.topk (jaxlib <= 0.9.2's top_k)", None, (TOPK_ROWS,),
             mlir=MHLO_TOPK_MLIR, numpy_oracle=_topk_oracle),
        Case("custom_call @mhlo.erf/acos/asin/atanh/sinh/cosh/acosh (jaxlib <= 0.9.0's CHLO)",
             None, (CHLO_X, CHLO_Y), rtol=1e-6, mlir=MHLO_CHLO_MLIR, numpy_oracle=_mhlo_chlo_oracle),
        Case("custom_call @ApproxTopK (approx_max_k, approx_min_k over dim 0)", lambda a: (
            lax.approx_max_k(a, 2), lax.approx_min_k(a, 3, reduction_dimension=0)), (F32,)),
    ]
    # Decompositions are unique up to vector signs/phases (and eig's order),
    # so these compare what is not: eigen/singular values and reconstructions.
    eig = [
        Case("custom_call @pjrtx_eigh (eigenvalues, V diag(w) V^T)", lambda a: (
            lambda w, v: (w, (v * w) @ v.T))(*jnp.linalg.eigh(a + a.T)), (SQ,), 1e-4),
        Case("custom_call @pjrtx_svd (s, U S Vt, compute_uv=False)", lambda a: (
            lambda u, s, vt: (s, (u * s) @ vt[:4], jnp.linalg.svd(a, compute_uv=False)))(
                *jnp.linalg.svd(a)), (F32,), 1e-4),
        Case("custom_call @pjrtx_eig (sorted eigenvalues, residuals)", lambda a: (
            lambda w, vl, vr: (jnp.sort(w), a @ vr - vr * w, vl.conj().T @ a - w[:, None] * vl.conj().T))(
                *lax.linalg.eig(a, compute_left_eigenvectors=True)), (SQ,), 1e-4),
        Case("custom_call @pjrtx_schur (Z T Z^T, Z^T Z)", lambda a: (
            lambda t, z: (z @ t @ z.T, z.T @ z))(*lax.linalg.schur(a)), (SQ,), 1e-4),
        Case("custom_call @pjrtx_hessenberg, @pjrtx_tridiagonal (LAPACK-packed)", lambda a: (
            lax.linalg.hessenberg(a), lax.linalg.tridiagonal(a, lower=False)), (SQ,), 1e-4),
    ]
    misc = [
        Case("while/case/if", lambda a: (
            lax.fori_loop(0, 5, lambda i, v: v * 1.5 + i, a),
            lax.switch(jnp.int32(2), [jnp.sin, jnp.cos, jnp.tanh], a),
            lax.cond(a.sum() > 0, jnp.exp, jnp.negative, a)), (F32,), 2e-6),
        # Each bin is within 2 eps log2(4N) sum|x| of the exact DFT per
        # implementation: sum|x| over 24 N(0,1) values is ~19, so about 6e-5.
        Case("fft (FFT, IFFT, RFFT, IRFFT over 1-2 axes)", lambda c, a: (
            jnp.fft.fft(c), jnp.fft.ifft2(c), jnp.fft.rfft2(a), jnp.fft.irfft(c, n=9)),
            (C64, F32), 1e-4),
        Case("optimization_barrier", lambda a: lax.optimization_barrier((a, a * 2)), (F32,)),
        Case("func.call (non-inlined jit)", _calls, (F32,), 2e-6),
        Case("rng_bit_generator (THREE_FRY, PHILOX)", lambda k: (
            lax.rng_bit_generator(k, (3, 5), algorithm=lax.RandomAlgorithm.RNG_THREE_FRY),
            lax.rng_bit_generator(k, (4,), jnp.uint8, algorithm=lax.RandomAlgorithm.RNG_PHILOX)),
            (np.array([1, 2, 3, 4], np.uint32),)),
        Case("jax.random (threefry)", lambda k: jax.random.normal(jax.random.wrap_key_data(k), (5,)),
             (np.array([0, 42], np.uint32),), 1e-6),
        Case("sdy.sharding_constraint", jax.jit(_sharded), (F32,), numpy_oracle=lambda x: x * 2),
        Case("custom_call @Sharding (GSPMD)", _gspmd_sharded, (F32,), numpy_oracle=lambda x: x * 2),
        Case("if, logistic (hand-written StableHLO)", None, (np.bool_(False), EDGE[:4].copy()),
             2e-6, mlir=MISC_MLIR),
        Case("collectives, ids, tokens on one device (hand-written StableHLO)", None, (EDGE[:4].copy(),),
             mlir=COLLECTIVE_MLIR),
        Case("custom_call identity targets, dce_sink (hand-written StableHLO)", None,
             (EDGE[:4].copy(),), mlir=IDENTITY_TARGETS_MLIR, numpy_oracle=lambda x: (x,) * 7),
        Case("async_start/async_done (all_gather), custom_call @control_dep (hand-written StableHLO)",
             None, (EDGE[:4].copy(),), mlir=ASYNC_CONTROL_DEP_MLIR,
             numpy_oracle=lambda x: (x, x + x * x)),
        Case("sdy.reshard, collective_broadcast (hand-written StableHLO)", None, (EDGE[:4].copy(),),
             mlir=RESHARD_MLIR, numpy_oracle=lambda x: (x, x)),
        Case("custom_call @pjrtx_callback (pure_callback, ordered io_callback in a loop)",
             _host_callbacks, (F32,)),
    ]
    # Factorizations of a 4x4 matrix with condition number about 10: the
    # two sides round differently (blocked LAPACK vs unblocked loops), within
    # about 2 cond n gamma_n ~ 2e-5 relative (Higham chs. 8-10, 19).
    spd = (F32 @ F32.T + 6 * np.eye(4)).astype(np.float32)
    sq = (F32[:, :4] + 4 * np.eye(4)).astype(np.float32)
    linalg = [
        Case("cholesky, triangular_solve (left/right, transposes)", lambda s, a, b: (
            jnp.linalg.cholesky(s),
            lax.linalg.triangular_solve(a, b, left_side=True, lower=True),
            lax.linalg.triangular_solve(a, b.T, left_side=False, lower=False, transpose_a=True)),
            (spd, sq, G32[:, :3].copy()), 2e-5),
        Case("custom_call @Qr, @ProductOfElementaryHouseholderReflectors (qr)",
             lambda a: jnp.linalg.qr(a, mode="complete"), (F32.T.copy(),), 2e-5),
        # Columns scaled 1:3:2:4 so that each pivot wins by a wide margin.
        Case("custom_call @pjrtx_geqp3 (scipy qr, pivoting=True)",
             lambda a: jax.scipy.linalg.qr(a, pivoting=True),
             ((F32.T * np.array([1, 3, 2, 4])).astype(np.float32),), 2e-5),
        Case("custom_call @LuDecomposition (lu, solve, det)", lambda a, b: (
            lax.linalg.lu(a), jnp.linalg.solve(a, b), jnp.linalg.det(a)),
            (sq, G32[:, :3].copy()), 2e-5),
        # Diagonally dominant (|d| >= 4 > |dl| + |du| mostly): cond about 3.
        Case("custom_call @pjrtx_tridiagonal_solve (plain, perturb_singular)", lambda dl, d, du, b: (
            lax.linalg.tridiagonal_solve(dl, d, du, b),
            lax.linalg.tridiagonal_solve(dl, d, du, b, perturb_singular=True)),
            (F32[0].copy(), (4 + np.abs(G32[0])).astype(np.float32), F32[1].copy(), G32[:2].T.copy()),
            2e-5),
    ]
    return ew + data + contraction + reduce + misc + linalg + eig


def _host_callbacks(a):
    from jax.experimental import io_callback
    y = jax.pure_callback(np.sin, jax.ShapeDtypeStruct(a.shape, a.dtype), a)
    # An ordered callback with a result, inside a loop: tokens and effects.
    return lax.fori_loop(0, 3, lambda i, v: io_callback(
        lambda t: t * 2 - 1, jax.ShapeDtypeStruct(a.shape, a.dtype), v, ordered=True), y)


def run_case(c: Case, device) -> list[np.ndarray]:
    import contextlib
    ctx = jax.enable_x64(True) if c.x64 else contextlib.nullcontext()
    with ctx:
        if c.numpy_oracle is not None and device.platform == "cpu":
            out = c.numpy_oracle(*c.args)
            return [np.asarray(o) for o in (out if isinstance(out, tuple) else (out,))]
        if c.mlir is not None:
            sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
            from oracle import run_mlir_on
            return run_mlir_on(device, c.mlir, *c.args)
        if c.numpy_oracle is not None:
            return [np.asarray(c.fn(*c.args))]
        placed = jax.device_put(c.args, device)
        out = jax.jit(c.fn)(*placed)
        return [np.asarray(o) for o in jax.tree_util.tree_leaves(out)]


def compare(got: list[np.ndarray], want: list[np.ndarray], rtol: float) -> tuple[bool, float]:
    if len(got) != len(want):
        return False, float("inf")
    ok, worst = True, 0.0
    for g, w in zip(got, want):
        if g.dtype != w.dtype or g.shape != w.shape:
            return False, float("inf")
        if g.dtype.kind in "biu":
            same = np.array_equal(g, w)
            ok &= same
            err = 0.0 if same else float(np.max(np.abs(g.astype(np.float64) - w.astype(np.float64))))
        else:
            wide = np.complex128 if g.dtype.kind == "c" else np.float64
            gw, ww = g.astype(wide), w.astype(wide)
            ok &= np.allclose(gw, ww, rtol=rtol, atol=rtol, equal_nan=True)
            # inf - inf is NaN: compare the matching infinities as equal
            with np.errstate(invalid="ignore"):
                diff = np.where(gw == ww, 0, np.abs(gw - ww))
            diff = diff[~np.isnan(diff)]
            err = float(diff.max()) if diff.size else 0.0
        worst = max(worst, err)
    return bool(ok), worst


def run_suite(verbose: bool = True) -> list[tuple[Case, bool, float, str]]:
    pjrtx, cpu = jax.devices("pjrtx")[0], jax.devices("cpu")[0]
    rows = []
    for c in cases():
        try:
            ok, err = compare(run_case(c, pjrtx), run_case(c, cpu), c.rtol)
            note = ""
        except Exception as e:  # a failure to compile or run is a failed row
            ok, err, note = False, float("nan"), f"{type(e).__name__}: {str(e).splitlines()[0][:100]}"
        rows.append((c, ok, err, note))
        if verbose:
            print(f"{c.op[:62]:<62} {c.dtype:<10} {err:>10.3g}  {'pass' if ok else 'FAIL'}  {note}",
                  flush=True)
    return rows


def main() -> int:
    print(f"jax {jax.__version__}; pjrtx on {jax.devices('pjrtx')[0].device_kind!r}, oracle XLA:CPU\n")
    print(f"{'op':<62} {'dtype':<10} {'max error':>10}  result")
    rows = run_suite()
    failed = sum(not ok for _, ok, _, _ in rows)
    print(f"\n{len(rows) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
