"""``python -m pjrtx doctor``: versions, library path, MLX device, variables;
``conformance`` (upstream JAX tests), ``compare`` (any pytest suite on
pjrtx and on XLA:CPU) and ``launch`` (a local multi-process run)."""
from __future__ import annotations

import argparse
import os
import sys


def distributed_line(ext, env) -> str:
    """Which MLX distributed back end joins processes under jax.distributed."""
    chosen = env.get("PJRTX_DISTRIBUTED")
    have = {b: bool(ext.distributed_available(b)) for b in ("ring", "mpi", "nccl", "jaccl")}
    listed = ", ".join(f"{b} {'yes' if ok else 'no'}" for b, ok in have.items())
    state = "available" if have.get(chosen) else "NOT available in this MLX build"
    return (f"jax.distributed joins them through MLX's {chosen} ({state}; PJRTX_DISTRIBUTED="
            f"{chosen}; {listed}); local runs: python -m pjrtx launch -n N script.py")


def doctor() -> int:
    from importlib import metadata

    import pjrtx
    from pjrtx import env
    from pjrtx._contract import load_extension

    try:
        ext = load_extension()
    except ImportError as e:
        return doctor_elsewhere(e)

    def version(dist):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            return "not installed"

    # A build without a project version (a plain CMake dev build) reports "".
    print(f"pjrtx      {pjrtx.__version__} (extension {ext.__version__ or 'dev'}, "
          f"contract {ext.CONTRACT_VERSION})")
    from pjrtx import versions

    jax_v, jaxlib_v = version('jax'), version('jaxlib')
    print(f"jax        {jax_v}")
    print(f"jaxlib     {jaxlib_v}")
    print(f"supported  {versions_line(jax_v, jaxlib_v)}")
    print(f"mlx        {version('mlx')} (C++ library {ext.mlx_version()}, pjrtx built "
          f"against {getattr(ext, 'MLX_BUILD_VERSION', 'unknown')})")
    print(f"library    {os.path.realpath(ext.__file__)}")
    ok = True
    try:
        device = ext.device_backend(env.get("PJRTX_DEVICE"))
    except Exception as e:  # a bad PJRTX_DEVICE value: JAX would fail to start the backend
        device = f"unavailable: {e}"
        ok = False
    print(f"device     {device} (PJRTX_DEVICE={env.get('PJRTX_DEVICE')})")
    raw = env.get("PJRTX_DEVICES")
    if raw.isdigit() and 1 <= int(raw) <= 1024:
        each = "its own executor thread and MLX stream" if int(raw) > 1 else "one executor thread"
        source = (f"PJRTX_DEVICES={raw}" if "PJRTX_DEVICES" in os.environ or raw == "1" else
                  f"--xla_force_host_platform_device_count={raw} in XLA_FLAGS; PJRTX_DEVICES unset")
        print(f"devices    {int(raw)} x {device}, each with {each} ({source})")
    else:
        print(f"devices    unavailable: PJRTX_DEVICES must be a whole number from 1 to 1024, "
              f"got {raw!r}")
        ok = False
    print(f"processes  {distributed_line(ext, env)}")
    print(f"blas       {blas_line()}")
    print(f"lapack     {lapack_line(ext, env)}")
    print(f"float32    {float32_line()}")
    if ok:
        kind = "cpu" if device == "CPU" else "gpu"
        rule = ext.mlx_rule("arg", kind, "float32")
        print(f"argmax     {'MLX' if rule else 'pjrtx'} picks the index on the {kind} device "
              f"(MLX's argmax {'gives' if rule else 'does not give'} JAX's answer for NaNs "
              f"and ties{'' if rule else ': computed from max/min instead'})")
        scan = ext.mlx_rule("scan", kind, "float32")
        print(f"cummax     {'MLX' if scan else 'pjrtx'} carries NaNs through cummax/cummin on "
              f"the {kind} device (MLX's scans {'do' if scan else 'do not'})")
    print(f"loops      {loops_line(env)}")
    caller = ""
    if jax_v != "not installed" and versions.status(jax_v) != versions.UNSUPPORTED:
        caller = f" (jaxlib {jaxlib_v} speaks 0.{versions.release(jax_v).pjrt_minor})"
    print(f"PJRT API   {'.'.join(map(str, ext.abi_version()))}{caller}")
    ops = ext.supported_ops()
    targets = [o for o in ops if o.startswith("custom_call @")]
    print(f"lowerings  {len(ops) - len(targets)} StableHLO ops, {len(targets)} custom_call targets")
    print("variables:")
    for v in env.variables():
        print(f"  {v.name:<16} = {v.value!r:<10} {v.description} (default {v.default!r})")
    return 0 if ok else 1


