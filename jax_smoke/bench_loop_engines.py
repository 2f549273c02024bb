"""Which engine should run a latency-bound loop on the host? A measurement.

    python jax_smoke/bench_loop_engines.py [--repeats 20]

Issue 36 asks for a loop to run whole as compiled host code and for the engine
to be chosen by measurement. Two candidates, on the bench's `loop` row
(1,000 steps of x * 0.999 + 0.001 over f32[16]) and `bufloop` row (100,000
steps of xs.at[i % n].set(xs[(i * 7919) % n] * 0.5 + 1) over f32[4096]):

- xla: jaxlib's own XLA CPU compiler (`xla_client.make_cpu_client()`,
  `compile_and_load` of the loop's StableHLO). A call moves the state in
  (`device_put`), runs (`execute`) and reads it back (`np.asarray`), which is
  what the plugin's executor thread would do. Every step of that holds the GIL.
- cxx: C++ for the loop, built with the system compiler as MLX's CPU JIT builds
  its kernels (`c++ -O2 -shared -fPIC`), called through a plain function
  pointer. The C++ here is written the way an emitter over the plan writes it:
  one statically shaped buffer per loop-carried value, one scalar statement per
  plan op, no library calls. The calls run in a C++ thread with no GIL.

Each engine is timed per call from a worker thread in two states of the main
thread: idle (waiting in `join`) and busy (running Python bytecode, as a
user's dispatch loop does under JAX's asynchronous dispatch). Its compile time
is the first build (the C++ compiler's, or XLA's `compile_and_load`). Every
answer is checked against jax.jit on XLA:CPU; a mismatch exits non-zero.
"""
from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import numpy as np  # noqa: E402
from jax import lax  # noqa: E402
from jax._src.lib import xla_client as xc  # noqa: E402

DECAY, SHIFT = 0.999, 0.001
BUF_N, BUF_STEPS, BUF_STRIDE = 4096, 100_000, 7919
LOOP_N, LOOP_STEPS = 16, 1000


def loop_fn(x):
    return lax.fori_loop(0, LOOP_STEPS, lambda i, c: c * np.float32(DECAY) + np.float32(SHIFT), x)


def bufloop_fn(xs):
    def body(i, xs):
        return xs.at[i % BUF_N].set(xs[(i * BUF_STRIDE) % BUF_N] * np.float32(0.5) + np.float32(1.0))

    return lax.fori_loop(0, BUF_STEPS, body, xs)


# What an emitter writes for each loop: the carried state in a local buffer,
# the predicate and body as scalar statements over static shapes. Integer
# semantics as StableHLO's: i32 wraps, rem truncates, negative indices of
# the jnp `% n` already made non-negative by jnp.
CXX = r"""
#include <cstdint>
#include <cstring>
#include <chrono>
#include <thread>
extern "C" {
void loop(const float* in, float* out) {
  float x[16];
  std::memcpy(x, in, sizeof x);
  for (int32_t i = 0; i < 1000; ++i)
    for (int k = 0; k < 16; ++k) x[k] = x[k] * 0.999f + 0.001f;
  std::memcpy(out, x, sizeof x);
}
void bufloop(const float* in, float* out) {
  static thread_local float xs[4096];
  std::memcpy(xs, in, sizeof xs);
  for (int32_t i = 0; i < 100000; ++i) {
    int32_t r = (int32_t)((uint32_t)i * 7919u) % 4096; if (r < 0) r += 4096;
    int32_t w = i % 4096; if (w < 0) w += 4096;
    float v = xs[r] * 0.5f + 1.0f;
    xs[w] = v;
  }
  std::memcpy(out, xs, sizeof xs);
}
// Calls fn n times in a fresh C++ thread (no GIL anywhere) and stores each
// call's wall time in ns.
void time_calls(void (*fn)(const float*, float*), const float* in, float* out,
                int n, int64_t* ns) {
  std::thread t([&] {
    for (int k = 0; k < n; ++k) {
      auto a = std::chrono::steady_clock::now();
      fn(in, out);
      ns[k] = std::chrono::duration_cast<std::chrono::nanoseconds>(
                  std::chrono::steady_clock::now() - a).count();
    }
  });
  t.join();
}
}
"""


def busy_python(stop: threading.Event) -> None:
    x = 0
    while not stop.is_set():
        for k in range(1000):
            x = (x * 31 + k) % 1000003


