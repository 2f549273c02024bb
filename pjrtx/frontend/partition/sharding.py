"""How values are split over the mesh, for every partitioning strategy:
the ValueSharding / PartitionInfo types the runtime reports back to JAX,
mesh coordinates of partitions, and reading Shardy's mesh and sharding
attributes. ShardyUnsafe is what any step raises for a program the Shardy
path cannot take."""
from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
from jaxlib.mlir import ir

from pjrtx.frontend.partition.walk import func_attr_list, func_type, is_ranked, op_name

try:
    from jaxlib.mlir.dialects import sdy
except Exception:  # a jaxlib without Shardy: no sdy annotations can occur
    sdy = None


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
        return tuple(math.prod(axis_ref_size(a, sizes) for a in d) for d in self.dims)


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
        coords = coords_of_partition(axes, ids)[partition]
        return tuple(dim_index(d, coords, axes) for d in sharding.dims)

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
        coords = coords_of_partition(axes, ids)
        for pos in range(self.num_partitions):
            p = ids[pos]
            idx = tuple(dim_index(d, coords[p], axes) for d in sharding.dims)
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
    n_unr = math.prod(axis_ref_size(a, sizes) for a in sharding.unreduced)
    if all(t == 1 for t in tiles) and n_unr == info.num_partitions:
        return xc.HloSharding.unreduced().to_proto().SerializeToString()
    rep = info.num_partitions // (math.prod(tiles) * n_unr)
    table = np.full(tiles + (n_unr, rep), -1, np.int64)
    fill = {}
    coords = coords_of_partition(axes, ids)
    for pos in range(info.num_partitions):
        p = ids[pos]
        idx = tuple(dim_index(d, coords[p], axes) for d in sharding.dims)
        idx += (dim_index(sharding.unreduced, coords[p], axes),)
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


def axis_ref_size(ref: str, sizes: dict) -> int:
    """The size of a mesh axis or sub-axis ("x" or "x:(pre)size")."""
    if ":" in ref:
        return int(ref.rsplit(")", 1)[1])
    return sizes[ref]