def loops_line(env) -> str:
    """Where while loops run (PJRTX_LOOPS), and whether the compiler the host
    loop engine builds with is there: without one every loop runs on MLX."""
    import shlex
    import shutil
    import subprocess

    mode = env.get("PJRTX_LOOPS")
    cxx = os.environ.get("CXX") or "c++"
    exe = shutil.which(shlex.split(cxx)[0]) if cxx.strip() else None
    if exe is None:
        return (f"PJRTX_LOOPS={mode}; no C++ compiler ({cxx!r} not found): every loop runs on "
                f"MLX (install one, e.g. Xcode's command line tools or g++, or set CXX)")
    try:
        first = subprocess.run([exe, "--version"], capture_output=True, text=True,
                               timeout=20).stdout.splitlines()[:1]
    except (OSError, subprocess.SubprocessError):
        first = []
    where = {"auto": "latency-bound loops run as compiled host code, others on MLX",
             "host": "every loop the host engine takes runs as compiled host code",
             "mlx": "every loop runs on MLX"}.get(mode, "unknown value")
    return f"PJRTX_LOOPS={mode}: {where}; compiler {cxx} ({first[0] if first else exe})"
def versions_line(jax_v: str, jaxlib_v: str) -> str:
    """Whether the installed jax is in the tested range (pjrtx/versions.py)."""
    from pjrtx import versions

    if jax_v == "not installed":
        return (f"no: jax is not installed; pjrtx needs jax/jaxlib {versions.OLDEST} to "
                f"{versions.NEWEST} (pip install 'jax=={versions.NEWEST}')")
    st = versions.status(jax_v)
    if st == versions.SUPPORTED:
        return f"yes: jax {jax_v} (tested range {versions.OLDEST} to {versions.NEWEST})"
    return ("no: " if st == versions.UNSUPPORTED else "untested: ") + \
        versions.message(jax_v, jaxlib_v).removeprefix("pjrtx: ")


def has_extension(package) -> bool:
    import importlib.machinery

    return any(any(package.glob(f"_pjrtx*{suffix}"))
               for suffix in importlib.machinery.EXTENSION_SUFFIXES)


def installed_package(source):
    """A pjrtx package folder on sys.path, other than source, that holds a
    built extension (the installed one), or None."""
    from pathlib import Path

    for entry in sys.path:
        d = (Path(entry or ".") / "pjrtx").resolve()
        if d != source and (d / "__init__.py").is_file() and has_extension(d):
            return d
    return None


def doctor_elsewhere(error) -> int:
    """`python -m pjrtx doctor` from a source checkout without a build: the
    checkout's pjrtx/ (first on sys.path, as -m puts the current folder
    there) shadows the installed package. Ask the installed one, whole (its
    Python and its extension), from a folder with no pjrtx/ in it; without
    one, the one line of what to do."""
    import os
    import subprocess
    import tempfile
    from pathlib import Path

    import pjrtx

    source = Path(pjrtx.__file__).resolve().parent
    if has_extension(source):  # it has one that does not load: say why
        print(error)
        return 1
    installed = installed_package(source)
    if installed is None:
        print(f"pjrtx: {source} has no built extension and no installed pjrtx has one: build it "
              f"in place (README, Development) or pip install the checkout")
        return 1
    print(f"note       {source} has no built extension and shadows the installed pjrtx; "
          f"this is the installed one, {installed}", flush=True)
    env = dict(os.environ)
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep)
             if p and (Path(p) / "pjrtx").resolve() != source]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    with tempfile.TemporaryDirectory() as elsewhere:
        return subprocess.call([sys.executable, "-m", "pjrtx", "doctor"], cwd=elsewhere, env=env)


