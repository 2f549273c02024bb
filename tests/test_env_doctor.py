"""`python -m pjrtx doctor` and the PJRTX_* variables, each in a fresh
process (the extension reads PJRTX_TRACE once, and a bad PJRTX_DEVICE must
fail where JAX starts the backend)."""
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from pjrtx import _pjrtx

# The children import the same pjrtx as this process (the installed package,
# or a source checkout with a built extension), never a checkout without one.
import pjrtx  # noqa: E402

PKG_PARENT = Path(pjrtx.__file__).resolve().parents[1]

# A tiny program in a child process: registers the plugin as conftest.py
# does and prints the result so the parent can check it against NumPy.
TINY_JIT = textwrap.dedent("""
    import os
    os.environ.setdefault("JAX_PLATFORMS", "pjrtx,cpu")
    import jax, numpy as np
    from jax._src import xla_bridge
    if "pjrtx" not in xla_bridge._backend_factories:
        from pjrtx import jax_plugin
        jax_plugin.initialize()
    x = jax.device_put(np.arange(6, dtype=np.float32).reshape(2, 3), jax.devices("pjrtx")[0])
    y = jax.jit(lambda a: (a * 2).T)(x)
    print("RESULT", np.asarray(y).ravel().tolist())
""")


def run(args, **env):
    e = {k: v for k, v in os.environ.items() if not k.startswith("PJRTX_")}
    e["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PKG_PARENT), os.environ.get("PYTHONPATH")]))
    for k, v in env.items():  # None: the variable unset in the child
        if v is None:
            e.pop(k, None)
        else:
            e[k] = v
    return subprocess.run([sys.executable, *args], cwd=PKG_PARENT, env=e, capture_output=True,
                          text=True, timeout=120)


def result_of(proc):
    m = re.search(r"^RESULT (.*)$", proc.stdout, re.M)
    assert m, proc.stdout + proc.stderr
    return np.array(eval(m.group(1)))  # a list literal we printed ourselves


WANT = (np.arange(6, dtype=np.float32).reshape(2, 3) * 2).T.ravel()


def test_doctor():
    import jax
    import jaxlib
    from importlib import metadata

    p = run(["-m", "pjrtx", "doctor"])
    assert p.returncode == 0, p.stderr
    out = p.stdout
    assert re.search(r"^pjrtx\s+\d+\.\d+\.\d+ \(extension \S+, contract \d+\)", out, re.M)
    assert "(extension ," not in out  # an empty build version reads as "dev"
    assert re.search(rf"^jax\s+{re.escape(jax.__version__)}$", out, re.M)
    assert re.search(rf"^jaxlib\s+{re.escape(jaxlib.__version__)}$", out, re.M)
    assert re.search(rf"^mlx\s+{re.escape(metadata.version('mlx'))} \(C\+\+ library "
                     rf"{re.escape(_pjrtx.mlx_version())}, pjrtx built against "
                     rf"{re.escape(_pjrtx.MLX_BUILD_VERSION)}\)", out, re.M)
    assert re.search(r"^supported\s+yes: jax ", out, re.M), out
    assert re.search(rf"^library\s+{re.escape(os.path.realpath(_pjrtx.__file__))}$", out, re.M) \
        or re.search(rf"^library\s+{re.escape(_pjrtx.__file__)}$", out, re.M)
    # auto: Metal on a Mac, CUDA where MLX's CUDA back end finds a GPU, else CPU.
    backend = _pjrtx.device_backend("auto")
    assert backend in ("Metal", "CUDA", "CPU")
    assert re.search(rf"^device\s+{backend} \(PJRTX_DEVICE=auto\)$", out, re.M), out
    assert re.search(rf"^devices\s+1 x {backend}, each with one executor thread "
                     r"\(PJRTX_DEVICES=1\)$", out, re.M), out
    assert re.search(r"^PJRT API\s+0\.\d+ \(jaxlib \S+ speaks 0\.\d+\)$", out, re.M)
    kind = "cpu" if backend == "CPU" else "gpu"
    who = "MLX" if _pjrtx.mlx_rule("arg", kind, "float32") else "pjrtx"
    assert re.search(rf"^argmax\s+{who} picks the index on the {kind} device ", out, re.M), out
    who = "MLX" if _pjrtx.mlx_rule("scan", kind, "float32") else "pjrtx"
    assert re.search(rf"^cummax\s+{who} carries NaNs through cummax/cummin on the {kind} "
                     rf"device ", out, re.M), out
    ops = _pjrtx.supported_ops()
    targets = sum(o.startswith("custom_call @") for o in ops)
    assert targets > 0
    assert re.search(rf"^lowerings\s+{len(ops) - targets} StableHLO ops, {targets} custom_call targets$",
                     out, re.M)
    names = [v[0] for v in _pjrtx.env_vars()]
    assert names and all(n.startswith("PJRTX_") for n in names)
    for name, default, description in _pjrtx.env_vars():
        line = re.search(rf"^  {name}\s+= '([^']*)'\s+(.*) \(default '([^']*)'\)$", out, re.M)
        assert line, (name, out)
        assert line.group(1) == default and line.group(2) == description
        assert line.group(3) == default


@pytest.mark.parametrize("value, line", [
    ("8", r"^devices\s+8 x \w+, each with its own executor thread and MLX stream \(PJRTX_DEVICES=8\)$"),
    ("0", r"^devices\s+unavailable: PJRTX_DEVICES must be a whole number from 1 to 1024, got '0'$"),
    ("two", r"^devices\s+unavailable: PJRTX_DEVICES must be a whole number from 1 to 1024, got 'two'$"),
])
def test_doctor_devices_line(value, line):
    p = run(["-m", "pjrtx", "doctor"], PJRTX_DEVICES=value)
    assert re.search(line, p.stdout, re.M), p.stdout


@pytest.mark.parametrize("value, line", [
    (None, r"^lapack\s+scipy \(PJRTX_LAPACK=scipy\): eigh, svd, eig and schur call the LAPACK "
           r"routines XLA:CPU calls \(scipy \S+'s cython_lapack\)$"),
    ("own", r"^lapack\s+own \(PJRTX_LAPACK=own\): MLX's linalg and pjrtx's own routines "
            r"\(PJRTX_LAPACK=own\)$"),
    ("netlib", r"^lapack\s+unavailable: .*PJRTX_LAPACK must be 'scipy' or 'own', got 'netlib'$"),
])
def test_doctor_lapack_line(value, line):
    p = run(["-m", "pjrtx", "doctor"], **({} if value is None else {"PJRTX_LAPACK": value}))
    assert re.search(line, p.stdout, re.M), p.stdout


def test_bad_device_count_is_a_clear_error_when_jax_starts():
    code = ("import jax\nfrom pjrtx import jax_plugin\njax_plugin.ensure_registered()\n"
            "try:\n    jax.devices('pjrtx')\nexcept Exception as e:\n    print('ERR', e)\n")
    p = run(["-c", code], PJRTX_DEVICES="0", JAX_PLATFORMS="pjrtx")
    assert "PJRTX_DEVICES must be a whole number from 1 to 1024, got '0'" in p.stdout + p.stderr, \
        (p.stdout, p.stderr)


def _source_copy(tmp_path):
    """A copy of the source tree's pjrtx/ without a built extension."""
    import shutil

    shutil.copytree(Path(pjrtx.__file__).resolve().parent, tmp_path / "pjrtx",
                    ignore=shutil.ignore_patterns("*.so", "*.dylib", "*.pyd", "__pycache__"))
    return tmp_path


def test_doctor_from_a_source_tree_without_a_build(tmp_path):
    # `python -m pjrtx doctor` from the repository root: ./pjrtx shadows the
    # installed package (here: the pjrtx this process imported).
    src = _source_copy(tmp_path)
    e = {k: v for k, v in os.environ.items() if not k.startswith("PJRTX_")}
    e["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PKG_PARENT), os.environ.get("PYTHONPATH")]))
    p = subprocess.run([sys.executable, "-m", "pjrtx", "doctor"], cwd=src, env=e,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    first = p.stdout.splitlines()[0]
    assert first.startswith(f"note       {src / 'pjrtx'} has no built extension"), first
    lib = os.path.realpath(_pjrtx.__file__)
    assert re.search(rf"^library\s+{re.escape(lib)}$", p.stdout, re.M), p.stdout


def test_doctor_from_a_source_tree_with_nothing_installed(tmp_path):
    # -S: no site-packages, so no installed pjrtx either: one line, what to do.
    src = _source_copy(tmp_path)
    e = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",) and not k.startswith("PJRTX_")}
    p = subprocess.run([sys.executable, "-S", "-m", "pjrtx", "doctor"], cwd=src, env=e,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 1
    out = (p.stdout + p.stderr).strip()
    assert out == (f"pjrtx: {src / 'pjrtx'} has no built extension and no installed pjrtx has "
                   f"one: build it in place (README, Development) or pip install the checkout"), out


@pytest.mark.parametrize("preset", [None, "0", "1", "junk"])
def test_mlx_tf32_is_off_unless_the_user_chose(preset):
    # MLX runs float32 matmuls and convolutions on a GPU in TF32 unless
    # MLX_ENABLE_TF32=0, read once at its first such op: importing pjrtx
    # (as JAX's plugin discovery does, before any program runs) sets 0 when
    # the variable is unset and keeps what the user set. doctor says which.
    code = TINY_JIT + "print('TF32', repr(os.environ['MLX_ENABLE_TF32']))\n"
    p = run(["-c", code], MLX_ENABLE_TF32=preset)
    assert p.returncode == 0, p.stderr
    np.testing.assert_array_equal(result_of(p), WANT)
    want = "0" if preset is None else preset
    assert re.search(rf"^TF32 '{want}'$", p.stdout, re.M), p.stdout
    d = run(["-m", "pjrtx", "doctor"], MLX_ENABLE_TF32=preset)
    line = re.search(r"^float32\s+(.*)$", d.stdout, re.M)
    assert line, d.stdout
    # MLX parses the value with atoi: "junk" is 0, so full precision too.
    if want == "1":
        assert line.group(1).startswith("matmuls (and CUDA convolutions) in TF32 on a GPU "
                                        "(MLX_ENABLE_TF32=1)"), line.group(1)
        assert "precision=HIGHEST is not honoured" in line.group(1)
    else:
        assert line.group(1) == ("matmuls and convolutions in full float32 on every device "
                                 f"(MLX_ENABLE_TF32={want})"), line.group(1)


def test_doctor_shows_set_values_and_bad_device():
    p = run(["-m", "pjrtx", "doctor"], PJRTX_DEVICE="bogus", PJRTX_TRACE="1")
    assert p.returncode == 1, (p.stdout, p.stderr)  # a problem found is an exit status
    assert "Traceback" not in p.stderr
    assert re.search(r"^device\s+unavailable: .*PJRTX_DEVICE must be 'auto', 'cpu' or 'gpu', "
                     r"got 'bogus'", p.stdout, re.M)
    assert re.search(r"^  PJRTX_TRACE\s+= '1'", p.stdout, re.M)
    assert re.search(r"^  PJRTX_DEVICE\s+= 'bogus'", p.stdout, re.M)


def test_trace_and_dump(tmp_path):
    p = run(["-c", TINY_JIT], PJRTX_TRACE="1", PJRTX_DUMP_DIR=str(tmp_path / "dump"))
    assert p.returncode == 0, p.stderr
    np.testing.assert_array_equal(result_of(p), WANT)
    lines = [l for l in p.stderr.splitlines() if l.startswith("[pjrtx] ")]
    kinds = {}
    for l in lines:
        m = re.fullmatch(r"\[pjrtx\] (\S+) (.*) bytes=(\d+) us=(\d+)", l)
        assert m, l
        kinds.setdefault(m.group(1), []).append((m.group(2), int(m.group(3))))
    assert {"compile", "h2d", "execute"} <= set(kinds), lines
    assert ("f32[2,3]", 24) in kinds["h2d"]
    from pjrtx import _pjrtx
    if _pjrtx.device_backend() == "CPU":
        # On MLX's CPU device NumPy reads the result in place (Buffer_IsOnCpu,
        # as on XLA:CPU): no device-to-host transfer happens to trace.
        assert "d2h" not in kinds, lines
    else:
        assert ("f32[3,2]", 24) in kinds["d2h"]
    assert any(re.fullmatch(r"jit__lambda instructions=\d+", w) for w, _ in kinds["compile"])
    assert any(w.startswith("jit__lambda") and b == 24 for w, b in kinds["execute"])
    # one .mlir and one .plan.txt per compile
    files = sorted(os.listdir(tmp_path / "dump"))
    mlir = [f for f in files if f.endswith(".mlir")]
    plans = [f for f in files if f.endswith(".plan.txt")]
    assert len(mlir) == len(plans) == len(kinds["compile"]) >= 1, files
    assert {f[:-len(".mlir")] for f in mlir} == {f[:-len(".plan.txt")] for f in plans}
    text = (tmp_path / "dump" / mlir[0]).read_text()
    assert "stablehlo.transpose" in text and "func.func public @main" in text
    plan = (tmp_path / "dump" / plans[0]).read_text()
    assert "stablehlo.transpose" in plan and "entry" in plan


def test_no_trace_by_default(tmp_path):
    p = run(["-c", TINY_JIT])
    assert p.returncode == 0, p.stderr
    np.testing.assert_array_equal(result_of(p), WANT)
    assert "[pjrtx]" not in p.stderr


@pytest.mark.parametrize("platforms", ["pjrtx,cpu", ""])
def test_bad_device_is_a_clear_error(platforms):
    script = TINY_JIT.replace('os.environ.setdefault("JAX_PLATFORMS", "pjrtx,cpu")',
                              f'os.environ["JAX_PLATFORMS"] = {platforms!r}')
    p = run(["-c", script], PJRTX_DEVICE="bogus")
    assert p.returncode > 0, (p.returncode, p.stderr)  # an exception, not a signal
    assert "PJRTX_DEVICE must be 'auto', 'cpu' or 'gpu', got 'bogus'" in p.stderr
    assert re.search(r"^(RuntimeError|jax\.errors\.JaxRuntimeError|"
                     r"jaxlib\..*Error): ", p.stderr.splitlines()[-1]), p.stderr[-2000:]


@pytest.mark.parametrize("value", ["abc", "-5", "2000000"])
def test_bad_spin_us_is_a_clear_error(value):
    p = run(["-c", TINY_JIT], PJRTX_SPIN_US=value)
    assert p.returncode > 0, (p.returncode, p.stderr)  # an exception, not a signal
    assert f"PJRTX_SPIN_US must be a number of microseconds from 0 to 1000000, got '{value}'" \
        in p.stderr, p.stderr[-2000:]


# Host syncs inside a run (a while loop's predicate, a counted loop's
# blocks, a case index, a trip count read from an argument) and a chain of
# small calls whose results are read at once: the paths that poll for
# results and keep MLX's CPU stream warm, against NumPy, with polling on
# (a long budget) and off.
SYNC_PATHS = textwrap.dedent("""
    import os
    os.environ.setdefault("JAX_PLATFORMS", "pjrtx,cpu")
    import jax, jax.numpy as jnp, numpy as np
    from jax import lax
    from jax._src import xla_bridge
    if "pjrtx" not in xla_bridge._backend_factories:
        from pjrtx import jax_plugin
        jax_plugin.initialize()
    dev = jax.devices("pjrtx")[0]
    x = jax.device_put(np.arange(8, dtype=np.float32), dev)
    counted = jax.jit(lambda x: lax.fori_loop(0, 100, lambda i, x: x * 0.5 + i, x))
    until = jax.jit(lambda x: lax.while_loop(lambda x: x[0] < 1000, lambda x: x * 2 + 1, x))
    branch = jax.jit(lambda i, x: lax.switch(i, [lambda x: x + 1, lambda x: x * 3], x))
    trips = jax.jit(lambda n, x: lax.fori_loop(0, n, lambda i, x: x + 1, x))
    step = jax.jit(lambda x: x * 0.999 + 0.001)
    out = {"counted": counted(x), "until": until(x), "branch1": branch(1, x),
           "branch0": branch(0, x), "trips": trips(37, x)}
    y = x
    for _ in range(200):
        y = step(y)
        y.block_until_ready()
    out["chain"] = y
    for k, v in out.items():
        print("RESULT", k, np.asarray(v).tolist())
""")


@pytest.mark.parametrize("spin", ["0", "5000"])
def test_results_with_and_without_polling(spin):
    p = run(["-c", SYNC_PATHS], PJRTX_SPIN_US=spin)
    assert p.returncode == 0, p.stderr[-3000:]
    got = {m.group(1): np.array(eval(m.group(2)), np.float32)
           for m in re.finditer(r"^RESULT (\w+) (.*)$", p.stdout, re.M)}
    x = np.arange(8, dtype=np.float32)
    want = {}
    c = x.copy()
    for i in range(100):
        c = c * np.float32(0.5) + np.float32(i)
    want["counted"] = c
    u = x.copy()
    while u[0] < 1000:
        u = u * np.float32(2) + np.float32(1)
    want["until"] = u
    want["branch1"], want["branch0"] = x * np.float32(3), x + np.float32(1)
    want["trips"] = x + np.float32(37)
    y = x.copy()
    for _ in range(200):
        y = y * np.float32(0.999) + np.float32(0.001)
    want["chain"] = y
    assert got.keys() == want.keys()
    for k in want:
        # Each step rounds once per op in f32 on both sides; XLA and MLX may
        # contract a*b+c into an FMA (one rounding fewer): allow one ulp of
        # the running value per step.
        steps = {"counted": 100, "until": 12, "chain": 200}.get(k, 1)
        np.testing.assert_allclose(got[k], want[k], rtol=steps * 2 * np.finfo(np.float32).eps,
                                   atol=0, err_msg=k)


def test_mlx_abi_mismatch_is_named():
    # An extension built against one MLX release and loaded with another
    # fails to link an mlx:: symbol (seen: built on 0.32.4, run with 0.32.1,
    # "undefined symbol: _ZN3mlx4core5arrayC1E..."). The error must say that,
    # with the installed version, not blame a source checkout.
    code = textwrap.dedent("""
        import sys, importlib.abc, importlib.machinery, importlib.util
        class Broken(importlib.abc.MetaPathFinder, importlib.abc.Loader):
            # Found where the real one is; loading it fails as dlopen does.
            def find_spec(self, name, path, target=None):
                if name != "pjrtx._pjrtx":
                    return None
                real = importlib.machinery.PathFinder.find_spec(name, path)
                return importlib.util.spec_from_file_location(name, real.origin, loader=self)
            def create_module(self, spec):
                raise ImportError("/x/_pjrtx.so: undefined symbol: "
                                  "_ZN3mlx4core5arrayC1ENS0_9allocator4DataE")
            def exec_module(self, module):
                pass
        sys.meta_path.insert(0, Broken())
        from importlib import metadata
        from pjrtx._contract import load_extension
        try:
            load_extension()
        except ImportError as e:
            print("MESSAGE", e)
        print("MLX", metadata.version("mlx"))
    """)
    p = run(["-c", code])
    assert p.returncode == 0, p.stderr
    msg = re.search(r"^MESSAGE (.*)$", p.stdout, re.M).group(1)
    have = re.search(r"^MLX (\S+)$", p.stdout, re.M).group(1)
    assert msg.startswith("pjrtx: the compiled extension was built against another MLX "
                          f"release than the installed mlx {have} ("), msg
    assert "undefined symbol: _ZN3mlx4core" in msg and "source checkout" not in msg
