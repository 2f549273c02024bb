"""The version table (pjrtx/versions.py and csrc/pjrt/pjrt_versions.h): its
rows agree with each other and with the installed jax, and a jax outside the
tested range gets a message that names the versions, never an exception."""
import subprocess
import sys
import tempfile
import warnings

import jax
import pytest

from _procs import child_env
from pjrtx import versions


def test_range_ends_are_rows():
    assert versions.OLDEST in versions.RELEASES and versions.NEWEST in versions.RELEASES
    keys = sorted(versions.RELEASES, key=versions.parse)
    assert keys[0] == versions.OLDEST and keys[-1] == versions.NEWEST


def test_rows_are_consistent():
    rows = sorted(versions.RELEASES.values(), key=lambda r: versions.parse(r.jax))
    minors = [r.pjrt_minor for r in rows]
    # A newer jaxlib never speaks an older PJRT C API.
    assert minors == sorted(minors), minors
    for r in rows:
        assert r.tag == f"jax-v{r.jax}"
        assert len(r.jax_commit) == 40 and int(r.jax_commit, 16) >= 0
        assert r.shardy in versions.SHARDY


def test_installed_jax_is_a_row():
    rel = versions.release(jax.__version__)
    assert rel.jax == jax.__version__, "the installed jax is missing from RELEASES"
    assert versions.status(jax.__version__) == versions.SUPPORTED


def test_struct_sizes_per_minor_match_the_extension():
    from pjrtx import _pjrtx

    abi = _pjrtx.abi_callers()
    rows = versions.RELEASES.values()
    assert abi["oldest_minor"] == versions.RELEASES[versions.OLDEST].pjrt_minor
    assert abi["newest_minor"] == versions.RELEASES[versions.NEWEST].pjrt_minor
    assert _pjrtx.abi_version() == (0, abi["newest_minor"])
    assert all(abi["oldest_minor"] <= r.pjrt_minor <= abi["newest_minor"] for r in rows)
    assert abi["grown"], "jaxlib 0.8.0 sends smaller GetCompiledMemoryStats args"
    for name, oldest, newest, grown_at in abi["grown"]:
        # Sizes are offsetof(last)+sizeof(last) of 8-byte-aligned fields
        # here, and the oldest caller's struct is a strict prefix.
        assert 16 <= oldest < newest, name
        assert oldest % 8 == 0, name
        assert abi["oldest_minor"] < grown_at <= abi["newest_minor"], name


def test_grown_struct_layout_is_the_abi():
    """The size a 0.80 caller sends for each grown struct is the offset of
    the first field added after 0.80, read from the compiled layout table
    (tests/pjrt_abi_layout.cc, checked against pypjrt in test_pjrt_abi)."""
    from pjrtx import _pjrtx
    from test_pjrt_abi import OURS

    first_new = {"PJRT_Executable_GetCompiledMemoryStats_Args": "total_size_in_bytes",
                 "PJRT_ExecuteOptions": "multi_slice_config"}
    for name, oldest, newest, _ in _pjrtx.abi_callers()["grown"]:
        offsets = {f[0]: f[1] for f in OURS[name]["fields"]}  # [name, offset, size]
        assert offsets[first_new[name]] == oldest, name
        assert OURS[name]["struct_size"] == newest, name


@pytest.mark.parametrize("version, expected", [
    ("0.7.2", versions.UNSUPPORTED), ("0.4.38", versions.UNSUPPORTED),
    ("0.8.0", versions.SUPPORTED), ("0.9.1", versions.SUPPORTED), ("0.10.2", versions.SUPPORTED),
    ("0.10.3", versions.NEWER), ("0.11.0", versions.NEWER), ("0.11.0.dev20270101", versions.NEWER),
    ("1.0.0", versions.NEWER),
])
def test_status(version, expected):
    assert versions.status(version) == expected


def test_out_of_range_message_names_the_versions():
    old = versions.message("0.7.2", "0.7.2")
    assert "0.7.2" in old and versions.OLDEST in old and versions.NEWEST in old
    assert "pip install" in old and "not registered" in old
    new = versions.message("0.11.0", "0.11.0")
    assert "0.11.0" in new and versions.OLDEST in new and versions.NEWEST in new
    assert f"jax=={versions.NEWEST}" in new
    assert versions.message(versions.NEWEST) == ""


def test_check_warns_once_and_gates_registration(monkeypatch):
    monkeypatch.setattr(versions, "_warned", set())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert versions.check("0.7.2", "0.7.2") is False
        assert versions.check("0.7.2", "0.7.2") is False
        assert versions.check("0.11.0", "0.11.0") is True
        assert versions.check(versions.NEWEST, versions.NEWEST) is True
    got = [str(w.message) for w in caught if issubclass(w.category, versions.VersionWarning)]
    assert len(got) == 2 and "0.7.2" in got[0] and "0.11.0" in got[1]


