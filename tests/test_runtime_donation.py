"""Buffer donation: jit(..., donate_argnums=...) hands the argument's memory
to the run. JAX emits the aliasing attributes only for platforms listed in
mlir._platforms_with_donation, which registration extends; the frontend reads
`tf.aliasing_output` / `jax.buffer_donor`, and execute deletes the donated
buffer and drops every handle so MLX can write an output in place."""
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pjrtx import _pjrtx
from oracle import assert_same


def test_registration_lists_pjrtx_for_donation():
    # Fails loudly if JAX renames or reshapes the list: donation would then
    # silently turn into a copy with a warning.
    from jax._src.interpreters import mlir

    assert isinstance(mlir._platforms_with_donation, list)
    assert "pjrtx" in mlir._platforms_with_donation


def _lowered_text(f, *args, **kw):
    dev = jax.devices("pjrtx")[0]
    placed = [jax.device_put(a, dev) for a in args]
    return jax.jit(f, **kw).lower(*placed).as_text()


def test_lowering_carries_aliasing_for_pjrtx():
    x = np.arange(6, dtype=np.float32)
    text = _lowered_text(lambda a: a + 1, x, donate_argnums=0)
    assert "tf.aliasing_output = 0" in text
    # An output of another type cannot alias: JAX marks a buffer donor.
    text = _lowered_text(lambda a, b: (a + b).astype(jnp.int32).reshape(2, 3) + 0, x, x,
                         donate_argnums=(0,))
    assert "jax.buffer_donor" in text or "tf.aliasing_output" in text


