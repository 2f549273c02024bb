"""pjrtx against hand-written MLX and XLA:CPU, workload by workload.

    python jax_smoke/bench.py [--quick] [--only mlp,adam] [--repeats 5] [--mlx-blas shipped|pjrtx]

Runs every workload (jax_smoke/_bench_workloads.py) on pjrtx, on native MLX
(`mlx.core`, `mx.compile`d) and on XLA:CPU, each backend in its own process,
all alive at once: samples are taken in rounds, each round timing every
backend once (in rotating order), so the machine's drift falls on all alike.
It prints per workload the median time per call, the ratios pjrtx / MLX and
pjrtx / XLA:CPU, GFLOP/s where the FLOPs are known, and the MLX primitives
one call evaluates on pjrtx (after pjrtx's own lowering) and in the native
MLX graph (nodes of `mx.export_to_dot`): on Metal each is a kernel launch.
pjrtx's outputs of one call are checked against XLA:CPU's (a normwise bound
per workload); a mismatch exits non-zero. --quick shrinks every workload and
the repeats, for tests. Native MLX uses the BLAS its wheel ships unless
--mlx-blas pjrtx, which loads it the way pjrtx does (PJRTX_BLAS).

Then the several-device rows (jax_smoke/_bench_multidevice.py; --only
allreduce,dp_mlp selects just them): an all-reduce of 4 KiB to 64 MiB per
device and a data-parallel MLP step over meshes of 1, 2, 4 and 8 devices, in
a second set of processes started with 8 devices (pjrtx: PJRTX_DEVICES=8;
XLA:CPU: --xla_force_host_platform_device_count=8), timed in the same
interleaved rounds, beside native MLX copying the all-reduce's bytes.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

BACKENDS = ("pjrtx", "mlx", "xla", "pjrtx_ref")
TIER_WARMUP_CALLS = 66
LABEL = {"pjrtx": "pjrtx", "mlx": "MLX", "xla": "XLA:CPU", "pjrtx_ref": "pjrtx-ref"}


def calibrate(call, target_s: float) -> int:
    """Calls per sample so that one sample lasts about target_s (a tiny call
    is timed over thousands)."""
    call()
    call()  # warm: compile, caches, allocator
    t0 = time.perf_counter()
    call()
    one = max(time.perf_counter() - t0, 1e-7)
    return max(1, min(100_000, int(target_s / one)))


def sample(call, inner: int) -> float:
    """Seconds per call, the mean over `inner` calls."""
    t0 = time.perf_counter()
    for _ in range(inner):
        call()
    return (time.perf_counter() - t0) / inner


def count_mlx_graph(outputs, path) -> int:
    import mlx.core as mx

    leaves = []

    def walk(o):
        if isinstance(o, (list, tuple)):
            for v in o:
                walk(v)
        elif isinstance(o, dict):
            for v in o.values():
                walk(v)
        else:
            leaves.append(o)

    walk(outputs)
    mx.export_to_dot(path, *leaves)
    with open(path) as f:
        return f.read().count("shape=rectangle")


def child(backend: str, args) -> None:
    import numpy as np

    if backend == "mlx":
        if args.mlx_blas == "pjrtx":
            import pjrtx  # noqa: F401  (binds libmlx's BLAS as pjrtx does)
        import mlx.core as mx

        if os.environ.get("PJRTX_DEVICE") == "cpu":
            mx.set_default_device(mx.cpu)
    else:
        if backend == "pjrtx_ref":
            backend = "pjrtx"
            os.environ["PJRTX_BLAS"] = "reference"  # before pjrtx is imported
        os.environ["JAX_PLATFORMS"] = "pjrtx" if backend == "pjrtx" else "cpu"
        import jax

        if backend == "pjrtx":
            from pjrtx import jax_plugin

            jax_plugin.ensure_registered()
        devices = jax.devices(os.environ["JAX_PLATFORMS"])
        device = devices[0]

    from _bench_multidevice import WORKLOADS as MULTI
    from _bench_workloads import WORKLOADS

    # Commands come one per line on stdin, answers go to stdout as one JSON
    # line each ("@@" marks them; libraries may print too). The parent times
    # the backends in turn, so every backend's samples interleave.
    by_name = {w.name: w for w in WORKLOADS + MULTI}
    w = run = inner = None

    def reply(obj):
        sys.stdout.write("@@" + json.dumps(obj) + "\n")
        sys.stdout.flush()

    reply({"blas": blas_of(backend)})
    for line in sys.stdin:
        cmd, _, name = line.strip().partition(" ")
        if cmd == "setup":
            w = by_name[name]
            if backend == "mlx" and w.make_mlx is None:
                w = None
                reply({"skip": True})
                continue
            size = dict(w.quick if args.quick else w.sizes)
            if backend == "mlx":
                run = w.make_mlx(size)
            else:
                size["device"], size["devices"] = device, devices
                run = w.make_jax(size)
            if backend.startswith("pjrtx") and not w.compile_time and not args.quick:
                # Steady state, as in a training loop: PJRTX_COMPILE=auto fuses a
                # function's kernels from its 65th run (replays it from the 3rd).
                # A call of a second or more (a 64 MiB all-reduce on 8 devices)
                # is all memory traffic; its warm-up stops after 5 s.
                t0 = time.perf_counter()
                for _ in range(TIER_WARMUP_CALLS):
                    run.call()
                    if time.perf_counter() - t0 > 5:
                        break
            inner = calibrate(run.call, 0.01 if args.quick else 0.3)
            reply({"inner": inner})
        elif cmd == "sample":
            reply({"s": sample(run.call, inner)})
        elif cmd == "finish":
            r = {}
            if backend == "pjrtx" and not w.compile_time:
                from pjrtx import _pjrtx

                _pjrtx.count_primitives(True)
                before = _pjrtx.primitives_evaluated()
                run.call()
                r["prims"] = _pjrtx.primitives_evaluated() - before
                _pjrtx.count_primitives(False)
            if backend == "mlx" and run.outputs is not None:
                r["prims"] = run.units * count_mlx_graph(run.outputs(),
                                                         os.path.join(args.out, f"{w.name}.dot"))
            if backend != "mlx" and not w.compile_time:
                out = run.call()
                leaves = run.digest(out) if run.digest else jax.tree_util.tree_leaves(out)
                np.savez(os.path.join(args.out, f"{args.child}_{w.name}.npz"),
                         *[np.asarray(v) for v in leaves])
            w = run = None
            reply(r)
        elif cmd == "quit":
            break


class Child:
    """One backend's process, driven line by line."""

    def __init__(self, backend, args, out, env=None):
        cmd = [sys.executable, os.path.abspath(__file__), "--child", backend, "--out", out,
               "--mlx-blas", args.mlx_blas]
        if args.quick:
            cmd.append("--quick")
        self.backend = backend
        self.p = subprocess.Popen(cmd, cwd=HERE, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  text=True, env={**os.environ, **(env or {})})
        self.hello = self.read()

    def read(self):
        for line in self.p.stdout:
            if line.startswith("@@"):
                return json.loads(line[2:])
            sys.stderr.write(line)
        raise RuntimeError(f"the {LABEL[self.backend]} process died "
                           f"(exit status {self.p.wait()})")

    def ask(self, cmd):
        self.p.stdin.write(cmd + "\n")
        self.p.stdin.flush()
        return self.read()

    def close(self):
        try:
            self.p.stdin.write("quit\n")
            self.p.stdin.close()
        except OSError:
            pass
        self.p.wait()


