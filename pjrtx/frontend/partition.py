"""Multi-device programs -> one per-device (SPMD) program.

JAX sends a program for N > 1 devices as one StableHLO module with
``mhlo.num_partitions = N``, an ``sdy.mesh`` and either ``sdy.sharding``
annotations over global shapes (jit) or ``sdy.manual_computation`` regions
with local shapes and explicit collectives (shard_map, pmap). The runtime runs
one program on each device, with ``stablehlo.partition_id`` = the device's
position in the device assignment, and collectives whose ``replica_groups`` /
``source_target_pairs`` hold those partition indices. :func:`localize`
rewrites the module into that per-device program, in place, in one of two
ways:

``shardy``
    Shardy's own passes (propagation, explicit reshards, global-to-local)
    partition the program. jaxlib 0.10.2's converter aborts the process on
    some ops (an LLVM CHECK: reduce_window or gather over a sharded dim),
    fails on others (while, dynamic_slice) and silently builds an all_reduce
    with an add body after a max/min reduce, so the path is taken only when
    every op is on :data:`SHARDY_SAFE_OPS` (verified against XLA:CPU in
    tests/test_partition.py) and the all_reduce bodies are repaired after.
``global``
    Every device runs the whole global program: main all-gathers its
    arguments' shards, runs the original body, and slices each result down to
    its own shard with ``partition_id``. Always correct; costs N times the
    compute and a gather of every sharded argument.

Shardings are described in :class:`ValueSharding` / :class:`PartitionInfo` so
the runtime can report parameter and output shardings back to JAX.
"""
from __future__ import annotations

import dataclasses
import itertools
import math
import os
import re

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir import passmanager

try:
    from jaxlib.mlir.dialects import sdy
except Exception:  # a jaxlib without Shardy: no sdy annotations can occur
    sdy = None

SHARDY_PIPELINE = (
    "builtin.module(sdy-propagation-pipeline,"
    "sdy-export-pipeline{enable-insert-explicit-collectives=true})")
LOCAL_PIPELINE = "builtin.module(sdy-convert-global-to-local,sdy-drop-sharding-and-mesh)"

# Ops jaxlib 0.10.2's Shardy pipeline partitions correctly wherever their
# operands are sharded (each family is checked against jax.jit on XLA:CPU in
# tests/test_partition.py). Not here, and why:
#   reduce_window (cumsum), gather: LLVM CHECK aborts the process
#     (convert_global_to_local.cc:2747, :2108);
#   while, case, if: region types are not converted (pass error);
#   dynamic_slice, dynamic_update_slice: sliced sizes are not localized;
#   custom_call, rng ops, fft, select_and_scatter, pad, reverse, cholesky,
#   triangular_solve, chlo.*: not verified.
_ELEMENTWISE = {
    "abs", "add", "and", "atan2", "cbrt", "ceil", "clamp", "compare", "complex",
    "convert", "cosine", "count_leading_zeros", "divide", "exponential",
    "exponential_minus_one", "floor", "imag", "is_finite", "log", "log_plus_one",
    "logistic", "maximum", "minimum", "multiply", "negate", "not", "or",
    "popcnt", "power", "real", "reduce_precision", "remainder",
    "round_nearest_afz", "round_nearest_even", "rsqrt", "select", "shift_left",
    "shift_right_arithmetic", "shift_right_logical", "sign", "sine", "sqrt",
    "subtract", "tan", "tanh", "xor",
}
_STRUCTURAL = {
    "constant", "iota", "broadcast_in_dim", "reshape", "transpose",
    "concatenate", "slice", "dot_general", "sort", "convolution",
    "optimization_barrier",
    # special-cased below: reduce (body kind), scatter (add body only)
    "reduce", "scatter",
}
SHARDY_SAFE_OPS = frozenset(
    {"stablehlo." + n for n in _ELEMENTWISE | _STRUCTURAL}
    | {"func.return", "sdy.sharding_constraint", "sdy.reshard", "sdy.manual_computation",
       "sdy.sharding_group"})
# Ops whose regions are scalar computations (not partitioned; not screened).
_SCALAR_BODY_OPS = {"stablehlo.reduce", "stablehlo.sort", "stablehlo.scatter",
                    "stablehlo.all_reduce", "stablehlo.reduce_scatter"}
# A reduce whose body is one of these binary ops is partitioned with an
# all_reduce, whose body localize sets to the same op.
_REDUCER_BODIES = {"stablehlo.add", "stablehlo.maximum", "stablehlo.minimum",
                   "stablehlo.multiply", "stablehlo.and", "stablehlo.or"}
_USER_TAG = "pjrtx.user_collective"


@dataclasses.dataclass(frozen=True)
class ValueSharding:
    """How one argument or result is split over the mesh.

    ``dims[d]`` lists the mesh axes dimension d is split over, major first.
    An axis is its name ("x") or, for a sub-axis, Shardy's spelling
    "x:(pre)size" (the size-`size` piece of x whose stride is `pre`).
    A value not split over any axis is reported as None, not as a ValueSharding.
    """
    dims: tuple[tuple[str, ...], ...]
    # Axes over which the devices hold partial sums of the value (JAX's
    # explicit-sharding `unreduced`): the value is their sum.
    unreduced: tuple[str, ...] = ()
    # ((axis, size), ...), device_ids) when the value's mesh is not the
    # program's (PartitionInfo.mesh_axes / device_ids); None otherwise.
    mesh: tuple | None = None

    def tile_counts(self, mesh_axes) -> tuple[int, ...]:
        sizes = dict(mesh_axes)
        return tuple(math.prod(_axis_ref_size(a, sizes) for a in d) for d in self.dims)


@dataclasses.dataclass
class PartitionInfo:
    path: str                       # "shardy" or "global"
    reason: str                     # why the global path was taken ('' for shardy)
    num_partitions: int
    mesh_axes: tuple[tuple[str, int], ...]   # (name, size), major first; () if no mesh
    # mesh position -> partition index (sdy.mesh device_ids; iota when absent)
    device_ids: tuple[int, ...]
    arg_shardings: list[ValueSharding | None]
    result_shardings: list[ValueSharding | None]

    def mesh_of(self, sharding):
        """(mesh_axes, device_ids) of a value: its own mesh, else the program's."""
        if sharding is not None and sharding.mesh:
            return sharding.mesh
        return self.mesh_axes, self.device_ids

    def shard_index(self, sharding: ValueSharding | None, partition: int) -> tuple[int, ...]:
        """Which tile of each dim partition `partition` holds (0s if replicated)."""
        if sharding is None:
            return ()
        axes, ids = self.mesh_of(sharding)
        coords = _coords_of_partition(axes, ids)[partition]
        return tuple(_dim_index(d, coords, axes) for d in sharding.dims)

    def hlo_sharding(self, sharding: ValueSharding | None, rank: int) -> str:
        """XLA HloSharding text for a value of this rank: '{replicated}' or
        '{devices=[t0,..,(r)]p0,p1,... [last_tile_dim_replicate]}' over partition
        indices (the device assignment's positions)."""
        if sharding is None or self.num_partitions == 1:
            return "{replicated}"
        axes, ids = self.mesh_of(sharding)
        tiles = sharding.tile_counts(axes)
        ntiles = math.prod(tiles)
        rep = self.num_partitions // ntiles
        table = np.full(tiles + (rep,), -1, np.int64)
        fill = {}
        coords = _coords_of_partition(axes, ids)
        for pos in range(self.num_partitions):
            p = ids[pos]
            idx = tuple(_dim_index(d, coords[p], axes) for d in sharding.dims)
            k = fill.get(idx, 0)
            fill[idx] = k + 1
            table[idx + (k,)] = p
        shape = list(tiles) + ([rep] if rep > 1 else [])
        devs = ",".join(str(int(v)) for v in table.reshape(-1))
        suffix = " last_tile_dim_replicate" if rep > 1 else ""
        return "{devices=[%s]%s%s}" % (",".join(map(str, shape)), devs, suffix)


