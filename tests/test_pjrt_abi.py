"""Our PJRT C API declaration (csrc/pjrt/pjrt_abi.h, version 0.112) against an
independent description of the ABI: pypjrt's ctypes tables for 0.114, which
pypjrt generates with libclang from the upstream headers.

The layouts come from tests/pjrt_abi_layout.cc, which computes them with the
compiler from our header (offsetof/sizeof). It is test-only code, so the
extension does not ship it: this module compiles it with the system C++
compiler into a small shared library (cached in a temporary folder, keyed by
the sources) and reads its table through ctypes. The C ABI is the platform's,
so these are the layouts the plugin is built with; test_plugin_table_size
checks that against the table the built plugin hands jaxlib.
0.112 and 0.114 differ in exactly the places listed under "Known differences"
below; everything else must match field for field.
"""

import ctypes
import hashlib
import json
import os
import pathlib
import re
import shutil
import subprocess
import tempfile

import pytest

from pjrtx import _pjrtx
from pypjrt._abi import pjrt_0_114 as oracle

API_HEADER_BYTES = 40  # struct_size, extension_start, PJRT_Api_Version (24 B)
SLOT_COUNT = 138

# --- Known differences between 0.112 (ours) and 0.114 (the oracle) ----------

# 0.114 appends `int64_t peak_allocated_bytes` (offset 192) and
# `bool peak_allocated_bytes_is_set` (offset 200) to PJRT_Device_MemoryStats_Args.
# At 0.112 the struct ends at peak_pool_bytes_is_set (offset 184), so
# STRUCT_SIZE is 184 + 1 = 185 (sizeof 192) against 0.114's 200 + 1 = 201
# (sizeof 208). jaxlib 0.10.2 passes 185; we must never write past it.
MEMORY_STATS = "PJRT_Device_MemoryStats_Args"
MEMORY_STATS_0_114_EXTRA = [
    ("peak_allocated_bytes", 192, 8),
    ("peak_allocated_bytes_is_set", 200, 1),
]
MEMORY_STATS_STRUCT_SIZE = {"ours": 185, "oracle": 201}
MEMORY_STATS_SIZEOF = {"ours": 192, "oracle": 208}

# 0.114 appends two element types after U1 = 31; 0.112 stops at U1.
BUFFER_TYPES_ADDED_AFTER_0_112 = {
    "PJRT_Buffer_Type_F6E2M3FN": 32,
    "PJRT_Buffer_Type_F6E3M2FN": 33,
}


# --- Our side ---------------------------------------------------------------

REPO = pathlib.Path(__file__).resolve().parent.parent
LAYOUT_SOURCE = REPO / "tests" / "pjrt_abi_layout.cc"
C_API_HEADER = REPO / "csrc" / "pjrt" / "pjrt_abi.h"


def _compiler():
    for cxx in (os.environ.get("CXX"), "c++", "g++", "clang++"):
        if cxx and shutil.which(cxx):
            return shutil.which(cxx)
    raise RuntimeError("test_pjrt_abi needs a C++ compiler (c++, g++ or clang++, or $CXX) "
                       "to build tests/pjrt_abi_layout.cc")


def _layout_library():
    """tests/pjrt_abi_layout.cc built as a shared library, reused while the
    sources and the compiler stay the same."""
    cxx = _compiler()
    key = hashlib.sha256()
    for part in (LAYOUT_SOURCE.read_bytes(), C_API_HEADER.read_bytes(), cxx.encode()):
        key.update(part)
    folder = pathlib.Path(tempfile.gettempdir()) / f"pjrtx-abi-layout-{key.hexdigest()[:16]}"
    lib = folder / "libpjrtx_abi_layout.so"
    if not lib.exists():
        folder.mkdir(parents=True, exist_ok=True)
        # Build under a private name, then rename: concurrent test workers
        # never load a half-written file.
        partial = folder / f"build-{os.getpid()}.so"
        cmd = [cxx, "-std=c++20", "-shared", "-fPIC", "-O0", f"-I{REPO / 'csrc'}",
               str(LAYOUT_SOURCE), "-o", str(partial)]
        run = subprocess.run(cmd, capture_output=True, text=True)
        if run.returncode != 0:
            raise RuntimeError(f"building the ABI layout table failed: {' '.join(cmd)}\n"
                               f"{run.stdout}{run.stderr}")
        os.replace(partial, lib)
    return lib


def _layout_tables():
    lib = ctypes.CDLL(str(_layout_library()))
    lib.pjrtx_abi_layout_json.restype = ctypes.c_char_p
    return json.loads(lib.pjrtx_abi_layout_json())


_TABLES = _layout_tables()
OURS = {s["name"]: s for s in _TABLES["layouts"]}
OUR_SLOTS = list(_TABLES["slots"])
OUR_ENUMS = dict(_TABLES["enums"])