def interleaved(children, workloads, repeats) -> dict:
    """Per backend and workload: samples taken in rounds, each round timing
    every backend once, the order rotating from round to round; so a slow
    spell of the machine (a shared VM drifts by tens of percent within a
    minute) falls on all backends alike rather than on whichever ran then."""
    res = {c.backend: {"blas": c.hello["blas"]} for c in children}
    for w in workloads:
        live = []
        for c in children:  # one at a time: warm-up and calibration undisturbed
            if not c.ask(f"setup {w.name}").get("skip"):
                live.append(c)
        samples = {c.backend: [] for c in live}
        rounds = 3 if w.compile_time else repeats
        for r in range(rounds):
            for c in live[r % len(live):] + live[:r % len(live)]:
                samples[c.backend].append(c.ask("sample")["s"])
        for c in live:
            extra = c.ask(f"finish {w.name}")
            res[c.backend][w.name] = {"median_s": statistics.median(samples[c.backend]),
                                      "samples": samples[c.backend], **extra}
            print(f"{LABEL[c.backend]:9} {w.name:10} "
                  f"{res[c.backend][w.name]['median_s'] * 1e3:10.3f} ms", file=sys.stderr,
                  flush=True)
    return res


def blas_of(backend: str) -> str:
    if backend == "xla" or sys.platform != "linux":
        return "-"
    if backend == "mlx" and "pjrtx" not in sys.modules:
        return "as shipped"
    from pjrtx import _blas

    if backend == "mlx":
        import mlx.core as mx

        a = mx.ones((4, 4))
        mx.eval(a @ a)
    lib = _blas.bound_library("cblas_sgemm")
    return os.path.basename(lib) if lib else _blas.state["active"]