def op_sharding_proto(info, sharding, rank: int) -> bytes:
    """The serialized xla.OpSharding JAX reads back for a value: the tiles of
    hlo_sharding(), with an UNREDUCED subgroup for unreduced axes (as XLA
    reports them)."""
    from jax._src.lib import xla_client as xc

    if sharding is None or not sharding.unreduced:
        return xc.HloSharding.from_string(info.hlo_sharding(sharding, rank)).to_proto() \
            .SerializeToString()
    axes, ids = info.mesh_of(sharding)
    sizes = dict(axes)
    tiles = sharding.tile_counts(axes)
    n_unr = math.prod(_axis_ref_size(a, sizes) for a in sharding.unreduced)
    if all(t == 1 for t in tiles) and n_unr == info.num_partitions:
        return xc.HloSharding.unreduced().to_proto().SerializeToString()
    rep = info.num_partitions // (math.prod(tiles) * n_unr)
    table = np.full(tiles + (n_unr, rep), -1, np.int64)
    fill = {}
    coords = _coords_of_partition(axes, ids)
    for pos in range(info.num_partitions):
        p = ids[pos]
        idx = tuple(_dim_index(d, coords[p], axes) for d in sharding.dims)
        idx += (_dim_index(sharding.unreduced, coords[p], axes),)
        k = fill.get(idx, 0)
        fill[idx] = k + 1
        table[idx + (k,)] = p
    types = [xc.OpSharding.Type.UNREDUCED]
    if rep > 1:
        types.append(xc.OpSharding.Type.REPLICATED)
    else:
        table = table.reshape(table.shape[:-1])
    return xc.HloSharding.subgroup_with_device_ordering(table, types).to_proto() \
        .SerializeToString()


def _zero_text(element_type) -> str:
    t = str(element_type)
    if t == "i1":
        return "false"
    if t.startswith("complex"):
        return "(0.000000e+00,0.000000e+00)"
    if t.startswith(("i", "ui", "si")):
        return "0"
    return "0.000000e+00"


class ShardyUnsafe(Exception):
    """The module holds an op the Shardy path cannot take safely."""


# ---------------------------------------------------------------- helpers
def _axis_ref_size(ref: str, sizes: dict) -> int:
    if ":" in ref:
        return int(ref.rsplit(")", 1)[1])
    return sizes[ref]


def _axis_ref_coord(ref: str, coords: dict, sizes: dict) -> int:
    if ":" in ref:
        name, rest = ref.split(":(", 1)
        pre, size = rest.split(")")
        return (coords[name] // int(pre)) % int(size)
    return coords[ref]


def _dim_index(dim_axes, coords, mesh_axes) -> int:
    sizes = dict(mesh_axes)
    idx = 0
    for ref in dim_axes:
        idx = idx * _axis_ref_size(ref, sizes) + _axis_ref_coord(ref, coords, sizes)
    return idx


def _coords_of_partition(mesh_axes, device_ids) -> dict:
    """partition index -> {axis name: coordinate}."""
    names = [n for n, _ in mesh_axes]
    shape = [s for _, s in mesh_axes]
    out = {}
    for pos, c in enumerate(itertools.product(*[range(s) for s in shape])):
        out[device_ids[pos]] = dict(zip(names, c))
    return out


def _is_ranked(t) -> bool:
    try:
        ir.RankedTensorType(t)
        return True
    except ValueError:
        return False


def _attr_names(op) -> list[str]:
    attrs = op.attributes
    return [attrs[i].name for i in range(len(attrs))]


def _op_name(op) -> str:
    return op.operation.name


def _walk(op):
    for region in op.regions:
        for block in region.blocks:
            for o in block.operations:
                yield o.operation
                yield from _walk(o.operation)


def _funcs(module) -> dict:
    return {o.attributes["sym_name"].value: o.operation for o in module.body.operations
            if _op_name(o) == "func.func"}


def _main(module):
    main = _funcs(module).get("main")
    if main is None:
        raise ValueError("pjrtx: the module has no @main")
    return main


def _func_attr_list(func, key: str, n: int) -> list:
    if key not in func.attributes:
        return [ir.DictAttr.get({}) for _ in range(n)]
    arr = func.attributes[key]
    return [ir.DictAttr(arr[i]) for i in range(len(arr))]


def _dict_without_sdy(d) -> dict:
    return {d[i].name: d[i].attr for i in range(len(d)) if not d[i].name.startswith("sdy.")}


def _func_type(func) -> ir.FunctionType:
    return ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)


# ---------------------------------------------------------------- inliner
def inline_calls(module) -> int:
    """Inlines every func.call reachable from @main and erases the private
    callees; returns how many calls it inlined. (jaxlib's registered `inline`
    pass has no func inliner interface and changes nothing.)"""
    funcs = _funcs(module)
    main = _main(module)
    count = 0
    while True:
        calls = [o for o in _walk(main) if _op_name(o) == "func.call"]
        if not calls:
            break
        for call in calls:
            callee_name = ir.FlatSymbolRefAttr(call.attributes["callee"]).value
            callee = funcs.get(callee_name)
            if callee is None or len(callee.regions[0].blocks) != 1:
                raise ValueError(f"pjrtx: cannot inline call to @{callee_name}: "
                                 "no single-block definition in the module")
            clone = callee.clone(ip=ir.InsertionPoint(module.body))
            body = clone.regions[0].blocks[0]
            for arg, val in zip(body.arguments, call.operands):
                arg.replace_all_uses_with(val)
            ops = list(body.operations)
            for o in ops[:-1]:
                o.operation.move_before(call)
            for res, val in zip(call.results, ops[-1].operands):
                res.replace_all_uses_with(val)
            call.erase()
            clone.erase()
            count += 1
    # A composite names its decomposition by attribute, not by a call: keep
    # those (and what they call), erase the other private callees.
    keep = {"main"}
    todo = [main]
    while todo:
        for o in _walk(todo.pop()):
            ref = {"stablehlo.composite": "decomposition", "func.call": "callee"}.get(_op_name(o))
            if ref and ref in o.attributes:
                name = ir.FlatSymbolRefAttr(o.attributes[ref]).value
                if name not in keep and name in funcs:
                    keep.add(name)
                    todo.append(funcs[name])
    for name, f in funcs.items():
        if name not in keep:
            vis = f.attributes["sym_visibility"].value if "sym_visibility" in f.attributes else "public"
            if vis == "private":
                f.erase()
    return count


