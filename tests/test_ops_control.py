"""while / case / if (host-driven control steps) against XLA:CPU.

These are the loops that stay on MLX (PJRTX_LOOPS=mlx, and every loop too big
for the host engine under auto): their counted and general paths, host
folds and loop statistics. Loops run as compiled host code are
tests/test_host_loops.py's.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from oracle import assert_same


@pytest.fixture(autouse=True)
def loops_on_mlx(monkeypatch):
    monkeypatch.setenv("PJRTX_LOOPS", "mlx")

X = np.arange(6, dtype=np.float32)


def test_loops():
    assert_same(lambda x: lax.fori_loop(0, 10, lambda i, c: c * 1.1 + i, x), X, rtol=1e-6)
    assert_same(lambda x: lax.while_loop(lambda c: c[0] < 100, lambda c: (c[0] * 2 + 1, c[1] + c[0]),
                                         (x[0], x)), X)
    assert_same(lambda x: lax.while_loop(lambda c: c < 0, lambda c: c + 1, x[0]), X)  # zero trips
    assert_same(lambda x: lax.scan(lambda c, v: (c + v, c * v), 0.0, x), X)
    assert_same(jax.grad(lambda x: lax.fori_loop(0, 3, lambda i, c: jnp.sin(c) * c, x).sum()), X,
                rtol=1e-5)


def test_long_loop_memory_stays_bounded():
    # 2000 iterations over a 1 MiB state: evaluated per iteration, not kept
    # as one lazy graph.
    big = np.ones((512, 512), np.float32)
    assert_same(lambda x: lax.fori_loop(0, 2000, lambda i, c: c * 0.5 + 0.5, x), big)


@pytest.mark.parametrize("index", [-3, 0, 1, 2, 7])
def test_switch_clamps_index(index):
    branches = [lambda x: x + 1, lambda x: x * 2, lambda x: -x]
    assert_same(lambda x, i: lax.switch(i, branches, x), X, np.int32(index))


def test_cond():
    for p in (True, False):
        assert_same(lambda x, p: lax.cond(p, lambda x: x.sum(), lambda x: x.max(), x), X, np.bool_(p))


# ---------------------------------------------------------------------------
# Counted loops (loops/counted_loop.h): loops whose trip count follows from the
# entry state run without a predicate read per iteration. `_pjrtx.loop_stats`
# says which path ran and how many body runs it made, so these tests prove the
# path as well as the answer. Loop state is integer or exactly representable
# float arithmetic, so pjrtx must equal XLA:CPU exactly.

import contextlib  # noqa: E402

from pjrtx import _pjrtx, versions  # noqa: E402

from oracle import assert_same_mlir  # noqa: E402

I = np.arange(6, dtype=np.int32)


def loop_runs(f, *args, **kw):
    """assert_same(f, *args) and the loop_stats delta of the pjrtx run."""
    before = _pjrtx.loop_stats()
    assert_same(f, *args, **kw)  # converts to NumPy, so the run has finished
    after = _pjrtx.loop_stats()
    # which iterations had host-folded index arithmetic: test_host_fold_*
    return {k: after[k] - before[k] for k in after if k not in ("folded_iterations", "host_steps")}


def counted(runs, iterations):
    return {"counted_runs": runs, "counted_iterations": iterations, "general_runs": 0,
            "general_iterations": 0}


def general(runs, iterations):
    return {"counted_runs": 0, "counted_iterations": 0, "general_runs": runs,
            "general_iterations": iterations}


def x64(on):
    return jax.enable_x64(True) if on else contextlib.nullcontext()


@pytest.mark.parametrize("lo,hi", [(0, 10), (3, 7), (-5, 3), (4, 4), (7, 2), (-3, -9)])
def test_fori_static_bounds_run_counted(lo, hi):
    # JAX turns a static fori_loop into a scan of max(hi - lo, 0) steps; an
    # empty one has no loop at all.
    stats = loop_runs(lambda x: lax.fori_loop(lo, hi, lambda i, c: c * 2 + i, x), I)
    n = max(hi - lo, 0)
    assert stats == (counted(1, n) if n else counted(0, 0))


@pytest.mark.parametrize("lo,hi", [(0, 10), (-5, 3), (4, 4), (7, 2), (-3, -9), (0, -1)])
def test_fori_dynamic_bounds_read_once_at_entry(lo, hi):
    stats = loop_runs(lambda x, a, b: lax.fori_loop(a, b, lambda i, c: c * 2 + i, x),
                      I, np.int32(lo), np.int32(hi))
    assert stats == counted(1, max(hi - lo, 0))
    stats = loop_runs(lambda x, b: lax.fori_loop(0, b, lambda i, c: c - i, x), I, np.int32(hi))
    assert stats == counted(1, max(hi, 0))


@pytest.mark.parametrize("dt,lo,hi", [
    (np.uint32, 0, 9), (np.uint32, 9, 3), (np.uint32, 2**32 - 4, 2**32 - 1),
    (np.int64, -(2**40), -(2**40) + 5), (np.int64, 2**63 - 4, 2**63 - 1),
    (np.int64, 5, -(2**62)), (np.int8, -128, 127), (np.uint8, 250, 255), (np.int16, -7, 0)])
def test_fori_counter_types(dt, lo, hi):
    # The last counter value (hi) still fits the type: no wrap, counted.
    with x64(np.dtype(dt).itemsize == 8):
        stats = loop_runs(lambda x, a, b: lax.fori_loop(a, b, lambda i, c: c + (i & 3).astype(c.dtype), x),
                          I, dt(lo), dt(hi))
    assert stats == counted(1, max(hi - lo, 0))


def test_fori_bound_passes_through_jit_argument_and_closure():
    # A bound from an argument, captured by the condition (JAX carries it as
    # loop state): the body passes it through, so it is read once.
    f = lambda x, n: lax.while_loop(lambda c: n > c[0], lambda c: (c[0] + 1, c[1] * 2), (0, x))
    assert loop_runs(f, I, np.int32(5)) == counted(1, 5)
    assert loop_runs(f, I, np.int32(-2)) == counted(1, 0)


@pytest.mark.parametrize("cond,step,init,trips", [
    (lambda i: i < 10, 3, 0, 4),      # LT, step 3: 0 3 6 9
    (lambda i: i <= 9, 3, 0, 4),      # LE: 0 3 6 9
    (lambda i: i <= 10, 5, 10, 1),
    (lambda i: 10 > i, 4, -3, 4),     # bound on the left: -3 1 5 9
    (lambda i: i > 0, -1, 5, 5),      # GT, subtract
    (lambda i: i >= 0, -2, 9, 5),     # GE: 9 7 5 3 1
    (lambda i: i >= 10, -2, 9, 0),
    (lambda i: i != 12, 3, 0, 4),     # NE, reaches the bound exactly
    (lambda i: i != -12, -4, 0, 3),
    (lambda i: i == 5, 7, 5, 1),      # EQ: one trip
    (lambda i: i == 5, 7, 4, 0),
])
def test_while_counter_directions(cond, step, init, trips):
    f = lambda x: lax.while_loop(lambda c: cond(c[0]), lambda c: (c[0] + step, c[1] * 2 + c[0]),
                                 (jnp.int32(init), x))
    assert loop_runs(f, I) == counted(1, trips)


@pytest.mark.parametrize("dt,init,step,bound,op,trips", [
    # Each counter wraps before the predicate fails: the count from the entry
    # state would be wrong, so the loop takes the general path and agrees
    # with XLA's wrapping loop.
    (np.int8, 100, 5, 127, "lt", 159),    # 100 + 5k = 127 (mod 256) at k = 159
    (np.uint8, 0, 10, 251, "lt", 51),     # 10k mod 256 = 254 at k = 51
    (np.int8, 0, 3, 11, "ne", 89),        # 3k = 11 (mod 256) at k = 89
    (np.uint8, 5, 255, 3, "gt", 2),       # u8 + 255 is -1, but as an unsigned step it wraps
])
def test_wrapping_counter_takes_general_path(dt, init, step, bound, op, trips):
    ops = {"lt": lambda a, b: a < b, "ne": lambda a, b: a != b, "gt": lambda a, b: a > b}
    f = lambda x: lax.while_loop(lambda c: ops[op](c[0], dt(bound)),
                                 lambda c: (c[0] + dt(step), c[1] + 1), (dt(init), x))
    # The trip counts in the table, checked by running the wrapping loop here.
    n, i = 0, dt(init)
    with np.errstate(over="ignore"):
        while ops[op](i, dt(bound)):
            n, i = n + 1, dt(i + dt(step))
    assert n == trips
    assert loop_runs(f, np.int32(0)) == general(1, trips)


@pytest.mark.parametrize("dt,init,step", [
    (np.int8, 100, 1), (np.int8, -100, -3), (np.uint8, 250, 1), (np.uint8, 3, 255),
    (np.int32, 2**31 - 150, 7), (np.uint64, 2**64 - 100, 1), (np.int64, -(2**63) + 50, -1)])
@pytest.mark.parametrize("dynamic", [False, True])
def test_induction_variables_wrap_like_xla(dt, init, step, dynamic):
    # A second loop-carried integer stepped by a constant is tracked on the
    # host during a counted loop; it wraps (here within 300 trips) exactly as
    # XLA's integer add does. dynamic: its entry value comes from an argument.
    def f(x, v0):
        v0 = v0 if dynamic else dt(init)
        body = lambda i, c: (c[0] + dt(step), c[1] * 3 + c[0].astype(c[1].dtype) + i)
        return lax.fori_loop(0, 300, body, (v0, x))

    with x64(np.dtype(dt).itemsize == 8):
        assert loop_runs(f, I, dt(init)) == counted(1, 300)


def test_data_dependent_while_takes_general_path():
    f = lambda x: lax.while_loop(lambda c: c.sum() < 1000, lambda c: c * 2 + 1, x)
    trips, c = 0, I.copy()
    while c.sum() < 1000:
        trips, c = trips + 1, c * 2 + 1
    assert loop_runs(f, I) == general(1, trips)
    # A counter whose bound the body changes is not counted either.
    g = lambda x: lax.while_loop(lambda c: c[0] < c[1], lambda c: (c[0] + 1, c[1] - 1, c[2] * 2),
                                 (0, 9, x))
    assert loop_runs(g, I) == general(1, 5)


@pytest.mark.parametrize("reverse", [False, True])
def test_scan_with_xs_and_ys(reverse):
    xs = np.arange(12, dtype=np.float32).reshape(4, 3)
    f = lambda xs: lax.scan(lambda c, x: (c * 2 + x, c - x), jnp.zeros(3, jnp.float32), xs,
                            reverse=reverse)
    assert loop_runs(f, xs) == counted(1, 4)
    # (The carry comes from the argument: a program without inputs would run
    # on the default device, pjrtx, for the oracle too.)
    g = lambda xs: lax.scan(lambda c, _: (c + 1, c * c), xs[1, 1].astype(jnp.int32), None, length=7)
    assert loop_runs(g, xs) == counted(1, 7)


def test_nested_loops():
    # Inner bound from the outer counter: read at every inner entry.
    f = lambda x: lax.fori_loop(0, 5, lambda i, c: lax.fori_loop(0, i, lambda j, d: d * 2 + j, c + i), x)
    assert loop_runs(f, I) == counted(6, 0 + 1 + 2 + 3 + 4 + 5)
    g = lambda xs: lax.scan(lambda c, x: (lax.fori_loop(0, 3, lambda j, d: d + x * j, c), c), xs[0], xs)
    assert loop_runs(g, np.arange(12, dtype=np.int32).reshape(4, 3)) == counted(5, 4 + 4 * 3)


def test_loops_in_branches_and_branches_in_loops():
    f = lambda x, p: lax.cond(p, lambda x: lax.fori_loop(0, 4, lambda i, c: c * 3 - i, x),
                              lambda x: lax.fori_loop(0, 6, lambda i, c: c + i, x), x)
    assert loop_runs(f, I, np.bool_(True)) == counted(1, 4)
    assert loop_runs(f, I, np.bool_(False)) == counted(1, 6)
    branches = [lambda x: x + 1, lambda x: lax.fori_loop(0, 3, lambda i, c: c * 2, x), lambda x: -x]
    g = lambda x, k: lax.switch(k, branches, x)
    assert loop_runs(g, I, np.int32(1)) == counted(1, 3)
    h = lambda x: lax.fori_loop(0, 8, lambda i, c: lax.cond(i % 3 == 0, lambda c: c * 2,
                                                            lambda c: c - i, c), x)
    assert loop_runs(h, I) == counted(1, 8)


def test_func_call_in_loop_body():
    @jax.jit
    def step(c, i):
        return c * 2 + i

    f = lambda x: lax.fori_loop(0, 9, lambda i, c: step(step(c, i), 1), x)
    assert loop_runs(f, I) == counted(1, 9)


def test_loops_under_grad_and_vmap():
    xf = np.linspace(-2, 2, 6).astype(np.float32)
    # c * 0.5 + 1 scales gradients by exact powers of two: exactly XLA's.
    f = lambda x: lax.fori_loop(0, 5, lambda i, c: c * 0.5 + 1, x).sum()
    # The loop is linear in x, so JAX keeps only the transposed loop (one
    # stablehlo.while in the lowered grad).
    assert loop_runs(jax.grad(f), xf) == counted(1, 5)
    # Reverse mode needs static bounds; forward mode runs a dynamic loop.
    g = lambda x, n: jax.jvp(lambda x: lax.fori_loop(0, n, lambda i, c: c * 0.5 + 1, x),
                             (x,), (jnp.ones_like(x),))
    assert loop_runs(g, xf, np.int32(4)) == counted(1, 4)
    # vmap with a shared bound stays counted; batched bounds make the
    # predicate a reduction over the batch: general path, XLA's answer.
    xs = np.arange(12, dtype=np.int32).reshape(3, 4)
    v = jax.vmap(lambda x: lax.fori_loop(0, 6, lambda i, c: c * 2 - i, x))
    assert loop_runs(v, xs) == counted(1, 6)
    vb = jax.vmap(lambda x, n: lax.fori_loop(0, n, lambda i, c: c * 2 - i, x))
    assert loop_runs(vb, xs, np.array([1, 4, 2], np.int32)) == general(1, 4)


CAPTURED_BOUND = """
module @m {
  func.func public @main(%x: tensor<4xi32>, %n: tensor<i32>) -> (tensor<i32>, tensor<4xi32>) {
    %c0 = stablehlo.constant dense<0> : tensor<i32>
    %0:2 = stablehlo.while(%i = %c0, %s = %x) : tensor<i32>, tensor<4xi32>
    cond {
      %p = stablehlo.compare GT, %n, %i, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %p : tensor<i1>
    } do {
      %c2 = stablehlo.constant dense<2> : tensor<i32>
      %1 = stablehlo.add %c2, %i : tensor<i32>
      %2 = stablehlo.add %s, %s : tensor<4xi32>
      stablehlo.return %1, %2 : tensor<i32>, tensor<4xi32>
    }
    return %0#0, %0#1 : tensor<i32>, tensor<4xi32>
  }
}
"""


@pytest.mark.parametrize("n,trips", [(7, 4), (8, 4), (0, 0), (-5, 0)])
def test_bound_captured_from_outside_the_loop(n, trips):
    # Not what JAX emits (it carries captured bounds), but valid StableHLO.
    before = _pjrtx.loop_stats()
    assert_same_mlir(CAPTURED_BOUND, np.arange(4, dtype=np.int32), np.int32(n))
    after = _pjrtx.loop_stats()
    assert after["counted_runs"] - before["counted_runs"] == 1
    assert after["counted_iterations"] - before["counted_iterations"] == trips


def test_condition_with_more_than_a_compare_is_general():
    # The counter goes through a widening convert: not the strict pattern.
    text = CAPTURED_BOUND.replace(
        "%p = stablehlo.compare GT, %n, %i, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>",
        "%w = stablehlo.convert %i : (tensor<i32>) -> tensor<i64>\n"
        "      %m = stablehlo.convert %n : (tensor<i32>) -> tensor<i64>\n"
        "      %p = stablehlo.compare GT, %m, %w, SIGNED : (tensor<i64>, tensor<i64>) -> tensor<i1>")
    before = _pjrtx.loop_stats()
    assert_same_mlir(text, np.arange(4, dtype=np.int32), np.int32(7))
    after = _pjrtx.loop_stats()
    assert after["general_runs"] - before["general_runs"] == 1
    assert after["counted_runs"] == before["counted_runs"]


# ---------------------------------------------------------------------------
# Host-folded index arithmetic (loops/host_fold.h): in a counted loop's traced
# blocks, scalar integer work on induction variables and constants is
# computed on the host, exactly as StableHLO defines it, and its
# instructions are skipped. Each op below runs on values that reach its edge
# cases (wrap, division by zero, INT_MIN / -1, shift counts past the width,
# narrowing converts); every result lands in an integer buffer, so pjrtx must
# equal XLA:CPU exactly, and the loop must have run folded.

def _index_ops(i):
    """Integer scalars computed from the counter i (int32) alone."""
    zero = i * 0
    imin = jnp.int32(np.iinfo(np.int32).min) + zero
    u = (-i).astype(jnp.uint32) * jnp.uint32(2654435761)  # wraps
    b = (i * 37).astype(jnp.int8)                           # narrows
    sh = i % 40                                             # counts past 32
    vals = [
        i % 64, (i * 7919) % 4096, (-i) % 7, (-i) // 4, lax.rem(-i, 7), lax.div(-i, 4),
        lax.div(i, zero), lax.rem(i, zero), lax.div(imin, zero - 1), lax.rem(imin, zero - 1),
        lax.div(u, jnp.uint32(0) + zero.astype(jnp.uint32)).astype(jnp.int32),
        (u % jnp.uint32(1000)).astype(jnp.int32), (u // jnp.uint32(3)).astype(jnp.int32),
        b.astype(jnp.int32), (b * b).astype(jnp.int32), lax.div(b, jnp.int8(-3)).astype(jnp.int32),
        lax.shift_left(i, sh), lax.shift_right_logical(-i, sh), lax.shift_right_arithmetic(-i, sh),
        lax.shift_right_arithmetic(u, sh.astype(jnp.uint32)).astype(jnp.int32),
        lax.shift_left(b, (i % 10).astype(jnp.int8)).astype(jnp.int32),
        jnp.where(i % 3 == 0, i, -i), lax.clamp(-5, i - 10, 5), jnp.minimum(i, 7 - i),
        jnp.maximum(u, jnp.uint32(7)).astype(jnp.int32), jnp.abs(imin + i), -(imin + i % 2),
        ~i, i ^ 0x5a5a, i & 12, i | 3, (i > 5).astype(jnp.int32) + (u < jnp.uint32(2**31)),
        jnp.logical_xor(i % 2 == 0, i % 3 == 0).astype(jnp.int32),
        jnp.logical_not(i == 3).astype(jnp.int32), (i * 65537 * 65537),
    ]
    return jnp.stack([v.astype(jnp.int32) for v in vals])


def _folded_loop(n, static=True):
    k = len(_index_ops(jnp.int32(0)))

    def f(buf, hi):
        def body(i, buf):
            return buf.at[i % buf.shape[0]].set(_index_ops(i) + buf[(i * 3) % buf.shape[0]])
        return lax.fori_loop(0, n if static else hi, body, buf)
    return f, np.zeros((16, k), np.int32)


def folded_runs(f, *args):
    before = _pjrtx.loop_stats()
    assert_same(f, *args)
    return _pjrtx.loop_stats()["folded_iterations"] - before["folded_iterations"]


@pytest.mark.parametrize("static", [True, False])
def test_host_fold_matches_xla_exactly(static):
    f, buf = _folded_loop(100, static)
    # 100 iterations: the first 2 eager (folding needs the traced blocks),
    # then blocks of 16 while 16 are left, the rest one by one.
    assert folded_runs(f, buf, np.int32(100)) == 96


@pytest.mark.parametrize("lo", [2**31 - 40, -(2**31)])
def test_host_fold_counter_at_the_type_edges(lo):
    # i * 7919, -i and i + 10 wrap here; the counter itself does not.
    def f(buf):
        def body(i, buf):
            return buf.at[i % 16].set(_index_ops(i))
        return lax.fori_loop(lo, lo + 39, body, buf)
    assert folded_runs(f, np.zeros((16, len(_index_ops(jnp.int32(0)))), np.int32)) == 32


def test_host_fold_with_x64_and_unsigned_counters():
    with jax.enable_x64(True):
        def f(buf):
            def body(i, buf):
                j = i.astype(jnp.uint64) * np.uint64(0x9E3779B97F4A7C15)  # wraps in 64 bits
                v = jnp.stack([(j >> np.uint64(7)).astype(jnp.int64), (i * i) % 1000003,
                               lax.div(i - 50, np.int64(-3)), (j % np.uint64(97)).astype(jnp.int64)])
                return buf.at[i % 8].set(v)
            return lax.fori_loop(np.int64(2**62), np.int64(2**62) + 60, body, buf)
        assert folded_runs(f, np.zeros((8, 4), np.int64)) == 48


def test_host_fold_leaves_carry_dependent_work_in_the_graph():
    # indices from the carry (a traced value, not an induction variable)
    # are not folded; the counter's are, in the same body
    def f(x):
        def body(i, c):
            xs, j = c
            return xs.at[(j + i % 5) % 32].add(i % 7), (j * 3 + 1) % 32
        return lax.fori_loop(0, 50, body, (x, jnp.int32(1)))
    assert folded_runs(f, np.zeros(32, np.int32)) == 48


def _slice_start_loop(n, it):
    """A counted loop whose dynamic_slice / dynamic_update_slice starts are
    folded values of index type `it` that leave [0, dim - size] on both
    sides (lax's ops pass them on unnormalized: StableHLO clamps)."""
    def f(buf, grid):
        def body(i, c):
            buf, grid = c
            a = (i * 7).astype(it) - it(20)          # negative early, past the end late
            b = ((i * 5) % 23).astype(it)            # up to 22, past 13 - 3
            row = lax.dynamic_slice(buf, (a,), (4,))
            win = lax.dynamic_slice(grid, (b, a), (3, 2))
            buf = lax.dynamic_update_slice(buf, row[::-1] + win.sum().astype(buf.dtype), (b,))
            grid = lax.dynamic_update_slice(grid, win * 2 + 1, (a - it(3), b))
            return buf, grid
        return lax.fori_loop(0, n, body, (buf, grid))
    return f, np.arange(40, dtype=np.int32), np.arange(13 * 9, dtype=np.int32).reshape(13, 9)


@pytest.mark.parametrize("it", [np.int32, np.uint32, np.int8, np.int16])
def test_host_fold_clamps_slice_starts_on_the_host(it):
    # The starts' clamps are host work too (HostFold::Start): exact against
    # XLA:CPU with starts below 0 and past the bound (uint32: the negative
    # ones wrap to huge values; int8: the dims' bounds fit the type), and
    # the traced block holds no clamp kernel.
    from oracle import primitives_per_call
    f, buf, grid = _slice_start_loop(64, it)
    assert folded_runs(f, buf, grid) == 48
    prims = primitives_per_call(f, buf, grid)
    assert not [k for k in prims if "Minimum" in k or "Maximum" in k], prims


# ---------------------------------------------------------------------------
# Small values on the host (host_small.h): in a general while loop whose
# predicate is integer/pred work, the steps on computed small values run on
# the host (no MLX node, no wait for the predicate). The answers must equal
# XLA:CPU's exactly; `host_steps` proves the host path ran (or did not).

def host_steps(f, *args, **kw):
    before = _pjrtx.loop_stats()["host_steps"]
    assert_same(f, *args, **kw)
    return _pjrtx.loop_stats()["host_steps"] - before


def test_host_small_vmapped_while_with_buffers():
    # vmap of a data-dependent while: the predicate is any(step < n) over a
    # batch of counters, the body writes a float buffer at each counter
    def one(start, xs, m):
        def body(c):
            step, xs = c
            # (batched indices make gathers with batching dims; their index
            # components are taken and clamped on the host)
            v = xs[step // 2] * 0.5 + lax.dynamic_slice(xs, (step // 3,), (1,))[0] * 0.25
            return step + 1, xs.at[step].set(v + step + m[step % 8, (step * 3) % 9 - 1])
        return lax.while_loop(lambda c: c[0] < xs.shape[0], body, (start, xs))

    starts = np.array([0, 3, 7], np.int32)
    xs = (np.arange(3 * 40, dtype=np.float32) / 8 - 7).reshape(3, 40)
    m = np.arange(3 * 64, dtype=np.float32).reshape(3, 8, 8)
    # products by powers of two are exact and each add is rounded once, the
    # same way on both sides: the results must be equal
    assert host_steps(jax.vmap(one), starts, xs, m) > 0


def test_host_small_integer_edge_cases_in_a_while():
    # every host integer op at its edge cases, on a carried counter the
    # predicate reads (so the loop runs on host values), with a switch on
    # the counter (its index read without a wait) and integer reductions
    def f(buf):
        def cond(c):
            i, v, buf = c
            return jnp.any(v < 40) & (i < 60)

        def body(c):
            i, v, buf = c
            branch = lax.switch(i % 3, [lambda: v + 1, lambda: v * 2 - 1, lambda: v ^ 5])
            # (a reduction's init that is not the identity counts once)
            row = jnp.concatenate([_index_ops(i), jnp.stack([branch.sum(), branch.max(),
                                                            jnp.bitwise_or.reduce(branch),
                                                            lax.reduce(branch, np.int32(7), lax.add, (0,))])])
            # the state the predicate reads comes from host work only
            return i + 1, jnp.where(i % 4 == 0, (v * 3) % 50, v + 1), buf.at[i % 16].set(row)

        return lax.while_loop(cond, body, (jnp.int32(0), jnp.arange(4, dtype=jnp.int32), buf))

    k = len(_index_ops(jnp.int32(0))) + 4
    assert host_steps(f, np.zeros((16, k), np.int32)) > 0


def test_host_small_moves_floats_without_arithmetic():
    # select, reshape and broadcast of small float vectors are data movement
    # (exact on the host); the float arithmetic after the loop is MLX's
    def f(v, w):
        def body(c):
            i, v, w, acc = c
            v2 = jnp.where(i % 2 == 0, w, v)
            w2 = jnp.where((jnp.arange(4) + i) % 3 == 0, v, w)
            row = jnp.broadcast_to(v2.reshape(1, 4), (2, 4)).reshape(8)
            return i + 1, v2, w2, jnp.where(i % 5 == 1, row, acc)
        # (two compares: a general loop, not a counted one)
        i, v, w, acc = lax.while_loop(lambda c: (c[0] < 23) & (c[0] >= 0), body,
                                      (jnp.int32(0), v, w, jnp.zeros(8, v.dtype)))
        return v, w, acc, acc * 2 + v.sum()

    v = np.array([1.5, -0.0, np.nan, 3.25], np.float32)
    w = np.array([np.inf, 2.0, -7.5, 1e-40], np.float32)  # a subnormal moves unchanged
    assert host_steps(f, v, w) > 0


def test_host_small_slices_concatenates_and_random_bits():
    # static slices (strided), concatenates and dynamic slices of small
    # integer values, and JAX's threefry (a counted loop of rotations over
    # slices of its constants, keys built by concatenation) on a counter the
    # predicate reads: all host work, bit-exact against XLA:CPU, and no
    # MLX primitive for any of it (the float buffer write stays MLX's)
    import jax.random as jr
    from oracle import primitives_per_call

    def f(buf, table):
        def body(c):
            i, v, buf = c
            key = jr.PRNGKey(i)
            r = jr.randint(key, (3,), 0, 1000)
            grid = jnp.concatenate([v.reshape(2, 3), r.reshape(1, 3), table[:4:2, 1:]], axis=0)
            cut = jnp.concatenate([grid[1:, ::2], grid[:4, 1:2]], axis=1)     # (4, 2) and (4, 1)
            # starts below 0 and past the bound; uint8 starts wrap to large
            d = lax.dynamic_slice(grid, (i % 7 - 3, (i * 5) % 9 - 4), (2, 2))
            u = lax.dynamic_slice(table, ((i * 3).astype(jnp.uint8), jnp.uint8(1)), (3, 1))
            row = jnp.concatenate([r, cut.reshape(-1)[:6], d.reshape(-1), u.reshape(-1)])
            return i + 1, (v + r[:1] + row[5]) % 97, buf.at[i % 8].set(row)
        return lax.while_loop(lambda c: (c[0] < 40) & (c[1][0] >= 0), body,
                              (jnp.int32(0), jnp.arange(6, dtype=jnp.int32), buf))

    buf = np.zeros((8, 16), np.int32)
    table = np.arange(24, dtype=np.int32).reshape(6, 4) * 7 - 50
    assert host_steps(f, buf, table) > 0
    prims = primitives_per_call(f, buf, table)
    host_ops = ("Xor", "Shift", "Slice", "Concatenate")
    if not versions.jax_at_least(versions.STRIDED_INDEX_AS_SLICE):
        # jax <= 0.9.0 writes grid[1:, ::2] as a gather, which stays on MLX
        # with the slices and concatenates around it (pjrtx/versions.py);
        # threefry's rotations still run on the host.
        host_ops = ("Xor", "Shift")
    moved = [k for k in prims if any(op in k for op in host_ops)]
    assert not moved, sorted(prims.items())


def test_host_lane_when_the_predicate_needs_mlx_work():
    # the predicate reads a value a switch computes (no host form): the loop
    # waits for MLX each iteration, but its counter and the switch index
    # (integer work on computed values) still run on the host
    def f(v):
        def body(c):
            i, v = c
            return i + 1, lax.switch(i % 2, [lambda: v + 3, lambda: v * 2])
        return lax.while_loop(lambda c: jnp.all(c[1] < 1000) & (c[0] < 50), body, (jnp.int32(0), v))
    assert host_steps(f, np.arange(4, dtype=np.int32)) > 0


def test_float_predicate_loop_counts_on_the_host():
    # the float state goes through log1p (no host form: libraries round it
    # differently), so the predicate waits for MLX each iteration; the
    # multiply on the computed state and the integer counter beside it run on
    # the host, the log1p, the add after it and the compare on MLX
    from oracle import primitives_per_call

    def f(x):
        return lax.while_loop(lambda c: c[0] < 10.0,
                              lambda c: (jnp.log1p(c[0] * 8.0) + c[0], c[1] + 1),
                              (x, jnp.int32(0)))
    # log1p is within a few ulps on each side (XLA's, MLX's); four chained
    # steps whose derivative is below 2 stay well under 1e-5 relative
    assert host_steps(f, np.float32(0.25), rtol=1e-5) > 0
    prims = primitives_per_call(f, np.float32(0.25))
    # 4 iterations (0.25 -> 1.35 -> 3.82 -> 7.27 -> 11.35): a log1p and an
    # add each on MLX, the predicate's compare on the 4 MLX results; no
    # multiply, and the counter's add is not among the adds
    assert prims.get("Log1p", 0) == 4 and prims.get("Add", 0) == 4, prims
    assert prims.get("Less", 0) == 4 and "Multiply" not in prims, prims


@pytest.mark.parametrize("compile_mode", ["auto", "never", "always"])
def test_random_draws_in_a_float_predicate_loop_run_threefry_on_the_host(monkeypatch, compile_mode):
    # NumPyro's samplers: a while loop whose predicate tests floats, with a
    # key split and a uniform draw per iteration. The key's threefry rounds
    # (inside jax.random's called functions) and the bits-to-float steps run
    # on the host; the float test and what depends on it run on MLX. A
    # counter updated under a float condition (a select reading a flag MLX
    # computes) stays with MLX while the plain counter runs on the host.
    # Everything is exact on both sides: integer work, u = bits/2^23 - 1
    # (exact), and comparisons of those.
    from oracle import primitives_per_call, run_on

    monkeypatch.setenv("PJRTX_COMPILE", compile_mode)

    def f(key):
        def cond(c):
            return jnp.max(c[1]) < 0.99

        def body(c):
            k, _, n, m = c
            k, sub = jax.random.split(k)
            u = jax.random.uniform(sub, (2,))
            return k, u, n + 1, jnp.where(u[0] > 0.5, m + 1, m)

        k, u, n, m = lax.while_loop(cond, body, (jax.random.wrap_key_data(key),
                                                 jnp.zeros(2, jnp.float32), jnp.int32(0),
                                                 jnp.int32(0)))
        return jax.random.key_data(k), u, n, m

    key = np.asarray(jax.random.key_data(jax.random.PRNGKey(3)))
    before = _pjrtx.loop_stats()["host_steps"]
    got = run_on(jax.devices("pjrtx")[0], f, key)
    want = run_on(jax.devices("cpu")[0], f, key)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
    assert int(np.asarray(want[2])) > 70  # enough iterations to reach the replay and fused tiers
    assert _pjrtx.loop_stats()["host_steps"] - before > 0
    prims = primitives_per_call(f, key)
    # (a float's bits read as int32 by the comparisons stays with MLX: its
    # operand is an MLX result; the draw's bits read as float32 do not)
    moved = [k for k in prims if any(op in k for op in ("Xor", "Shift", "BitwiseOr", "View float32"))]
    assert not moved, sorted(prims.items())


def test_threefry_runs_as_one_host_function():
    # jax.random's threefry2x32 helper (20 rounds of add/rotate/xor, ~120
    # steps) runs as one native host function once checked against its own
    # steps: a key split and a draw per iteration then cost a few host
    # steps each, with the same bits as XLA:CPU
    def f(key):
        def body(c):
            k, acc, n = c
            k, sub = jax.random.split(k)
            bits = jax.random.bits(sub, (4,), jnp.uint32)
            return k, acc ^ bits, n + 1
        k, acc, n = lax.while_loop(lambda c: (c[2] < 40) & (jnp.max(c[1]) > 7), body,
                                   (jax.random.wrap_key_data(key), jnp.full(4, 99, jnp.uint32),
                                    jnp.int32(0)))
        return jax.random.key_data(k), acc, n

    key = np.asarray(jax.random.key_data(jax.random.PRNGKey(11)))
    steps = host_steps(f, key)
    # 40 iterations, two threefry calls each: about 120 steps per call if the
    # rounds ran one by one (~300 per iteration), ~70 per iteration in all
    # with the native form (the split's and the draw's slicing, the loop's
    # own steps)
    assert 0 < steps < 100 * 40, steps


def test_a_function_named_threefry2x32_that_is_not_threefry_keeps_its_steps():
    # the native form is chosen by name, then checked against the callee's
    # own steps on sample inputs: a different function of the same name and
    # signature must still give its own answers
    @jax.jit
    def threefry2x32(k0, k1, x0, x1):
        return x0 + k0 * jnp.uint32(3), (x1 ^ k1) >> jnp.uint32(1)

    def f(k0, k1, x0, x1):
        def body(c):
            a, b, n = c
            a, b = threefry2x32(k0, k1, a, b)
            return a, b, n + 1
        return lax.while_loop(lambda c: c[2] < 5, body, (x0, x1, jnp.int32(0)))

    x = np.arange(6, dtype=np.uint32) * np.uint32(0x9E3779B9)
    assert host_steps(f, np.uint32(7), np.uint32(0xDEADBEEF), x, x[::-1].copy()) > 0


def _same_bits(got, want):
    # bit for bit, -0 against +0 included; any NaN matches any NaN (its
    # payload is the hardware's, not the op's)
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype)
    if got.dtype.kind != "f":
        np.testing.assert_array_equal(got, want)
        return
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    ints = np.dtype(f"u{got.dtype.itemsize}")
    np.testing.assert_array_equal(got.view(ints)[~nan], want.view(ints)[~nan])


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_small_float_math_runs_on_the_host_bit_for_bit(monkeypatch, dt):
    # A sampler's loop state is a few floats: + - * /, sqrt, neg, abs,
    # floor, ceil, round, sign, XLA's max/min/clip, compares, converts and
    # order-free reductions (max, min, sums of one or two terms) have one
    # IEEE answer, so they run on the host with the bits MLX and XLA:CPU
    # give: signed zeros, infinities, NaN and saturating float -> int
    # converts included. No MLX arithmetic primitive runs in the loop.
    from oracle import primitives_per_call, run_on

    v0 = np.array([1.5, -0.0, 0.0, np.nan, np.inf, -np.inf, 1e-30, -3.0e9, 2.5, -2.5, 3.0e9,
                   7.0, -1e-3, 1e30, 4.0, -0.5], dt)
    w0 = np.array([-0.0, 0.0, -0.0, 2.0, np.inf, 1.0, 3.0, 0.0, 2.0, -0.0, np.nan, 0.5,
                   -1e-3, 1e-30, -4.0, 0.25], dt)

    def make_f():
        # a new function per backend setting (JAX caches executables per function)
        def f(v, w):
            def body(c):
                i, v, w, out = c
                ops = [v + w, v - w, v * w, v / w, jnp.sqrt(v), -v, jnp.abs(v), jnp.floor(v),
                       jnp.ceil(v), jnp.round(v), jnp.sign(v), jnp.maximum(v, w),
                       jnp.minimum(v, w), jnp.clip(v, -1.0, w),
                       lax.clamp(v.dtype.type(-1.0), v, v.dtype.type(2.0)),
                       jnp.where(jnp.isfinite(v), w, v),
                       jnp.where(v < w, v, w), jnp.where(v <= w, 1.0, 0.0).astype(v.dtype),
                       jnp.where(v == w, v, -w), jnp.where(v != w, 2.0, 3.0).astype(v.dtype),
                       jnp.where(v > w, v, w) + jnp.where(v >= w, 1.0, 0.0).astype(v.dtype),
                       v.astype(jnp.int32).astype(v.dtype), v.astype(jnp.uint8).astype(v.dtype),
                       (v * 1e9).astype(jnp.int32).astype(v.dtype) * 0.5,
                       jnp.tile(v.reshape(8, 2).max(axis=1), 2),
                       jnp.tile(v.reshape(8, 2).min(axis=1), 2),
                       jnp.tile(v.reshape(8, 2).sum(axis=1), 2), v.reshape(16, 1).sum(axis=1)]
                # every iteration's results are kept; the operands swap sides
                return i + 1, w, v, out.at[i].set(jnp.stack(ops))

            out = jnp.zeros((4, 28, 16), v.dtype)
            # the predicate reads a float the host computes
            i, v, w, out = lax.while_loop(lambda c: c[0].astype(v.dtype) * 0.5 < 2.0,
                                          body, (jnp.int32(0), v, w, out))
            return out, (jnp.int32(1 << 24) + i + 1).astype(v.dtype)
        return f

    def on_pjrtx(host, v, w):
        monkeypatch.setenv("PJRTX_HOST", host)
        return run_on(jax.devices("pjrtx")[0], make_f(), v, w)

    with x64(np.dtype(dt).itemsize == 8):
        before = _pjrtx.loop_stats()["host_steps"]
        got = on_pjrtx("all", v0, w0)
        assert _pjrtx.loop_stats()["host_steps"] - before > 0
        for g, w in zip(got, run_on(jax.devices("cpu")[0], make_f(), v0, w0)):
            _same_bits(g, w)
        # Subnormals: XLA:CPU flushes them to zero, MLX's CPU kernels do not;
        # the host keeps MLX's bits, so compare with MLX doing the same work
        # (PJRTX_HOST=int).
        tiny = np.finfo(dt).smallest_subnormal
        vs, ws = v0.copy(), w0.copy()
        vs[6], ws[13], vs[13] = tiny, -tiny * 3, tiny * 5
        for g, w in zip(on_pjrtx("all", vs, ws), on_pjrtx("int", vs, ws)):
            _same_bits(g, w)
        monkeypatch.setenv("PJRTX_HOST", "all")
        prims = primitives_per_call(make_f(), v0, w0)
    arith = [k for k in prims if any(op in k for op in (
        "Add", "Subtract", "Multiply", "Divide", "Sqrt", "Negative", "Abs", "Floor", "Ceil",
        "Round", "Sign", "Maximum", "Minimum", "Less", "Greater", "Equal", "AsType", "Sum", "Max",
        "Min", "Select", "IsFinite", "Compiled"))]
    assert not arith, sorted(prims.items())


def test_host_setting_off_and_a_bad_value(monkeypatch):
    # PJRTX_HOST=off: every op is an MLX primitive (same answers); a value
    # it does not know is a clear error naming the variable
    def f(v):
        return lax.while_loop(lambda c: (c[0] < 9) & (c[1][0] < 100.0),
                              lambda c: (c[0] + 1, c[1] * 2.0 + 1.0), (jnp.int32(0), v))

    v = np.array([0.5, -1.0, 3.0], np.float32)
    monkeypatch.setenv("PJRTX_HOST", "off")
    assert host_steps(jax.jit(lambda v: f(v)), v) == 0
    monkeypatch.setenv("PJRTX_HOST", "all")
    assert host_steps(jax.jit(lambda v: f(v)), v) > 0
    monkeypatch.setenv("PJRTX_HOST", "floats")
    with pytest.raises(Exception, match="PJRTX_HOST must be 'all', 'int' or 'off', got 'floats'"):
        jax.jit(lambda v: f(v))(jax.device_put(v, jax.devices("pjrtx")[0]))


def test_a_draw_with_mlx_bounds_keeps_threefry_on_the_host():
    # jax.random.uniform is all host work (threefry, bits to float, the
    # scaling); with bounds MLX computes (exp of the state) its operands are
    # not all host values, and the call must still run by itself, so the
    # key's rounds stay on the host rather than being traced with the rest
    from oracle import primitives_per_call, run_on

    def f(key, x):
        def body(c):
            k, x, s, n = c
            k, sub = jax.random.split(k)
            # bounds from exp (MLX) of a carried scale s that the draws do
            # not feed back into
            u = jax.random.uniform(sub, (3,), minval=-jnp.exp(s), maxval=jnp.exp(s * 0.5))
            return k, x + u * 0.25, s * 0.5 + 0.125, n + 1
        k, x, s, n = lax.while_loop(lambda c: (c[3] < 30) & (jnp.abs(c[1][0]) < 50.0), body,
                                    (jax.random.wrap_key_data(key), x, jnp.float32(1.0),
                                     jnp.int32(0)))
        return jax.random.key_data(k), x, n

    key = np.asarray(jax.random.key_data(jax.random.PRNGKey(5)))
    x = np.array([0.5, -0.25, 1.0], np.float32)
    got = run_on(jax.devices("pjrtx")[0], f, key, x)
    want = run_on(jax.devices("cpu")[0], f, key, x)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[2], want[2])
    # s stays in [0.25, 1] (exact host arithmetic on both sides), so
    # |bounds| <= e; exp may differ by a few ulps between XLA and MLX, and a
    # draw u = lo + b * (hi - lo) with b in [0, 1) then by at most ~4 ulps
    # of e each, 0.25 of it per step, over 30 steps: x within
    # 30 * 0.25 * 4 * e * 2^-23 ~ 1e-5 absolute, plus x's own rounding
    np.testing.assert_allclose(got[1], want[1], rtol=2 ** -20, atol=3e-5)
    prims = primitives_per_call(f, key, x)
    moved = [k for k in prims if any(op in k for op in ("Xor", "Shift", "BitwiseOr"))]
    assert not moved, sorted(prims.items())