def check(w, size, out_dir, backend="pjrtx") -> str:
    """pjrtx vs XLA:CPU on one call's outputs: every float output within
    rel * max|XLA:CPU output| (normwise), integer outputs equal."""
    import numpy as np

    got_f = os.path.join(out_dir, f"{backend}_{w.name}.npz")
    want_f = os.path.join(out_dir, f"xla_{w.name}.npz")
    if not (os.path.exists(got_f) and os.path.exists(want_f)):
        return "-"
    got, want = np.load(got_f), np.load(want_f)
    rel = w.rel(size)
    worst = 0.0
    for k in want.files:
        g, v = got[k], want[k]
        if g.shape != v.shape or g.dtype != v.dtype:
            return f"FAIL {k}: {g.dtype}{g.shape} vs {v.dtype}{v.shape}"
        if v.dtype.kind in "iub":
            if not np.array_equal(g, v):
                return f"FAIL {k}: integers differ"
            continue
        scale = float(np.max(np.abs(v))) if v.size else 0.0
        err = float(np.max(np.abs(g.astype(np.float64) - v))) if v.size else 0.0
        if not err <= rel * scale:
            return f"FAIL {k}: |diff| {err:.3g} > {rel:.3g} * {scale:.3g}"
        worst = max(worst, err / scale if scale else 0.0)
    return f"ok ({worst:.1e})"