# ---------------------------------------------------------------- sharding parse
def _meshes(module) -> dict:
    out = {}
    for o in module.body.operations:
        if _op_name(o) == "sdy.mesh":
            out[o.attributes["sym_name"].value] = sdy.MeshAttr(o.attributes["mesh"])
    return out


def _mesh_info(mesh_attr, n: int):
    axes = tuple((sdy.MeshAxisAttr(a).name, sdy.MeshAxisAttr(a).size) for a in mesh_attr.axes)
    ids = tuple(int(i) for i in mesh_attr.device_ids)
    size = math.prod(s for _, s in axes)
    if not ids:
        ids = tuple(range(size))
    return axes, ids


def _axis_ref_str(a) -> str:
    a = sdy.AxisRefAttr(a)
    if a.sub_axis_info is None:
        return a.name
    si = sdy.SubAxisInfoAttr(a.sub_axis_info)
    return f"{a.name}:({si.pre_size}){si.size}"


def _parse_sharding(attr, meshes):
    """-> (mesh name or None, ValueSharding or None, has_unreduced)."""
    s = sdy.TensorShardingAttr(attr)
    mesh = s.mesh_or_ref
    try:
        mesh_name = ir.FlatSymbolRefAttr(mesh).value
    except (ValueError, TypeError):
        mesh_name = None  # an inline #sdy.mesh<...>
    dims = tuple(tuple(_axis_ref_str(a) for a in sdy.DimensionShardingAttr(d).axes)
                 for d in s.dimension_shardings)
    unreduced = tuple(_axis_ref_str(a) for a in s.unreduced_axes)
    vs = ValueSharding(dims, unreduced) if any(dims) or unreduced else None
    return mesh_name, vs, bool(unreduced)


def _read_shardings(func, meshes, which: str) -> tuple[list, set, bool]:
    ftype = _func_type(func)
    n = len(ftype.inputs if which == "arg" else ftype.results)
    attrs = _func_attr_list(func, "arg_attrs" if which == "arg" else "res_attrs", n)
    out, used, unreduced = [], set(), False
    for d in attrs:
        if "sdy.sharding" in d:
            name, vs, unr = _parse_sharding(d["sdy.sharding"], meshes)
            out.append(vs)
            unreduced |= unr
            if vs is not None:
                used.add(name)
        else:
            out.append(None)
    return out, used, unreduced


def _value_mesh_names(func, which: str) -> list:
    """The mesh name of each argument's or result's sdy.sharding (None)."""
    ftype = _func_type(func)
    n = len(ftype.inputs if which == "arg" else ftype.results)
    attrs = _func_attr_list(func, "arg_attrs" if which == "arg" else "res_attrs", n)
    names = []
    for d in attrs:
        if "sdy.sharding" in d:
            try:
                names.append(ir.FlatSymbolRefAttr(sdy.TensorShardingAttr(d["sdy.sharding"]).mesh_or_ref).value)
            except (ValueError, TypeError):
                names.append(None)
        else:
            names.append(None)
    return names


# ---------------------------------------------------------------- screening
def _reduce_kind(op) -> str | None:
    """The single binary op of a one-operand reduce's body, or None."""
    if len(op.operands) != 2:
        return None
    body = list(op.regions[0].blocks[0].operations)
    if len(body) != 2 or _op_name(body[0]) not in _REDUCER_BODIES:
        return None
    args = list(op.regions[0].blocks[0].arguments)
    if list(body[0].operands) != args and list(body[0].operands) != args[::-1]:
        return None
    return _op_name(body[0])


def _screen(main, mesh_axis_names: set) -> tuple[list[str], list[str]]:
    """-> (unsafe ops outside manual computations, unsafe ops inside them)."""
    outside, inside = [], []

    def visit(op, in_manual_full: bool, in_manual: bool):
        for region in op.regions:
            for block in region.blocks:
                for o in block.operations:
                    o = o.operation
                    name = _op_name(o)
                    bad = None
                    if name == "sdy.manual_computation":
                        # ManualAxesAttr has no Python accessors: #sdy<manual_axes{"x", "y"}>
                        manual = set(re.findall(r'"([^"]+)"', str(o.attributes["manual_axes"])))
                        visit(o, in_manual_full or manual >= mesh_axis_names, True)
                        continue
                    if in_manual_full:
                        # local program: the converter only moves it; anything goes
                        if name != "sdy.return" and name.startswith("sdy."):
                            bad = f"{name} inside a manual computation"
                    elif name == "sdy.return" and in_manual:
                        pass
                    elif in_manual and name in ("stablehlo.all_reduce", "stablehlo.all_gather",
                                                "stablehlo.collective_permute",
                                                "stablehlo.all_to_all", "stablehlo.reduce_scatter",
                                                "stablehlo.partition_id"):
                        pass
                    elif name not in SHARDY_SAFE_OPS:
                        bad = name
                    elif name == "stablehlo.reduce" and _reduce_kind(o) is None:
                        bad = "stablehlo.reduce with a body other than one add/max/min/mul/and/or"
                    elif name == "stablehlo.scatter":
                        body = list(o.regions[0].blocks[0].operations)
                        if len(o.operands) != 3 or len(body) != 2 or _op_name(body[0]) != "stablehlo.add":
                            bad = "stablehlo.scatter other than a single-operand scatter-add"
                    if bad:
                        (inside if in_manual else outside).append(bad)
                    if bad and not in_manual_full:
                        continue  # its regions would only repeat the same refusal
                    if name not in _SCALAR_BODY_OPS and not in_manual_full:
                        visit(o, in_manual_full, in_manual)
                    elif in_manual_full:
                        visit(o, in_manual_full, in_manual)

    visit(main, False, False)
    return outside, inside


# ---------------------------------------------------------------- shardy path
_COLLECTIVES = {"stablehlo.all_reduce", "stablehlo.all_gather", "stablehlo.all_to_all",
                "stablehlo.collective_permute", "stablehlo.reduce_scatter",
                "stablehlo.collective_broadcast"}
# Collectives Shardy may insert that localize accepts. jaxlib 0.10.2 builds
# reshards that need a collective_permute followed by an all_to_all (e.g.
# [{"x"},{"y"}] -> [{"y"},{"x"}] on a 2x4 mesh) that give every device the
# wrong block, so a program where Shardy inserted either takes the global path.
_SHARDY_COLLECTIVES_OK = {"stablehlo.all_reduce", "stablehlo.all_gather"}


def _tag_user_collectives(main):
    """Marks the collectives the program already has (shard_map bodies), so the
    ones Shardy inserts can be told apart after the pass."""
    for o in _walk(main):
        if _op_name(o) in _COLLECTIVES:
            o.attributes[_USER_TAG] = ir.UnitAttr.get()