# --- Oracle side ------------------------------------------------------------


def oracle_struct_names():
    return sorted(n[len("_OFFSETS_"):] for n in dir(oracle)
                  if n.startswith("_OFFSETS_"))


def oracle_fields(name):
    """[(field, offset, size)] in declaration order, with anonymous union
    members listed one by one at the union's offset (as our table does)."""
    cls = getattr(oracle, name)
    offsets = dict(getattr(oracle, "_OFFSETS_" + name))
    anonymous = set(getattr(cls, "_anonymous_", ()))
    fields = []
    for field, ftype in cls._fields_:
        if field in anonymous:
            union_offset = getattr(cls, field).offset
            for member, mtype in ftype._fields_:
                fields.append((member, union_offset + getattr(ftype, member).offset,
                               ctypes.sizeof(mtype)))
        else:
            fields.append((field, offsets[field], ctypes.sizeof(ftype)))
    return fields


def oracle_slots():
    return [name for name, _ in sorted(oracle.SLOT.items(), key=lambda kv: kv[1])]


def oracle_enums():
    """{enum name: [(enumerator, value)]} from the '# enum X' blocks of the
    generated module."""
    with open(oracle.__file__) as f:
        source = f.read()
    blocks = re.findall(r"^# enum (\w+)\n((?:\w+ = -?\d+\n)+)", source, re.M)
    return {
        enum: [(line.split(" = ")[0], int(line.split(" = ")[1]))
               for line in body.strip().splitlines()]
        for enum, body in blocks
    }


SHARED = sorted(set(OURS) & set(oracle_struct_names()))


def field_diff(name, ours, theirs):
    """Human-readable lines naming the struct and field of each mismatch."""
    lines = []
    theirs_by_name = {f[0]: f for f in theirs}
    ours_by_name = {f[0]: f for f in ours}
    for field, offset, size in theirs:
        if field not in ours_by_name:
            lines.append(f"{name}.{field}: missing in ours (pypjrt offset {offset}, size {size})")
            continue
        _, o_offset, o_size = ours_by_name[field]
        if (o_offset, o_size) != (offset, size):
            lines.append(f"{name}.{field}: ours offset {o_offset} size {o_size}, "
                         f"pypjrt offset {offset} size {size}")
    for field, offset, _ in ours:
        if field not in theirs_by_name:
            lines.append(f"{name}.{field}: only in ours (offset {offset})")
    if not lines and [f[0] for f in ours] != [f[0] for f in theirs]:
        lines.append(f"{name}: field order differs: ours {[f[0] for f in ours]}, "
                     f"pypjrt {[f[0] for f in theirs]}")
    return lines


# --- Tests ------------------------------------------------------------------


def test_version_is_0_112():
    assert tuple(_pjrtx.abi_version()) == (0, 112)


def test_plugin_table_size():
    """The PJRT_Api table the built plugin hands jaxlib has the struct_size
    and version the layout table computes from the same header."""
    plugin = ctypes.CDLL(_pjrtx.__file__)
    plugin.GetPjrtApi.restype = ctypes.c_void_p
    api = plugin.GetPjrtApi()
    fields = {f[0]: f for f in OURS["PJRT_Api"]["fields"]}
    assert ctypes.c_size_t.from_address(api).value == OURS["PJRT_Api"]["struct_size"]
    version = api + fields["pjrt_api_version"][1]
    version_fields = {f[0]: f for f in OURS["PJRT_Api_Version"]["fields"]}
    major = ctypes.c_int.from_address(version + version_fields["major_version"][1]).value
    minor = ctypes.c_int.from_address(version + version_fields["minor_version"][1]).value
    assert (major, minor) == tuple(_pjrtx.abi_version()) == (0, 112)


def test_slot_names_match_oracle_in_order():
    theirs = oracle_slots()
    assert len(OUR_SLOTS) == SLOT_COUNT
    assert len(theirs) >= SLOT_COUNT
    mismatches = [f"slot {i}: ours {a}, pypjrt {b}"
                  for i, (a, b) in enumerate(zip(OUR_SLOTS, theirs[:SLOT_COUNT]))
                  if a != b]
    assert not mismatches, "\n".join(mismatches)


def test_api_table_layout():
    api = OURS["PJRT_Api"]
    assert api["sizeof"] == API_HEADER_BYTES + SLOT_COUNT * 8
    assert api["struct_size"] == API_HEADER_BYTES + SLOT_COUNT * 8 == 1144
    slots = api["fields"][3:]
    assert [f[0] for f in api["fields"][:3]] == [
        "struct_size", "extension_start", "pjrt_api_version"]
    assert [f[0] for f in slots] == OUR_SLOTS
    for i, (name, offset, size) in enumerate(slots):
        assert (offset, size) == (API_HEADER_BYTES + 8 * i, 8), f"PJRT_Api.{name}"