def test_release_rows_for_untested_versions():
    assert versions.release("0.11.0").jax == versions.NEWEST  # the best try
    assert versions.release("0.10.3").jax == "0.10.2"
    with pytest.raises(ValueError, match=versions.OLDEST):
        versions.release("0.7.2")


def test_shardy_row_matches_the_installed_passes():
    """The Shardy row of the installed jaxlib names passes it registers, and
    a row without a localiser is one whose jaxlib lacks the passes."""
    from jax._src.interpreters import mlir as jmlir
    from jaxlib.mlir import passmanager

    row = versions.shardy()
    with jmlir.make_ir_context():
        passmanager.PassManager.parse(row.propagate)
        if row.localize is not None:
            for pipeline in row.localize:
                passmanager.PassManager.parse(pipeline)
        else:
            with pytest.raises(Exception):
                passmanager.PassManager.parse(
                    "builtin.module(sdy-convert-global-to-local,sdy-drop-sharding-and-mesh)")


def test_attribute_names_shim():
    from jax._src.interpreters import mlir as jmlir
    from jaxlib.mlir import ir

    with jmlir.make_ir_context(), ir.Location.unknown():
        m = ir.Module.parse("module attributes {a.b = 1 : i32, c.d = \"x\"} {}")
        assert sorted(versions.attribute_names(m.operation.attributes)) == ["a.b", "c.d"]


def _doctor_with_jax(version: str) -> subprocess.CompletedProcess:
    code = (
        "import sys, importlib.metadata as md\n"
        f"real = md.version\n"
        f"md.version = lambda d: {version!r} if d in ('jax', 'jaxlib') else real(d)\n"
        "from pjrtx.__main__ import main\n"
        "sys.exit(main(['doctor']))\n")
    # The child imports the same pjrtx as this process, from outside the
    # checkout: in CI the source tree would shadow the installed package,
    # and doctor would then hand over to the installed one, unpatched.
    return subprocess.run([sys.executable, "-W", "always", "-c", code],
                          capture_output=True, text=True, timeout=300, env=child_env(),
                          cwd=tempfile.gettempdir())


@pytest.mark.parametrize("version, word", [("0.7.2", "no:"), ("0.11.0", "untested:")])
def test_doctor_names_an_out_of_range_jax(version, word):
    p = _doctor_with_jax(version)
    out = p.stdout + p.stderr
    assert "Traceback" not in out, out
    line = next(x for x in p.stdout.splitlines() if x.startswith("supported"))
    assert word in line and version in line and versions.OLDEST in line \
        and versions.NEWEST in line, line


def test_doctor_says_supported():
    p = _doctor_with_jax(jax.__version__)
    line = next(x for x in p.stdout.splitlines() if x.startswith("supported"))
    assert line.split()[1] == "yes:" and jax.__version__ in line


def test_kwargs_for_drops_only_known_late_keywords():
    def old_helper(x, *, has_side_effect):
        return x

    def new_helper(x, *, has_side_effect, returns_token=True):
        return x

    kw = dict(has_side_effect=True, returns_token=False)
    assert versions.kwargs_for(old_helper, **kw) == {"has_side_effect": True}
    assert versions.kwargs_for(new_helper, **kw) == kw
    # a keyword not in OPTIONAL_KWARGS is never dropped: the call fails loudly
    assert versions.kwargs_for(old_helper, typo=1) == {"typo": 1}


def test_oracle_defects_name_the_fixing_release():
    for name, fixed in versions.XLA_CPU_FIXED.items():
        assert fixed in versions.RELEASES, name
        why = versions.xla_cpu_defect(name)
        assert (why is None) == versions.jax_at_least(fixed)
        if why:
            assert fixed in why and jax.__version__ in why


def test_grown_struct_at_the_callers_size(pjrtx_device):
    """memory_analysis() calls PJRT_Executable_GetCompiledMemoryStats, whose
    args grew at 0.90 and 0.104: jaxlib 0.8.0 sends the 0.80 size, which
    pjrtx accepts and never writes past (it used to refuse it)."""
    import jax.numpy as jnp

    x = jax.device_put(jnp.ones((4, 4), jnp.float32), pjrtx_device)
    m = jax.jit(lambda a: a * 2).lower(x).compile().memory_analysis()
    assert m.argument_size_in_bytes == 64 and m.output_size_in_bytes == 64