@pytest.mark.parametrize("platform", ["pjrtx", "cpu"])
def test_donated_argument_is_deleted_like_xla(platform):
    dev = jax.devices(platform)[0]
    x = jax.device_put(np.arange(8, dtype=np.float32), dev)
    keep = jax.device_put(np.ones(8, np.float32), dev)
    f = jax.jit(lambda a, b: (a * 2 + b, b - 1), donate_argnums=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "Some donated buffers were not usable"
        y, z = f(x, keep)
    np.testing.assert_array_equal(np.asarray(y), np.arange(8, dtype=np.float32) * 2 + 1)
    np.testing.assert_array_equal(np.asarray(z), np.zeros(8, np.float32))
    assert x.is_deleted()
    assert not keep.is_deleted()
    with pytest.raises(RuntimeError, match="donated|deleted"):
        np.asarray(x)
    # XLA:CPU fails the call with INVALID_ARGUMENT (a ValueError); jaxlib
    # 0.8.x spells it "Invalid buffer passed: buffer has been deleted or donated".
    with pytest.raises(ValueError, match="(?i)buffer has been deleted or donated"):
        f(x, keep)
    # Waiting on it fails too: jax 0.8.x asks the buffer for its ready event
    # (XLA's is an error, "BlockHostUntilReady() called on deleted or
    # donated buffer"); later releases refuse a deleted array first.
    with pytest.raises(RuntimeError, match="(?i)deleted"):
        x.block_until_ready()


def test_donation_results_match_xla():
    a = np.linspace(-3, 3, 24, dtype=np.float32).reshape(4, 6)
    b = np.linspace(1, 2, 6, dtype=np.float32)
    # Aliased outputs (same type), a donor whose type matches no output,
    # and a donated argument that also feeds a second output.
    # x * y + 1 rounds once or twice on XLA:CPU depending on its code for
    # the shape (an FMA for f32[5] or f32[64, 64] with a broadcast row, two
    # roundings for this f32[4, 6]); pjrtx rounds once (fma_contract.h):
    # the product's rounding (half an ulp of x * y) and the sum's (an ulp
    # of the result, either way) apart.
    p = np.abs(a * b)
    assert_same(lambda x, y: x * y + 1, a, b, donate_argnums=(0, 1),
                bound=(np.spacing(p) / 2 + np.spacing(np.abs(a * b + 1))).astype(np.float64))
    assert_same(lambda x, y: (x * y, jnp.sum(x, axis=0)), a, b, donate_argnums=(0, 1))
    assert_same(lambda x: x.T @ x, a, donate_argnums=0, rtol=1e-6, atol=1e-5)


def test_donation_inside_a_loop_of_calls_keeps_values():
    dev = jax.devices("pjrtx")[0]
    step = jax.jit(lambda x, i: x * 0.5 + i, donate_argnums=0)
    x = jax.device_put(np.full(1000, 8.0, np.float32), dev)
    want = np.full(1000, 8.0, np.float32)
    for i in range(10):
        x = step(x, np.float32(i))
        want = want * np.float32(0.5) + np.float32(i)
    np.testing.assert_array_equal(np.asarray(x), want)


def _loop_peak(n, steps, donate):
    dev = jax.devices("pjrtx")[0]
    step = jax.jit(lambda x: x * 1.0001 + 1.0, donate_argnums=0 if donate else ())
    # Compile outside the measured loop; the warm-up result is dropped.
    step(jax.device_put(np.zeros(n, np.float32), dev)).block_until_ready()
    x = jax.device_put(np.zeros(n, np.float32), dev)
    x.block_until_ready()
    _pjrtx.reset_peak_memory()
    base = _pjrtx.memory_stats()["in_use"]
    for _ in range(steps):
        # The caller holds x until the step has run: only donation lets the
        # step reuse its memory. (With `x = step(x)` Python drops x while the
        # step is still queued, and the run is then its last owner either way.)
        y = step(x)
        y.block_until_ready()
        x = y
    del y
    # MLX restarts the peak at 0, so a loop that allocates nothing reads 0.
    peak = max(_pjrtx.memory_stats()["peak"], base)
    np.testing.assert_allclose(np.asarray(x[:4]), _expected(steps), rtol=1e-6)
    x.delete()
    return base, peak


def _expected(steps):
    v = np.float32(0)
    for _ in range(steps):
        v = v * np.float32(1.0001) + np.float32(1.0)
    return np.full(4, v, np.float32)


def test_donated_update_loop_peak_stays_near_one_copy():
    n = 16 * 1024 * 1024  # 64 MiB of f32
    copy = 4 * n
    base, peak = _loop_peak(n, 20, donate=True)
    # The loop starts with one copy live (x). Each step's multiply writes into
    # x's memory and the add into the multiply's, so nothing beyond that copy
    # is allocated; 1/8 of a copy leaves room for small scratch arrays.
    print(f"donated: base {base} peak {peak} ({(peak - base) / copy:.3f} copies extra)")
    assert base >= copy
    assert peak - base < copy / 8, (base, peak, copy)
    # Without donation the output of each step is a second copy while the
    # input is still alive: the same measurement must see it.
    base, peak = _loop_peak(n, 20, donate=False)
    print(f"not donated: base {base} peak {peak} ({(peak - base) / copy:.3f} copies extra)")
    assert peak - base >= copy, (base, peak, copy)


@pytest.mark.parametrize("platform", ["pjrtx", "cpu"])
def test_donating_a_buffer_passed_twice_fails_like_xla(platform):
    # The donated buffer would be overwritten while the second argument reads
    # it; XLA refuses the call (a RuntimeError) and keeps the buffer.
    x = jax.device_put(np.arange(10, dtype=np.float32), jax.devices(platform)[0])
    f = jax.jit(lambda a, b: a + b, donate_argnums=0)
    with pytest.raises(RuntimeError, match="previously donated"):
        f(x, x).block_until_ready()
    assert not x.is_deleted()
    np.testing.assert_array_equal(np.asarray(x), np.arange(10, dtype=np.float32))


_IN_PLACE_UPDATES = {
    "scatter_set": lambda x, i: x.at[i].set(x[0] + 1.0),
    "scatter_add": lambda x, i: x.at[i].add(2.0),
    "dynamic_update_slice": lambda x, i: jax.lax.dynamic_update_slice(x, jnp.full((3,), 7.0), (i,)),
    "elementwise": lambda x, i: x * 0.5 + i.astype(x.dtype),
}


@pytest.mark.parametrize("kind", sorted(_IN_PLACE_UPDATES))
def test_donated_in_place_update_reuses_storage(kind):
    # XLA aliases a donated input with the output of the same shape and
    # dtype: unsafe_buffer_pointer() is equal, 20 updates of a 64 MiB buffer
    # keep one copy live, and the values are XLA:CPU's.
    if jax.devices("pjrtx")[0].device_kind != "MLX CPU" and kind.startswith("scatter"):
        pytest.skip("on a GPU device MLX's scatter copies its operand (no in-place GPU kernel)")
    f = _IN_PLACE_UPDATES[kind]
    n = 16 * 1024 * 1024
    dev = jax.devices("pjrtx")[0]
    step = jax.jit(f, donate_argnums=0)
    step(jax.device_put(np.zeros(n, np.float32), dev), np.int32(0)).block_until_ready()
    x = jax.device_put(np.zeros(n, np.float32), dev)
    x.block_until_ready()
    ptr = x.unsafe_buffer_pointer()
    _pjrtx.reset_peak_memory()
    base = _pjrtx.memory_stats()["in_use"]
    for k in range(20):
        y = step(x, np.int32(k * 1000))
        y.block_until_ready()
        assert y.unsafe_buffer_pointer() == ptr, k
        x = y
    peak = max(_pjrtx.memory_stats()["peak"], base)
    assert peak - base < 4 * n / 8, (base, peak)
    want = np.zeros(n, np.float32)
    cpu_step = jax.jit(f)
    for k in range(20):
        want = np.asarray(cpu_step(jax.device_put(want, jax.devices("cpu")[0]), np.int32(k * 1000)))
    np.testing.assert_array_equal(np.asarray(x), want)


@pytest.mark.parametrize("shape", [(), (1,), (3,), (2, 2)])
def test_small_donated_outputs_alias_their_input(shape):
    # MLX never reuses a one-element operand's storage (a binary op on two
    # scalars); XLA aliases the donated input anyway, and equinox's
    # filter_jit(donate="all") tests check the pointer. Another output that
    # reads the donated input must still see its old value.
    if jax.devices("pjrtx")[0].device_kind != "MLX CPU":
        pytest.skip("the small-output aliasing copies on the host: MLX's CPU device only")
    f = lambda x, y: (x + 1, x * 2 + y, y - x)
    x0 = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape) + 0.5
    y0 = np.float32(3.0)
    want = jax.jit(f)(jax.device_put(x0, jax.devices("cpu")[0]), y0)
    x = jax.device_put(x0, jax.devices("pjrtx")[0])
    ptr = x.unsafe_buffer_pointer()
    got = jax.jit(f, donate_argnums=0)(x, y0)
    assert x.is_deleted()
    assert got[0].unsafe_buffer_pointer() == ptr
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


def test_small_donated_output_waits_for_effects_reading_the_input():
    # The aliased output is written into the donated input last: a host
    # callback that reads the input (an effect, not an output) sees its
    # value from before the call.
    if jax.devices("pjrtx")[0].device_kind != "MLX CPU":
        pytest.skip("the small-output aliasing copies on the host: MLX's CPU device only")
    seen = []

    def f(x):
        jax.debug.callback(lambda v: seen.append(np.asarray(v).copy()), x)
        return x * 3 + 1

    x = jax.device_put(np.array([2.0, 5.0], np.float32), jax.devices("pjrtx")[0])
    ptr = x.unsafe_buffer_pointer()
    for _ in range(20):  # the order inside one evaluation is MLX's: try it often
        before = np.asarray(x).copy()
        y = jax.jit(f, donate_argnums=0)(x)
        jax.effects_barrier()
        np.testing.assert_array_equal(seen[-1], before)
        assert y.unsafe_buffer_pointer() == ptr
        x = y
