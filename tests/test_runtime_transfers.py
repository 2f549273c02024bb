"""Host <-> device transfers: every dtype, scalars, zero-size arrays, strided
host views, large arrays, and jit outputs that MLX holds as lazy views."""
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from oracle import assert_same

DTYPES = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
          np.uint64, np.float16, ml_dtypes.bfloat16, np.float32, np.float64, np.complex64]
IDS = [np.dtype(d).name for d in DTYPES]


@pytest.fixture
def x64():
    # 64-bit types stay 64-bit only with x64 on; restore whatever was set.
    with jax.enable_x64(True):
        yield


def sample(dtype, shape):
    """Distinct values with the dtype's edges (min/max, -0, inf, nan)."""
    dt = np.dtype(dtype)
    n = int(np.prod(shape))
    if dt == np.bool_:
        flat = np.arange(n) % 3 == 1
    elif dt.kind in "iu":
        info = np.iinfo(dt)
        flat = (np.arange(n, dtype=np.int64) * 37 % 251).astype(dt)
        edges = np.array([info.min, info.max, 0, 1], dtype=dt)[:n]
        flat[:edges.size] = edges
    elif dt.kind == "c":
        flat = (np.arange(n) * 0.25 - 3 + 1j * (np.arange(n)[::-1] * 0.5)).astype(dt)
        edges = np.array([complex(np.inf, -np.inf), complex(-0.0, np.nan)], dtype=dt)[:n]
        flat[:edges.size] = edges
    else:
        flat = (np.arange(n) * 0.375 - 5).astype(dt)
        edges = np.array([np.inf, -np.inf, np.nan, -0.0], dtype=dt)[:n]
        flat[:edges.size] = edges
    return flat.reshape(shape)


def check_round_trip(host, device):
    got = np.asarray(jax.device_put(host, device))
    assert got.dtype == host.dtype, (got.dtype, host.dtype)
    assert got.shape == host.shape
    # Byte-exact: NaN payloads and -0.0 must survive a transfer.
    np.testing.assert_array_equal(np.ascontiguousarray(got).view(np.uint8),
                                  np.ascontiguousarray(host).view(np.uint8))


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_round_trip_every_dtype(dtype, pjrtx_device, x64):
    for shape in [(), (1,), (7,), (2, 3, 4)]:
        check_round_trip(sample(dtype, shape), pjrtx_device)


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_zero_size(dtype, pjrtx_device, x64):
    for shape in [(0,), (3, 0, 2), (0, 0)]:
        check_round_trip(np.zeros(shape, dtype), pjrtx_device)
        # and as a jit output (an MLX array with no data)
        out = np.asarray(jax.jit(lambda a: a)(jax.device_put(np.zeros(shape, dtype), pjrtx_device)))
        assert out.shape == shape and out.dtype == np.dtype(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_strided_host_views(dtype, pjrtx_device, x64):
    base = sample(dtype, (4, 6, 5))
    views = {
        "every_other": base[:, ::2],
        "transpose": base.T,
        "negative": base[::-1],
        "negative_inner": base[:, :, ::-1],
        "broadcast": np.broadcast_to(base[:1, :1], (3, 6, 5)),
        "broadcast_row": np.broadcast_to(base[0, 0], (4, 5)),
        "fortran": np.asfortranarray(base),
        "slice": base[1:3, 2:5, 1:4],
    }
    for name, v in views.items():
        assert not v.flags.c_contiguous, name  # the strided path is what is tested
        got = np.asarray(jax.device_put(v, pjrtx_device))
        assert got.shape == v.shape and got.dtype == v.dtype, name
        np.testing.assert_array_equal(got.view(np.uint8), np.ascontiguousarray(v).view(np.uint8),
                                      err_msg=name)


def test_strided_view_as_jit_argument(pjrtx_device):
    base = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    for v in [base[:, ::2], base.T, base[::-1, :, ::-2], np.broadcast_to(base[:, :1], (3, 4, 5))]:
        assert_same(lambda a: a * 2 + 1, v)


def test_large_array(pjrtx_device):
    host = np.random.default_rng(1).standard_normal(1 << 20).astype(np.float32)
    x = jax.device_put(host, pjrtx_device)
    np.testing.assert_array_equal(np.asarray(x), host)
    y = jax.jit(lambda a: a[::-1] * 2)(x)
    np.testing.assert_array_equal(np.asarray(y), host[::-1] * 2)
    strided = np.random.default_rng(2).standard_normal((1024, 2048)).astype(np.float32)[:, ::2]
    np.testing.assert_array_equal(np.asarray(jax.device_put(strided, pjrtx_device)), strided)


def test_python_scalars_and_0d(pjrtx_device, x64):
    for v in [True, 3, -2.5, np.complex64(1 + 2j), np.float16(1.5), np.int8(-128),
              np.uint64(2 ** 64 - 1)]:
        got = np.asarray(jax.device_put(v, pjrtx_device))
        want = np.asarray(jax.device_put(v, jax.devices("cpu")[0]))
        assert got.dtype == want.dtype and got.shape == ()
        assert got == want


# ---- jit outputs that MLX keeps as views ------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.int64, ml_dtypes.bfloat16, np.complex64,
                                   np.bool_, np.uint8], ids=lambda d: np.dtype(d).name)