def _check_partial_sums(main):
    """sdy-convert-global-to-local CHECK-fails (aborting the process) on a
    dot_general with a sharded contraction unless its one user is the
    all_reduce of its partial sums (convert_global_to_local.cc:1700): a
    reduce_scatter, or the partial sums read elsewhere too, abort. Such
    programs take the global path."""
    for o in _walk(main):
        if _op_name(o) not in ("stablehlo.dot_general", "stablehlo.dot", "stablehlo.convolution"):
            continue
        for r in o.results:
            users = [_op_name(u.owner) for u in r.uses]
            partial = any(u in ("sdy.all_reduce", "sdy.reduce_scatter") for u in users)
            sharding = str(o.attributes["sdy.sharding"]) if "sdy.sharding" in o.attributes else ""
            if (partial or "unreduced" in sharding) and users != ["sdy.all_reduce"]:
                raise ShardyUnsafe(f"{_op_name(o)} with a sharded contraction feeds {users} "
                                   "(Shardy's converter aborts unless one all_reduce does)")


def _check_divisible(main, meshes):
    """sdy-convert-global-to-local aborts the process on a value whose
    sharded dimension does not divide by its axes (jax allows such
    intermediates, e.g. with_sharding_constraint on 113003 elements over 2
    devices; XLA pads them). Such programs take the global path."""
    sizes_of = {k: dict(_mesh_info(m, 0)[0]) for k, m in meshes.items()}
    for o in _walk(main):
        if "sdy.sharding" not in o.attributes:
            continue
        try:
            per_value = sdy.TensorShardingPerValueAttr(o.attributes["sdy.sharding"]).shardings
        except (ValueError, TypeError):
            continue
        for r, attr in zip(o.results, per_value):
            mesh_name, vs, _ = _parse_sharding(attr, meshes)
            if vs is None or mesh_name not in sizes_of:
                continue
            try:
                shape = ir.RankedTensorType(r.type).shape
            except (ValueError, TypeError):
                continue
            sizes = sizes_of[mesh_name]
            for dim, axes in zip(shape, vs.dims):
                n = math.prod(_axis_ref_size(a, sizes) for a in axes)
                if n > 1 and dim % n:
                    raise ShardyUnsafe(f"{_op_name(o)} shards a dimension of {dim} over {n} "
                                       "devices (uneven; Shardy's converter aborts)")


def _check_inserted_collectives(main):
    for o in _walk(main):
        name = _op_name(o)
        if name in _COLLECTIVES and _USER_TAG not in o.attributes \
                and name not in _SHARDY_COLLECTIVES_OK:
            raise ShardyUnsafe(f"Shardy inserted a {name} (not verified to reshard correctly)")


def _fix_all_reduce_bodies(main) -> None:
    """Shardy 0.10.2 gives every all_reduce it inserts an add body. Set it to
    the reduce it follows; refuse any all_reduce whose origin is unclear."""
    for o in list(_walk(main)):
        if _op_name(o) != "stablehlo.all_reduce":
            continue
        if _USER_TAG in o.attributes:
            continue
        kinds = set()
        for v in o.operands:
            owner = v.owner
            owner = getattr(owner, "operation", owner)  # an OpView, or a Block for block args
            owner_name = owner.name if isinstance(owner, ir.Operation) else None
            if owner_name == "stablehlo.reduce":
                kind = _reduce_kind(owner)
                if kind is None:
                    raise ShardyUnsafe("all_reduce after a reduce with an unknown body")
                kinds.add(kind)
            elif owner_name in ("stablehlo.dot_general", "stablehlo.convolution"):
                kinds.add("stablehlo.add")
            else:
                raise ShardyUnsafe(f"Shardy inserted an all_reduce after {owner_name}; "
                                   "its reduction kind is not known")
        if len(kinds) != 1:
            raise ShardyUnsafe("an all_reduce combines reductions of different kinds")
        kind = kinds.pop()
        block = o.regions[0].blocks[0]
        body = list(block.operations)
        if len(body) != 2 or _op_name(body[0]) != "stablehlo.add":
            raise ShardyUnsafe("an inserted all_reduce has an unexpected body")
        if kind == "stablehlo.add":
            continue
        old = body[0]
        new = ir.Operation.create(kind, results=[old.result.type],
                                  operands=list(old.operands), loc=old.location,
                                  ip=ir.InsertionPoint(old))
        old.result.replace_all_uses_with(new.result)
        old.erase()


def _close_unannotated_args(main, mesh_name: str):
    """Arguments JAX sent without a sharding hold the whole value on every
    device: pin them replicated so propagation cannot shard them."""
    ftype = _func_type(main)
    attrs = _func_attr_list(main, "arg_attrs", len(ftype.inputs))
    changed = False
    new = []
    for t, d in zip(ftype.inputs, attrs):
        entries = {d[i].name: d[i].attr for i in range(len(d))}
        if "sdy.sharding" not in entries and _is_ranked(t):
            rank = ir.RankedTensorType(t).rank
            entries["sdy.sharding"] = ir.Attribute.parse(
                "#sdy.sharding<@%s, [%s]>" % (mesh_name, ", ".join(["{}"] * rank)))
            changed = True
        new.append(ir.DictAttr.get(entries))
    if changed:
        main.attributes["arg_attrs"] = ir.ArrayAttr.get(new)


def _localize_shardy(module, n: int, meshes: dict) -> PartitionInfo:
    main = _main(module)
    # A mesh without axes (JAX's @empty_mesh for scalars outside a
    # shard_map) only says "replicated"; Shardy reads it as such.
    real = {k: m for k, m in meshes.items() if len(list(m.axes)) > 0}
    if len(real) != 1:
        raise ShardyUnsafe(f"{len(real)} meshes with axes in the module")
    mesh_name, mesh_attr = next(iter(real.items()))
    axes, ids = _mesh_info(mesh_attr, n)
    _close_unannotated_args(main, mesh_name)
    _tag_user_collectives(main)
    passmanager.PassManager.parse(SHARDY_PIPELINE).run(module.operation)
    main = _main(module)
    _check_partial_sums(main)
    _check_divisible(main, meshes)
    args, _, _ = _read_shardings(main, meshes, "arg")
    results, _, _ = _read_shardings(main, meshes, "result")
    passmanager.PassManager.parse(LOCAL_PIPELINE).run(module.operation)
    main = _main(module)
    left = sorted({_op_name(o) for o in _walk(module.operation) if _op_name(o).startswith("sdy.")})
    if left:
        raise ShardyUnsafe(f"sdy ops remain after the pipeline: {left}")
    _check_inserted_collectives(main)
    _fix_all_reduce_bodies(main)
    for o in _walk(main):
        if _USER_TAG in o.attributes:
            del o.attributes[_USER_TAG]
    return PartitionInfo("shardy", "", n, axes, ids, args, results)


