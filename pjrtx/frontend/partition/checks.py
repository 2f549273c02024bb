"""What the Shardy path checks once Shardy's export has run (every op then
carries its sharding, and the collectives Shardy inserts are explicit), and
the one fix it makes after the converter. Each check raises ShardyUnsafe
for a program jaxlib 0.10.2's converter would abort on or partition
wrongly; localize then takes the global path."""
from __future__ import annotations

import math

from jaxlib.mlir import ir
from jaxlib.mlir.dialects import stablehlo

from pjrtx.frontend.partition.sharding import (
    ShardyUnsafe, axis_ref_size, mesh_info, parse_sharding, sdy, value_sharding,
)
from pjrtx.frontend.partition.walk import nested_ops, op_name


# A reduce whose body is one of these binary ops is partitioned with an
# all_reduce, whose body localize sets to the same op.
REDUCER_BODIES = {"stablehlo.add", "stablehlo.maximum", "stablehlo.minimum",
                  "stablehlo.multiply", "stablehlo.and", "stablehlo.or"}
USER_TAG = "pjrtx.user_collective"
COLLECTIVES = {"stablehlo.all_reduce", "stablehlo.all_gather", "stablehlo.all_to_all",
               "stablehlo.collective_permute", "stablehlo.reduce_scatter",
               "stablehlo.collective_broadcast"}
# Collectives Shardy may insert that localize accepts. jaxlib 0.10.2 builds
# reshards that need a collective_permute followed by an all_to_all (e.g.
# [{"x"},{"y"}] -> [{"y"},{"x"}] on a 2x4 mesh) that give every device the
# wrong block, so a program where Shardy inserted either takes the global path.
SHARDY_COLLECTIVES_OK = {"stablehlo.all_reduce", "stablehlo.all_gather"}


def tag_user_collectives(main):
    """Marks the collectives the program already has (shard_map bodies), so the
    ones Shardy inserts can be told apart after the pass."""
    for o in nested_ops(main):
        if op_name(o) in COLLECTIVES:
            o.attributes[USER_TAG] = ir.UnitAttr.get()


def untag_user_collectives(main):
    """Drops the marks tag_user_collectives set, once the checks are done."""
    for o in nested_ops(main):
        if USER_TAG in o.attributes:
            del o.attributes[USER_TAG]


def reduce_kind(op) -> str | None:
    """The single binary op of a one-operand reduce's body, or None."""
    if len(op.operands) != 2:
        return None
    body = list(op.regions[0].blocks[0].operations)
    if len(body) != 2 or op_name(body[0]) not in REDUCER_BODIES:
        return None
    args = list(op.regions[0].blocks[0].arguments)
    if list(body[0].operands) != args and list(body[0].operands) != args[::-1]:
        return None
    return op_name(body[0])


def _dims(v, main, meshes) -> tuple | None:
    s = value_sharding(v, main, meshes)
    return None if s is None else s[0]


def check_partial_sums(main):
    """sdy-convert-global-to-local CHECK-fails (aborting the process) on a
    dot_general with a sharded contraction unless its one user is the
    all_reduce of its partial sums (convert_global_to_local.cc:1700): a
    reduce_scatter, or the partial sums read elsewhere too, abort. Such
    programs take the global path."""
    for o in nested_ops(main):
        if op_name(o) not in ("stablehlo.dot_general", "stablehlo.dot", "stablehlo.convolution"):
            continue
        for r in o.results:
            users = [op_name(u.owner) for u in r.uses]
            partial = any(u in ("sdy.all_reduce", "sdy.reduce_scatter") for u in users)
            sharding = str(o.attributes["sdy.sharding"]) if "sdy.sharding" in o.attributes else ""
            # (unreduced.py wraps the dots it leaves unreduced in
            # manual computations: one still marked unreduced was not)
            if (partial or "unreduced" in sharding) and users != ["sdy.all_reduce"]:
                raise ShardyUnsafe(f"{op_name(o)} with a sharded contraction feeds {users} "
                                   "(Shardy's converter aborts unless one all_reduce does)")


