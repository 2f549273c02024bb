"""DLPack export of pjrtx arrays (pjrtx/jax_plugin.py, _enable_dlpack).

jaxlib exports DLPack only for cpu/cuda/rocm devices; pjrtx exports its
arrays as read-only kDLCPU tensors. The oracle is the same values on
XLA:CPU, which exports through jaxlib's own path."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pjrtx.conformance.pytest_plugin import device_class

DTYPES = [np.bool_, np.int8, np.uint16, np.int32, np.float16, np.float32, np.complex64]
SHAPES = [(), (5,), (3, 4), (2, 0, 3)]


def _values(dtype, shape):
    n = int(np.prod(shape))
    flat = (np.arange(n) * 7 % 11 - 5).astype(np.float32)
    if np.dtype(dtype) == np.bool_:
        return (flat > 0).reshape(shape)
    if np.dtype(dtype).kind == "u":
        flat = np.abs(flat)
    out = flat.astype(dtype).reshape(shape)
    if np.dtype(dtype).kind == "c":
        out = out + 1j * out[::-1].reshape(shape) if out.ndim else out + 2j
    return out.astype(dtype)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_numpy_from_dlpack_equals_xla_cpu(pjrtx_device, cpu_device, dtype, shape):
    host = _values(dtype, shape)
    ours = jax.device_put(host, pjrtx_device)
    theirs = jax.device_put(host, cpu_device)
    got = np.from_dlpack(ours)
    want = np.from_dlpack(theirs)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_device_is_cpu_and_result_of_jit_exports(pjrtx_device):
    f = jax.jit(lambda a: jnp.sin(a) * 2 + 1, device=pjrtx_device)
    x = jnp.linspace(-3, 3, 12, dtype=jnp.float32).reshape(3, 4)
    y = f(x)
    assert y.__dlpack_device__()[1] == 0
    assert int(y.__dlpack_device__()[0]) == 1  # kDLCPU
    want = jax.jit(lambda a: jnp.sin(a) * 2 + 1, device=jax.devices("cpu")[0])(
        jax.device_put(np.asarray(x), jax.devices("cpu")[0]))
    got = np.from_dlpack(y)
    # The export is the array itself, bit for bit ...
    np.testing.assert_array_equal(got, np.asarray(y))
    # ... and the array is XLA:CPU's up to sin's rounding (a few ulp of |sin| <= 1,
    # doubled, plus the rounding of the result near 3).
    eps = float(np.finfo(np.float32).eps)
    np.testing.assert_allclose(got, np.asarray(want), rtol=0, atol=4 * eps * 2 + 2 * eps * 3)


@pytest.mark.skipif(device_class() != "cpu",
                    reason="hardware: zero-copy export needs the buffer in host memory "
                           "(MLX's CPU device); Metal and CUDA buffers are copied")
def test_export_is_zero_copy_and_read_only(pjrtx_device):
    x = jax.device_put(np.arange(16, dtype=np.float32), pjrtx_device)
    view = np.from_dlpack(x)
    assert view.ctypes.data == x.unsafe_buffer_pointer()
    assert not view.flags.writeable
    with pytest.raises(ValueError):
        view[0] = 1.0
    del x  # the capsule keeps the storage alive
    np.testing.assert_array_equal(view, np.arange(16, dtype=np.float32))


def test_copy_true_gives_a_writable_copy(pjrtx_device):
    x = jax.device_put(np.arange(6, dtype=np.int32), pjrtx_device)
    c = np.from_dlpack(x, copy=True)
    assert c.flags.writeable
    c[0] = 100
    np.testing.assert_array_equal(np.asarray(x), np.arange(6, dtype=np.int32))


def test_legacy_capsule_copies_or_refuses(pjrtx_device):
    # A consumer that names no max_version gets a DLPack 0.x capsule, which
    # cannot say read-only: a copy, or BufferError when copy=False.
    x = jax.device_put(np.arange(4, dtype=np.float32), pjrtx_device)
    capsule = x.__dlpack__()
    assert type(capsule).__name__ == "PyCapsule"
    with pytest.raises(BufferError, match="read-only"):
        x.__dlpack__(copy=False)


def test_bad_device_and_stream_are_refused(pjrtx_device):
    x = jax.device_put(np.ones(3, np.float32), pjrtx_device)
    with pytest.raises(BufferError, match="kDLCPU"):
        x.__dlpack__(max_version=(1, 0), dl_device=(2, 0))  # kDLCUDA
    with pytest.raises(BufferError, match="stream"):
        x.__dlpack__(max_version=(1, 0), stream=7)


def test_jax_from_dlpack_round_trip_stays_on_device(pjrtx_device, cpu_device):
    x = jax.device_put(np.arange(5, dtype=np.float32), pjrtx_device)
    y = jax.dlpack.from_dlpack(x)
    assert y.devices() == {pjrtx_device}
    np.testing.assert_array_equal(np.asarray(y), np.arange(5, dtype=np.float32))
    z = jnp.from_dlpack(x, copy=True)
    assert z.devices() == {pjrtx_device} and z is not x
    w = jnp.from_dlpack(x, device=cpu_device)
    assert w.devices() == {cpu_device}
    np.testing.assert_array_equal(np.asarray(w), np.arange(5, dtype=np.float32))
    with pytest.raises(ValueError, match="copy=False"):
        jnp.from_dlpack(x, device=cpu_device, copy=False)


def test_numpy_into_pjrtx_through_dlpack(pjrtx_device):
    host = np.arange(12, dtype=np.float32).reshape(3, 4)
    y = jnp.from_dlpack(host, device=pjrtx_device)
    assert y.devices() == {pjrtx_device}
    np.testing.assert_array_equal(np.asarray(y), host)
