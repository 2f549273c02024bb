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
import json
import math
import os
import re

import numpy as np
from jaxlib.mlir import ir
from jaxlib.mlir import passmanager
from jaxlib.mlir.dialects import stablehlo

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
#   custom_call (but see _BATCH_TARGETS), rng ops, fft, select_and_scatter,
#   reverse, chlo.*: not verified.
# pad and gather pass the screen but are checked after Shardy's export
# (_check_pads_and_gathers): a pad only where no sharded dimension is padded,
# a gather only where its sharded dimensions are batch dimensions (the
# jvp/vjp of batched linalg), since the converter aborts on others.
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
    # batched matrix ops: Shardy's own rules keep the batch dimensions and
    # replicate each matrix (an all_gather where a matrix dim is sharded)
    "cholesky", "triangular_solve",
    # special-cased below: reduce (body kind), scatter (add body only)
    "reduce", "scatter",
}
SHARDY_SAFE_OPS = frozenset(
    {"stablehlo." + n for n in _ELEMENTWISE | _STRUCTURAL}
    | {"func.return", "sdy.sharding_constraint", "sdy.reshard", "sdy.manual_computation",
       "sdy.sharding_group"})
# Ops the screen lets through that _check_pads_and_gathers checks once their
# shardings are known (after Shardy's export, before the converter).
_CHECKED_AFTER_EXPORT = frozenset({"stablehlo.pad", "stablehlo.gather"})
# Ops whose regions are scalar computations (not partitioned; not screened).
_SCALAR_BODY_OPS = {"stablehlo.reduce", "stablehlo.sort", "stablehlo.scatter",
                    "stablehlo.all_reduce", "stablehlo.reduce_scatter"}
# A reduce whose body is one of these binary ops is partitioned with an
# all_reduce, whose body localize sets to the same op.
_REDUCER_BODIES = {"stablehlo.add", "stablehlo.maximum", "stablehlo.minimum",
                   "stablehlo.multiply", "stablehlo.and", "stablehlo.or"}
_USER_TAG = "pjrtx.user_collective"
_BATCH_TAG = "pjrtx.batch_call"
# pjrtx's linalg custom calls: each works matrix by matrix over leading batch
# dimensions that all its operands and results share (operand 0 has this
# many trailing core dimensions), as XLA partitions its own linalg custom
# calls (num_batch_dims). The frontend gives them a Shardy sharding rule
# (batch factors shared, every core dimension replicated) and lets them on
# the Shardy path.
_BATCH_TARGETS = {
    "pjrtx_eig": 2, "pjrtx_eigh": 2, "pjrtx_svd": 2, "pjrtx_schur": 2,
    "pjrtx_hessenberg": 2, "pjrtx_tridiagonal": 2, "pjrtx_tridiagonal_solve": 1,
    "pjrtx_geqp3": 2, "LuDecomposition": 2, "Qr": 2,
    "ProductOfElementaryHouseholderReflectors": 2,
}


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


def _factor_name(i: int) -> str:
    # Shardy's factor names: i..z, then z_1, z_2, ...
    return chr(ord("i") + i) if i < 18 else f"z_{i - 17}"


def _batch_layout(o):
    """-> (batch dims, static shapes of operands then results) for a custom
    call of _BATCH_TARGETS whose operands and results share at least one
    leading batch dimension; None otherwise."""
    if _op_name(o) != "stablehlo.custom_call":
        return None
    core = _BATCH_TARGETS.get(ir.StringAttr(o.attributes["call_target_name"]).value)
    values = [v.type for v in o.operands] + [r.type for r in o.results]
    if core is None or not values or not all(
            _is_ranked(t) and ir.RankedTensorType(t).has_static_shape for t in values):
        return None
    shapes = [list(ir.RankedTensorType(t).shape) for t in values]
    nb = len(shapes[0]) - core
    if nb < 1 or any(len(sh) < nb or sh[:nb] != shapes[0][:nb] for sh in shapes):
        return None
    return nb, shapes


