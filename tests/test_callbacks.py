"""Host callbacks (pure_callback, io_callback, debug.print/callback, checkify)
on pjrtx against XLA:CPU: the same program runs on both; results and what the
callbacks saw (values, order, printed text) must agree."""
import gc
import threading
import time

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax import lax
from jax.experimental import checkify, io_callback

from oracle import run_on
from pjrtx import versions

PJ = jax.devices("pjrtx")[0]
CPU = jax.devices("cpu")[0]
SDS = jax.ShapeDtypeStruct


def both(make, *args):
    """make(log) -> f. Runs jit(f) on pjrtx and on CPU with a fresh log each;
    returns [(outputs, log) for pjrtx, for cpu]."""
    res = []
    for dev in (PJ, CPU):
        log = []
        out = run_on(dev, make(log), *args)
        jax.effects_barrier()
        res.append((out, log))
    return res


def assert_tree_equal(a, b):
    la, ta = jax.tree_util.tree_flatten(a)
    lb, tb = jax.tree_util.tree_flatten(b)
    assert ta == tb
    assert len(la) == len(lb)
    for x, y in zip(la, lb):
        x, y = np.asarray(x), np.asarray(y)
        assert x.dtype == y.dtype and x.shape == y.shape, (x.dtype, x.shape, y.dtype, y.shape)
        np.testing.assert_array_equal(x, y)


def assert_same_run(make, *args):
    (got, got_log), (want, want_log) = both(make, *args)
    assert_tree_equal(got, want)
    assert len(got_log) == len(want_log), (got_log, want_log)
    for g, w in zip(got_log, want_log):
        assert_tree_equal(g, w)
    return got_log


DTYPES = [np.float32, np.float16, ml_dtypes.bfloat16, np.int8, np.int32, np.uint8, np.uint32,
          np.bool_, np.complex64, ml_dtypes.int4, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2,
          ml_dtypes.float4_e2m1fn]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", [(), (0,), (2, 3)])
def test_pure_callback_dtypes_and_shapes(dtype, shape):
    x = (np.arange(int(np.prod(shape))) % 5 - 2).reshape(shape).astype(dtype)

    def host(v):
        return ~v if v.dtype == np.bool_ else (v + v).astype(v.dtype)

    def make(log):
        def f(v):
            def cb(a):
                a = np.asarray(a)
                log.append(a.copy())
                return host(a)
            return jax.pure_callback(cb, SDS(v.shape, v.dtype), v * 1 if dtype != np.bool_ else v)
        return f

    if shape == () and dtype in (ml_dtypes.int4, ml_dtypes.float4_e2m1fn) \
            and versions.xla_cpu_defect("sub-byte scalar callback"):
        # XLA:CPU is no oracle here: NumPy is (the callback's own answer).
        log = []
        got = run_on(PJ, make(log), x)
        jax.effects_barrier()
        assert_tree_equal(got, host(x))
        assert len(log) == 1 and log[0].dtype == x.dtype
        assert_tree_equal(log[0], x)
        return
    seen = assert_same_run(make, x)
    # XLA:CPU drops a pure op whose results are all empty; so does pjrtx.
    assert len(seen) == (0 if 0 in shape else 1)


def test_x64_dtypes():
    with jax.enable_x64(True):
        x = np.linspace(-1, 1, 5)
        n = np.arange(5, dtype=np.int64) - 2**40

        def make(log):
            def f(a, b):
                def cb(u, v):
                    log.append((np.asarray(u), np.asarray(v)))
                    return np.cos(u), v * 3
                return jax.pure_callback(cb, (SDS(a.shape, a.dtype), SDS(b.shape, b.dtype)), a, b)
            return f

        assert_same_run(make, x, n)


def test_pytrees_and_many_results():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)

    def make(log):
        def f(a):
            def cb(d):
                log.append(d)
                return {"s": d["x"].sum(0), "p": (d["x"] * d["k"], np.int32(7))}
            out = SDS((3,), np.float32), (SDS((2, 3), np.float32), SDS((), np.int32))
            return jax.pure_callback(cb, {"s": out[0], "p": out[1]}, {"x": a, "k": a[0, 1]})
        return f

    assert_same_run(make, x)


