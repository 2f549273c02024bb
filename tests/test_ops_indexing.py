"""dynamic_slice, dynamic_update_slice, gather, scatter and pad against
XLA:CPU. MLX does no bounds checks, so out-of-range indices of every integer
type are the point: clamped starts (slice, gather), dropped windows
(scatter), and never a crash."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from oracle import assert_same, assert_same_mlir, primitives_per_call, run_on

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


@pytest.mark.parametrize("p", [0, 2, 5, -3, 1000])
def test_dynamic_slice_constant_and_mixed_starts(p):
    # Starts that are plan constants are clamped at compile time (a static
    # slice, or only the runtime starts in MLX's index array); out-of-range
    # constants clamp as XLA does, and so do runtime ones beside them.
    x = np.arange(5 * 6 * 7, dtype=np.float32).reshape(5, 6, 7)
    u = -np.ones((2, 3, 4), np.float32)
    i = np.int32(p)
    assert_same(lambda x, i: dict(
        const=lax.dynamic_slice(x, (1, 2, 3), (2, 3, 4)),
        const_clamped=lax.dynamic_slice(x, (4, -2, 100), (2, 3, 4)),
        mixed=lax.dynamic_slice(x, (0, i, 3), (2, 3, 4)),
        mixed_zeros=lax.dynamic_slice(x, (0, i, 0), (2, 3, 4)),
        two_runtime=lax.dynamic_slice(x, (i, i * 2, 1), (2, 3, 4))), x, i)
    assert_same(lambda x, u, i: dict(
        const=lax.dynamic_update_slice(x, u, (1, 2, 3)),
        const_clamped=lax.dynamic_update_slice(x, u, (9, -1, 5)),
        mixed=lax.dynamic_update_slice(x, u, (0, i, 3)),
        mixed_zeros=lax.dynamic_update_slice(x, u, (0, i, 0))), x, u, i)


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


@pytest.mark.parametrize("op", ["set", "add", "sub", "mul", "max", "min"])
@pytest.mark.parametrize("windows", [1, 3])
def test_dropped_windows_leave_nan_and_signed_zero_bits(op, windows):
    # A dropped window writes nothing: with one window the update writes the
    # covered values back, with several an add of -0 or a multiply by 1
    # (no padded copy of the operand). Bits must match XLA:CPU, so -0.0 and
    # NaN payloads in the operand must survive.
    x = X.copy()
    x[0, :3] = -0.0
    x[3, 4:] = np.nan
    x[2, 0] = np.inf
    dn = lax.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,),
                                     scatter_dims_to_operand_dims=(0, 1))
    fn = {"set": lax.scatter, "add": lax.scatter_add, "sub": lax.scatter_sub,
          "mul": lax.scatter_mul, "max": lax.scatter_max, "min": lax.scatter_min}[op]
    # windows of 3 columns; [0, 4] and [3, 5] do not fit, [2, -1] neither
    for starts in ([[0, 4]], [[3, 5]], [[2, -1]], [[0, 0]], [[3, 3]]) if windows == 1 else (
            [[0, 4], [1, 0], [3, 5]], [[2, -1], [0, 0], [3, 3]]):
        i = np.array(starts, np.int32)
        u = np.full((len(starts), 3), -2.5, np.float32)
        f = lambda x, i, u: fn(x, i, u, dn, unique_indices=op == "set")
        got = np.asarray(run_on(jax.devices("pjrtx")[0], f, x, i, u))
        want = np.asarray(run_on(jax.devices("cpu")[0], f, x, i, u))
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32), err_msg=str(starts))


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


# ---- scatter with general update bodies (applied in rounds) ----------------

DUP = np.array([3, 0, 3, 1, 3, -1, 7, 0], np.int32)  # repeats, and out of range
DROP = lax.GatherScatterMode.FILL_OR_DROP


def scatter_with_body(x, idx, v, dnums, body):
    """lax.scatter with an arbitrary update computation body(old, new)."""
    from jax._src.lax import lax as lax_internal
    from jax._src.lax import slicing
    jaxpr, consts = lax_internal._reduction_jaxpr(body, jax.typeof(lax_internal._zero(x)))
    return slicing.scatter_p.bind(x, idx, v, update_jaxpr=jaxpr, update_consts=consts,
                                  dimension_numbers=dnums, indices_are_sorted=False,
                                  unique_indices=False, mode=DROP)


def test_scatter_general_bodies_with_repeated_indices():
    v = np.arange(8, dtype=np.float32) + 1.5
    x = np.linspace(-2, 2, 6).astype(np.float32)
    dnums = lax.ScatterDimensionNumbers((), (0,), (0,))

    def f(x, i, v):
        idx = i[:, None]
        return dict(
            # .at[].apply: a unary body, applied once per repeat
            apply=x.at[i].apply(lambda t: t * 2 + 1, mode="drop"),
            # scatter_sub's subtract body (a fast path)
            sub=lax.scatter_sub(x, idx, v, dnums, mode=DROP),
            # non-commutative: the result depends on the update order
            ordered=scatter_with_body(x, idx, v, dnums, lambda a, b: 2 * a + b))

    got = assert_same(f, x, DUP, v, rtol=1e-6)
    assert got["apply"][3] == ((x[3] * 2 + 1) * 2 + 1) * 2 + 1  # three repeats


def test_scatter_general_body_windows_and_ints():
    # Overlapping 2-wide windows into rows, an int body with wrapping, and
    # a window that does not fit (dropped).
    x = np.arange(20, dtype=np.int8).reshape(4, 5) * 9
    u = (np.arange(12, dtype=np.int8).reshape(3, 2, 2) - 5) * 7
    idx = np.array([[0, 1], [1, 2], [3, 4]], np.int32)  # the last window hangs off
    dnums = lax.ScatterDimensionNumbers((1, 2), (), (0, 1))
    assert_same(lambda x, i, u: scatter_with_body(x, i, u, dnums, lambda a, b: a * 3 - b),
                x, idx, u)


VARIADIC_SCATTER = """module @m {
func.func public @main(%x: tensor<6xf32>, %n: tensor<6xi32>, %i: tensor<4x1xi32>,
                       %vx: tensor<4xf32>, %vn: tensor<4xi32>) -> (tensor<6xf32>, tensor<6xi32>) {
  %r:2 = "stablehlo.scatter"(%x, %n, %i, %vx, %vn) ({
    ^bb0(%a: tensor<f32>, %an: tensor<i32>, %b: tensor<f32>, %bn: tensor<i32>):
      %t = stablehlo.compare GT, %b, %a : (tensor<f32>, tensor<f32>) -> tensor<i1>
      %s = stablehlo.select %t, %b, %a : tensor<i1>, tensor<f32>
      %sn = stablehlo.select %t, %bn, %an : tensor<i1>, tensor<i32>
      stablehlo.return %s, %sn : tensor<f32>, tensor<i32>
  }) {scatter_dimension_numbers = #stablehlo.scatter<inserted_window_dims = [0],
      scatter_dims_to_operand_dims = [0], index_vector_dim = 1>}
    : (tensor<6xf32>, tensor<6xi32>, tensor<4x1xi32>, tensor<4xf32>, tensor<4xi32>)
      -> (tensor<6xf32>, tensor<6xi32>)
  return %r#0, %r#1 : tensor<6xf32>, tensor<6xi32>
}
}"""


def test_variadic_scatter():
    # Two operands updated together by one (value, index) body; JAX's own
    # scatter primitive has one operand, so this is hand-written StableHLO.
    assert_same_mlir(VARIADIC_SCATTER, np.arange(6, dtype=np.float32),
                     np.arange(6, dtype=np.int32) * 10, np.array([[1], [4], [1], [9]], np.int32),
                     np.array([5.0, -1.0, 7.0, 9.0], np.float32), np.array([1, 2, 3, 4], np.int32))


def test_scatter_without_index_dims():
    # An empty index vector: every update window starts at the origin (JAX
    # emits this for static full-slice updates); no MLX scatter axis exists.
    x = np.arange(12, dtype=np.int32).reshape(3, 4)
    u = np.full((2, 4), 5, np.int32)
    dn = lax.ScatterDimensionNumbers(update_window_dims=(0, 1), inserted_window_dims=(),
                                     scatter_dims_to_operand_dims=())
    none = np.zeros((0,), np.int32)
    assert_same(lambda x, i, u: (lax.scatter_min(x, i, u, dn), lax.scatter_add(x, i, u, dn),
                                 lax.scatter(x, i, u, dn)), x, none, u)


# take_along_axis: one indexed axis, every other dim a batching dim. pjrtx
# reads it with MLX's take_along_axis and writes its gradient (a scatter-add
# of the same form) with scatter_add_axis; clamping and dropping as XLA does.
AXIS_IDX = np.array([[0, 5, -1], [9, 2, -7], [3, 3, 3], [1, 0, 100]], np.int32)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.float16, np.complex64, np.bool_])
@pytest.mark.parametrize("mode", ["clip", "fill", None])
def test_take_along_axis(dtype, mode):
    x = (np.arange(4 * 6, dtype=np.float32).reshape(4, 6) % 5 - 2).astype(dtype)
    assert_same(lambda x, i: dict(
        axis1=jnp.take_along_axis(x, i, axis=1, mode=mode),
        axis0=jnp.take_along_axis(x.T, i.T % 4, axis=0, mode=mode),
        one_column=jnp.take_along_axis(x, i[:, :1], axis=1, mode=mode)), x, AXIS_IDX)


@pytest.mark.parametrize("itype", [np.int8, np.uint8, np.int32, np.uint32])
def test_take_along_axis_index_types_and_3d(itype):
    x = np.arange(2 * 3 * 5, dtype=np.float32).reshape(2, 3, 5)
    i = np.array([0, 4, 7, 200, 1, 2]).astype(itype)
    for axis, shape in [(0, (3, 3, 5)), (1, (2, 4, 5)), (2, (2, 3, 2))]:
        idx = np.resize(i, shape)
        assert_same(lambda x, i: jnp.take_along_axis(x, i, axis=axis, mode="clip"), x, idx)


def test_take_along_axis_gradient_drops_out_of_range():
    # The gradient scatters with mode fill: out-of-range indices add nothing.
    x = np.linspace(-2, 2, 24, dtype=np.float32).reshape(4, 6)
    w = np.arange(12, dtype=np.float32).reshape(4, 3) - 5
    g = jax.grad(lambda x, i: (jnp.take_along_axis(x, i, axis=1) * w).sum())
    assert_same(g, x, AXIS_IDX)
    # Repeated indices add equal terms 2x, so any order gives the same sum.
    assert_same(jax.grad(lambda x, i: (jnp.take_along_axis(x.T, i.T, axis=0) ** 2).sum()),
                x, AXIS_IDX % 6)


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.complex64])
def test_scatter_add_along_axis_keeps_the_operand_where_dropped(dtype):
    # Out-of-range updates are dropped: the operand keeps every bit there,
    # negative zeros and NaNs included, for add and for subtract.
    x = np.array([[-0.0, 1, np.nan, -0.0], [2, -0.0, 3, 0.0]], np.float32).astype(dtype) \
        if dtype != np.int32 else np.array([[0, 1, 5, -3], [2, 0, 3, 7]], np.int32)
    u = np.array([[1, 2, 3], [4, 5, 6]]).astype(dtype)
    i = np.array([[4, -1, 1], [9, 2, 2]], np.int32)
    dn = lax.ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(1,),
                                     scatter_dims_to_operand_dims=(1,), operand_batching_dims=(0,),
                                     scatter_indices_batching_dims=(0,))
    mode = lax.GatherScatterMode.FILL_OR_DROP

    def f(x, i, u):
        return dict(add=lax.scatter_add(x, i[..., None], u, dn, mode=mode),
                    sub=lax.scatter_sub(x, i[..., None], u, dn, mode=mode))

    got = assert_same(f, x, i, u)
    want = run_on(jax.devices("cpu")[0], f, x, i, u)
    for k in got:
        if np.dtype(dtype).kind in "fc":
            parts = (np.real, np.imag) if np.dtype(dtype).kind == "c" else (np.asarray,)
            for part in parts:
                np.testing.assert_array_equal(np.signbit(part(got[k])), np.signbit(part(want[k])))


@pytest.mark.parametrize("itype", [np.int8, np.int16, np.int32])
def test_out_of_range_checks_of_signed_indices(itype):
    # The bounds check of a signed index is one unsigned compare: negative
    # indices of every width must still count as out of range, and an int8
    # index into a dim longer than int8's range (300) is in range whenever
    # it is >= 0. Gather with mode fill, scatter-add with mode drop, and the
    # gradient of take_along_axis, against XLA:CPU.
    x = np.linspace(-3, 3, 2 * 300, dtype=np.float32).reshape(2, 300)
    info = np.iinfo(itype)
    i = np.array([[0, 127, -1, int(info.min), int(info.max), 5],
                  [299 if info.max >= 299 else 1, -128, 64, -2, 1, 300 if info.max >= 300 else 0]],
                 np.int64).astype(itype)
    dn = lax.ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(1,),
                                     scatter_dims_to_operand_dims=(1,), operand_batching_dims=(0,),
                                     scatter_indices_batching_dims=(0,))
    u = np.arange(12, dtype=np.float32).reshape(2, 6) + 1

    def f(x, i):
        return dict(
            fill=jnp.take_along_axis(x, i, axis=1, mode="fill"),
            drop=lax.scatter_add(x, i[..., None], u, dn, mode=lax.GatherScatterMode.FILL_OR_DROP),
            grad=jax.grad(lambda x: (jnp.take_along_axis(x, i, axis=1, mode="fill") * u).sum())(x))

    assert_same(f, x, i)


def test_take_along_axis_is_one_gather_primitive(monkeypatch):
    # One GatherAxis and the index clamp, where a general batched gather
    # needs an iota per batching dim, index slices and result views.
    monkeypatch.setenv("PJRTX_COMPILE", "never")  # count the eager graph
    dn = lax.GatherDimensionNumbers(offset_dims=(), collapsed_slice_dims=(1,), start_index_map=(1,),
                                    operand_batching_dims=(0,), start_indices_batching_dims=(0,))
    hist = primitives_per_call(lambda x, i: lax.gather(x, i[..., None], dn, (1, 1), mode="clip"),
                               np.ones((128, 10), np.float32), np.zeros((128, 1), np.int32))
    # The clamp's scalar bounds broadcast unless the segment is fused.
    assert hist.get("GatherAxis") == 1, hist
    assert set(hist) <= {"GatherAxis", "Minimum", "Maximum", "Broadcast"}, hist


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint8])
def test_one_dimensional_gather_and_scatter_add(dtype):
    # x[i] and x.at[i].add(u) on a vector are the same one-axis form, with
    # repeated, negative and out-of-range indices.
    x = np.arange(7).astype(dtype)
    i = np.array([0, 6, 2, 2, -1, 9, -9, 2], np.int32)
    u = np.arange(1, 9).astype(dtype)
    assert_same(lambda x, i, u: dict(get=x[i], clip=jnp.take(x, i, mode="clip"),
                                     add=x.at[i].add(u), drop=x.at[i].add(u, mode="drop"),
                                     sub=x.at[i % 7].subtract(u)), x, i, u)


def _set_scatter_cases():
    r = np.random.default_rng(7)
    x2 = r.standard_normal((5, 7)).astype(np.float32)
    dn_vec0 = lax.ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(0, 1),
                                          scatter_dims_to_operand_dims=(0, 1))
    dn_rows = lax.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,),
                                          scatter_dims_to_operand_dims=(0,))
    dn_cols_t = lax.ScatterDimensionNumbers(update_window_dims=(0,), inserted_window_dims=(1,),
                                            scatter_dims_to_operand_dims=(1,))
    return [
        ("1d", lambda x, i: x.at[i].set(-1.0), np.arange(10, dtype=np.float32), np.int32(3)),
        ("1d_negative", lambda x, i: x.at[i].set(-1.0), np.arange(10, dtype=np.float32), np.int32(-2)),
        ("1d_dropped", lambda x, i: x.at[i].set(-1.0, mode="drop"), np.arange(10, dtype=np.float32),
         np.int32(10)),
        ("row", lambda x, i: x.at[i].set(jnp.arange(7.0)), x2, np.int32(4)),
        ("col", lambda x, i: x.at[:, i].set(jnp.arange(5.0)), x2, np.int32(6)),
        ("element", lambda x, i: x.at[i, i + 1].set(9.0), x2, np.int32(2)),
        ("many_rows", lambda x, i: x.at[i].set(jnp.arange(21.0).reshape(3, 7)), x2,
         np.array([4, 0, 2], np.int32)),
        ("many_dropped", lambda x, i: x.at[i].set(jnp.arange(21.0).reshape(3, 7), mode="drop"), x2,
         np.array([4, 9, -9], np.int32)),
        ("uint8", lambda x, i: x.at[i].set(5.0, mode="drop"), x2, np.array([1, 200, 3], np.uint8)),
        ("int8_negative", lambda x, i: x.at[i].set(5.0, mode="drop"), x2, np.array([-1, 3], np.int8)),
        ("uint32_huge", lambda x, i: x.at[i].set(5.0, mode="drop"), x2,
         np.array([2, 2**32 - 1], np.uint32)),
        ("element_pairs", lambda x, i: lax.scatter(x, i, jnp.array([1.0, 2.0, 3.0]), dn_vec0,
                                                    unique_indices=True), x2,
         np.array([[0, 1], [4, 6], [2, 9]], np.int32)),
        ("rows_transposed_updates", lambda x, i: lax.scatter(x, i, jnp.arange(14.0).reshape(7, 2).T,
                                                             dn_rows, unique_indices=True), x2,
         np.array([[1], [3]], np.int32)),
        ("cols_window_first", lambda x, i: lax.scatter(x, i, jnp.arange(10.0).reshape(5, 2),
                                                       dn_cols_t, unique_indices=True), x2,
         np.array([[1], [6]], np.int32)),
        ("vmap_batching", jax.vmap(lambda x, i: x.at[i].set(-3.0)), x2, np.array([0, 6, 3, 2, -1], np.int32)),
        ("vmap_rows", jax.vmap(lambda x, i: x.at[i].set(jnp.full((7,), -4.0))),
         r.standard_normal((3, 4, 7)).astype(np.float32), np.array([0, 3, 5], np.int32)),
        ("float16", lambda x, i: x.at[i].set(2.5), x2.astype(np.float16), np.int32(1)),
        ("bool", lambda x, i: x.at[i].set(True), x2 > 0, np.int32(2)),
        ("int8", lambda x, i: x.at[i].set(-7), (x2 * 10).astype(np.int8), np.int32(3)),
        ("complex64", lambda x, i: x.at[i].set(1 - 2j), (x2 + 1j * x2).astype(np.complex64), np.int32(0)),
        ("fori_loop", lambda x, i: lax.fori_loop(0, 40, lambda k, x: x.at[(k * 3 + i) % 35 // 7, k % 7].set(
            x[k % 5, (k + 1) % 7] * 0.5 + 1.0), x), x2, np.int32(2)),
    ]


@pytest.mark.parametrize("case", _set_scatter_cases(), ids=lambda c: c[0])
def test_set_scatter_forms(case):
    # Set scatters run as one in-place node on MLX's CPU device: every
    # dimension-number form, index type, dropped window and update layout
    # must give XLA:CPU's bits.
    _, f, x, i = case
    got = np.asarray(run_on(jax.devices("pjrtx")[0], f, x, i))
    want = np.asarray(run_on(jax.devices("cpu")[0], f, x, i))
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