def in_worker(call, repeats: int, busy: bool) -> float:
    """Median seconds per call of call(), run in a worker thread while the
    main thread either waits (join) or runs Python."""
    times: list[float] = []
    done = threading.Event()

    def work():
        for _ in range(repeats):
            t0 = time.perf_counter()
            call()
            times.append(time.perf_counter() - t0)
        done.set()

    t = threading.Thread(target=work)
    t.start()
    if busy:
        busy_python(done)
    t.join()
    return statistics.median(times)


def xla_engine(fn, x0: np.ndarray, repeats: int) -> dict:
    text = jax.jit(fn).lower(x0).as_text()
    cli = xc.make_cpu_client()
    dev = cli.devices()[0]
    t0 = time.perf_counter()
    exe = cli.compile_and_load(text, xc.DeviceList((dev,)), xc.CompileOptions())
    compile_s = time.perf_counter() - t0

    def call():
        (y,) = exe.execute([jax.device_put(x0, dev)])
        return np.asarray(y)

    out = call()
    return dict(compile_s=compile_s, out=out, idle_s=in_worker(call, repeats, False),
                busy_s=in_worker(call, repeats, True))


def build_cxx(tmp: str) -> tuple[ctypes.CDLL, float]:
    src = os.path.join(tmp, "loops.cc")
    lib = os.path.join(tmp, "loops.so")
    with open(src, "w") as f:
        f.write(CXX)
    cxx = os.environ.get("CXX", "c++")
    t0 = time.perf_counter()
    subprocess.run([cxx, "-O2", "-std=c++17", "-shared", "-fPIC", "-pthread", src, "-o", lib],
                   check=True)
    return ctypes.CDLL(lib), time.perf_counter() - t0


def cxx_engine(so: ctypes.CDLL, name: str, x0: np.ndarray, repeats: int) -> dict:
    fn = getattr(so, name)
    fp = ctypes.cast(fn, ctypes.c_void_p)
    out = np.empty_like(x0)
    ns = np.zeros(repeats, np.int64)
    ptr = lambda a: a.ctypes.data_as(ctypes.c_void_p)  # noqa: E731

    def timed(busy: bool) -> float:
        done = threading.Event()

        def work():  # ctypes drops the GIL for the whole foreign call
            so.time_calls(fp, ptr(x0), ptr(out), ctypes.c_int(repeats), ptr(ns))
            done.set()

        t = threading.Thread(target=work)
        t.start()
        if busy:
            busy_python(done)
        t.join()
        return float(np.median(ns)) * 1e-9

    idle = timed(False)
    busy = timed(True)
    return dict(out=out.copy(), idle_s=idle, busy_s=busy)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=20)
    args = ap.parse_args()
    cases = [
        ("loop", loop_fn, np.linspace(-1, 1, LOOP_N, dtype=np.float32)),
        ("bufloop", bufloop_fn, np.linspace(-1, 1, BUF_N, dtype=np.float32)),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        so, cxx_compile_s = build_cxx(tmp)
        print(f"cxx: one build of both loops: {cxx_compile_s * 1e3:.0f} ms "
              f"({os.environ.get('CXX', 'c++')} -O2)")
        print(f"{'row':8} {'engine':6} {'compile':>10} {'idle/call':>12} {'busy/call':>12} {'busy/idle':>9}")
        ok = True
        for name, fn, x0 in cases:
            jf = jax.jit(fn)
            want = np.asarray(jf(x0))
            xd = jax.device_put(x0)
            ref = in_worker(lambda: jf(xd).block_until_ready(), args.repeats, False)
            print(f"{name:8} {'jit':6} {'':>10} {ref * 1e6:>10.1f}us   (jax.jit on XLA:CPU, the reference)")
            x = xla_engine(fn, x0, args.repeats)
            c = cxx_engine(so, name, x0, args.repeats)
            for eng, r in (("xla", x), ("cxx", c)):
                # Both round each multiply and add once, in the same order:
                # bit for bit unless a compiler contracts a*b+c into an FMA.
                # The maps contract (factor 0.999 or 0.5), so an FMA's extra
                # precision stays within a few ulp of the value.
                if not np.allclose(r["out"], want, rtol=1e-5, atol=1e-6):
                    print(f"MISMATCH {name} {eng}: max err {np.max(np.abs(r['out'] - want))}")
                    ok = False
                comp = f"{r['compile_s'] * 1e3:.0f} ms" if "compile_s" in r else "(above)"
                print(f"{name:8} {eng:6} {comp:>10} {r['idle_s'] * 1e6:>10.1f}us "
                      f"{r['busy_s'] * 1e6:>10.1f}us {r['busy_s'] / r['idle_s']:>8.1f}x")
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