def test_np_asarray_of_callback_result():
    # The result read right away (jaxlib waits for it without the GIL).
    f = jax.jit(lambda v: jax.pure_callback(np.exp, SDS(v.shape, v.dtype), v) + 1)
    x = np.linspace(-2, 2, 7, dtype=np.float32)
    np.testing.assert_array_equal(np.asarray(f(jax.device_put(x, PJ))),
                                  np.asarray(f(jax.device_put(x, CPU))))


@pytest.mark.parametrize("ordered", [True, False])
def test_io_callback_in_fori_loop(ordered):
    def make(log):
        def f(x):
            def body(i, c):
                r = io_callback(lambda a, b: (log.append((a, b)), b * 2 + a)[1],
                                SDS(c.shape, c.dtype), i.astype(c.dtype), c, ordered=ordered)
                return r + 1
            return lax.fori_loop(0, 5, body, x)
        return f

    log = assert_same_run(make, np.float32(1))
    assert len(log) == 5


def test_io_callback_without_results_in_scan_and_while():
    # Resultless callbacks run every iteration, in iteration order.
    def make(log):
        def f(x):
            def step(c, t):
                io_callback(lambda a, b: log.append(("scan", a, b)), None, c, t, ordered=True)
                return c + t, c * t
            c, ys = lax.scan(step, x, jnp.arange(4.0))

            def cond(s):
                io_callback(lambda a: log.append(("cond", a)), None, s, ordered=True)
                return s < 20

            def body(s):
                io_callback(lambda a: log.append(("body", a)), None, s, ordered=True)
                return s * 2 + 1
            return c, ys, lax.while_loop(cond, body, c)
        return f

    log = assert_same_run(make, np.float32(0.5))
    assert [e[0] for e in log] == ["scan"] * 4 + ["cond", "body"] * 2 + ["cond"]


def test_unordered_callbacks_all_run():
    # Unordered callbacks in straight-line code: the same multiset of calls.
    def make(log):
        def f(x):
            for k in range(4):
                io_callback(lambda a, k=k: log.append((k, a)), None, x * k)
            jax.debug.callback(lambda a: log.append(("dbg", a)), x)
            return x
        return f

    (_, got), (_, want) = both(make, np.float32(3))
    key = lambda e: str(e)
    assert sorted(map(key, got)) == sorted(map(key, want))
    assert len(got) == 5


def test_callbacks_in_cond_branches():
    def make(log):
        def f(p, x):
            def yes(v):
                return io_callback(lambda a: (log.append(("yes", a)), a + 1)[1], SDS((), v.dtype),
                                   v, ordered=True)

            def no(v):
                jax.debug.callback(lambda a: log.append(("no", a)), v)
                return jax.pure_callback(lambda a: a - 1, SDS((), v.dtype), v)
            return lax.cond(p, yes, no, x), lax.switch(p.astype(jnp.int32), [no, yes], x * 2)
        return f

    for p in (True, False):
        log = assert_same_run(make, np.bool_(p), np.float32(4))
        assert {e[0] for e in log} == ({"yes"} if p else {"no"})


def test_debug_print_in_loop(capfd):
    def f(x):
        def body(i, c):
            jax.debug.print("step {i}: {c}", i=i, c=c)
            jax.debug.print("ordered {i}", i=i, ordered=True)
            return c * 2
        return lax.fori_loop(0, 4, body, x)

    outs = []
    for dev in (PJ, CPU):
        capfd.readouterr()
        r = run_on(dev, f, np.float32(1.5))
        jax.effects_barrier()
        outs.append((r, capfd.readouterr().out.splitlines()))
    (got, got_lines), (want, want_lines) = outs
    np.testing.assert_array_equal(got, want)
    assert sorted(got_lines) == sorted(want_lines)
    # Every iteration prints, and the ordered prints keep their order.
    assert [l for l in got_lines if l.startswith("ordered")] == [f"ordered {i}" for i in range(4)]
    assert [l for l in got_lines if l.startswith("step")] == [
        l for l in want_lines if l.startswith("step")]
    assert len(got_lines) == 8