def float32_line() -> str:
    """How MLX computes float32 dots and convolutions on a GPU (pjrtx sets
    MLX_ENABLE_TF32=0 unless the user set it; MLX reads it once)."""
    import os
    import re

    from pjrtx import MLX_TF32_VAR

    raw = os.environ.get(MLX_TF32_VAR, "1")  # MLX's own default is 1
    m = re.match(r"\s*[+-]?\d+", raw)  # MLX reads it with atoi: junk is 0
    tf32 = bool(m and int(m.group()))
    if tf32:
        return (f"matmuls (and CUDA convolutions) in TF32 on a GPU ({MLX_TF32_VAR}={raw}): "
                f"faster, about 3 decimal digits, and precision=HIGHEST is not honoured there")
    return f"matmuls and convolutions in full float32 on every device ({MLX_TF32_VAR}={raw})"


def lapack_line(ext, env) -> str:
    """Which routines eigh, svd, eig and schur run (PJRTX_LAPACK)."""
    mode = env.get("PJRTX_LAPACK")
    try:
        missing = ext.lapack_missing()
    except Exception as e:  # a bad PJRTX_LAPACK value
        return f"unavailable: {e}"
    if not missing:
        import scipy

        return (f"scipy (PJRTX_LAPACK={mode}): eigh, svd, eig and schur call the LAPACK "
                f"routines XLA:CPU calls (scipy {scipy.__version__}'s cython_lapack)")
    return f"own (PJRTX_LAPACK={mode}): MLX's linalg and pjrtx's own routines ({missing})"


def blas_line() -> str:
    """Which BLAS MLX's CPU matmul really calls: one f32 matmul on MLX's CPU
    stream binds libmlx's cblas_sgemm slot, which is then read back."""
    import sys

    from pjrtx import _blas

    st = _blas.state
    if sys.platform != "linux":
        return f"{st['active']} (PJRTX_BLAS has no effect on {sys.platform})"
    import mlx.core as mx

    a = mx.ones((4, 4), dtype=mx.float32, stream=mx.cpu)
    mx.eval(mx.matmul(a, a, stream=mx.cpu))
    lib = _blas.bound_library("cblas_sgemm")
    why = f"; {st['reason']}" if st["reason"] else ""
    if st["threads"]:
        why += f", {st['threads']} thread{'s' if st['threads'] > 1 else ''}"
    return (f"{st['active']} (PJRTX_BLAS={st['mode']}{why}); libmlx's cblas_sgemm -> "
            f"{lib or 'unknown (no libpjrtx_blas.so to read the slot)'}")