# ---------------------------------------------------------------- global path
def _groups_for_dim(dim_axes, mesh_axes, device_ids):
    """Partition groups that all-gather one dim: partitions that differ only in
    the (sub)axes of that dim, each group ordered by shard index."""
    sizes = dict(mesh_axes)
    coords = _coords_of_partition(mesh_axes, device_ids)
    groups = {}
    for p, c in coords.items():
        rest = dict(c)
        for ref in dim_axes:
            name = ref.split(":")[0]
            pre = int(ref.split(":(")[1].split(")")[0]) if ":" in ref else 1
            rest[name] -= _axis_ref_coord(ref, c, sizes) * pre
        key = tuple(sorted(rest.items()))
        groups.setdefault(key, []).append((_dim_index(dim_axes, c, mesh_axes), p))
    out = [[p for _, p in sorted(g)] for g in groups.values()]
    out.sort()
    return out


def _groups_text(g) -> str:
    """A replica_groups attribute for an int64 array of partition groups."""
    return "dense<%s> : tensor<%dx%dxi64>" % (str(g.tolist()).replace(" ", ""), g.shape[0],
                                               g.shape[1])


def _block_slice_text(lines, out, src, global_t, local_t, vs, axes, coords, n, tag):
    """Appends `out = this device's block of src` to lines: per sharded
    dimension an offset table indexed by partition_id (%pid; %zero for the
    others), then one dynamic_slice to the local type."""
    lshape = list(ir.RankedTensorType(ir.Type.parse(str(local_t))).shape)
    offs = []
    for dim, dim_axes in enumerate(vs.dims):
        if not dim_axes:
            offs.append("%zero")
            continue
        table = [_dim_index(dim_axes, coords[p], axes) * lshape[dim] for p in range(n)]
        tn = f"%{tag}_{dim}"
        lines.append(f"{tn} = stablehlo.constant dense<{table}> : tensor<{n}xi32>".replace(", ", ","))
        lines.append(f'{tn}s = "stablehlo.dynamic_slice"({tn}, %pid) <{{slice_sizes = '
                     f"array<i64: 1>}}> : (tensor<{n}xi32>, tensor<i32>) -> tensor<1xi32>")
        lines.append(f"{tn}o = stablehlo.reshape {tn}s : (tensor<1xi32>) -> tensor<i32>")
        offs.append(f"{tn}o")
    idx_types = ", ".join(["tensor<i32>"] * len(offs))
    sizes_txt = ", ".join(map(str, lshape))
    lines.append(f'{out} = "stablehlo.dynamic_slice"({src}, {", ".join(offs)}) '
                 f"<{{slice_sizes = array<i64: {sizes_txt}>}}> : ({global_t}, {idx_types}) -> {local_t}")


def _global_wrapper_text(main, n, axes, ids, args, results, callee: str) -> str:
    ftype = _func_type(main)
    arg_attrs = _func_attr_list(main, "arg_attrs", len(ftype.inputs))
    res_attrs = _func_attr_list(main, "res_attrs", len(ftype.results))
    def mesh_of(vs):
        # A value may live on its own mesh (the same devices in another
        # order, e.g. a reshard between two meshes).
        a, i = vs.mesh if vs is not None and vs.mesh else (axes, ids)
        return a, i, dict(a), _coords_of_partition(a, i)
    lines, params, handle = [], [], itertools.count(1)

    def local_type(t, vs, what):
        if vs is None or not _is_ranked(t):
            return str(t)
        rt = ir.RankedTensorType(t)
        shape = list(rt.shape)
        sizes = mesh_of(vs)[2]
        for d, dim_axes in enumerate(vs.dims):
            k = math.prod(_axis_ref_size(a, sizes) for a in dim_axes)
            if shape[d] % k:
                raise ValueError(f"pjrtx: {what} dim {d} of {t} does not divide over {k} devices")
            shape[d] //= k
        return str(ir.RankedTensorType.get(shape, rt.element_type))

    def dict_text(d):
        kept = _dict_without_sdy(d)
        return (" " + str(ir.DictAttr.get(kept))) if kept else ""

    call_args = []
    for i, (t, vs, d) in enumerate(zip(ftype.inputs, args, arg_attrs)):
        lt = local_type(t, vs, f"argument {i}")
        params.append(f"%a{i}: {lt}{dict_text(d)}")
        cur, cur_t = f"%a{i}", lt
        v_axes, v_ids, _, _ = mesh_of(vs)
        if vs is not None and _is_ranked(t):
            rt = ir.RankedTensorType(t)
            shape = list(ir.RankedTensorType(ir.Type.parse(lt)).shape)
            for dim, dim_axes in enumerate(vs.dims):
                if not dim_axes:
                    continue
                groups = _groups_for_dim(dim_axes, v_axes, v_ids)
                shape[dim] = rt.shape[dim]
                nt = str(ir.RankedTensorType.get(shape, rt.element_type))
                g = np.array(groups, np.int64)
                gtext = _groups_text(g)
                nxt = f"%g{i}_{dim}"
                lines.append(
                    f'{nxt} = "stablehlo.all_gather"({cur}) <{{all_gather_dim = {dim} : i64, '
                    f"channel_handle = #stablehlo.channel_handle<handle = {next(handle)}, type = 1>, "
                    f"replica_groups = {gtext}, use_global_device_ids}}> : ({cur_t}) -> {nt}")
                cur, cur_t = nxt, nt
        if vs is not None and vs.unreduced and _is_ranked(t):
            # Each device holds a partial sum: the value is their sum.
            et = ir.RankedTensorType(t).element_type
            g = np.array(_groups_for_dim(vs.unreduced, v_axes, v_ids), np.int64)
            gtext = _groups_text(g)
            nxt = f"%u{i}"
            lines.append(
                f'{nxt} = "stablehlo.all_reduce"({cur}) <{{channel_handle = '
                f"#stablehlo.channel_handle<handle = {next(handle)}, type = 1>, "
                f"replica_groups = {gtext}, use_global_device_ids}}> ({{\n"
                f"    ^bb0(%p{i}: tensor<{et}>, %q{i}: tensor<{et}>):\n"
                f"      %s{i} = stablehlo.add %p{i}, %q{i} : tensor<{et}>\n"
                f"      stablehlo.return %s{i} : tensor<{et}>\n"
                f"    }}) : ({cur_t}) -> {cur_t}")
            cur = nxt
        call_args.append(cur)
    in_types = ", ".join(str(t) for t in ftype.inputs)
    out_types = ", ".join(str(t) for t in ftype.results)
    nres = len(ftype.results)
    if nres:
        lines.append(f"%r:{nres} = func.call @{callee}({', '.join(call_args)}) : "
                     f"({in_types}) -> ({out_types})")
    else:
        lines.append(f"func.call @{callee}({', '.join(call_args)}) : ({in_types}) -> ()")
    rets, ret_types, res_params = [], [], []
    need_pid = any(vs is not None for vs in results)
    if need_pid:
        lines.append("%pid_u = stablehlo.partition_id : tensor<ui32>")
        lines.append("%pid = stablehlo.convert %pid_u : (tensor<ui32>) -> tensor<i32>")
        lines.append("%zero = stablehlo.constant dense<0> : tensor<i32>")
    for j, (t, vs, d) in enumerate(zip(ftype.results, results, res_attrs)):
        lt = local_type(t, vs, f"result {j}")
        res_params.append(f"{lt}{dict_text(d)}")
        ret_types.append(lt)
        if vs is None or not _is_ranked(t):
            rets.append(f"%r#{j}")
            continue
        rt = ir.RankedTensorType(t)
        v_axes, _, _, coords = mesh_of(vs)
        full = f"%r#{j}"
        if vs.unreduced:
            # Unreduced: the first device of each group holds the value, the
            # others zeros, so the group's sum is the value.
            et = rt.element_type
            first = [_dim_index(vs.unreduced, coords[p], v_axes) == 0 for p in range(n)]
            ft = f"%f{j}"
            lines.append(f"{ft} = stablehlo.constant dense<{str(first).lower()}> : tensor<{n}xi1>"
                         .replace(", ", ","))
            lines.append(f'{ft}s = "stablehlo.dynamic_slice"({ft}, %pid) <{{slice_sizes = '
                         f"array<i64: 1>}}> : (tensor<{n}xi1>, tensor<i32>) -> tensor<1xi1>")
            lines.append(f"{ft}o = stablehlo.reshape {ft}s : (tensor<1xi1>) -> tensor<i1>")
            lines.append(f"{ft}b = stablehlo.broadcast_in_dim {ft}o, dims = [] : "
                         f"(tensor<i1>) -> tensor<{'x'.join(map(str, rt.shape))}{'x' if rt.shape else ''}i1>")
            lines.append(f"{ft}z = stablehlo.constant dense<{_zero_text(et)}> : {t}")
            lines.append(f"{ft}v = stablehlo.select {ft}b, %r#{j}, {ft}z : "
                         f"tensor<{'x'.join(map(str, rt.shape))}{'x' if rt.shape else ''}i1>, {t}")
            full = f"{ft}v"
        if not any(vs.dims):
            rets.append(full)
            continue
        _block_slice_text(lines, f"%s{j}", full, t, lt, vs, v_axes, coords, n, f"t{j}")
        rets.append(f"%s{j}")
    if rets:
        lines.append(f"return {', '.join(rets)} : {', '.join(ret_types)}")
    else:
        lines.append("return")
    body = "\n    ".join(lines)
    return (f"module {{\n  func.func private @{callee}({in_types}) -> ({out_types})\n"
            f"  func.func public @main({', '.join(params)}) -> ({', '.join(res_params)}) {{\n"
            f"    {body}\n  }}\n}}\n")