def test_debug_print_formats_like_cpu(capfd):
    def f(x, n):
        jax.debug.print("x={x} n={n} sum={s:.3f}", x=x, n=n, s=x.sum())
        return x

    texts = []
    for dev in (PJ, CPU):
        capfd.readouterr()
        run_on(dev, f, np.linspace(0, 1, 4, dtype=np.float32), np.int32(-3))
        jax.effects_barrier()
        texts.append(capfd.readouterr().out)
    assert texts[0] == texts[1] and "n=-3" in texts[0]


@pytest.mark.parametrize("method", ["sequential", "expand_dims", "broadcast_all"])
def test_vmap_pure_callback(method):
    xs = np.arange(12, dtype=np.float32).reshape(4, 3)
    w = np.float32(0.5)

    def make(log):
        def f(xs, w):
            def cb(a, b):
                log.append((np.shape(a), np.shape(b)))
                b = np.asarray(b).reshape(np.shape(b) + (1,) * (np.ndim(a) - np.ndim(b)))
                return (np.sin(a) * b).astype(np.float32)
            g = lambda x: jax.pure_callback(cb, SDS(x.shape, x.dtype), x, w, vmap_method=method)
            return jax.vmap(g)(xs)
        return f

    log = assert_same_run(make, xs, w)
    assert len(log) == (4 if method == "sequential" else 1)


def test_vmap_io_and_debug_callbacks():
    def make(log):
        def f(xs):
            def g(x):
                jax.debug.callback(lambda a: log.append(("dbg", a)), x)
                return io_callback(lambda a: (log.append(("io", a)), a * 3)[1],
                                   SDS(x.shape, x.dtype), x)
            return jax.vmap(g)(xs)
        return f

    (got, got_log), (want, want_log) = both(make, np.arange(3, dtype=np.float32))
    np.testing.assert_array_equal(got, want)
    assert sorted(map(str, got_log)) == sorted(map(str, want_log))


def test_grad_through_pure_callback_with_custom_jvp():
    @jax.custom_jvp
    def sin(x):
        return jax.pure_callback(np.sin, SDS(x.shape, x.dtype), x, vmap_method="expand_dims")

    @sin.defjvp
    def sin_jvp(primals, tangents):
        (x,), (t,) = primals, tangents
        return sin(x), jax.pure_callback(np.cos, SDS(x.shape, x.dtype), x,
                                         vmap_method="expand_dims") * t

    f = lambda x: jax.grad(lambda v: (sin(v) * v).sum())(x)
    x = np.linspace(-1, 1, 5, dtype=np.float32)
    np.testing.assert_array_equal(run_on(PJ, f, x), run_on(CPU, f, x))
    per_elem = lambda x: jax.vmap(jax.grad(sin))(x)
    np.testing.assert_array_equal(run_on(PJ, per_elem, x), run_on(CPU, per_elem, x))


def _raise_value_error(x):
    raise ValueError("callback says no: 17")


@pytest.mark.parametrize("kind", ["pure", "io", "io_ordered", "debug"])
def test_exception_reaches_the_caller_and_next_call_works(kind):
    def f(x):
        if kind == "pure":
            return jax.pure_callback(_raise_value_error, SDS(x.shape, x.dtype), x)
        if kind == "debug":
            jax.debug.callback(_raise_value_error, x)
            return x + 1
        return io_callback(_raise_value_error, SDS(x.shape, x.dtype), x, ordered=kind == "io_ordered")

    x = np.float32(2)
    for dev in (PJ, CPU):
        with pytest.raises(RuntimeError, match="callback says no: 17"):
            np.asarray(jax.jit(f)(jax.device_put(x, dev)))
    # XLA:CPU raises from the jitted call, so no failed run is left behind
    # for effects_barrier to raise again; the same holds on pjrtx.
    jax.effects_barrier()
    with pytest.raises(RuntimeError, match="_raise_value_error"):
        jax.jit(f)(jax.device_put(x, PJ))
    g = jax.jit(lambda v: jax.pure_callback(lambda a: a * 2, SDS((), v.dtype), v))
    assert float(g(jax.device_put(x, PJ))) == 4.0