def axis_ref_coord(ref: str, coords: dict, sizes: dict) -> int:
    """A partition's coordinate along an axis or sub-axis, from its axis coordinates."""
    if ":" in ref:
        name, rest = ref.split(":(", 1)
        pre, size = rest.split(")")
        return (coords[name] // int(pre)) % int(size)
    return coords[ref]


def dim_index(dim_axes, coords, mesh_axes) -> int:
    """Which tile of a dimension split over `dim_axes` (major first) a partition holds."""
    sizes = dict(mesh_axes)
    idx = 0
    for ref in dim_axes:
        idx = idx * axis_ref_size(ref, sizes) + axis_ref_coord(ref, coords, sizes)
    return idx


def coords_of_partition(mesh_axes, device_ids) -> dict:
    """partition index -> {axis name: coordinate}."""
    names = [n for n, _ in mesh_axes]
    shape = [s for _, s in mesh_axes]
    out = {}
    for pos, c in enumerate(itertools.product(*[range(s) for s in shape])):
        out[device_ids[pos]] = dict(zip(names, c))
    return out


def meshes_by_name(module) -> dict:
    """The module's sdy.mesh attributes by symbol name."""
    out = {}
    for o in module.body.operations:
        if op_name(o) == "sdy.mesh":
            out[o.attributes["sym_name"].value] = sdy.MeshAttr(o.attributes["mesh"])
    return out


def mesh_info(mesh_attr, n: int):
    """-> (((axis, size), ...), device_ids) of a mesh; device_ids iota when absent."""
    axes = tuple((sdy.MeshAxisAttr(a).name, sdy.MeshAxisAttr(a).size) for a in mesh_attr.axes)
    ids = tuple(int(i) for i in mesh_attr.device_ids)
    size = math.prod(s for _, s in axes)
    if not ids:
        ids = tuple(range(size))
    return axes, ids


def axis_ref_str(a) -> str:
    """An sdy.AxisRefAttr in ValueSharding's spelling ("x" or "x:(pre)size")."""
    a = sdy.AxisRefAttr(a)
    if a.sub_axis_info is None:
        return a.name
    si = sdy.SubAxisInfoAttr(a.sub_axis_info)
    return f"{a.name}:({si.pre_size}){si.size}"


def parse_sharding(attr, meshes):
    """-> (mesh name or None, ValueSharding or None, has_unreduced)."""
    s = sdy.TensorShardingAttr(attr)
    mesh = s.mesh_or_ref
    try:
        mesh_name = ir.FlatSymbolRefAttr(mesh).value
    except (ValueError, TypeError):
        mesh_name = None  # an inline #sdy.mesh<...>
    dims = tuple(tuple(axis_ref_str(a) for a in sdy.DimensionShardingAttr(d).axes)
                 for d in s.dimension_shardings)
    unreduced = tuple(axis_ref_str(a) for a in s.unreduced_axes)
    vs = ValueSharding(dims, unreduced) if any(dims) or unreduced else None
    return mesh_name, vs, bool(unreduced)


def read_shardings(func, meshes, which: str) -> tuple[list, set, bool]:
    """-> (ValueSharding or None per argument (which="arg") or result, the mesh
    names they use, whether any is unreduced)."""
    ftype = func_type(func)
    n = len(ftype.inputs if which == "arg" else ftype.results)
    attrs = func_attr_list(func, "arg_attrs" if which == "arg" else "res_attrs", n)
    out, used, unreduced = [], set(), False
    for d in attrs:
        if "sdy.sharding" in d:
            name, vs, unr = parse_sharding(d["sdy.sharding"], meshes)
            out.append(vs)
            unreduced |= unr
            if vs is not None:
                used.add(name)
        else:
            out.append(None)
    return out, used, unreduced


def value_mesh_names(func, which: str) -> list:
    """The mesh name of each argument's or result's sdy.sharding (None)."""
    ftype = func_type(func)
    n = len(ftype.inputs if which == "arg" else ftype.results)
    attrs = func_attr_list(func, "arg_attrs" if which == "arg" else "res_attrs", n)
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


def value_sharding(v, main, meshes) -> tuple | None:
    """(dims, unreduced axes) of value `v` after Shardy's propagation or
    export: dims holds the mesh axes of each dimension (() where unsharded).
    Read from `v`'s producer (its sdy.sharding, a manual computation's
    out_shardings, an sdy collective's out_sharding) or from main's
    arg_attrs; unannotated is replicated. None when not known (an argument
    of a region other than main's body)."""
    owner = v.owner
    owner = getattr(owner, "operation", owner)
    rank = ir.RankedTensorType(v.type).rank if is_ranked(v.type) else 0
    attr = None
    if isinstance(owner, ir.Operation):
        if owner.name == "sdy.manual_computation":
            attr = sdy.TensorShardingPerValueAttr(owner.attributes["out_shardings"]).shardings[
                ir.OpResult(v).result_number]
        elif "out_sharding" in owner.attributes:
            attr = owner.attributes["out_sharding"]
        elif "sdy.sharding" in owner.attributes:
            attr = sdy.TensorShardingPerValueAttr(owner.attributes["sdy.sharding"]).shardings[
                ir.OpResult(v).result_number]
    else:
        arg = ir.BlockArgument(v)
        if arg.owner != main.regions[0].blocks[0]:
            return None
        d = func_attr_list(main, "arg_attrs", len(func_type(main).inputs))[arg.arg_number]
        attr = d["sdy.sharding"] if "sdy.sharding" in d else None
    vs = parse_sharding(attr, meshes)[1] if attr is not None else None
    if vs is None:
        return ((),) * rank, ()
    return vs.dims, vs.unreduced