def test_view_outputs(dtype, x64):
    a = sample(dtype, (3, 4, 5))
    cases = {
        "transpose": lambda a: a.T,
        "transpose_102": lambda a: jnp.transpose(a, (1, 0, 2)),
        "broadcast": lambda a: jnp.broadcast_to(a[:, :1], (3, 4, 5)),
        "broadcast_new_axis": lambda a: jnp.broadcast_to(a[0, 0], (2, 3, 5)),
        "slice_step": lambda a: a[::2, 1::2, ::-1],
        "reverse": lambda a: a[::-1],
        "reshape_of_transpose": lambda a: a.T.reshape(20, 3),
        "several": lambda a: (a.T, a[1], jnp.broadcast_to(a[:1], (4, 4, 5))),
    }
    # One program returning every case: one compile per backend.
    assert_same(lambda a: {name: f(a) for name, f in cases.items()}, a)


def test_identity_jit_aliases_input(pjrtx_device):
    host = np.arange(12, dtype=np.float32).reshape(3, 4)
    x = jax.device_put(host, pjrtx_device)
    y = jax.jit(lambda a: a)(x)
    np.testing.assert_array_equal(np.asarray(y), host)
    # the output shares data with the input: deleting one leaves the other
    x.delete()
    np.testing.assert_array_equal(np.asarray(y), host)
    z = jax.jit(lambda a, b: (b, a, a))(y, jax.device_put(np.int32(7), pjrtx_device))
    y.delete()
    assert int(z[0]) == 7
    np.testing.assert_array_equal(np.asarray(z[1]), host)
    np.testing.assert_array_equal(np.asarray(z[2]), host)


def test_jit_output_reused_as_input_many_times(pjrtx_device):
    x = jax.device_put(np.arange(6, dtype=np.float32).reshape(2, 3), pjrtx_device)
    f = jax.jit(lambda a: a.T[::-1])
    want = np.arange(6, dtype=np.float32).reshape(2, 3)
    for _ in range(5):
        x, want = f(x), want.T[::-1]
    np.testing.assert_array_equal(np.asarray(x), want)


def test_copy_to_host_async(pjrtx_device):
    x = jax.jit(lambda a: a.T * 2)(jax.device_put(np.arange(6.0, dtype=np.float32).reshape(2, 3)))
    x.copy_to_host_async()
    np.testing.assert_array_equal(np.asarray(x), (np.arange(6.0).reshape(2, 3).T * 2))


def test_transfer_between_backends(pjrtx_device, cpu_device):
    host = sample(np.float32, (5, 3))
    x = jax.device_put(host, pjrtx_device)
    on_cpu = jax.device_put(x, cpu_device)
    assert on_cpu.devices() == {cpu_device}
    back = jax.device_put(on_cpu, pjrtx_device)
    np.testing.assert_array_equal(np.asarray(back).view(np.uint32), host.view(np.uint32))


def test_unsupported_element_type_is_refused_by_name(pjrtx_device, x64):
    # pjrtx has no 1-bit integers (s2/u2 and s4/u4 live one value per byte;
    # 1-bit ones it does not take); the error names the type instead of a
    # PJRT number. (jax 0.8.x refuses int1 arrays itself, by name, before
    # any backend sees them.)
    with pytest.raises(Exception, match=r"element type s1 is not supported|"
                                        r"int1 is not a valid JAX array type"):
        jax.device_put(np.ones(3, ml_dtypes.int1), pjrtx_device)


