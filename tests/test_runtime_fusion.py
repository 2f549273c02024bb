"""PJRTX_COMPILE: straight-line segments run through mx::compile (fused
kernels) from their third run (auto), from the first (always) or never.
Fusion must not change a result: fused runs equal eager runs bit for bit
where the ops are exact, and equal XLA:CPU."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from oracle import assert_same, run_on
from pjrtx import _pjrtx


@pytest.fixture
def counting():
    _pjrtx.count_primitives(True)
    yield
    _pjrtx.count_primitives(False)


def run_counted(f, *args):
    before = _pjrtx.primitives_evaluated()
    out = f(*args)
    jax.block_until_ready(out)
    return np.asarray(out), _pjrtx.primitives_evaluated() - before


def chain(x, y):
    # XLA's float maximum guards NaN (several MLX ops); all of it is exact,
    # so fused and eager runs must agree bit for bit.
    return jnp.where(x > 0.5, jnp.maximum(x * 3.0 + y, y) - 1.0, -x * y)


def chain_bound(x, y):
    # XLA:CPU contracts x * 3 + y into one fused multiply-add; MLX rounds the
    # product and the sum apart, and rounds again in `- 1`: within one ulp
    # of each of 3|x|, |3x + y| and the final value (eps * (3|x| + |y| + 1)
    # covers all three, the where's other branch is exact).
    eps = np.finfo(np.float32).eps
    return eps * (3 * np.abs(x.astype(np.float64)) + 2 * np.abs(y.astype(np.float64)) + 1)


def inputs(pjrtx_device, n=96):
    # (more than 64 elements: smaller computed values run on the host,
    # PJRTX_HOST, and never reach MLX's tiers)
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n).astype(np.float32)
    x[:3] = [np.nan, -0.0, np.inf]
    y = rng.standard_normal(n).astype(np.float32)
    return x, y, jax.device_put(x, pjrtx_device), jax.device_put(y, pjrtx_device)


def traces():
    s = _pjrtx.fusion_stats()
    return s["replay_traces"], s["fused_traces"], s["failed_traces"]


def test_auto_tiers(monkeypatch, counting, pjrtx_device):
    # Runs 1-2 eager, from run 3 a replay of the traced graph (fusion off: no
    # kernel compiler), from run 65 fused kernels. One trace per tier.
    monkeypatch.setenv("PJRTX_COMPILE", "auto")
    x, y, dx, dy = inputs(pjrtx_device)
    f = jax.jit(lambda a, b: chain(a, b))
    f(dx, dy).block_until_ready()  # compile outside the counts
    seen, runs = [traces()], [run_counted(f, dx, dy)]  # run 2
    for _ in range(3, 71):
        runs.append(run_counted(f, dx, dy))
        seen.append(traces())
    replay, fused, failed = (np.diff([s[i] for s in seen]) for i in range(3))
    # seen[k] is after run k + 2 (k >= 1)
    assert replay.tolist() == [1] + [0] * 67, replay
    assert fused.tolist() == [0] * 62 + [1] + [0] * 5, fused
    assert not failed.any()
    counts = [c for _, c in runs]
    # Fused runs evaluate fewer primitives (the element-wise chain is one).
    assert counts[-1] < counts[0], counts
    for out, _ in runs[1:]:
        np.testing.assert_array_equal(out, runs[0][0])
    assert_same(chain, x, y, bound=chain_bound(x, y))


def test_replay_tier_stays_unfused_around_a_called_function(monkeypatch, pjrtx_device):
    # A segment that calls a jitted helper traces the helper's own segments
    # inside its trace. Runs 3-64 replay without fusion (no kernel compiler):
    # the helper's replay, nested in the caller's trace, must not switch
    # fusion back on for the caller's still open trace.
    monkeypatch.setenv("PJRTX_COMPILE", "auto")
    helper = jax.jit(lambda v: jnp.where(v > 0.5, v * 4.0, -v) - 1.0)
    f = jax.jit(lambda a, b: helper(a * 0.5 - b) * 2.0 + b)
    x, y, dx, dy = inputs(pjrtx_device)
    first = np.asarray(f(dx, dy))  # compile and run 1
    _pjrtx.count_primitives(True)
    try:
        for run in range(2, 12):
            _pjrtx.primitive_histogram(reset=True)
            out = np.asarray(f(dx, dy))
            h = _pjrtx.primitive_histogram(reset=True)
            assert not [k for k in h if k.startswith("Compiled")], (run, h)
            np.testing.assert_array_equal(out, first)
    finally:
        _pjrtx.count_primitives(False)
    # (every product is by a power of two, exact: an FMA XLA:CPU may form
    # rounds the same)
    assert_same(lambda a, b: helper(a * 0.5 - b) * 2.0 + b, x, y)


def test_never_and_always(monkeypatch, counting, pjrtx_device):
    x, y, dx, dy = inputs(pjrtx_device)
    monkeypatch.setenv("PJRTX_COMPILE", "never")
    # Fresh functions: JAX caches executables per function, and each test
    # needs programs compiled under its own tier.
    f = jax.jit(lambda a, b: chain(a, b))
    before = traces()
    eager = [run_counted(f, dx, dy) for _ in range(80)]
    assert traces() == before
    never = {c for _, c in eager}
    assert len(never) == 1, never
    monkeypatch.setenv("PJRTX_COMPILE", "always")
    g = jax.jit(lambda a, b: chain(a, b))
    out, first = run_counted(g, dx, dy)
    assert traces()[1] == before[1] + 1
    assert first < min(never), (first, never)
    np.testing.assert_array_equal(out, eager[0][0])


def test_bad_tier_is_a_clear_error(monkeypatch, pjrtx_device):
    monkeypatch.setenv("PJRTX_COMPILE", "sometimes")
    with pytest.raises(Exception, match="PJRTX_COMPILE must be"):
        jax.jit(lambda v: v * 7.0 + 1.0)(jax.device_put(np.ones(3, np.float32), pjrtx_device))


def test_loop_body_fuses_and_matches(monkeypatch, counting, pjrtx_device):
    # No multiply feeds an add: XLA:CPU would contract it into an FMA.
    body = lambda i, v: jnp.where(v > 1.0, v * 0.5, v + 0.75)  # noqa: E731
    loop = lambda v: lax.fori_loop(0, 200, body, v)  # noqa: E731
    x = np.linspace(-2, 2, 96, dtype=np.float32)
    dx = jax.device_put(x, pjrtx_device)
    # The MLX loop path's fusion tiers: not compiled host code (PJRTX_LOOPS).
    monkeypatch.setenv("PJRTX_LOOPS", "mlx")
    monkeypatch.setenv("PJRTX_COMPILE", "never")
    eager, n_eager = run_counted(jax.jit(lambda v: loop(v)), dx)
    monkeypatch.setenv("PJRTX_COMPILE", "auto")
    f = jax.jit(lambda v: loop(v))
    fused, n_fused = run_counted(f, dx)
    # The body runs 200 times in one call: its iterations run in traced
    # blocks of 16 from the third, fused from the 65th, so the call
    # evaluates fewer primitives than the eager one.
    assert n_fused < n_eager, (n_fused, n_eager)
    np.testing.assert_array_equal(fused, eager)
    assert_same(loop, x)


def test_host_syncs_split_segments(monkeypatch, pjrtx_device):
    # A while loop (host-read predicate) between two element-wise segments,
    # and a scatter with duplicate indices (its lowering counts rounds on the
    # host, so tracing it fails and that segment stays eager).
    monkeypatch.setenv("PJRTX_COMPILE", "always")

    def f(x, idx, upd):
        # Multiplies by powers of two and 1.5 only, no add after a multiply
        # (XLA:CPU would contract it into an FMA): every op rounds the same
        # on both backends.
        a = x * 2.0
        a = lax.while_loop(lambda v: v[0] < 100.0, lambda v: v * 1.5, a)
        return a.at[idx].max(upd) * 0.5

    def total(x, idx, upd):
        b = f(x, idx, upd)
        return jnp.sum(b * b)

    x = np.linspace(1, 2, 16, dtype=np.float32)
    idx = np.array([1, 1, 3, 3, 3, 7], np.int32)
    upd = np.linspace(500, 600, 6, dtype=np.float32)
    # 16 positive terms summed in any order: each result within
    # gamma_16 * sum of the terms of the exact sum, so the two within twice.
    n, eps = 16, np.finfo(np.float32).eps / 2
    for _ in range(3):
        assert_same(f, x, idx, upd)
        assert_same(total, x, idx, upd, rtol=2 * n * eps / (1 - n * eps))


def test_random_keys_are_not_frozen(monkeypatch, pjrtx_device):
    # Tracing freezes captured arrays as constants; a key must stay an input.
    # (threefry's rounds make the segment; the tolerance is test_ops_rng's:
    # erf_inv's f32 approximations differ by a few ulps between XLA:CPU and
    # MLX's log/sqrt.)
    monkeypatch.setenv("PJRTX_COMPILE", "always")
    g = lambda k: jax.random.normal(k, (8,))  # noqa: E731
    outs = []
    for s in range(4):
        key = np.asarray(jax.random.PRNGKey(s))
        outs.append(run_on(pjrtx_device, g, key))
        assert_same(g, key, rtol=2e-6, atol=1e-7)
    assert len({o.tobytes() for o in outs}) == 4


def test_donated_input_with_fused_segments(monkeypatch, pjrtx_device):
    monkeypatch.setenv("PJRTX_COMPILE", "always")
    step = jax.jit(lambda v: jnp.maximum(v * 0.5, v - 1.0) + 2.0, donate_argnums=0)
    x = np.linspace(-4, 4, 1024, dtype=np.float32)
    v = jax.device_put(x, pjrtx_device)
    want = x.copy()
    for _ in range(6):
        prev = v
        v = step(v)
        assert prev.is_deleted()
        want = np.maximum(want * np.float32(0.5), want - np.float32(1.0)) + np.float32(2.0)
    np.testing.assert_array_equal(np.asarray(v), want)


@pytest.mark.parametrize("tier", ["auto", "always"])
@pytest.mark.parametrize("steps", [5, 16, 53])
def test_counted_loop_blocks_match(monkeypatch, tier, steps, pjrtx_device):
    # A pure loop body runs in compiled blocks of 16 iterations with the
    # counter's host values as inputs: a scan reading xs[i], writing ys[i]
    # and reading a captured value must see every iteration's own i, also
    # in the iterations before the first block and after the last.
    monkeypatch.setenv("PJRTX_COMPILE", tier)

    def f(xs, w):
        def body(c, x):
            c = jnp.where(c > 10.0, c * 0.5, c + x + w)
            return c, c - x
        return lax.scan(body, jnp.zeros((4,), jnp.float32), xs)

    rng = np.random.default_rng(1)
    xs = rng.standard_normal((steps, 4)).astype(np.float32)
    w = np.float32(0.75)
    monkeypatch.setenv("PJRTX_COMPILE", "never")
    eager = run_on(pjrtx_device, lambda a, b: f(a, b), xs, w)
    monkeypatch.setenv("PJRTX_COMPILE", tier)
    g = lambda a, b: f(a, b)  # noqa: E731
    for _ in range(3):
        got = run_on(pjrtx_device, g, xs, w)
        for a, b in zip(got, eager):
            np.testing.assert_array_equal(a, b)
    assert_same(f, xs, w)


def test_complex_constants_in_fused_segments(monkeypatch, pjrtx_device):
    # mx::compile writes one-element constants into a fused kernel's source;
    # MLX 0.32 prints complex ones with 7 digits and bare nan/inf (a kernel
    # g++ cannot compile). Complex constants must reach fused kernels intact:
    # a NaN fill (jnp.unique's canonicalisation), infinities, and values
    # that need all 9 digits of a float.
    monkeypatch.setenv("PJRTX_COMPILE", "always")
    c_nan = np.complex64(complex(np.nan, 0.0))
    c_inf = np.complex64(complex(np.inf, -np.inf))
    c_fine = np.complex64(complex(0.1234567891, -3.3333333e-5))

    def f(x):
        bad = jnp.isnan(x)
        return {"nan_fill": jnp.where(bad, c_nan, x),
                "inf_fill": jnp.where(bad, c_inf, x),
                "scaled": x * c_fine + c_fine,
                "vector": x * jnp.asarray([c_fine], jnp.complex64)}

    x = np.array([1 + 2j, np.nan, -3.5 + 0.25j, 0j, complex(np.nan, 1.0)], np.complex64)
    got = run_on(pjrtx_device, f, x)
    want = run_on(jax.devices("cpu")[0], f, x)
    for k in want:
        if k in ("nan_fill", "inf_fill"):  # selects: bit for bit
            assert got[k].view(np.uint32).tolist() == want[k].view(np.uint32).tolist(), k
        else:  # one complex multiply-add: a few ulps of |x||c| + |c|
            bound = 8 * np.finfo(np.float32).eps * (np.abs(x) * abs(c_fine) + abs(c_fine))
            ok = np.isnan(want[k]) | (np.abs(got[k] - want[k]) <= bound)
            assert np.all(ok), (k, got[k], want[k])
            assert np.array_equal(np.isnan(got[k]), np.isnan(want[k])), k


@pytest.mark.parametrize("dtype", [np.float32, np.float16, jnp.bfloat16])
def test_negative_zero_constants_in_fused_segments(monkeypatch, pjrtx_device, dtype):
    # MLX 0.32 prints a one-element -0.0 into a fused kernel's source as
    # `-0`, an int literal that reads as +0. Selects, products and minima
    # with -0 must keep the sign bit as on XLA:CPU.
    monkeypatch.setenv("PJRTX_COMPILE", "always")
    x = np.array([1.0, -2.0, 0.0, 3.0, -0.0], dtype)

    def f(x):
        return {"select": jnp.where(x > 0, x, jnp.asarray(-0.0, x.dtype)), "times": x * -0.0,
                "plus": x + -0.0, "min": jnp.minimum(x, jnp.asarray(-0.0, x.dtype))}

    got = run_on(pjrtx_device, f, x)
    want = run_on(jax.devices("cpu")[0], f, x)
    for k in want:
        np.testing.assert_array_equal(np.asarray(got[k], np.float32), np.asarray(want[k], np.float32))
        assert np.signbit(np.asarray(got[k], np.float32)).tolist() == \
            np.signbit(np.asarray(want[k], np.float32)).tolist(), k


@pytest.mark.parametrize("dtype", [np.float32, np.float16, jnp.bfloat16])
def test_max_min_of_signed_zeros_in_fused_segments(monkeypatch, pjrtx_device, dtype):
    # XLA's max/min order -0 below +0 and propagate NaN. pjrtx settles ties
    # of zeros by IEEE addition inside the fused kernel (no bit view): every
    # pairing of +-0, NaN, +-inf and equal numbers must give XLA:CPU's bits
    # (a NaN's sign aside: XLA:CPU's min(-x, NaN) is a NaN with the sign bit
    # set, MLX's the NaN operand).
    from test_ops_elementwise import float_bits
    monkeypatch.setenv("PJRTX_COMPILE", "always")
    vals = [0.0, -0.0, np.nan, np.inf, -np.inf, 1.5, -1.5]
    a, b = (np.array(v, dtype) for v in zip(*[(p, q) for p in vals for q in vals]))

    def f(ab):
        a, b = ab[0], ab[1]
        return {"max": jnp.maximum(a, b), "min": jnp.minimum(a, b),
                "clamp": jnp.clip(a, b, jnp.maximum(a, b))}

    x = np.stack([a, b])
    got = run_on(pjrtx_device, f, x)
    want = run_on(jax.devices("cpu")[0], f, x)
    ut = float_bits(np.dtype(dtype))
    for k in want:
        nan = np.isnan(got[k].astype(np.float32)) & np.isnan(want[k].astype(np.float32))
        bad = np.nonzero((got[k].view(ut) != want[k].view(ut)) & ~nan)[0]
        assert bad.size == 0, (k, [(float(a[i]), float(b[i]), hex(int(got[k].view(ut)[i])),
                                    hex(int(want[k].view(ut)[i]))) for i in bad[:6]])


def test_float_math_on_constants_stays_fused(monkeypatch, pjrtx_device):
    # An SGD step's gradient of a mean starts from -1/n, float arithmetic on
    # constants alone, folded at lowering. Computed on the host it would be
    # an input of the traced rest, and the fused kernels around it came out
    # split (the bench's MLP: 49 -> 66 primitives); a host lane treats it as
    # a constant, so the fused step runs as many primitives as with float
    # host forms off.
    monkeypatch.setenv("PJRTX_COMPILE", "always")
    rng = np.random.default_rng(2)
    # (a batch of 128: its gradient's cotangent is too big for the host,
    # the -1/128 it is built from is not)
    dims = [32, 24, 24, 10]
    ps = []
    for a, b in zip(dims[:-1], dims[1:]):
        ps += [rng.standard_normal((a, b)).astype(np.float32) * 0.2,
               rng.standard_normal(b).astype(np.float32) * 0.1]
    x = rng.standard_normal((128, 32)).astype(np.float32)
    y = rng.integers(0, 10, 128).astype(np.int32)

    def make_step():
        def loss(ps, x, y):
            h = x
            for i in range(0, len(ps) - 2, 2):
                h = jax.nn.relu(h @ ps[i] + ps[i + 1])
            logp = jax.nn.log_softmax(h @ ps[-2] + ps[-1])
            return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1))

        def step(ps, x, y):
            l, g = jax.value_and_grad(loss)(ps, x, y)
            return [p - 0.01 * gp for p, gp in zip(ps, g)], l
        return jax.jit(step)

    counts, outs = {}, {}
    for host in ("int", "all"):
        monkeypatch.setenv("PJRTX_HOST", host)
        f = make_step()
        args = jax.device_put((ps, x, y), pjrtx_device)
        jax.block_until_ready(f(*args))
        _pjrtx.count_primitives(True)
        try:
            before = _pjrtx.primitives_evaluated()
            out = jax.block_until_ready(f(*args))
            counts[host] = _pjrtx.primitives_evaluated() - before
        finally:
            _pjrtx.count_primitives(False)
        outs[host] = jax.tree_util.tree_leaves(jax.device_get(out))
    assert counts["all"] <= counts["int"], counts
    # the host's float ops give MLX's bits: the same step either way
    for a, b in zip(outs["all"], outs["int"]):
        np.testing.assert_array_equal(a, b)


def test_a_folded_broadcast_of_a_segment_input_is_traced(monkeypatch, pjrtx_device):
    # c is folded (constants only) before a host sync (the loop); after it,
    # one step reads c (an input of that segment's trace) and a folded
    # broadcast of c is rebuilt inside the trace. Built from c's own array,
    # the trace would reach that array beside its placeholder, which MLX
    # refuses ("uncaptured inputs"): the segment then ran eagerly forever.
    monkeypatch.setenv("PJRTX_COMPILE", "always")

    def f(x, n):
        c = lax.full((), 0.25, jnp.float32) + 0.25
        k = lax.while_loop(lambda i: i < n, lambda i: i + 1, jnp.int32(0))
        # (c is a power of two: products are exact, an FMA rounds the same)
        return x * c + k.astype(jnp.float32) * c

    x = np.linspace(-1, 1, 96, dtype=np.float32)
    before = traces()
    assert_same(f, x, np.int32(3))
    after = traces()
    assert after[2] == before[2], (before, after)  # no failed trace
    assert after[1] > before[1], (before, after)


ALIASED_CONSTANT = """
module @m {
  func.func public @main(%x: tensor<256xf32>, %n: tensor<i32>) -> tensor<256xf32> {
    %c = stablehlo.constant dense<0.5> : tensor<f32>
    %zero = stablehlo.constant dense<0> : tensor<i32>
    %one = stablehlo.constant dense<1> : tensor<i32>
    %cb = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<f32>) -> tensor<256xf32>
    %x1 = stablehlo.add %x, %cb : tensor<256xf32>
    %r:2 = stablehlo.while(%i = %zero, %v = %x1) : tensor<i32>, tensor<256xf32>
      cond {
        %p = stablehlo.compare LT, %i, %n : (tensor<i32>, tensor<i32>) -> tensor<i1>
        stablehlo.return %p : tensor<i1>
      } do {
        %i2 = stablehlo.add %i, %one : tensor<i32>
        %v2 = stablehlo.sine %v : tensor<256xf32>
        stablehlo.return %i2, %v2 : tensor<i32>, tensor<256xf32>
      }
    %c2 = stablehlo.convert %c : (tensor<f32>) -> tensor<f32>
    %c2b = stablehlo.broadcast_in_dim %c2, dims = [] : (tensor<f32>) -> tensor<256xf32>
    %y = stablehlo.multiply %r#1, %c2b : tensor<256xf32>
    %y2 = stablehlo.cosine %y : tensor<256xf32>
    %cb3 = stablehlo.broadcast_in_dim %c, dims = [] : (tensor<f32>) -> tensor<256xf32>
    %out = stablehlo.add %y2, %cb3 : tensor<256xf32>
    return %out : tensor<256xf32>
  }
}
"""


def test_a_constant_that_is_also_a_segment_input_is_traced(monkeypatch, pjrtx_device):
    # %c is defined before the loop (a host sync) and read after it, so it is
    # an input of the last segment's trace; the folded %c2 (a convert to the
    # same type) is %c's own array, which the trace hands to its graph as a
    # constant. MLX refuses a graph that reaches an input other than through
    # its placeholder ("uncaptured inputs"), and the segment then ran eagerly
    # for good (numpyro's RenyiELBO step: 538 steps, every run).
    monkeypatch.setenv("PJRTX_COMPILE", "always")
    from oracle import run_mlir_on

    x = np.linspace(-1, 1, 256, dtype=np.float32)
    before = traces()
    got = run_mlir_on(pjrtx_device, ALIASED_CONSTANT, x, np.int32(2))[0]
    after = traces()
    assert after[2] == before[2], (before, after)  # no failed trace
    assert after[1] > before[1], (before, after)
    want = run_mlir_on(jax.devices("cpu")[0], ALIASED_CONSTANT, x, np.int32(2))[0]
    # sin, sin, cos: a few ulps each of values at most 1 (XLA's and MLX's
    # kernels differ); cos(0.5 v) halves v's error: under 1e-6 in all.
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)