def fmt_time(s, unit):
    if s is None:
        return "-"
    return f"{1 / s:.1f} tok/s" if unit == "tok/s" else (f"{s * 1e6:.1f} us" if s < 1e-3
                                                          else f"{s * 1e3:.2f} ms")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="small sizes, few repeats (tests)")
    ap.add_argument("--only", type=lambda s: s.split(","), default=None, help="workload names")
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--mlx-blas", choices=("shipped", "pjrtx"), default="shipped")
    ap.add_argument("--reference-blas", action="store_true",
                    help="also run pjrtx with PJRTX_BLAS=reference (MLX's bundled BLAS), "
                         "a column of its own (Linux)")
    ap.add_argument("--child", choices=BACKENDS, help=argparse.SUPPRESS)
    ap.add_argument("--out", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.repeats is None:
        args.repeats = 2 if args.quick else 5
    if args.child:
        child(args.child, args)
        return 0

    from _bench_multidevice import WORKLOADS as MULTI, env_for
    from _bench_workloads import WORKLOADS

    def chosen(w):
        return ((not args.only or w.name in args.only or w.group in args.only)
                and not (args.quick and w.quick is None))

    single = [w for w in WORKLOADS if chosen(w)]
    multi = [w for w in MULTI if chosen(w)]
    # pjrtx sets MLX_ENABLE_TF32=0 (full float32 matmuls on a GPU) unless the
    # user chose; native MLX gets the same setting, so both run the same math.
    os.environ.setdefault("MLX_ENABLE_TF32", "0")
    out = tempfile.mkdtemp(prefix="pjrtx_bench_")
    backends = BACKENDS if args.reference_blas else BACKENDS[:3]
    res = mres = None
    try:
        if single:
            res = section(backends, single, args, out, lambda b: {})
        if multi:
            # Processes of their own: the device count is fixed when JAX starts,
            # and the single-device rows keep running on one-device processes.
            mres = section(BACKENDS[:3], multi, args, out, env_for)
    except RuntimeError as e:
        print(f"bench: {e}")
        return 1

    failed = False
    if single:
        failed |= report_single(single, res, args, out)
    if multi:
        failed |= report_multi(multi, mres, args, out)
    print(f"bench: {'FAILED numerics check' if failed else 'all outputs match XLA:CPU'}")
    return 1 if failed else 0


def section(backends, workloads, args, out, env_of) -> dict:
    children = []
    try:
        for b in backends:
            children.append(Child(b, args, out, env_of(b)))
        return interleaved(children, workloads, args.repeats)
    finally:
        for c in children:
            c.close()


def report_single(workloads, res, args, out) -> bool:
    import platform

    print(f"pjrtx bench, {time.strftime('%Y-%m-%d %H:%M')} UTC, {platform.machine()} "
          f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; median of {args.repeats} "
          f"samples per backend, taken in interleaved rounds"
          f"{' (quick sizes)' if args.quick else ''}; BLAS: pjrtx {res['pjrtx']['blas']}, "
          f"MLX {res['mlx']['blas']}; MLX_ENABLE_TF32={os.environ['MLX_ENABLE_TF32']} for both")
    head = (f"{'workload':10} {'pjrtx':>13} {'MLX':>13} {'XLA:CPU':>13} {'/MLX':>6} "
            f"{'(rounds)':>11} {'/XLA':>6} "
            f"{'GFLOP/s pjrtx/MLX/XLA':>22} {'prims pjrtx/MLX':>16}  check")
    print(head)
    failed = False
    for w in workloads:
        size = w.quick if args.quick else w.sizes
        t = {b: res[b].get(w.name, {}).get("median_s") for b in BACKENDS[:3]}
        ratio = lambda o: f"{t['pjrtx'] / t[o]:.2f}" if t[o] else "-"  # noqa: E731
        gf = "-"
        if w.flops:
            fl = w.flops(size)
            gf = "/".join(f"{fl / t[b] / 1e9:.1f}" if t[b] else "-" for b in BACKENDS[:3])
        # pjrtx / MLX within each round: the spread says how far to trust
        # the ratio of medians.
        spread = round_spread(res, w, "mlx")
        prims = "/".join(str(res[b].get(w.name, {}).get("prims", "-")) for b in ("pjrtx", "mlx"))
        ok = "-" if w.compile_time else check(w, size, out)
        failed |= ok.startswith("FAIL")
        print(f"{w.name:10} {fmt_time(t['pjrtx'], w.unit):>13} {fmt_time(t['mlx'], w.unit):>13} "
              f"{fmt_time(t['xla'], w.unit):>13} {ratio('mlx'):>6} {spread:>11} {ratio('xla'):>6} {gf:>22} "
              f"{prims:>16}  {ok}")
    print("ratios are time pjrtx / time other (below 1: pjrtx faster); (rounds): lowest and "
          "highest pjrtx / MLX within one round; rows: "
          + "; ".join(f"{w.name} = {w.title}" for w in workloads))
    if args.reference_blas:
        print("pjrtx with PJRTX_BLAS=reference (MLX's bundled netlib BLAS), same run:")
        for w in workloads:
            t, r = res["pjrtx"].get(w.name, {}).get("median_s"), res["pjrtx_ref"].get(w.name, {})
            if t and r.get("median_s"):
                gf = f", {w.flops(w.quick if args.quick else w.sizes) / r['median_s'] / 1e9:.1f} " \
                     "GFLOP/s" if w.flops else ""
                print(f"  {w.name:10} {fmt_time(r['median_s'], w.unit):>13}{gf}; OpenBLAS speed-up "
                      f"{r['median_s'] / t:.2f}x; check {check(w, w.quick if args.quick else w.sizes, out, 'pjrtx_ref')}")
    return failed


def round_spread(res, w, other) -> str:
    """Lowest and highest pjrtx / other within one round."""
    pairs = [a / b for a, b in zip(res["pjrtx"].get(w.name, {}).get("samples", []),
                                   res[other].get(w.name, {}).get("samples", []))]
    return f"{min(pairs):.2f}-{max(pairs):.2f}" if pairs else "-"


def report_multi(workloads, res, args, out) -> bool:
    from _bench_multidevice import DEVICES, allreduce_bytes, fmt_bytes

    print(f"several devices, {time.strftime('%Y-%m-%d %H:%M')} UTC, load "
          f"{os.getloadavg()[0]:.1f}: pjrtx with PJRTX_DEVICES={DEVICES} and XLA:CPU with "
          f"--xla_force_host_platform_device_count={DEVICES}, each in its own process; a row's "
          f"mesh is the first k devices; median of {args.repeats} samples per backend, taken "
          f"in interleaved rounds{' (quick sizes)' if args.quick else ''}")
    failed = False
    t = lambda b, w: res[b].get(w.name, {}).get("median_s")  # noqa: E731
    ratio = lambda w, o: f"{t('pjrtx', w) / t(o, w):.2f}" if t(o, w) else "-"  # noqa: E731
    ar = [w for w in workloads if w.group == "allreduce"]
    if ar:
        print("allreduce = jit(shard_map(lambda a: lax.psum(a, 'x'))) of S bytes of float32 on "
              "each of k devices, per call incl. block_until_ready; MLX copy = native mlx.core "
              "copying k distinct S-byte arrays once each into fresh storage (mx.array(x), "
              "checked not to share x's storage), evaluated together: the same bytes at the "
              "unified-memory bandwidth bound; GB/s = 2*k*S / time, the bytes the math needs "
              "(each of the k inputs read once, each of the k results written once); k=1: the "
              "psum is the identity, which a backend may answer with its input buffer, moving "
              "no bytes, so a k=1 GB/s is no bandwidth")
        print(f"{'row':20} {'k':>2} {'S':>6} {'pjrtx':>10} {'XLA:CPU':>10} {'MLX copy':>10} "
              f"{'/XLA':>6} {'(rounds)':>11} {'/copy':>6} {'GB/s pjrtx/XLA/copy':>20}  check")
        for w in ar:
            size = w.quick if args.quick else w.sizes
            gbs = "/".join(f"{allreduce_bytes(size) / t(b, w) / 1e9:.1f}" if t(b, w) else "-"
                           for b in BACKENDS[:3])
            ok = check(w, size, out)
            failed |= ok.startswith("FAIL")
            print(f"{w.name:20} {size['k']:>2} {fmt_bytes(size['bytes']):>6} "
                  f"{fmt_time(t('pjrtx', w), 'ms'):>10} {fmt_time(t('xla', w), 'ms'):>10} "
                  f"{fmt_time(t('mlx', w), 'ms'):>10} {ratio(w, 'xla'):>6} "
                  f"{round_spread(res, w, 'xla'):>11} {ratio(w, 'mlx'):>6} {gbs:>20}  {ok}")
    dp = [w for w in workloads if w.group == "dp_mlp"]
    if dp:
        d = (dp[0].quick if args.quick else dp[0].sizes)["dims"]
        print(f"dp_mlp = MLP {'-'.join(map(str, d))} SGD step, batch (per device) * k sharded over "
              "k devices by jit with NamedSharding (parameters replicated; the partitioner "
              "all-reduces the gradients), per step incl. block_until_ready; checked against "
              "XLA:CPU on every device's copy of the parameters and loss")
        print(f"{'row':20} {'k':>2} {'batch':>6} {'pjrtx':>10} {'XLA:CPU':>10} {'/XLA':>6} "
              f"{'(rounds)':>11} {'GFLOP/s pjrtx/XLA':>18}  check")
        for w in dp:
            size = w.quick if args.quick else w.sizes
            gf = "/".join(f"{w.flops(size) / t(b, w) / 1e9:.1f}" if t(b, w) else "-"
                          for b in ("pjrtx", "xla"))
            ok = check(w, size, out)
            failed |= ok.startswith("FAIL")
            print(f"{w.name:20} {size['k']:>2} {size['batch']:>6} "
                  f"{fmt_time(t('pjrtx', w), 'ms'):>10} {fmt_time(t('xla', w), 'ms'):>10} "
                  f"{ratio(w, 'xla'):>6} {round_spread(res, w, 'xla'):>11} {gf:>18}  {ok}")
    print("ratios are time pjrtx / time other (below 1: pjrtx faster); (rounds): lowest and "
          "highest pjrtx / XLA:CPU within one round")
    return failed

if __name__ == "__main__":
    sys.exit(main())
