"""The executable cache and executable serialization.

Compiling the same program twice reuses the first compile (the frontend runs
once); PJRT_Executable_Serialize / DeserializeAndLoad carry the plan, so a
second process with `jax_compilation_cache_dir` loads it without the
frontend; damaged or foreign bytes raise instead of crashing."""
import functools
import gc
import hashlib
import json
import os
import random
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from pjrtx import _pjrtx
from oracle import run_on


def _stats():
    return _pjrtx.compile_stats()


def _delta(before, after):
    return {k: after[k] - before[k] for k in before}


# Integer arithmetic, a reduction (a region) and a closed-over constant:
# exact on both backends, so results compare bit for bit.
_TABLE = np.arange(12, dtype=np.int32).reshape(3, 4) * 7 - 5


def _g(x):
    return (x * 3 + x.sum(axis=0)) ^ (x >> 1) + jnp.asarray(_TABLE)


def _x():
    return (np.arange(12, dtype=np.int32).reshape(3, 4) - 6) * 1001


def _compile_fresh(f, x):
    # jax keeps its own in-memory caches of lowered and compiled programs;
    # clearing them makes jax call PJRT_Client_Compile again with the same
    # bytes (same function, same call site, so the same locations).
    _clear_jax_caches_only()
    return jax.jit(f).lower(x).compile()


def _clear_jax_caches_only():
    """jax.clear_caches() without its call into pjrtx (it empties our
    executable cache too): JAX then compiles the same bytes again while our
    cache still holds them."""
    from pjrtx import jax_plugin

    clearer = jax_plugin._clearer
    clearer.cache_clear = lambda: None
    try:
        jax.clear_caches()
    finally:
        del clearer.cache_clear


@pytest.mark.parametrize("n", [0, 1, 55, 56, 63, 64, 65, 119, 120, 1000, 100_003])
def test_sha256_matches_hashlib(n):
    data = bytes(random.Random(n).getrandbits(8) for _ in range(n))
    assert _pjrtx.sha256_hex(data) == hashlib.sha256(data).hexdigest()


def test_jax_clear_caches_empties_ours(pjrtx_device):
    x = jax.device_put(_x(), pjrtx_device)
    _compile_fresh(_g, x)
    before = _stats()
    jax.clear_caches()
    jax.jit(_g).lower(x).compile()
    d = _delta(before, _stats())
    assert d["frontend_runs"] == 1 and d["cache_hits"] == 0, d


def test_same_program_compiles_once(pjrtx_device, cpu_device):
    x = jax.device_put(_x(), pjrtx_device)
    before = _stats()
    compiled = [_compile_fresh(_g, x) for _ in range(2)]
    d = _delta(before, _stats())
    assert d["frontend_runs"] == 1, d
    assert d["cache_hits"] == 1, d
    want = run_on(cpu_device, _g, _x())
    for c in compiled:
        np.testing.assert_array_equal(np.asarray(c(x)), want)
    fingerprints = {c._executable.xla_extension_executable().fingerprint for c in compiled}
    assert len(fingerprints) == 1
    assert len(next(iter(fingerprints))) == 64  # SHA-256 hex


def test_other_program_is_not_a_hit(pjrtx_device):
    x = jax.device_put(_x(), pjrtx_device)
    _compile_fresh(_g, x)
    before = _stats()
    # Another dtype and another function: both new programs.
    _compile_fresh(_g, jax.device_put(_x().astype(np.int16), pjrtx_device))
    _compile_fresh(lambda v: _g(v) + 1, x)
    d = _delta(before, _stats())
    assert d["frontend_runs"] == 2 and d["cache_hits"] == 0, d


def test_cached_executable_survives_the_first_being_destroyed(pjrtx_device, cpu_device):
    # Each compile hands out its own LoadedExecutable around the shared
    # program: destroying one (jaxlib calls PJRT_LoadedExecutable_Destroy
    # when the Python object dies) must leave the other usable.
    x = jax.device_put(_x(), pjrtx_device)
    first = _compile_fresh(_g, x)
    second = _compile_fresh(_g, x)
    del first
    gc.collect()
    np.testing.assert_array_equal(np.asarray(second(x)), run_on(cpu_device, _g, _x()))


def _executable(f, x):
    return _compile_fresh(f, x)._executable.xla_extension_executable()