def _add_batch_rules(main, mesh_name: str) -> None:
    """Readies each batched custom call for Shardy: a sdy.sharding_rule (the
    batch dims are common factors, every other dim its own factor that
    needs replication), and a sharding constraint on each operand that
    keeps its batch dims open and replicates the rest (jaxlib 0.10.2's
    explicit reshards ignore need_replication: an operand sharded along a
    matrix dimension would reach the call as a slice). The global shapes go
    in _BATCH_TAG for _check_batch_calls."""
    for o in list(_walk(main)):
        layout = _batch_layout(o)
        if layout is None:
            continue
        nb, shapes = layout
        sizes = list(shapes[0][:nb])
        mapping, need = [], []
        for sh in shapes:
            names = [_factor_name(d) for d in range(nb)]
            for d in sh[nb:]:
                names.append(_factor_name(len(sizes)))
                need.append(names[-1])
                sizes.append(d)
            mapping.append("[" + ", ".join(names) + "]")
        nin = len(o.operands)
        factors = ", ".join(f"{_factor_name(i)}={d}" for i, d in enumerate(sizes))
        rule = (f"#sdy.op_sharding_rule<({', '.join(mapping[:nin])})->"
                f"({', '.join(mapping[nin:])}) {{{factors}}}"
                + (f" need_replication={{{', '.join(need)}}}" if need else "") + ">")
        o.attributes["sdy.sharding_rule"] = ir.Attribute.parse(rule)
        o.attributes[_BATCH_TAG] = ir.StringAttr.get(json.dumps(shapes))
        for k, (v, sh) in enumerate(zip(list(o.operands), shapes)):
            dims = ", ".join(["{?}"] * nb + ["{}"] * (len(sh) - nb))
            with ir.InsertionPoint(o), o.location:
                c = ir.Operation.create(
                    "sdy.sharding_constraint", results=[v.type], operands=[v],
                    attributes={"sharding": ir.Attribute.parse(
                        f"#sdy.sharding<@{mesh_name}, [{dims}]>")})
            o.operands[k] = c.result


def _check_batch_calls(main) -> None:
    """After localization each batched custom call must see whole matrices
    (its global non-batch dims) and one batch block in all its operands and
    results; otherwise the program takes the global path."""
    for o in _walk(main):
        if _BATCH_TAG not in o.attributes:
            continue
        glob = json.loads(ir.StringAttr(o.attributes[_BATCH_TAG]).value)
        del o.attributes[_BATCH_TAG]
        shapes = [list(ir.RankedTensorType(v.type).shape)
                  for v in list(o.operands) + list(o.results)]
        nb = len(glob[0]) - _BATCH_TARGETS[ir.StringAttr(o.attributes["call_target_name"]).value]
        if any(sh[:nb] != shapes[0][:nb] or sh[nb:] != g[nb:] for sh, g in zip(shapes, glob)):
            raise ShardyUnsafe(f"a batched custom call's operands and results disagree after "
                               f"localization: {shapes} (global {glob})")


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
                    elif name == "stablehlo.custom_call" and _batch_layout(o) is not None:
                        pass
                    elif name not in SHARDY_SAFE_OPS and name not in _CHECKED_AFTER_EXPORT:
                        bad = name
                    elif name == "stablehlo.reduce" and _reduce_kind(o) is None:
                        bad = "stablehlo.reduce with a body other than one add/max/min/mul/and/or"
                    elif name == "stablehlo.scatter" and len(o.operands) != 3:
                        bad = "stablehlo.scatter of several operands"
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
            # (partition_unreduced wraps the dots it leaves unreduced in
            # manual computations: one still marked unreduced was not)
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


def _value_sharding_dims(v, main, meshes) -> tuple | None:
    """The mesh axes of each dimension of value `v` after Shardy's export
    (() per unsharded dimension); None when not known (a block argument other
    than main's)."""
    owner = v.owner
    owner = getattr(owner, "operation", owner)
    rank = ir.RankedTensorType(v.type).rank
    if isinstance(owner, ir.Operation):
        if "sdy.sharding" not in owner.attributes:
            return ((),) * rank
        per_value = sdy.TensorShardingPerValueAttr(owner.attributes["sdy.sharding"]).shardings
        attr = per_value[ir.OpResult(v).result_number]
    else:
        arg = ir.BlockArgument(v)
        if arg.owner != main.regions[0].blocks[0]:
            return None
        attrs = _func_attr_list(main, "arg_attrs", len(_func_type(main).inputs))[arg.arg_number]
        if "sdy.sharding" not in attrs:
            return ((),) * rank
        attr = attrs["sdy.sharding"]
    _, vs, _ = _parse_sharding(attr, meshes)
    return vs.dims if vs is not None else ((),) * rank


def _check_pads_and_gathers(main, meshes):
    """The converter localizes a pad's amounts and a gather's slices as if
    no sharded dimension were involved (and CHECK-fails on a gather over a
    sharded dimension): such programs take the global path. Ops inside
    manual computations are local already and not checked."""
    def visit(op):
        for region in op.regions:
            for block in region.blocks:
                for o in block.operations:
                    o = o.operation
                    name = _op_name(o)
                    if name == "sdy.manual_computation":
                        continue
                    if name == "stablehlo.pad":
                        _check_pad(o, main, meshes)
                    elif name == "stablehlo.gather":
                        _check_gather(o, main, meshes)
                    elif name == "stablehlo.scatter" and not _is_scatter_add(o):
                        _check_scatter(o, main, meshes)
                    visit(o)

    visit(main)