def _manual_on_global(module, n: int, meshes: dict) -> None:
    """A shard_map/pmap body (sdy.manual_computation) inside a program that
    takes the global path: each device slices the global operands down to
    its block along the manual axes (partition_id tables), runs the body as
    written (its collectives are per device) and all-gathers its results
    back along those axes. Axes the region leaves to the compiler stay
    whole, as everything on the global path does."""
    from jaxlib.mlir.dialects import func as func_d

    counter = itertools.count()
    while True:
        ops = [o for o in _walk(_main(module)) if _op_name(o) == "sdy.manual_computation"]
        if not ops:
            return
        op = ops[0]
        # Outermost first: a nested region (axis_index in a partially manual
        # region nests one over the other axes) lands in main with the outer
        # body and is taken next; it slices and gathers along its own axes
        # only, within the outer block.
        k = next(counter)
        # #sdy<manual_axes{"x", "y"}> (the bindings give no accessor)
        manual = re.findall(r'"([^"]+)"', str(op.attributes["manual_axes"]))
        in_sh = list(sdy.TensorShardingPerValueAttr(op.attributes["in_shardings"]).shardings)
        out_sh = list(sdy.TensorShardingPerValueAttr(op.attributes["out_shardings"]).shardings)

        def manual_only(attr):
            name, vs, _ = _parse_sharding(attr, meshes)
            if name is None or name not in meshes:
                raise ValueError("pjrtx: a shard_map region on an inline mesh")
            axes, ids = _mesh_info(meshes[name], n)
            dims = tuple(tuple(a for a in d if a.split(":")[0] in manual)
                         for d in (vs.dims if vs else ()))
            unr = tuple(a for a in (vs.unreduced if vs else ()) if a.split(":")[0] in manual)
            return (ValueSharding(dims, unr) if any(dims) or unr else None), axes, ids

        def sum_over(cur, cur_t, et, groups_axes, axes, ids):
            g = np.array(_groups_for_dim(groups_axes, axes, ids), np.int64)
            gtext = _groups_text(g)
            h = next(handle)
            lines.append(
                f'%sum{h} = "stablehlo.all_reduce"({cur}) <{{channel_handle = '
                f"#stablehlo.channel_handle<handle = {h}, type = 1>, "
                f"replica_groups = {gtext}, use_global_device_ids}}> ({{\n"
                f"    ^bb0(%p{h}: tensor<{et}>, %q{h}: tensor<{et}>):\n"
                f"      %s{h} = stablehlo.add %p{h}, %q{h} : tensor<{et}>\n"
                f"      stablehlo.return %s{h} : tensor<{et}>\n"
                f"    }}) : ({cur_t}) -> {cur_t}")
            return f"%sum{h}"

        def first_only(cur, cur_t, et, shape, groups_axes, axes, ids):
            # partial sums whose total is the value: the value on the first
            # device of each group, zeros on the others
            coords = _coords_of_partition(axes, ids)
            first = [_dim_index(groups_axes, coords[p], axes) == 0 for p in range(n)]
            h = next(handle)
            pt = f"tensor<{''.join(f'{d}x' for d in shape)}i1>"
            lines.append(f"%fi{h} = stablehlo.constant dense<{str(first).lower()}> : tensor<{n}xi1>"
                         .replace(", ", ","))
            lines.append(f'%fi{h}s = "stablehlo.dynamic_slice"(%fi{h}, %pid) <{{slice_sizes = '
                         f"array<i64: 1>}}> : (tensor<{n}xi1>, tensor<i32>) -> tensor<1xi1>")
            lines.append(f"%fi{h}o = stablehlo.reshape %fi{h}s : (tensor<1xi1>) -> tensor<i1>")
            lines.append(f"%fi{h}b = stablehlo.broadcast_in_dim %fi{h}o, dims = [] : (tensor<i1>) -> {pt}")
            lines.append(f"%fi{h}z = stablehlo.constant dense<{_zero_text(et)}> : {cur_t}")
            lines.append(f"%fi{h}v = stablehlo.select %fi{h}b, {cur}, %fi{h}z : {pt}, {cur_t}")
            return f"%fi{h}v"

        block = op.regions[0].blocks[0]
        local_in = [a.type for a in block.arguments]
        term = list(block.operations)[-1]
        local_out = [v.type for v in term.operands]
        glob_in = [v.type for v in op.operands]
        glob_out = [r.type for r in op.results]
        # The body becomes a private function (the region is isolated from
        # above, so it reads only its arguments).
        body_name = f"__pjrtx_manual_body_{k}"
        with ir.InsertionPoint(module.body):
            fn = func_d.FuncOp(body_name, (local_in, local_out))
            fn.attributes["sym_visibility"] = ir.StringAttr.get("private")
            entry = fn.add_entry_block()
        for old_arg, new_arg in zip(block.arguments, entry.arguments):
            old_arg.replace_all_uses_with(new_arg)
        ip = ir.InsertionPoint(entry)
        for o in list(block.operations):
            o.detach_from_parent()
            ip.insert(o)
        term = list(entry.operations)[-1]
        with ir.InsertionPoint(term), term.location:
            func_d.ReturnOp(list(term.operands))
        term.erase()
        # The wrapper: slice in, call, gather out.
        lines, handle = [], itertools.count(1000 * (k + 1))
        lines.append("%pid_u = stablehlo.partition_id : tensor<ui32>")
        lines.append("%pid = stablehlo.convert %pid_u : (tensor<ui32>) -> tensor<i32>")
        lines.append("%zero = stablehlo.constant dense<0> : tensor<i32>")
        params, call_args = [], []
        for i, (gt, lt, attr) in enumerate(zip(glob_in, local_in, in_sh)):
            params.append(f"%g{i}: {gt}")
            vs, axes, ids = manual_only(attr)
            if vs is not None and vs.unreduced and _is_ranked(gt):
                rt = ir.RankedTensorType(gt)
                params_src = first_only(f"%g{i}", str(gt), rt.element_type, list(rt.shape),
                                        vs.unreduced, axes, ids)
            else:
                params_src = f"%g{i}"
            if vs is None or not any(vs.dims) or str(gt) == str(lt) or not _is_ranked(gt):
                call_args.append(params_src)
                continue
            _block_slice_text(lines, f"%l{i}", params_src, gt, lt, vs, axes,
                              _coords_of_partition(axes, ids), n, f"t{i}")
            call_args.append(f"%l{i}")
        in_t = ", ".join(str(t) for t in local_in)
        out_t = ", ".join(str(t) for t in local_out)
        nres = len(local_out)
        call = f"func.call @{body_name}({', '.join(call_args)}) : ({in_t}) -> ({out_t})"
        lines.append(f"%r:{nres} = {call}" if nres else call)
        rets = []
        for j, (gt, lt, attr) in enumerate(zip(glob_out, local_out, out_sh)):
            vs, axes, ids = manual_only(attr)
            cur, cur_t = f"%r#{j}", str(lt)
            if vs is not None and vs.unreduced and _is_ranked(lt):
                # the devices hold partial sums: the value is their sum
                cur = sum_over(cur, cur_t, ir.RankedTensorType(lt).element_type, vs.unreduced,
                               axes, ids)
            if vs is not None and any(vs.dims) and str(gt) != str(lt) and _is_ranked(gt):
                shape = list(ir.RankedTensorType(lt).shape)
                grt = ir.RankedTensorType(gt)
                for dim, dim_axes in enumerate(vs.dims):
                    if not dim_axes:
                        continue
                    g = np.array(_groups_for_dim(dim_axes, axes, ids), np.int64)
                    gtext = _groups_text(g)
                    shape[dim] = grt.shape[dim]
                    nt = str(ir.RankedTensorType.get(shape, grt.element_type))
                    nxt = f"%o{j}_{dim}"
                    lines.append(
                        f'{nxt} = "stablehlo.all_gather"({cur}) <{{all_gather_dim = {dim} : i64, '
                        f"channel_handle = #stablehlo.channel_handle<handle = {next(handle)}, type = 1>, "
                        f"replica_groups = {gtext}, use_global_device_ids}}> : ({cur_t}) -> {nt}")
                    cur, cur_t = nxt, nt
            rets.append(cur)
        glob_out_t = ", ".join(str(t) for t in glob_out)
        if rets:
            lines.append(f"return {', '.join(rets)} : {glob_out_t}")
        else:
            lines.append("return")
        wrap_name = f"__pjrtx_manual_{k}"
        body = "\n    ".join(lines)
        text = (f"module {{\n  func.func private @{body_name}({in_t}) -> ({out_t})\n"
                f"  func.func private @{wrap_name}({', '.join(params)}) -> ({glob_out_t}) {{\n"
                f"    {body}\n  }}\n}}\n")
        wrapper = ir.Module.parse(text)
        wfn = [o for o in wrapper.body.operations if o.attributes["sym_name"].value == wrap_name][0]
        wfn.operation.clone(ip=ir.InsertionPoint(module.body))
        with ir.InsertionPoint(op), op.location:
            c = func_d.CallOp(list(op.results.types) if hasattr(op.results, "types")
                              else [r.type for r in op.results],
                              ir.FlatSymbolRefAttr.get(wrap_name), list(op.operands))
        for r_old, r_new in zip(op.results, c.results):
            r_old.replace_all_uses_with(r_new)
        op.erase()
        inline_calls(module)