def conformance(args) -> int:
    import time
    from pathlib import Path

    import jax

    from pjrtx.conformance import expectations, report, runner

    jax_tests = Path(args.jax_tests).resolve()
    exp_dir = Path(args.expectations) if args.expectations else expectations.data_dir()
    have_exp = (exp_dir / "selection.txt").exists()
    from pjrtx import versions

    # The upstream tests of the installed JAX, at its own tag (pjrtx/versions.py).
    rel = versions.release(jax.__version__)
    print(f"pjrtx conformance: jax {jax.__version__} runs the tests of tag {rel.tag} "
          f"({rel.jax_commit}): git clone --depth 1 --branch {rel.tag} "
          f"https://github.com/jax-ml/jax", file=sys.stderr)
    if have_exp:
        pin = expectations.read_pin(exp_dir)
        if pin.get("tag") != rel.tag:
            print(f"pjrtx conformance: note: known_failures.txt was recorded at {pin.get('tag')}; "
                  f"under jax {jax.__version__} --check compares with that list", file=sys.stderr)
        selection = expectations.read_selection(exp_dir)
    patterns = args.files or (selection.include if have_exp else None)
    if not patterns:
        print("pjrtx conformance: name test files (no selection.txt found)", file=sys.stderr)
        return 2
    files = runner.resolve_files(jax_tests, patterns)
    if have_exp:
        for f in files:
            for pat, reason in selection.exclude.items():
                if f == pat or Path(f).match(pat):
                    print(f"pjrtx conformance: note: {f} is excluded from the selection: {reason}",
                          file=sys.stderr)
    opts = runner.Options(jax_tests=jax_tests, files=files, jobs=args.jobs, shards=args.shards,
                          x64=args.x64, timeout=args.timeout, platform=args.platform,
                          devices=args.devices,
                          strict_tags=args.strict_tags, split_above=args.split_above,
                          file_tags=selection.tags if have_exp else {},
                          durations=runner.read_durations(exp_dir / "durations.txt"))
    t0 = time.time()
    file_seconds: dict = {}
    results = runner.run(opts, file_seconds)
    if args.reference:
        runner.rerun_failures_on_reference(opts, results)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "durations.txt").write_text(
        "# wall seconds per file (all shards) of this run; copy to third_party/jax_upstream/\n"
        "# to plan the next run's order and splits\n" +
        "".join(f"{f} {sec:.0f}\n" for f, sec in sorted(file_seconds.items())))
    header = (f"jax {jax.__version__} (tests of {rel.tag}), platform {args.platform}, "
              f"x64={args.x64}, "
              f"devices={args.devices}, "
              f"strict_tags={args.strict_tags}, "
              f"{time.strftime('%Y-%m-%d')}, {time.time() - t0:.0f} s, command: "
              f"`python -m pjrtx conformance {' '.join(sys.argv[2:] if argv_is_cli() else [])}`")
    total = report.write(results, out, header)
    print(f"pjrtx conformance: {total['passed']} passed, {total['failed']} failed, "
          f"{total['error']} errors, {total['crash']} crashed, {total['timeout']} timed out, {total['skipped']} skipped "
          f"({report.pass_rate(total):.2f}% of non-skipped); report: {out / 'report.md'}")
    if args.reference:
        theirs = sum(report.fails_on_reference(r) for r in results)
        print(f"pjrtx conformance: {theirs} of the failures fail on XLA:CPU too; without them "
              f"{report.own_rate(results):.2f}% (pjrtx's own failures only)")
    if args.check:
        if not have_exp:
            print("pjrtx conformance: --check needs third_party/jax_upstream", file=sys.stderr)
            return 2
        problems = expectations.check(results, expectations.read_known_failures(exp_dir, x64=args.x64))
        for p in problems:
            print(p)
        return 1 if problems else 0
    return 0


def compare(args, pytest_args) -> int:
    from pathlib import Path

    from pjrtx.compare import runner
    from pjrtx.conformance import expectations

    if not pytest_args or pytest_args[0] not in ("pytest", "py.test"):
        print("pjrtx compare: give the pytest command after --: "
              "python -m pjrtx compare [options] -- pytest ARGS", file=sys.stderr)
        return 2
    known = expectations.read_reasoned_ids(Path(args.check)) if args.check else None
    out = Path(args.out)
    s = runner.run(runner.Options(pytest_args=pytest_args[1:], out=out, timeout=args.timeout,
                                  total_timeout=args.total_timeout, jobs=args.numprocesses))
    for side, v in s["sides"].items():
        t = v["totals"]
        print(f"pjrtx compare: {runner.NAME[side]:<8} {t['passed']} passed, {t['failed']} failed, "
              f"{t['error']} errors, {t['crash']} crashed, {t['timeout']} hung, "
              f"{t['skipped']} skipped, {t[runner.NOT_RUN]} not run ({v['wall_s']:.0f} s; "
              f"default backend {v['backend']})")
    for line in s["pins"] + s["notes"]:
        print(f"pjrtx compare: {line}")
    print(f"pjrtx compare: {len(s['differences'])} tests differ; report: {out / 'report.md'}")
    if known is None:
        return 0
    results = {side: [runner.Result(**r) for r in rs] for side, rs in s["results"].items()}
    problems = runner.check(s["differences"], results, known, Path(args.check).name)
    for p in problems:
        print(p)
    return 1 if problems else 0