def _check_pad(o, main, meshes):
    operand = _value_sharding_dims(o.operands[0], main, meshes)
    result = _value_sharding_dims(o.results[0], main, meshes)
    amounts = [list(ir.DenseI64ArrayAttr(o.attributes[k]))
               for k in ("edge_padding_low", "edge_padding_high", "interior_padding")]
    if operand is None or result is None:
        raise ShardyUnsafe("stablehlo.pad of a value whose sharding is unknown")
    for d, (a, b) in enumerate(zip(operand, result)):
        if (a or b) and (a != b or any(x[d] for x in amounts)):
            raise ShardyUnsafe(f"stablehlo.pad pads or reshards dimension {d}, which is sharded")


def _check_gather(o, main, meshes):
    dn = stablehlo.GatherDimensionNumbers(o.attributes["dimension_numbers"])
    operand = _value_sharding_dims(o.operands[0], main, meshes)
    indices = _value_sharding_dims(o.operands[1], main, meshes)
    result = _value_sharding_dims(o.results[0], main, meshes)
    if operand is None or indices is None or result is None:
        raise ShardyUnsafe("stablehlo.gather of a value whose sharding is unknown")
    op_batch = list(dn.operand_batching_dims)
    ix_batch = list(dn.start_indices_batching_dims)
    # result dims that are not offset dims are the indices' dims in order,
    # without index_vector_dim
    ix_dims = [d for d in range(len(indices)) if d != dn.index_vector_dim]
    batch_dims = [d for d in range(len(result)) if d not in set(dn.offset_dims)]
    # offset dims of the result are the operand dims neither collapsed nor
    # batching, in order; one whose slice is the whole dim and that no index
    # addresses passes through and may stay sharded (as its result dim is)
    sizes = list(ir.RankedTensorType(o.operands[0].type).shape)
    slice_sizes = list(ir.DenseI64ArrayAttr(o.attributes["slice_sizes"]))
    kept = [d for d in range(len(operand))
            if d not in set(dn.collapsed_slice_dims) and d not in op_batch]
    passthrough = {d: r for d, r in zip(kept, dn.offset_dims)
                   if slice_sizes[d] == sizes[d] and d not in set(dn.start_index_map)}
    for d, axes in enumerate(operand):
        if axes and d not in op_batch and (d not in passthrough or result[passthrough[d]] != axes):
            raise ShardyUnsafe(f"stablehlo.gather over sharded operand dimension {d}")
    for d, axes in enumerate(indices):
        if axes and d not in ix_batch:
            raise ShardyUnsafe(f"stablehlo.gather with sharded index dimension {d}")
    for d, axes in enumerate(result):
        if axes and d in set(dn.offset_dims) and d not in passthrough.values():
            raise ShardyUnsafe(f"stablehlo.gather with sharded offset dimension {d}")
    for ob, ib in zip(op_batch, ix_batch):
        rd = batch_dims[ix_dims.index(ib)]
        if not (operand[ob] == indices[ib] == result[rd]):
            raise ShardyUnsafe("stablehlo.gather whose batch dimensions are sharded differently")
    for ib in (d for d in ix_dims if d not in ix_batch):
        if result[batch_dims[ix_dims.index(ib)]]:
            raise ShardyUnsafe("stablehlo.gather with a sharded non-batch result dimension")


def _is_scatter_add(o) -> bool:
    body = list(o.regions[0].blocks[0].operations)
    return len(body) == 2 and _op_name(body[0]) == "stablehlo.add"