def _strip_sdy(module):
    """Drops sdy ops that only annotate (constraints, reshards, barriers) and
    every sdy attribute, and the meshes."""
    for o in list(_walk(module.operation)):
        name = _op_name(o)
        if name in ("sdy.sharding_constraint", "sdy.reshard", "sdy.propagation_barrier"):
            o.results[0].replace_all_uses_with(o.operands[0])
            o.erase()
        elif name == "sdy.sharding_group":  # shard_alike's hint: no results
            o.erase()
        elif name.startswith("sdy.") and name != "sdy.mesh":
            raise ValueError(f"pjrtx: {name} cannot run on the global path")
    for o in itertools.chain([module.operation], _walk(module.operation)):
        for key in [a for a in _attr_names(o) if a.startswith("sdy.")]:
            del o.attributes[key]
        if _op_name(o) == "func.func":
            for key in ("arg_attrs", "res_attrs"):
                if key in o.attributes:
                    arr = o.attributes[key]
                    o.attributes[key] = ir.ArrayAttr.get(
                        [ir.DictAttr.get(_dict_without_sdy(ir.DictAttr(arr[i])))
                         for i in range(len(arr))])
    for o in list(module.body.operations):
        if _op_name(o) == "sdy.mesh":
            o.operation.erase()


def _propagated_results(module, n: int, meshes: dict) -> dict:
    """For results the program leaves to the compiler (no sdy.sharding, or
    open dimensions), the sharding Shardy's propagation picks: the global
    path then hands each device that shard, and reports it, as XLA's
    partitioner would (instead of replicating). Propagation alone never
    reaches the converter whose CHECKs abort; a failure means replicated."""
    main = _main(module)
    ftype = _func_type(main)
    attrs = _func_attr_list(main, "res_attrs", len(ftype.results))
    open_ = [i for i, d in enumerate(attrs)
             if "sdy.sharding" not in d or "?" in str(d["sdy.sharding"])]
    if not open_ or not meshes:
        return {}
    try:
        work = ir.Module.parse(str(module))
        passmanager.PassManager.parse("builtin.module(sdy-propagation-pipeline)").run(
            work.operation)
        wmain = _main(work)
        res, _, _ = _read_shardings(wmain, _meshes(work), "result")
        names = _value_mesh_names(wmain, "result")
    except Exception:  # noqa: BLE001 - propagation is a nicety here
        return {}
    out = {}
    for i in open_:
        vs = res[i]
        if vs is None or vs.unreduced or names[i] not in meshes:
            continue
        axes, _ = _mesh_info(meshes[names[i]], n)
        sizes = dict(axes)
        try:
            shape = ir.RankedTensorType(ftype.results[i]).shape
        except (ValueError, TypeError):
            continue
        if all(d % math.prod(_axis_ref_size(a, sizes) for a in dim) == 0
               for d, dim in zip(shape, vs.dims)):
            out[i] = (vs, names[i])
    return out