def argv_is_cli() -> bool:
    return len(sys.argv) > 1 and sys.argv[1] == "conformance"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pjrtx")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("doctor", help="print versions, library path, MLX device and PJRTX_* variables")
    c = sub.add_parser("conformance", help="run upstream JAX test files on the pjrtx device")
    c.add_argument("--jax-tests", required=True, help="the tests/ folder of jax-ml/jax at the installed tag")
    c.add_argument("files", nargs="*", help="test files or globs (default: third_party selection)")
    c.add_argument("-j", "--jobs", type=int, default=1, help="test processes at once")
    c.add_argument("--shards", type=int, default=1, help="split each file over this many processes")
    c.add_argument("--split-above", type=float, default=300.0,
                   help="split a file whose last run (durations.txt) took longer than this many "
                        "seconds into shards of about this length (0: never)")
    c.add_argument("--x64", action="store_true", help="JAX_ENABLE_X64=1")
    c.add_argument("--devices", type=int, default=8,
                   help="devices of pjrtx (PJRTX_DEVICES) and of the XLA:CPU reference "
                        "(--xla_force_host_platform_device_count); default 8")
    c.add_argument("--strict-tags", action="store_true",
                   help="tag the device only 'pjrtx' (upstream's own filter), not also 'cpu'/'gpu'")
    c.add_argument("--out", default="conformance-report", help="report folder")
    c.add_argument("--timeout", type=float, default=300.0, help="seconds per test before TIMEOUT")
    c.add_argument("--check", action="store_true",
                   help="exit 1 on an unlisted failure or a listed failure that now passes")
    c.add_argument("--expectations", default=None, help="folder with PIN, selection.txt, known_failures.txt")
    c.add_argument("--reference", action="store_true",
                   help="run each failing test again on XLA:CPU; one that fails there too is "
                        "reported apart (the tag's own failure) and --check does not count it")
    c.add_argument("--platform", default="pjrtx", help=argparse.SUPPRESS)
    m = sub.add_parser("compare", help="run a pytest selection on pjrtx and on XLA:CPU and "
                       "report the tests whose outcomes differ",
                       usage="python -m pjrtx compare [options] -- pytest ARGS")
    m.add_argument("--out", default="compare-report", help="report folder")
    m.add_argument("--timeout", type=float, default=300.0,
                   help="seconds per test before it counts as hung")
    m.add_argument("--total-timeout", type=float, default=None,
                   help="seconds for each backend's whole run; tests not reached are 'not run'")
    m.add_argument("--check", metavar="FILE", default=None,
                   help="known differences (test ids under '# reason:' lines): exit 1 when an "
                        "unlisted test differs or a listed one now matches XLA:CPU")
    m.add_argument("-n", dest="numprocesses", type=int, default=0,
                   help="pytest-xdist processes per run (where pytest-xdist is installed)")
    la = sub.add_parser("launch", help="start a local multi-process run (jax.distributed)",
                        usage="python -m pjrtx launch -n N [--devices K] [--coordinator HOST:PORT "
                              "--nodes M --node-rank R] script.py [args]")
    la.add_argument("-n", "--nprocs", type=int, required=True, help="processes")
    la.add_argument("--devices", type=int, default=None,
                    help="pjrtx devices per process (PJRTX_DEVICES; default: as set, else 1)")
    la.add_argument("--coordinator", default=None, metavar="HOST:PORT",
                    help="JAX's coordinator, an address of node 0's machine (across "
                         "machines; default: a free local port)")
    la.add_argument("--nodes", type=int, default=1, help="machines, each running this "
                    "launcher with -n processes (default 1)")
    la.add_argument("--node-rank", type=int, default=0, help="this machine's index (0: the "
                    "one serving the coordinator)")
    la.add_argument("script")
    la.add_argument("script_args", nargs=argparse.REMAINDER)
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["launch"]:
        args = parser.parse_args(argv)
        from pjrtx import launch
        rest = [a for a in args.script_args if a != "--"] if args.script_args[:1] == ["--"] else args.script_args
        return launch.launch(args.nprocs, args.devices, args.script, rest,
                             coordinator=args.coordinator, nodes=args.nodes,
                             node_rank=args.node_rank)
    pytest_args = []
    if "--" in argv:  # compare: everything after -- is the pytest command
        i = argv.index("--")
        argv, pytest_args = argv[:i], argv[i + 1:]
    args = parser.parse_args(argv)
    if args.command == "compare":
        return compare(args, pytest_args)
    if args.command == "doctor":
        return doctor()
    if args.command == "conformance":
        return conformance(args)
    return 2


if __name__ == "__main__":
    sys.exit(main())