def _check_scatter(o, main, meshes):
    """A single-operand scatter-add partitions wherever its operands are
    sharded; any other body only where each sharded dimension is a batch
    dimension or a whole window dimension no index addresses."""
    dn = stablehlo.ScatterDimensionNumbers(o.attributes["scatter_dimension_numbers"])
    operand = _value_sharding_dims(o.operands[0], main, meshes)
    indices = _value_sharding_dims(o.operands[1], main, meshes)
    updates = _value_sharding_dims(o.operands[2], main, meshes)
    result = _value_sharding_dims(o.results[0], main, meshes)
    if None in (operand, indices, updates, result):
        raise ShardyUnsafe("stablehlo.scatter of a value whose sharding is unknown")
    if operand != result:
        raise ShardyUnsafe("stablehlo.scatter whose operand and result are sharded differently")
    op_batch = list(dn.input_batching_dims)
    ix_batch = list(dn.scatter_indices_batching_dims)
    sizes = list(ir.RankedTensorType(o.operands[0].type).shape)
    up_sizes = list(ir.RankedTensorType(o.operands[2].type).shape)
    window = list(dn.update_window_dims)
    kept = [d for d in range(len(operand))
            if d not in set(dn.inserted_window_dims) and d not in op_batch]
    passthrough = {d: u for d, u in zip(kept, window)
                   if up_sizes[u] == sizes[d] and d not in set(dn.scattered_dims_to_operand_dims)}
    ix_dims = [d for d in range(len(indices)) if d != dn.index_vector_dim]
    scatter_dims = [d for d in range(len(updates)) if d not in set(window)]
    for d, axes in enumerate(operand):
        if axes and d not in op_batch and (d not in passthrough or updates[passthrough[d]] != axes):
            raise ShardyUnsafe(f"stablehlo.scatter into sharded operand dimension {d}")
    for d, axes in enumerate(indices):
        if axes and d not in ix_batch:
            raise ShardyUnsafe(f"stablehlo.scatter with sharded index dimension {d}")
    for d, axes in enumerate(updates):
        if axes and d in set(window) and d not in passthrough.values():
            raise ShardyUnsafe(f"stablehlo.scatter with sharded window dimension {d}")
    for ob, ib in zip(op_batch, ix_batch):
        if not (operand[ob] == indices[ib] == updates[scatter_dims[ix_dims.index(ib)]]):
            raise ShardyUnsafe("stablehlo.scatter whose batch dimensions are sharded differently")
    for ib in (d for d in ix_dims if d not in ix_batch):
        if updates[scatter_dims[ix_dims.index(ib)]]:
            raise ShardyUnsafe("stablehlo.scatter with a sharded non-batch update dimension")


def _check_inserted_collectives(main):
    for o in _walk(main):
        name = _op_name(o)
        if name in _COLLECTIVES and _USER_TAG not in o.attributes \
                and name not in _SHARDY_COLLECTIVES_OK:
            raise ShardyUnsafe(f"Shardy inserted a {name} (not verified to reshard correctly)")


def _fix_all_reduce_bodies(main, sums_of_unreduced: bool = False) -> None:
    """Shardy 0.10.2 gives every all_reduce it inserts an add body. Set it to
    the reduce it follows; refuse any all_reduce whose origin is unclear
    (unless the program sums unreduced values, whose all_reduces
    partition_unreduced checked before the converter ran)."""
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
            elif sums_of_unreduced:
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
    _add_batch_rules(main, mesh_name)
    passmanager.PassManager.parse(SHARDY_PIPELINE).run(module.operation)
    main = _main(module)
    from pjrtx.frontend import partition_unreduced  # it builds on this module

    sums_of_unreduced = 0
    if partition_unreduced.has_unreduced(main):
        sums_of_unreduced = partition_unreduced.lower_unreduced(
            main, meshes, mesh_name, axes, ids, n)
    _check_partial_sums(main)
    _check_divisible(main, meshes)
    _check_pads_and_gathers(main, meshes)
    args, _, _ = _read_shardings(main, meshes, "arg")
    results, _, _ = _read_shardings(main, meshes, "result")
    passmanager.PassManager.parse(LOCAL_PIPELINE).run(module.operation)
    main = _main(module)
    left = sorted({_op_name(o) for o in _walk(module.operation) if _op_name(o).startswith("sdy.")})
    if left:
        raise ShardyUnsafe(f"sdy ops remain after the pipeline: {left}")
    _check_inserted_collectives(main)
    _check_batch_calls(main)
    _fix_all_reduce_bodies(main, sums_of_unreduced > 0)
    for o in _walk(main):
        if _USER_TAG in o.attributes:
            del o.attributes[_USER_TAG]
    return PartitionInfo("shardy", "", n, axes, ids, args, results)


# ---------------------------------------------------------------- entry point
def _localize_global(module, n: int, meshes: dict, reason: str) -> PartitionInfo:
    # The global path lives in its own module, which builds on this one.
    from pjrtx.frontend import partition_global

    return partition_global.localize_global(module, n, meshes, reason)


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
    from pjrtx.frontend import partition_custom  # it builds on this module

    if partition_custom.has_custom_partitioning(main):
        # the user's partition callback, as XLA's SPMD partitioner calls it:
        # a fully manual computation from here on
        try:
            partition_custom.expand(module, n)
        except ShardyUnsafe as e:
            raise ValueError(f"pjrtx: jax.experimental.custom_partitioning: {e}") from None
        main = _main(module)
    if partition_custom.has_inspect_sharding(main):
        try:
            partition_custom.run_inspect_sharding(module, n)
        except ShardyUnsafe as e:
            raise ValueError(f"pjrtx: jax.debug.inspect_array_sharding: {e}") from None
        main = _main(module)

    if force == "global":
        return _localize_global(module, n, meshes, "forced")
    if not meshes:
        return _localize_global(module, n, meshes, "no sdy.mesh: every value is replicated")
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