@pytest.mark.parametrize("bad, match", [
    (lambda: np.zeros((2,), np.float32), r"Incorrect output shape for return value #0: "
                                         r"Expected: \(3,\), Actual: \(2,\)"),
    (lambda: np.zeros((3,), np.int32), r"Incorrect output dtype for return value #0: "
                                       r"Expected: float32, Actual: int32"),
    (lambda: (np.zeros(3, np.float32),) * 2, r"Mismatched number of outputs"),
])
def test_wrong_results_name_the_callback(bad, match):
    def cb(_):
        return bad()
    f = jax.jit(lambda v: jax.pure_callback(cb, SDS((3,), np.float32), v))
    with pytest.raises(RuntimeError, match=match) as e:
        f(jax.device_put(np.float32(1), PJ))
    assert "jax.pure_callback(test_wrong_results_name_the_callback.<locals>.cb)" in str(e.value)
    # As on CPU: the same check fails there too.
    with pytest.raises(RuntimeError, match=match):
        f(jax.device_put(np.float32(1), CPU))


def test_python_literal_is_canonicalized():
    f = jax.jit(lambda v: jax.pure_callback(lambda a: 42.0, SDS((), np.float32), v))
    assert run_on(PJ, f, np.float32(0)) == run_on(CPU, f, np.float32(0)) == 42.0


def test_callback_into_pjrtx_fails_instead_of_hanging():
    # The callback runs inside a pjrtx run: work it queues on pjrtx could
    # only start after it returns, so it is refused with a clear error.
    # Compiled ahead (a compile inside a callback is the next test).
    g = jax.jit(lambda v: v + 1).lower(SDS((), np.float32)).compile()

    def cb(a):
        return np.asarray(g(jax.device_put(a, PJ)))
    f = jax.jit(lambda v: jax.pure_callback(cb, SDS((), v.dtype), v))
    with pytest.raises(RuntimeError, match="host callback cannot run pjrtx computations"):
        f(jax.device_put(np.float32(1), PJ))
    assert float(run_on(PJ, lambda v: v * 3, np.float32(2))) == 6.0


def test_compile_inside_a_callback_fails_instead_of_hanging():
    # jnp on the callback's NumPy input compiles for the default backend,
    # pjrtx, on a jaxlib worker thread that would wait for the executor,
    # which waits for this callback: refused with a clear error instead.
    def cb(a):
        return np.asarray(jax.jit(lambda t: t * 7 + 1, device=PJ)(a), np.float32)
    f = jax.jit(lambda v: jax.pure_callback(cb, SDS((), v.dtype), v))
    with pytest.raises(Exception, match="cannot compile .* while a host callback runs"):
        np.asarray(f(jax.device_put(np.float32(1), PJ)))
    assert float(run_on(PJ, lambda v: v * 5, np.float32(2))) == 10.0


def test_callback_while_another_thread_compiles():
    # Thread A runs a program whose callback takes the GIL (and sleeps in
    # Python) while thread B compiles programs (the frontend takes the GIL
    # and compile waits for the executor): neither may wait for the other.
    started, done = threading.Event(), threading.Event()
    errors, results = [], {}

    def cb(a):
        started.set()
        time.sleep(0.3)
        return a + 1

    def run_a():
        try:
            f = jax.jit(lambda v: lax.fori_loop(
                0, 3, lambda i, c: jax.pure_callback(cb, SDS((), c.dtype), c), v))
            results["a"] = float(f(jax.device_put(np.float32(0), PJ)))
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    def run_b():
        try:
            started.wait(10)
            outs = []
            for k in range(3):
                g = jax.jit(lambda v, k=k: jnp.tanh(v * k) + jnp.arange(4.0 + k).sum())
                outs.append(float(g(jax.device_put(np.float32(1), PJ))))
            results["b"] = outs
        except Exception as e:  # noqa: BLE001
            errors.append(e)
        finally:
            done.set()

    ta, tb = threading.Thread(target=run_a, daemon=True), threading.Thread(target=run_b, daemon=True)
    ta.start(), tb.start()
    ta.join(60), tb.join(60)
    assert not ta.is_alive() and not tb.is_alive(), "deadlock"
    assert not errors, errors
    assert results["a"] == 3.0
    # f32 tanh within a few ulps of the f64 value, plus an exact integer sum.
    np.testing.assert_allclose(results["b"], [np.tanh(k) + sum(range(4 + k)) for k in range(3)],
                               rtol=4 * np.finfo(np.float32).eps)