def _localize_global(module, n: int, meshes: dict, reason: str) -> PartitionInfo:
    main = _main(module)
    propagated = _propagated_results(module, n, meshes)
    if any(_op_name(o) == "sdy.manual_computation" for o in _walk(main)):
        _manual_on_global(module, n, meshes)
        main = _main(module)
    args, used_a, unr_a = _read_shardings(main, meshes, "arg")
    results, used_r, unr_r = _read_shardings(main, meshes, "result")
    for i, (vs, name) in propagated.items():
        results[i] = vs
        used_r.add(name)
    used = (used_a | used_r)
    if None in used:
        raise ValueError("pjrtx: inline meshes in main's shardings are not supported")
    used = sorted(u for u in used if len(list(meshes[u].axes)) > 0)
    if used:
        axes, ids = _mesh_info(meshes[used[0]], n)
    elif meshes:
        axes, ids = _mesh_info(next(iter(meshes.values())), n)
    else:
        axes, ids = (), tuple(range(n))
    for a, i in [(axes, ids)] + [_mesh_info(meshes[u], n) for u in used]:
        if a and (math.prod(s for _, s in a) != n or sorted(i) != list(range(n))):
            raise ValueError(f"pjrtx: mesh {a} (device_ids {i}) does not cover {n} partitions")
    # Values on another mesh than the first carry theirs.
    for which, vals in (("arg", args), ("result", results)):
        for k, name in enumerate(_value_mesh_names(main, which)):
            if vals[k] is not None and name in meshes and _mesh_info(meshes[name], n) != (axes, ids):
                vals[k] = dataclasses.replace(vals[k], mesh=_mesh_info(meshes[name], n))
    for i, (vs, name) in propagated.items():
        if _mesh_info(meshes[name], n) != (axes, ids):
            results[i] = dataclasses.replace(vs, mesh=_mesh_info(meshes[name], n))
    callee = "__pjrtx_global_main"
    if any(args) or any(results):
        text = _global_wrapper_text(main, n, axes, ids, args, results, callee)
        main.attributes["sym_name"] = ir.StringAttr.get(callee)
        main.attributes["sym_visibility"] = ir.StringAttr.get("private")
        for key in ("arg_attrs", "res_attrs"):
            if key in main.attributes:
                del main.attributes[key]
        wrapper = ir.Module.parse(text)
        new_main = [o for o in wrapper.body.operations
                    if o.attributes["sym_name"].value == "main"][0]
        new_main.operation.clone(ip=ir.InsertionPoint(module.body))
        inline_calls(module)
    _strip_sdy(module)
    return PartitionInfo("global", reason, n, axes, ids, args, results)


# ---------------------------------------------------------------- entry point
def localize(module, num_partitions: int, *, force: str | None = None) -> PartitionInfo:
    """Rewrites `module` (an ir.Module, inside its context) in place into the
    program each of `num_partitions` devices runs, and says how.

    `force` ("shardy" or "global"; also PJRTX_PARTITION) skips the screen:
    for tests and experiments only, since an unscreened module can abort the
    process inside Shardy.
    """
    n = int(num_partitions)
    force = force or os.environ.get("PJRTX_PARTITION") or None
    if force not in (None, "auto", "global", "shardy"):
        raise ValueError(f"pjrtx: PJRTX_PARTITION must be auto, global or shardy, got {force!r}")
    if n < 1:
        raise ValueError(f"pjrtx: num_partitions must be >= 1, got {n}")
    main = _main(module)
    for o in itertools.chain([main], _walk(main)):
        if "mhlo.sharding" in o.attributes and "replicated" not in str(o.attributes["mhlo.sharding"]):
            raise ValueError("pjrtx: GSPMD (mhlo.sharding) programs are not supported; "
                             "keep jax_use_shardy_partitioner on")
    for key in ("arg_attrs", "res_attrs"):
        if key in main.attributes and "mhlo.sharding" in str(main.attributes[key]) \
                and "{devices=" in str(main.attributes[key]):
            raise ValueError("pjrtx: GSPMD (mhlo.sharding) programs are not supported; "
                             "keep jax_use_shardy_partitioner on")
    meshes = _meshes(module) if sdy is not None else {}
    inline_calls(module)
    main = _main(module)
    has_manual = any(_op_name(o) == "sdy.manual_computation" for o in _walk(main))

    if force == "global":
        return _localize_global(module, n, meshes, "forced")
    if not meshes:
        return _localize_global(module, n, meshes, "no sdy.mesh: every value is replicated")
    if force != "shardy" and "unreduced=" in str(main):
        # jaxlib 0.10.2's converter has no pass for unreduced axes (JAX's
        # explicit sharding); the global program computes the reduced values.
        return _localize_global(module, n, meshes, "unreduced shardings")
    if force != "shardy":
        axis_names = {a for m in meshes.values() for a, _ in _mesh_info(m, n)[0]}
        outside, inside = _screen(main, axis_names)
        if inside:
            return _localize_global(module, n, meshes,
                                    f"{inside[0]} inside a partially manual shard_map region "
                                    "is not on the Shardy allow-list")
        if outside:
            return _localize_global(module, n, meshes,
                                    f"{outside[0]} is not on the Shardy allow-list")
    # Shardy runs on a copy: a failing pass leaves its module half rewritten.
    work = ir.Module.parse(str(module))
    try:
        info = _localize_shardy(work, n, _meshes(work))
    except (ShardyUnsafe, ir.MLIRError) as e:
        module_meshes = _meshes(module)
        return _localize_global(module, n, module_meshes, f"Shardy failed: {str(e)[:500]}")
    _replace_body(module, work)
    return info


def _replace_body(module, work):
    for o in list(module.body.operations):
        o.operation.erase()
    for o in work.body.operations:
        o.operation.clone(ip=ir.InsertionPoint(module.body))
    for a in _attr_names(module.operation):
        if a.startswith("sdy."):
            del module.operation.attributes[a]
    for a in _attr_names(work.operation):
        module.operation.attributes[a] = work.operation.attributes[a]