# ---- int4 / uint4 -------------------------------------------------------------------
# Host arrays hold one value per byte, in the low nibble (ml_dtypes stores s4
# -2 as 0x0e); XLA:CPU reads only that nibble and hands back a clear high
# nibble. MLX keeps s4 sign-extended, so both directions convert.

INT4S = [ml_dtypes.int4, ml_dtypes.uint4, ml_dtypes.int2, ml_dtypes.uint2]


def int4_host(dtype, shape, seed=0):
    n = int(np.prod(shape))
    flat = (np.arange(n) * 7 + seed) % 16  # every nibble once n >= 16
    return flat.astype(np.uint8).view(dtype).reshape(shape)


def check_int4_like_cpu(host, pjrtx_device, cpu_device):
    """Round trip, and the value as a jit input, must match XLA:CPU byte for byte."""
    for f in (lambda a: a, lambda a: a.astype(jnp.int32), lambda a: a.T + a.T):
        got = np.asarray(jax.jit(f)(jax.device_put(host, pjrtx_device)))
        want = np.asarray(jax.jit(f)(jax.device_put(host, cpu_device)))
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(np.ascontiguousarray(got).view(np.uint8),
                                      np.ascontiguousarray(want).view(np.uint8))
    np.testing.assert_array_equal(np.asarray(jax.device_put(host, pjrtx_device)), host)


@pytest.mark.parametrize("dtype", INT4S, ids=lambda d: np.dtype(d).name)
def test_int4_round_trip(dtype, pjrtx_device, cpu_device):
    for shape in [(), (1,), (5,), (7,), (16,), (2, 3, 5), (0,), (3, 0, 2)]:
        check_int4_like_cpu(int4_host(dtype, shape), pjrtx_device, cpu_device)
    # High nibbles set on the host: XLA:CPU reads 0xfe as s4 -2 / u4 14.
    dirty = (np.arange(32, dtype=np.uint8) * 0x1b + 0x80).view(dtype)
    check_int4_like_cpu(dirty, pjrtx_device, cpu_device)


@pytest.mark.parametrize("dtype", INT4S, ids=lambda d: np.dtype(d).name)
def test_int4_strided_host_views(dtype, pjrtx_device, cpu_device):
    base = int4_host(dtype, (4, 6, 5), seed=3)
    for v in [base[:, ::2], base.T, base[::-1], base[:, :, ::-1], np.asfortranarray(base),
              np.broadcast_to(base[:1, :1], (3, 6, 5)), base[1:3, 2:5, 1:4]]:
        check_int4_like_cpu(v, pjrtx_device, cpu_device)


def test_int4_python_scalars_and_transfer_to_cpu(pjrtx_device, cpu_device):
    for v in [ml_dtypes.int4(-8), ml_dtypes.int4(7), ml_dtypes.uint4(15)]:
        got = np.asarray(jax.device_put(v, pjrtx_device))
        want = np.asarray(jax.device_put(v, cpu_device))
        assert got.dtype == want.dtype and got.shape == () and got == want
    x = jax.jit(lambda a: -a)(jax.device_put(int4_host(ml_dtypes.int4, (3, 5)), pjrtx_device))
    np.testing.assert_array_equal(np.asarray(jax.device_put(x, cpu_device)).view(np.uint8),
                                  np.asarray(x).view(np.uint8))


def test_unsafe_buffer_pointer(pjrtx_device):
    x = jax.device_put(np.arange(6, dtype=np.float32), pjrtx_device)
    y = jnp.sin(x)
    px, py = x.unsafe_buffer_pointer(), y.unsafe_buffer_pointer()
    assert px and py and px != py and px == x.unsafe_buffer_pointer()
    assert jax.device_put(np.zeros(0, np.float32), pjrtx_device).unsafe_buffer_pointer() == 0
    # A broadcast result is a view in MLX: it gets one contiguous copy, and
    # then keeps its address.
    for b, want in [(jax.jit(lambda v: jnp.broadcast_to(v[:1], (3, 4)))(x), np.zeros((3, 4))),
                    (jnp.ones(10), np.ones(10))]:
        pb = b.unsafe_buffer_pointer()
        assert pb and pb == b.unsafe_buffer_pointer() and pb != px
        np.testing.assert_array_equal(np.asarray(b), want.astype(np.float32))
    if pjrtx_device.device_kind == "MLX CPU":
        # On the CPU back end the address is host memory holding the values.
        import ctypes
        got = np.ctypeslib.as_array((ctypes.c_float * 6).from_address(py))
        np.testing.assert_array_equal(got, np.asarray(y))