def test_serialize_roundtrip_in_process(pjrtx_device, cpu_device):
    x = jax.device_put(_x(), pjrtx_device)
    exe = _executable(_g, x)
    blob = exe.serialize()
    backend = pjrtx_device.client
    before = _stats()
    loaded = backend.deserialize_executable(blob, jax.sharding.SingleDeviceSharding(
        pjrtx_device)._internal_device_list, None)
    d = _delta(before, _stats())
    assert d["frontend_runs"] == 0 and d["deserialized"] == 1, d
    assert loaded.fingerprint == exe.fingerprint
    out = loaded.execute_sharded([x]).disassemble_into_single_device_arrays()
    np.testing.assert_array_equal(np.asarray(out[0][0]), run_on(cpu_device, _g, _x()))


def _load(blob, device):
    return device.client.deserialize_executable(
        blob, jax.sharding.SingleDeviceSharding(device)._internal_device_list, None)


def test_damaged_or_foreign_blobs_raise(pjrtx_device):
    blob = _executable(_g, jax.device_put(_x(), pjrtx_device)).serialize()
    # jaxlib frames our bytes: a length-prefixed metadata proto, then what
    # PJRT_Executable_Serialize returned, to the end.
    i = blob.index(b"PJRTXEXE")
    head, ours = blob[:i], blob[i:]
    cases = {
        "not ours": b"HloModuleProto" + ours[14:],
        "truncated header": ours[:10],
        "truncated payload": ours[: len(ours) // 2],
        "one byte short": ours[:-1],
        "trailing byte": ours + b"\0",
        "flipped payload byte": ours[:-20] + bytes([ours[-20] ^ 0x40]) + ours[-19:],
        "other version": ours[:8] + (99).to_bytes(4, "little") + ours[12:],
    }
    for name, bad in cases.items():
        with pytest.raises(Exception, match="INVALID_ARGUMENT.*pjrtx: serialized executable"):
            _load(head + bad, pjrtx_device)
    # Another pjrtx build: the producer string differs in one character.
    j = ours.index(b"pjrtx ")
    other = ours[:j] + b"qjrtx " + ours[j + 6:]
    with pytest.raises(Exception, match="INVALID_ARGUMENT.*written by 'qjrtx"):
        _load(head + other, pjrtx_device)
    # Nothing of ours at all: jaxlib's own framing check refuses it.
    for bad in (b"", b"\x00" * 7, blob[:10]):
        with pytest.raises(Exception, match="INVALID_ARGUMENT"):
            _load(bad, pjrtx_device)


def _rich_plan():
    """A plan with every attribute kind, dense data (splat and not), nested
    regions, donors and memory kinds, built through the frontend's builder."""
    b = _pjrtx.PlanBuilder()
    f32, s32 = ("f32", [2, 3]), ("s32", [])
    (a, n) = b.begin_function("main", True, [f32, s32], [f32, f32])
    b.set_donors([0])
    b.set_memory_kinds(["device", ""], ["pinned_host", "device"])
    dense = _pjrtx.Dense("f32", [2, 3], np.arange(6, dtype=np.float32).tobytes())
    splat = _pjrtx.Dense("f32", [2, 3], np.float32(-0.5).tobytes(), splat=True)
    (c,) = b.add_op("stablehlo.constant", [], [f32], {"value": dense}, 'loc("c")')
    (s,) = b.add_op("stablehlo.constant", [], [f32], {"value": splat})
    (t,) = b.add_op("stablehlo.add", [a, c], [f32],
                    {"none": None, "flag": True, "count": -7, "scale": 2.5e-3,
                     "name": "x\0y", "ints": [1, -2, 3], "floats": [0.5, float("inf")],
                     "names": ["p", "", "q"]}, "loc(fused)")
    (r,) = b.add_op("stablehlo.reduce", [t, s], [("f32", [3])], {"dimensions": [0]},
                    num_regions=1)
    (p, q) = b.begin_region([("f32", []), ("f32", [])])
    (u,) = b.add_op("stablehlo.add", [p, q], [("f32", [])], {})
    b.end_region([u])
    (w,) = b.add_op("stablehlo.broadcast_in_dim", [r], [f32], {"broadcast_dimensions": [1]})
    b.end_function([w, s])
    return b.finish("main", "jit_rich")


def test_plan_serializer_roundtrips_every_kind():
    plan = _rich_plan()
    data = _pjrtx.serialize_plan(plan)
    back = _pjrtx.deserialize_plan(data)
    assert back.text() == plan.text()
    assert back.donated_params == [0]
    assert _pjrtx.serialize_plan(back) == data


def test_plan_reader_refuses_damaged_bytes():
    # The envelope's checksum stops damaged executables before this reader;
    # the reader itself must still refuse anything malformed with an error,
    # never crash: every prefix, and random single-byte changes.
    data = _pjrtx.serialize_plan(_rich_plan())
    for n in range(len(data)):
        with pytest.raises(RuntimeError, match="pjrtx: serialized plan"):
            _pjrtx.deserialize_plan(data[:n])
    rng = random.Random(9)
    refused = 0
    for _ in range(400):
        i = rng.randrange(len(data))
        bad = data[:i] + bytes([data[i] ^ (1 << rng.randrange(8))]) + data[i + 1:]
        try:
            _pjrtx.deserialize_plan(bad)
        except RuntimeError as e:
            # The reader's own message, or the verifier's "[op] ...".
            assert "pjrtx" in str(e) or str(e).startswith("["), str(e)
            refused += 1
    # A change inside a string or a number may still be a valid plan; most
    # changes (lengths, ids, tags, dtypes) are not.
    assert refused > 100


_CHILD = textwrap.dedent("""
    import json, os, sys
    import numpy as np
    import jax
    jax.config.update("jax_compilation_cache_dir", sys.argv[1])
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    from pjrtx import jax_plugin, _pjrtx
    jax_plugin.ensure_registered()
    sys.path.insert(0, sys.argv[2])
    from test_runtime_compile_cache import _g, _x
    x = jax.device_put(_x(), jax.devices("pjrtx")[0])
    y = np.asarray(jax.jit(_g)(x))
    print(json.dumps({"stats": _pjrtx.compile_stats(), "y": y.tolist()}))
""")


def _child(cache_dir):
    env = dict(os.environ, JAX_PLATFORMS="pjrtx,cpu")
    # cwd outside the checkout: `python -c` puts the cwd first on sys.path,
    # and the source tree's pjrtx (no extension in a non-editable install)
    # would shadow the installed one.
    r = subprocess.run([sys.executable, "-c", _CHILD, str(cache_dir), os.path.dirname(__file__)],
                       capture_output=True, text=True, env=env, timeout=300, cwd=cache_dir)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_persistent_cache_skips_the_frontend_in_a_second_process(tmp_path, cpu_device):
    want = run_on(cpu_device, _g, _x()).tolist()
    first = _child(tmp_path)
    assert first["stats"]["frontend_runs"] >= 1 and first["stats"]["serialized"] >= 1
    assert any(tmp_path.iterdir()), "the first process wrote no cache entry"
    second = _child(tmp_path)
    assert second["stats"]["frontend_runs"] == 0, second["stats"]
    assert second["stats"]["deserialized"] >= 1, second["stats"]
    assert first["y"] == want and second["y"] == want


_SHARDED_CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np
    import jax, jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec as P
    jax.config.update("jax_compilation_cache_dir", sys.argv[1])
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    from pjrtx import jax_plugin, _pjrtx
    jax_plugin.ensure_registered()
    mesh = jax.sharding.Mesh(np.array(jax.devices("pjrtx")[:2]), ("x",))
    x = jax.device_put(np.arange(32.0).reshape(8, 4), NamedSharding(mesh, P("x")))
    f = jax.jit(lambda a: jnp.tanh(a) @ a.T, out_shardings=NamedSharding(mesh, P("x")))
    y = f(x)
    c = f.lower(x).compile()
    print(json.dumps({"stats": _pjrtx.compile_stats(), "y": np.asarray(y).tolist(),
                      "shards": len(y.addressable_shards),
                      "formats": [list(c.input_formats[0][0].layout.major_to_minor),
                                  list(c.output_formats.layout.major_to_minor)]}))
""")


def test_persistent_cache_holds_multi_device_executables(tmp_path, cpu_device):
    # jaxlib 0.10.2 serializes an executable's parameter and output layouts
    # with it; pjrtx reports them through the Layouts extension (before it,
    # jaxlib dereferenced a missing layout and the process died, so
    # multi-device executables were kept out of the cache).
    env = dict(os.environ, JAX_PLATFORMS="pjrtx,cpu", PJRTX_DEVICES="2")
    env.pop("XLA_FLAGS", None)

    def child():
        r = subprocess.run([sys.executable, "-c", _SHARDED_CHILD, str(tmp_path)],
                           capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
        assert r.returncode == 0, r.stderr[-3000:]
        return json.loads(r.stdout.strip().splitlines()[-1])

    x = np.arange(32.0, dtype=np.float32).reshape(8, 4)
    want = run_on(cpu_device, lambda a: jnp.tanh(a) @ a.T, x)
    first, second = child(), child()
    assert first["stats"]["serialized"] >= 1, first["stats"]
    assert second["stats"]["frontend_runs"] == 0 and second["stats"]["deserialized"] >= 1, second
    for run in (first, second):
        assert run["shards"] == 2 and run["formats"] == [[0, 1], [0, 1]]
        np.testing.assert_allclose(run["y"], want, rtol=0, atol=sum_bound_abs(x))


def sum_bound_abs(x):
    """|pjrtx - XLA:CPU| bound for tanh(x) @ x.T in f32: each side's 4-term
    dot is within gamma_4 * sum|tanh(a) * b| of the exact sum (Higham 3.1),
    and the two tanh approximations (MLX's, XLA's) differ by at most 16
    ulps per term (each within 8 of the exact value, a generous bound for
    both); |tanh| <= 1, so every term is weighted by |x| at most."""
    u = np.finfo(np.float32).eps / 2
    gamma4 = 4 * u / (1 - 4 * u)
    return (2 * gamma4 + 16 * 2 * u) * float(np.abs(x).sum(axis=1).max())


def test_compiled_formats_are_row_major(pjrtx_device):
    # Compiled.input_formats / output_formats read the executable's layouts
    # (they raised AssertionError before pjrtx reported any).
    x = jax.device_put(np.ones((4, 3, 2), np.float32), pjrtx_device)
    c = jax.jit(lambda a: (a.sum(0), a[0, 0, 0])).lower(x).compile()
    assert c.input_formats[0][0].layout.major_to_minor == (0, 1, 2)
    outs = c.output_formats
    assert outs[0].layout.major_to_minor == (0, 1) and outs[1].layout.major_to_minor == ()
    assert x.format.layout.major_to_minor == (0, 1, 2)


def test_registration_wraps_the_persistent_cache_gate():
    # jax 0.10.2 lists the platforms that may use jax_compilation_cache_dir
    # inside compilation_cache.is_cache_used; a rename must fail loudly.
    from jax._src import compilation_cache, stages

    assert getattr(compilation_cache.is_cache_used, "_pjrtx_wrapped", False)
    assert getattr(stages.Executable.as_text, "_pjrtx_wrapped", False)


def test_compiled_as_text_shows_the_plan(pjrtx_device, cpu_device):
    def h(x):
        return jnp.sin(x) * 2 + x.sum()

    x = np.linspace(-1, 1, 6, dtype=np.float32)
    compiled = jax.jit(h).lower(jax.device_put(x, pjrtx_device)).compile()
    text = compiled.as_text()
    fingerprint = compiled._executable.xla_extension_executable().fingerprint.decode()
    assert text == _pjrtx.plan_text(fingerprint)
    assert text.startswith("func public @main(%0: f32[6]) -> (f32[6])")
    for op in ("stablehlo.sine", "stablehlo.multiply", "stablehlo.reduce", "stablehlo.add"):
        assert op in text, op
    # Other backends keep jaxlib's HLO text.
    cpu_text = jax.jit(h).lower(jax.device_put(x, cpu_device)).compile().as_text()
    assert cpu_text.startswith("HloModule")


def test_programs_with_host_callbacks_are_not_cached_or_serialized(pjrtx_device):
    def cb(v):
        return np.asarray(v) * 2

    def k(x):
        return jax.pure_callback(cb, jax.ShapeDtypeStruct(x.shape, x.dtype), x) + 1

    x = jax.device_put(np.arange(4, dtype=np.float32), pjrtx_device)
    before = _stats()
    compiled = [_compile_fresh(k, x) for _ in range(2)]
    d = _delta(before, _stats())
    # Each lowering registers its own callback id, and the program holding
    # an id is never kept by the cache.
    assert d["frontend_runs"] == 2 and d["cache_hits"] == 0, d
    np.testing.assert_array_equal(np.asarray(compiled[1](x)), np.arange(4) * 2 + 1)
    with pytest.raises(Exception, match="host callbacks"):
        compiled[0]._executable.xla_extension_executable().serialize()


def test_cache_is_bounded_least_recently_used_first(pjrtx_device):
    # 64 programs fit; the 65th distinct one evicts the least recently used.
    x = jax.device_put(_x(), pjrtx_device)
    programs = [functools.partial(lambda v, k: _g(v) + k, k=k) for k in range(65)]
    # One call site for every compile: locations (and so the bytes) name
    # the caller's line.
    order = programs + [programs[-1], programs[0]]
    for i, p in enumerate(order):
        if i == len(programs):
            before = _stats()
        _compile_fresh(p, x)
    # The most recent program is still cached; the least recent was evicted.
    d = _delta(before, _stats())
    assert d["cache_hits"] == 1 and d["frontend_runs"] == 1, d