def test_callbacks_from_several_threads():
    def run(k, out):
        f = jax.jit(lambda v: io_callback(lambda a: a * k, SDS((4,), np.float32), v))
        out[k] = [np.asarray(f(jax.device_put(np.arange(4, dtype=np.float32) + i, PJ)))
                  for i in range(5)]

    out = {}
    threads = [threading.Thread(target=run, args=(k, out), daemon=True) for k in range(1, 4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads), "deadlock"
    for k in range(1, 4):
        for i, r in enumerate(out[k]):
            np.testing.assert_array_equal(r, (np.arange(4, dtype=np.float32) + i) * k)


def test_effects_barrier_waits_for_callbacks():
    seen = []

    def slow(a):
        time.sleep(0.2)
        seen.append(float(a))

    f = jax.jit(lambda v: (io_callback(slow, None, v), v)[1])
    f(jax.device_put(np.float32(5), PJ))
    jax.effects_barrier()
    assert seen == [5.0]


def test_checkify_check_under_jit():
    def f(x):
        checkify.check(jnp.all(x > 0), "x must be positive, got {}", x.min())
        return x * 2

    old = jax.config.jax_experimental_unsafe_xla_runtime_errors
    jax.config.update("jax_experimental_unsafe_xla_runtime_errors", True)
    try:
        np.testing.assert_array_equal(run_on(PJ, f, np.ones(3, np.float32)), np.full(3, 2.0))
        for dev in (PJ, CPU):
            with pytest.raises(Exception, match="x must be positive, got -1"):
                run_on(dev, f, np.array([1, -1, 2], np.float32))
    finally:
        jax.config.update("jax_experimental_unsafe_xla_runtime_errors", old)
    # Functionalized checkify needs no callback; it still works.
    err, out = jax.jit(checkify.checkify(f))(jax.device_put(np.array([-2.0], np.float32), PJ))
    assert "x must be positive, got -2" in err.get()


def test_callables_are_freed_with_their_executables():
    from pjrtx.jax_rules import callbacks

    def compile_and_run(k):
        f = jax.jit(lambda v: jax.pure_callback(lambda a: a + k, SDS((), v.dtype), v))
        return float(f(jax.device_put(np.float32(1), PJ)))

    compile_and_run(0)
    gc.collect()
    base = callbacks.live_callbacks()
    for k in range(30):
        assert compile_and_run(k) == 1.0 + k
    gc.collect()
    # Each dropped executable's entry goes (allow the last one still queued).
    assert callbacks.live_callbacks() <= base + 1


@pytest.mark.parametrize("kind", ["pure", "io", "io_ordered"])
def test_callback_sharding_annotation_matches_xla(kind):
    # JAX puts a maximal sharding on its own callback custom call (with an
    # extra entry for an ordered io_callback's token); pjrtx's rule must
    # write the same annotation, which users and upstream tests read in the
    # lowered text.
    import re

    from jax.experimental import io_callback

    def f(x):
        shape = jax.ShapeDtypeStruct(x.shape, x.dtype)
        if kind == "pure":
            return jax.pure_callback(lambda a: a * 2, shape, x)
        return io_callback(lambda a: a * 2, shape, x, ordered=kind == "io_ordered")

    def annotations(platform):
        x = jax.device_put(np.arange(4, dtype=np.float32), jax.devices(platform)[0])
        text = jax.jit(f).lower(x).as_text()
        return re.findall(r"(?:sdy|mhlo)\.sharding = [^{}]*?>\]>|mhlo\.sharding = \"[^\"]*\"",
                          text)

    want = annotations("cpu")
    assert want  # XLA:CPU's lowering carries one
    assert annotations("pjrtx") == want


# A custom primitive lowered with JAX's own helper for Python callbacks
# (jax.interpreters.mlir.emit_python_callback), as libraries and upstream's
# jaxpr_effects_test do; JAX's helper refuses platforms other than
# cpu/cuda/rocm/tpu, ours takes pjrtx.
def _make_host_prim():
    from jax._src import core as jcore
    from jax.interpreters import mlir as public_mlir

    seen = []
    prim = jcore.Primitive("pjrtx_test_host_affine")
    prim.def_impl(lambda x: x * 2 + 1)
    prim.def_abstract_eval(lambda x: x)

    def host(x):
        seen.append(np.array(x))
        return (x * 2 + 1,)

    def lowering(ctx, x):
        out, token, keep = public_mlir.emit_python_callback(
            ctx, host, None, [x], ctx.avals_in, ctx.avals_out,
            has_side_effect=True, returns_token=False)
        assert token is None and callable(keep)
        return out

    public_mlir.register_lowering(prim, lowering)
    return prim, seen


def test_emit_python_callback_custom_primitive():
    prim, seen = _make_host_prim()
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    f = lambda a: prim.bind(a * 3) - 1
    got = run_on(PJ, f, x)
    want = run_on(CPU, f, x)
    assert_tree_equal(got, want)
    assert len(seen) == 2
    assert_tree_equal(seen[0], seen[1])


def test_emit_python_callback_checks_results():
    from jax._src import core as jcore
    from jax.interpreters import mlir as public_mlir

    prim = jcore.Primitive("pjrtx_test_host_wrong_shape")
    prim.def_abstract_eval(lambda x: x)
    public_mlir.register_lowering(prim, lambda ctx, x: public_mlir.emit_python_callback(
        ctx, lambda a: (np.zeros(7, a.dtype),), None, [x], ctx.avals_in, ctx.avals_out,
        has_side_effect=False, returns_token=False)[0])
    with pytest.raises(Exception, match="Incorrect output shape"):
        jax.block_until_ready(run_on(PJ, prim.bind, np.ones(3, np.float32)))


_EXIT_GATE_CHILD = r"""
import threading, time
import numpy as np
from pjrtx import jax_plugin; jax_plugin.ensure_registered()
import jax
from pjrtx._contract import load_extension
started, finished = threading.Event(), []
def slow(v):
    started.set(); time.sleep(0.5); finished.append(1); return v
f = jax.jit(lambda a: jax.pure_callback(slow, jax.ShapeDtypeStruct(a.shape, a.dtype), a))
t = threading.Thread(target=lambda: np.asarray(f(np.ones(3, np.float32))))
t.start()
assert started.wait(60)
load_extension()._close_callbacks(60.0)
print("WAITED", len(finished)); t.join()
try:
    np.asarray(f(np.ones(3, np.float32))); print("NO ERROR")
except Exception as e:
    print("REFUSED", "shuts down" in str(e))
"""


def test_interpreter_exit_waits_for_running_callbacks_and_refuses_new_ones(tmp_path):
    # At exit (atexit runs _close_callbacks) a callback still running
    # finishes before Python finalizes, since a thread that takes the GIL
    # during finalization is ended by Python and aborts the process; one
    # that starts later fails with an error instead of taking the GIL.
    import subprocess
    import sys

    from _procs import child_env

    # cwd: `-c` puts it first on sys.path, and a source checkout there
    # would shadow the installed package.
    p = subprocess.run([sys.executable, "-c", _EXIT_GATE_CHILD], cwd=tmp_path,
                       env=child_env(JAX_PLATFORMS="pjrtx,cpu"), capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "WAITED 1" in p.stdout and "REFUSED True" in p.stdout, p.stdout + p.stderr[-3000:]