# ---- zero-copy reads (external references) --------------------------------
# On MLX's CPU device a buffer's storage is host memory in PJRT's dense
# layout, so jaxlib reads it in place: np.asarray, memoryview and the buffer
# protocol go through Buffer_IncreaseExternalReferenceCount /
# OpaqueDeviceMemoryDataPointer. XLA:CPU does the same; it is the oracle.

BUFFER_PROTOCOL_DTYPES = [np.bool_, np.int8, np.int16, np.int32, np.uint8, np.uint32,
                          np.float16, np.float32, np.complex64]


@pytest.mark.parametrize("dtype", BUFFER_PROTOCOL_DTYPES,
                         ids=[np.dtype(d).name for d in BUFFER_PROTOCOL_DTYPES])
def test_buffer_protocol_matches_xla_cpu(dtype, pjrtx_device, cpu_device):
    host = sample(dtype, (3, 5))
    got = memoryview(jax.device_put(host, pjrtx_device))
    want = memoryview(jax.device_put(host, cpu_device))
    assert (got.format, got.shape, got.strides, got.readonly) == \
        (want.format, want.shape, want.strides, want.readonly)
    assert got.tobytes() == want.tobytes() == np.ascontiguousarray(host).tobytes()


def test_buffer_protocol_of_a_jit_view(pjrtx_device, cpu_device):
    # A transpose result MLX holds as a strided view: the reader must see
    # the row-major values.
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    got = jax.jit(lambda a: a.T[1:, ::2])(jax.device_put(x, pjrtx_device))
    want = jax.jit(lambda a: a.T[1:, ::2])(jax.device_put(x, cpu_device))
    assert memoryview(got).tobytes() == memoryview(want).tobytes()


def test_buffer_protocol_bfloat16_is_refused_like_xla_cpu(pjrtx_device, cpu_device):
    host = np.ones(3, ml_dtypes.bfloat16)
    for dev in (pjrtx_device, cpu_device):
        with pytest.raises(BufferError, match="BF16"):
            memoryview(jax.device_put(host, dev))


def test_numpy_view_outlives_delete(pjrtx_device):
    host = np.arange(1000, dtype=np.int32) * 3
    x = jax.jit(lambda a: a + 1)(jax.device_put(host, pjrtx_device))
    view = np.asarray(x)
    mv = memoryview(x)
    x.delete()
    # The external references hold the storage: no use-after-free, and
    # later programs (which MLX may run in donated memory) do not write it.
    for _ in range(3):
        jax.block_until_ready(jax.jit(lambda a: a * 5)(jax.device_put(host, pjrtx_device)))
    np.testing.assert_array_equal(view, host + 1)
    np.testing.assert_array_equal(np.frombuffer(mv.tobytes(), np.int32), host + 1)


def test_buffer_protocol_of_deleted_array_is_an_error(pjrtx_device, cpu_device):
    errors = []
    for dev in (pjrtx_device, cpu_device):
        x = jax.device_put(np.ones(4, np.float32), dev)
        x.delete()
        with pytest.raises(Exception) as e:
            memoryview(x)
        errors.append((type(e.value), str(e.value)))
    assert errors[0] == errors[1]


def test_int4_reads_keep_the_host_nibble(pjrtx_device, cpu_device):
    # s4 storage in MLX is sign-extended, so these buffers are not read in
    # place: the copy path hands back XLA:CPU's bytes.
    host = np.array([-8, -2, 0, 1, 7], ml_dtypes.int4)
    got = np.asarray(jax.device_put(host, pjrtx_device))
    want = np.asarray(jax.device_put(host, cpu_device))
    assert got.tobytes() == want.tobytes()
