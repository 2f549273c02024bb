"""jax_smoke/bench.py --quick completes with every backend in its own process
and pjrtx's outputs match XLA:CPU's on every workload, the several-device
rows included (no timing asserts: the numbers belong to the machine)."""
import os
import re
import subprocess
import sys

BENCH = os.path.join(os.path.dirname(__file__), "..", "jax_smoke", "bench.py")


def test_bench_quick():
    sys.path.insert(0, os.path.dirname(BENCH))
    from _bench_multidevice import WORKLOADS as MULTI
    from _bench_workloads import WORKLOADS

    p = subprocess.run([sys.executable, BENCH, "--quick", "--repeats", "1"], capture_output=True,
                       text=True, timeout=900)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert p.stdout.splitlines()[-1] == "bench: all outputs match XLA:CPU", p.stdout
    for w in WORKLOADS:
        if w.quick is None:  # not run with --quick (numpyro's NUTS)
            continue
        row = re.search(rf"^{w.name} .*$", p.stdout, re.M)
        assert row, (w.name, p.stdout)
        if w.compile_time:
            continue
        assert row.group(0).rstrip().split("  ")[-1].startswith("ok ("), row.group(0)
        if w.make_mlx is None:  # no native MLX program to count (newton, ode)
            continue
        # pjrtx and native MLX both report how many primitives a call runs
        # (pjrtx's tiny call runs none: its 8 floats are computed on the
        # host, PJRTX_HOST; nor do the fori loops over an argument, which run
        # whole as compiled host code on the executor).
        prims = re.search(r" (\d+)/(\d+)  ok", row.group(0))
        assert prims and int(prims.group(2)) > 0, row.group(0)
        assert int(prims.group(1)) > 0 or w.name in ("tiny", "loop", "bufloop"), row.group(0)
    # All-reduce and data-parallel MLP over 1..8 devices: each row timed on
    # both backends and every device's outputs checked against XLA:CPU.
    multi = [w for w in MULTI if w.quick is not None]
    assert {w.quick["k"] for w in multi} == {1, 2, 4, 8}
    for w in multi:
        row = re.search(rf"^{w.name} .*$", p.stdout, re.M)
        assert row and row.group(0).rstrip().split("  ")[-1].startswith("ok ("), (w.name, p.stdout)
        assert " - " not in row.group(0), row.group(0)  # a time in every column


def test_multidevice_check_catches_a_misplaced_block(tmp_path):
    """A device whose 1 MiB result has two blocks swapped (same sum, same
    strided sample) fails bench.py's check: large shards are digested, not
    saved, so the digest must still see where every value lies."""
    from types import SimpleNamespace as NS

    import numpy as np

    sys.path.insert(0, os.path.dirname(BENCH))
    import bench
    from _bench_multidevice import WORKLOADS as MULTI, digest

    w = next(w for w in MULTI if w.name == "allreduce_k2_1MiB")
    want = np.random.default_rng(0).integers(-8, 9, 2 << 18).astype(np.float32)
    got = want.copy()
    got[(1 << 18) + 1:(1 << 18) + 3], got[(1 << 18) + 4:(1 << 18) + 6] = \
        want[(1 << 18) + 4:(1 << 18) + 6], want[(1 << 18) + 1:(1 << 18) + 3]

    def shards(a):
        return NS(addressable_shards=[NS(device=NS(id=i), data=a[i << 18:(i + 1) << 18])
                                      for i in (1, 0)])

    for name, a in (("pjrtx", got), ("xla", want)):
        np.savez(tmp_path / f"{name}_{w.name}.npz", *digest(shards(a)))
    assert bench.check(w, w.sizes, str(tmp_path)).startswith("FAIL arr_3"), \
        bench.check(w, w.sizes, str(tmp_path))
    np.savez(tmp_path / f"pjrtx_{w.name}.npz", *digest(shards(want)))
    assert bench.check(w, w.sizes, str(tmp_path)) == "ok (0.0e+00)"


def test_bench_donation_small():
    # The donation bench's values match XLA:CPU for every kind of update.
    script = os.path.join(os.path.dirname(BENCH), "bench_donation.py")
    p = subprocess.run([sys.executable, script, "--gib", "0.004", "--steps", "3"],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    rows = [l for l in p.stdout.splitlines() if l.split()[:1] and l.split()[0] in
            ("scatter", "dynamic_update_slice", "elementwise")]
    assert len(rows) == 3 and all(r.endswith("ok") for r in rows), p.stdout


def test_loop_benches_check_their_answers():
    # The measurements behind the host loop engine, its placement and its
    # first-call cost (README, "Loops"): each compares every answer with XLA:CPU and exits
    # non-zero on a mismatch. Timings are printed, not asserted.
    here = os.path.dirname(BENCH)
    for args in (["bench_loop_engines.py", "--repeats", "2"],
                 ["bench_loop_placement.py", "--sizes", "64", "2048", "--repeats", "1"],
                 ["bench_first_call.py", "--rows", "newton"]):
        p = subprocess.run([sys.executable, os.path.join(here, args[0]), *args[1:]],
                           capture_output=True, text=True, timeout=900)
        assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
        assert "MISMATCH" not in p.stdout, p.stdout