def check_divisible(main, meshes):
    """sdy-convert-global-to-local aborts the process on a value whose
    sharded dimension does not divide by its axes (jax allows such
    intermediates, e.g. with_sharding_constraint on 113003 elements over 2
    devices; XLA pads them). Such programs take the global path."""
    sizes_of = {k: dict(mesh_info(m, 0)[0]) for k, m in meshes.items()}
    for o in nested_ops(main):
        if "sdy.sharding" not in o.attributes:
            continue
        try:
            per_value = sdy.TensorShardingPerValueAttr(o.attributes["sdy.sharding"]).shardings
        except (ValueError, TypeError):
            continue
        for r, attr in zip(o.results, per_value):
            mesh_name, vs, _ = parse_sharding(attr, meshes)
            if vs is None or mesh_name not in sizes_of:
                continue
            try:
                shape = ir.RankedTensorType(r.type).shape
            except (ValueError, TypeError):
                continue
            sizes = sizes_of[mesh_name]
            for dim, axes in zip(shape, vs.dims):
                n = math.prod(axis_ref_size(a, sizes) for a in axes)
                if n > 1 and dim % n:
                    raise ShardyUnsafe(f"{op_name(o)} shards a dimension of {dim} over {n} "
                                       "devices (uneven; Shardy's converter aborts)")


def check_pads_gathers_scatters(main, meshes):
    """The converter localizes a pad's amounts and a gather's slices as if
    no sharded dimension were involved (and CHECK-fails on a gather over a
    sharded dimension): such programs take the global path. Ops inside
    manual computations are local already and not checked."""
    def visit(op):
        for region in op.regions:
            for block in region.blocks:
                for o in block.operations:
                    o = o.operation
                    name = op_name(o)
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
    operand = _dims(o.operands[0], main, meshes)
    result = _dims(o.results[0], main, meshes)
    amounts = [list(ir.DenseI64ArrayAttr(o.attributes[k]))
               for k in ("edge_padding_low", "edge_padding_high", "interior_padding")]
    if operand is None or result is None:
        raise ShardyUnsafe("stablehlo.pad of a value whose sharding is unknown")
    for d, (a, b) in enumerate(zip(operand, result)):
        if (a or b) and (a != b or any(x[d] for x in amounts)):
            raise ShardyUnsafe(f"stablehlo.pad pads or reshards dimension {d}, which is sharded")


def _check_gather(o, main, meshes):
    dn = stablehlo.GatherDimensionNumbers(o.attributes["dimension_numbers"])
    operand = _dims(o.operands[0], main, meshes)
    indices = _dims(o.operands[1], main, meshes)
    result = _dims(o.results[0], main, meshes)
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
    return len(body) == 2 and op_name(body[0]) == "stablehlo.add"


def _check_scatter(o, main, meshes):
    """A single-operand scatter-add partitions wherever its operands are
    sharded; any other body only where each sharded dimension is a batch
    dimension or a whole window dimension no index addresses."""
    dn = stablehlo.ScatterDimensionNumbers(o.attributes["scatter_dimension_numbers"])
    operand = _dims(o.operands[0], main, meshes)
    indices = _dims(o.operands[1], main, meshes)
    updates = _dims(o.operands[2], main, meshes)
    result = _dims(o.results[0], main, meshes)
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


def check_inserted_collectives(main):
    for o in nested_ops(main):
        name = op_name(o)
        if name in COLLECTIVES and USER_TAG not in o.attributes \
                and name not in SHARDY_COLLECTIVES_OK:
            raise ShardyUnsafe(f"Shardy inserted a {name} (not verified to reshard correctly)")


def fix_all_reduce_bodies(main, sums_of_unreduced: bool = False) -> None:
    """Shardy 0.10.2 gives every all_reduce it inserts an add body. Set it to
    the reduce it follows; refuse any all_reduce whose origin is unclear
    (unless the program sums unreduced values, whose all_reduces
    unreduced.py checked before the converter ran)."""
    for o in list(nested_ops(main)):
        if op_name(o) != "stablehlo.all_reduce":
            continue
        if USER_TAG in o.attributes:
            continue
        kinds = set()
        for v in o.operands:
            owner = v.owner
            owner = getattr(owner, "operation", owner)  # an OpView, or a Block for block args
            owner_name = owner.name if isinstance(owner, ir.Operation) else None
            if owner_name == "stablehlo.reduce":
                kind = reduce_kind(owner)
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
        if len(body) != 2 or op_name(body[0]) != "stablehlo.add":
            raise ShardyUnsafe("an inserted all_reduce has an unexpected body")
        if kind == "stablehlo.add":
            continue
        old = body[0]
        new = ir.Operation.create(kind, results=[old.result.type],
                                  operands=list(old.operands), loc=old.location,
                                  ip=ir.InsertionPoint(old))
        old.result.replace_all_uses_with(new.result)
        old.erase()