@pytest.mark.parametrize("name", [n for n in SHARED if n != MEMORY_STATS])
def test_struct_matches_oracle(name):
    ours = [tuple(f) for f in OURS[name]["fields"]]
    theirs = oracle_fields(name)
    problems = field_diff(name, ours, theirs)
    their_struct_size = getattr(oracle, name + "_STRUCT_SIZE", None)
    if their_struct_size is not None and their_struct_size != OURS[name]["struct_size"]:
        problems.append(f"{name}_STRUCT_SIZE: ours {OURS[name]['struct_size']}, "
                        f"pypjrt {their_struct_size}")
    their_sizeof = ctypes.sizeof(getattr(oracle, name))
    if their_sizeof != OURS[name]["sizeof"]:
        problems.append(f"sizeof({name}): ours {OURS[name]['sizeof']}, pypjrt {their_sizeof}")
    assert not problems, "\n".join(problems)


def test_memory_stats_is_the_one_known_layout_difference():
    ours = [tuple(f) for f in OURS[MEMORY_STATS]["fields"]]
    theirs = oracle_fields(MEMORY_STATS)
    assert theirs == ours + MEMORY_STATS_0_114_EXTRA, "\n".join(
        field_diff(MEMORY_STATS, ours, theirs))
    assert ours[-1] == ("peak_pool_bytes_is_set", 184, 1)
    assert OURS[MEMORY_STATS]["struct_size"] == MEMORY_STATS_STRUCT_SIZE["ours"]
    assert getattr(oracle, MEMORY_STATS + "_STRUCT_SIZE") == MEMORY_STATS_STRUCT_SIZE["oracle"]
    assert OURS[MEMORY_STATS]["sizeof"] == MEMORY_STATS_SIZEOF["ours"]
    assert ctypes.sizeof(getattr(oracle, MEMORY_STATS)) == MEMORY_STATS_SIZEOF["oracle"]


def test_every_declared_struct_is_compared():
    only_ours = sorted(set(OURS) - set(SHARED))
    assert not only_ours, f"structs pypjrt does not know: {only_ours}"
    # 165 at the time of writing: all 138 slots' _Args structs, PJRT_Api and
    # its version, the error/memory objects and tables, and the helpers.
    print(f"{len(SHARED)} structs compared with pypjrt 0.114")
    assert len(SHARED) >= 150


def test_every_slot_has_its_args_struct():
    missing = [f"{slot}_Args" for slot in OUR_SLOTS if f"{slot}_Args" not in OURS]
    assert not missing, f"args structs not declared: {missing}"


@pytest.mark.parametrize("name", sorted(OURS))
def test_struct_size_is_end_of_last_field(name):
    s = OURS[name]
    fields = s["fields"]
    problems = []
    for prev, cur in zip(fields, fields[1:]):
        same_union = cur[1] == prev[1]
        if not same_union and cur[1] < prev[1] + prev[2]:
            problems.append(f"{name}.{cur[0]} (offset {cur[1]}) overlaps {prev[0]}")
    last = max(fields, key=lambda f: f[1] + f[2])
    if s["struct_size"] != last[1] + last[2]:
        problems.append(f"{name}_STRUCT_SIZE {s['struct_size']} != end of {last[0]} "
                        f"({last[1] + last[2]})")
    if s["sizeof"] < s["struct_size"]:
        problems.append(f"sizeof({name}) {s['sizeof']} < STRUCT_SIZE {s['struct_size']}")
    assert not problems, "\n".join(problems)


def test_enums_match_oracle():
    theirs = oracle_enums()
    problems = []
    for enum, values in OUR_ENUMS.items():
        if enum not in theirs:
            problems.append(f"enum {enum}: unknown to pypjrt")
            continue
        ours = [tuple(v) for v in values]
        expected = [v for v in theirs[enum] if v[0] not in BUFFER_TYPES_ADDED_AFTER_0_112]
        for name, value in ours:
            if getattr(oracle, name, None) != value:
                problems.append(f"{enum}.{name}: ours {value}, pypjrt "
                                f"{getattr(oracle, name, 'missing')}")
        if ours != expected:
            problems.append(f"enum {enum}: ours {ours}, pypjrt {expected}")
    for name, value in BUFFER_TYPES_ADDED_AFTER_0_112.items():
        assert getattr(oracle, name) == value, name
    assert not problems, "\n".join(problems)
    assert {"PJRT_Error_Code", "PJRT_Buffer_Type", "PJRT_HostBufferSemantics",
            "PJRT_NamedValue_Type", "PJRT_Extension_Type"} <= set(OUR_ENUMS)
