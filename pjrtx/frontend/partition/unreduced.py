"""Unreduced values on Shardy's path.

JAX's explicit sharding (and shard_map's ``out_specs=P(unreduced=...)``)
lets a value be *unreduced* over mesh axes: each device along those axes
holds a partial value, and the value is their sum. jaxlib 0.10.2's Shardy
passes propagate such shardings but leave three things to the partitioner
that runs after them, which XLA's SPMD partitioner does and
sdy-convert-global-to-local does not:

- a value that is whole on every device becoming unreduced (an
  ``sdy.replicated_to_unreduced``, or a constant that propagation made
  unreduced): XLA keeps it on the first device of each group along the
  axes and zeros elsewhere, so the sum is the value;
- a value sharded over an axis becoming unreduced over it: XLA places each
  device's block into zeros of the whole shape;
- a dot_general whose sharded contraction is left unreduced: the converter
  CHECK-fails (aborting the process) unless an all_reduce follows.

``lower_unreduced`` rewrites the exported module (global shapes, every op
annotated) so the converter sees none of these: masks built from
``stablehlo.partition_id`` for the first two, a fully manual computation
around the dot for the third. It checks every op that touches an
unreduced value and raises ShardyUnsafe (the global path) for anything
whose partial-sum semantics it cannot vouch for.
"""
from __future__ import annotations

import re

from jaxlib.mlir import ir

from pjrtx.frontend.partition.sharding import (
    ShardyUnsafe, axis_ref_size, coords_of_partition, dim_index, value_sharding,
)
from pjrtx.frontend.partition.walk import attr_names, is_ranked, op_name, zero_text

# Ops that are linear in each operand that carries the unreduced axes (the
# others must be whole along them); a sum of partial values goes through.
_LINEAR_UNARY = {
    "stablehlo.broadcast_in_dim", "stablehlo.reshape", "stablehlo.transpose",
    "stablehlo.slice", "stablehlo.convert", "stablehlo.negate", "stablehlo.real",
    "stablehlo.imag", "stablehlo.reverse", "stablehlo.copy",
}
_ADDITIVE = {"stablehlo.add", "stablehlo.subtract", "stablehlo.concatenate"}
_SOURCES = {"stablehlo.constant", "sdy.constant", "stablehlo.iota"}


class _Sharding:
    """dims: the mesh axes of each dimension; unreduced: a set of axes."""

    def __init__(self, mesh: str, dims: tuple, unreduced: frozenset):
        self.mesh, self.dims, self.unreduced = mesh, dims, unreduced

    def attr_text(self, unreduced=None) -> str:
        unr = self.unreduced if unreduced is None else unreduced
        dims = ", ".join("{%s}" % ", ".join(_ref_text(a) for a in d) for d in self.dims)
        tail = (", unreduced={%s}" % ", ".join(_ref_text(a) for a in sorted(unr))) if unr else ""
        return f"<@{self.mesh}, [{dims}]{tail}>"


def _ref_text(ref: str) -> str:
    name, _, sub = ref.partition(":")
    return f'"{name}"' + (f":{sub}" if sub else "")


class _Lowering:
    def __init__(self, main, meshes, mesh_name, axes, ids, n):
        self.main, self.meshes, self.mesh_name = main, meshes, mesh_name
        self.axes, self.ids, self.n = axes, ids, n
        self.coords = coords_of_partition(axes, ids)
        self.sizes = dict(axes)
        self.sums = 0  # sdy.all_reduce ops that sum unreduced values

    # ------------------------------------------------------------ shardings
    def sharding(self, v) -> _Sharding | None:
        s = value_sharding(v, self.main, self.meshes)
        return None if s is None else _Sharding(self.mesh_name, s[0], frozenset(s[1]))

    def unreduced(self, v) -> frozenset:
        s = self.sharding(v)
        if s is None:
            raise ShardyUnsafe("an unreduced value of unknown sharding")
        return s.unreduced

    # --------------------------------------------------------------- masks
    def _first_pred(self, axes: frozenset, ip, loc):
        """tensor<i1>: this device is the first of its group along `axes`."""
        first = [dim_index(tuple(sorted(axes)), self.coords[p], self.axes) == 0
                 for p in range(self.n)]
        i32, i1 = ir.IntegerType.get_signless(32), ir.IntegerType.get_signless(1)
        pid = ir.Operation.create("stablehlo.partition_id", results=[
            ir.RankedTensorType.get([], ir.IntegerType.get_unsigned(32))], ip=ip, loc=loc)
        pid32 = ir.Operation.create("stablehlo.convert", results=[ir.RankedTensorType.get([], i32)],
                                    operands=[pid.result], ip=ip, loc=loc)
        table = ir.Operation.create("stablehlo.constant", results=[
            ir.RankedTensorType.get([self.n], i1)], attributes={"value": ir.Attribute.parse(
                "dense<%s> : tensor<%dxi1>" % (str(first).lower().replace(" ", ""), self.n))},
            ip=ip, loc=loc)
        one = ir.Operation.create("stablehlo.dynamic_slice", results=[
            ir.RankedTensorType.get([1], i1)], operands=[table.result, pid32.result],
            attributes={"slice_sizes": ir.DenseI64ArrayAttr.get([1])}, ip=ip, loc=loc)
        return ir.Operation.create("stablehlo.reshape", results=[ir.RankedTensorType.get([], i1)],
                                   operands=[one.result], ip=ip, loc=loc).result

    def mask(self, v, axes: frozenset, sharding: _Sharding, ip, loc, unreduced=None):
        """v on the first device of each group along `axes`, zeros elsewhere;
        annotated with `sharding` (unreduced over `unreduced`, default
        sharding's own plus `axes`)."""
        t = ir.RankedTensorType(v.type)
        unr = (sharding.unreduced | axes) if unreduced is None else unreduced
        pred = self._first_pred(axes, ip, loc)
        whole = ir.Attribute.parse("#sdy.sharding_per_value<[%s]>" % sharding.attr_text(frozenset()))
        marked = ir.Attribute.parse("#sdy.sharding_per_value<[%s]>" % sharding.attr_text(unr))
        i1 = ir.IntegerType.get_signless(1)
        bpred = ir.Operation.create(
            "stablehlo.broadcast_in_dim", results=[ir.RankedTensorType.get(t.shape, i1)],
            operands=[pred], attributes={"broadcast_dimensions": ir.DenseI64ArrayAttr.get([]),
                                         "sdy.sharding": whole}, ip=ip, loc=loc)
        zero = ir.Operation.create("stablehlo.constant", results=[
            ir.RankedTensorType.get([], t.element_type)], attributes={
                "value": ir.Attribute.parse(f"dense<{zero_text(t.element_type)}> : "
                                            f"tensor<{t.element_type}>")}, ip=ip, loc=loc)
        zeros = ir.Operation.create(
            "stablehlo.broadcast_in_dim", results=[t], operands=[zero.result],
            attributes={"broadcast_dimensions": ir.DenseI64ArrayAttr.get([]),
                        "sdy.sharding": whole}, ip=ip, loc=loc)
        return ir.Operation.create("stablehlo.select", results=[t],
                                   operands=[bpred.result, v, zeros.result],
                                   attributes={"sdy.sharding": marked}, ip=ip, loc=loc).result

    # ---------------------------------------------------------------- ops
    def wrap_dot(self, o):
        """A fully manual computation around a dot_general whose sharded
        contraction stays unreduced: each device multiplies its blocks."""
        ins = [self.sharding(v) for v in o.operands]
        out = self.sharding(o.results[0])
        if None in ins:
            raise ShardyUnsafe("a dot_general of unknown operand sharding")
        local = [self._local_type(v.type, s) for v, s in zip(o.operands, ins)]
        out_local = self._local_type(o.results[0].type, out)
        axes_text = ", ".join(f'"{a}"' for a, _ in self.axes)
        mc = ir.Operation.create(
            "sdy.manual_computation", results=[o.results[0].type], operands=list(o.operands),
            attributes={
                "in_shardings": ir.Attribute.parse(
                    "#sdy.sharding_per_value<[%s]>" % ", ".join(s.attr_text() for s in ins)),
                "out_shardings": ir.Attribute.parse(
                    "#sdy.sharding_per_value<[%s]>" % out.attr_text()),
                "manual_axes": ir.Attribute.parse("#sdy<manual_axes{%s}>" % axes_text)},
            regions=1, ip=ir.InsertionPoint(o), loc=o.location)
        block = mc.regions[0].blocks.append(*local)
        ip = ir.InsertionPoint(block)
        attrs = {a: o.attributes[a] for a in attr_names(o) if a != "sdy.sharding"}
        body = ir.Operation.create(o.name, results=[out_local], operands=list(block.arguments),
                                   attributes=attrs, ip=ip, loc=o.location)
        ir.Operation.create("sdy.return", operands=[body.result], ip=ip, loc=o.location)
        o.results[0].replace_all_uses_with(mc.result)
        o.erase()

    def _local_type(self, t, s: _Sharding):
        rt = ir.RankedTensorType(t)
        shape = []
        for dim, axes in zip(rt.shape, s.dims):
            k = 1
            for a in axes:
                k *= axis_ref_size(a, self.sizes)
            if dim % k:
                raise ShardyUnsafe("an unreduced dot_general with an uneven sharded dimension")
            shape.append(dim // k)
        return ir.RankedTensorType.get(shape, rt.element_type)

    def contraction_axes(self, o) -> frozenset:
        lhs = self.sharding(o.operands[0])
        text = str(o.attributes["dot_dimension_numbers"])
        m = re.search(r"lhs_contracting_dimensions = \[([0-9, ]*)\]", text)
        dims = [int(x) for x in m.group(1).split(",") if x.strip()] if m else []
        return frozenset(a for d in dims for a in lhs.dims[d])

    def reduced_axes(self, o) -> frozenset:
        operand = self.sharding(o.operands[0])
        dims = list(ir.DenseI64ArrayAttr(o.attributes["dimensions"]))
        return frozenset(a for d in dims for a in operand.dims[d])

    def visit(self, op):
        for region in op.regions:
            for block in region.blocks:
                for o in list(block.operations):
                    o = o.operation
                    name = op_name(o)
                    if name == "sdy.manual_computation":
                        continue  # its body is local; its boundary is the converter's
                    if name not in ("stablehlo.reduce", "stablehlo.sort", "stablehlo.scatter"):
                        self.visit(o)
                    self.lower(o, name)

    def lower(self, o, name):
        if name == "sdy.replicated_to_unreduced":
            axes = frozenset(re.findall(r'"([^"]+)"', str(o.attributes["axes"])))
            src = o.operands[0]
            s = self.sharding(src)
            if s is None:
                raise ShardyUnsafe("replicated_to_unreduced of unknown sharding")
            v = self.mask(src, axes, s, ir.InsertionPoint(o), o.location)
            o.results[0].replace_all_uses_with(v)
            o.erase()
            return
        if name == "sdy.sharded_to_unreduced":
            self.sharded_to_unreduced(o)
            return
        if name in ("sdy.all_reduce", "sdy.reduce_scatter"):
            self.check_all_reduce(o)
            return
        if name in ("func.return", "sdy.return"):
            return
        results = [r for r in o.results if is_ranked(r.type)]
        out_unr = frozenset().union(*[self.unreduced(r) for r in results]) if results else frozenset()
        in_unr = [self.unreduced(v) if is_ranked(v.type) else frozenset()
                  for v in o.operands]
        if not out_unr:
            if any(in_unr):
                raise ShardyUnsafe(f"{name} reads an unreduced value")
            return
        if name.startswith("sdy.") and name not in ("sdy.constant",):
            raise ShardyUnsafe(f"{name} on an unreduced value")
        if len(results) != 1:
            raise ShardyUnsafe(f"{name} with several results, unreduced")
        res_s = self.sharding(results[0])
        if name in _SOURCES:
            self._mask_result(o, out_unr, res_s)
            return
        if name in ("stablehlo.dot_general", "stablehlo.reduce"):
            partial = self.contraction_axes(o) if name == "stablehlo.dot_general" \
                else self.reduced_axes(o)
            if name == "stablehlo.reduce":
                body = list(o.regions[0].blocks[0].operations)
                if len(o.operands) != 2 or len(body) != 2 or op_name(body[0]) != "stablehlo.add":
                    raise ShardyUnsafe("an unreduced reduce whose body is not one add")
            carried = [u for u in in_unr if u]
            if len(carried) > 1 or (carried and not carried[0] <= out_unr):
                raise ShardyUnsafe(f"{name} of several unreduced operands")
            have = partial | (carried[0] if carried else frozenset())
            if not partial <= out_unr:
                raise ShardyUnsafe(f"{name} leaves partial sums over axes it does not mark unreduced")
            if not have <= out_unr:
                raise ShardyUnsafe(f"{name}: unexpected unreduced axes")
            if out_unr - have:
                self._mask_result(o, out_unr - have, res_s)
            if name == "stablehlo.dot_general" and partial:
                self.wrap_dot(o)
            return
        if name == "stablehlo.scatter":
            self.scatter_add(o, in_unr, out_unr, res_s)
            return
        if name == "stablehlo.convert" and in_unr[0] and not (
                _is_float_type(o.operands[0].type) and _is_float_type(o.results[0].type)):
            # rounding to an integer does not commute with the sum
            raise ShardyUnsafe("a convert of an unreduced value to or from an integer type")
        if name in _LINEAR_UNARY:
            missing = out_unr - in_unr[0]
            if in_unr[0] - out_unr:
                raise ShardyUnsafe(f"{name} drops unreduced axes")
            if missing:
                self._mask_result(o, missing, res_s)
            return
        if name in _ADDITIVE or name == "stablehlo.select":
            first = 1 if name == "stablehlo.select" else 0
            if name == "stablehlo.select" and in_unr[0]:
                raise ShardyUnsafe("select on an unreduced predicate")
            for k in range(first, len(o.operands)):
                if in_unr[k] - out_unr:
                    raise ShardyUnsafe(f"{name} drops unreduced axes")
                missing = out_unr - in_unr[k]
                if missing:
                    v = o.operands[k]
                    s = self.sharding(v)
                    o.operands[k] = self.mask(v, missing, s, ir.InsertionPoint(o), o.location,
                                              unreduced=out_unr)
            return
        if name in ("stablehlo.multiply", "stablehlo.divide"):
            carried = [k for k, u in enumerate(in_unr) if u]
            if name == "stablehlo.divide" and carried and carried != [0]:
                raise ShardyUnsafe("divide by an unreduced value")
            if len(carried) > 1:
                raise ShardyUnsafe(f"{name} of two unreduced values")
            have = in_unr[carried[0]] if carried else frozenset()
            if have - out_unr:
                raise ShardyUnsafe(f"{name} drops unreduced axes")
            if out_unr - have:
                self._mask_result(o, out_unr - have, res_s)
            return
        raise ShardyUnsafe(f"{name} on an unreduced value")

    def sharded_to_unreduced(self, o):
        """Axes that split a dimension become unreduced: as XLA does, each
        device puts its block where it belongs in zeros of the new (less
        split) shape, inside a fully manual computation."""
        src = o.operands[0]
        s_in = self.sharding(src)
        s_out = self.sharding(o.results[0])
        if s_in is None:
            raise ShardyUnsafe("sharded_to_unreduced of unknown sharding")
        if s_in.unreduced - s_out.unreduced:
            raise ShardyUnsafe("sharded_to_unreduced drops unreduced axes")
        t_in = self._local_type(src.type, s_in)
        t_out = self._local_type(o.results[0].type, s_out)
        offsets = []  # per dim: a table over partitions, or None
        for d, (a_in, a_out) in enumerate(zip(s_in.dims, s_out.dims)):
            if tuple(a_in[:len(a_out)]) != tuple(a_out):
                raise ShardyUnsafe("sharded_to_unreduced keeps a minor axis of a dimension")
            moved = tuple(a_in[len(a_out):])
            if not moved:
                offsets.append(None)
                continue
            step = ir.RankedTensorType(t_in).shape[d]
            offsets.append([dim_index(moved, self.coords[p], self.axes) * step
                            for p in range(self.n)])
        axes_text = ", ".join(f'"{a}"' for a, _ in self.axes)
        mc = ir.Operation.create(
            "sdy.manual_computation", results=[o.results[0].type], operands=[src],
            attributes={
                "in_shardings": ir.Attribute.parse(
                    "#sdy.sharding_per_value<[%s]>" % s_in.attr_text()),
                "out_shardings": ir.Attribute.parse(
                    "#sdy.sharding_per_value<[%s]>" % s_out.attr_text()),
                "manual_axes": ir.Attribute.parse("#sdy<manual_axes{%s}>" % axes_text)},
            regions=1, ip=ir.InsertionPoint(o), loc=o.location)
        block = mc.regions[0].blocks.append(t_in)
        ip = ir.InsertionPoint(block)
        et = ir.RankedTensorType(t_out).element_type
        i32 = ir.IntegerType.get_signless(32)
        scalar_i32 = ir.RankedTensorType.get([], i32)
        zero = ir.Operation.create("stablehlo.constant", results=[ir.RankedTensorType.get([], et)],
                                   attributes={"value": ir.Attribute.parse(
                                       f"dense<{zero_text(et)}> : tensor<{et}>")}, ip=ip)
        zeros = ir.Operation.create("stablehlo.broadcast_in_dim", results=[t_out],
                                    operands=[zero.result], attributes={
                                        "broadcast_dimensions": ir.DenseI64ArrayAttr.get([])}, ip=ip)
        izero = ir.Operation.create("stablehlo.constant", results=[scalar_i32], attributes={
            "value": ir.Attribute.parse("dense<0> : tensor<i32>")}, ip=ip)
        pid = ir.Operation.create("stablehlo.partition_id", results=[
            ir.RankedTensorType.get([], ir.IntegerType.get_unsigned(32))], ip=ip)
        pid32 = ir.Operation.create("stablehlo.convert", results=[scalar_i32],
                                    operands=[pid.result], ip=ip)
        idx = []
        for table in offsets:
            if table is None:
                idx.append(izero.result)
                continue
            tab = ir.Operation.create("stablehlo.constant", results=[
                ir.RankedTensorType.get([self.n], i32)], attributes={"value": ir.Attribute.parse(
                    "dense<%s> : tensor<%dxi32>" % (str(table).replace(" ", ""), self.n))}, ip=ip)
            one = ir.Operation.create("stablehlo.dynamic_slice", results=[
                ir.RankedTensorType.get([1], i32)], operands=[tab.result, pid32.result],
                attributes={"slice_sizes": ir.DenseI64ArrayAttr.get([1])}, ip=ip)
            idx.append(ir.Operation.create("stablehlo.reshape", results=[scalar_i32],
                                           operands=[one.result], ip=ip).result)
        placed = ir.Operation.create("stablehlo.dynamic_update_slice", results=[t_out],
                                     operands=[zeros.result, block.arguments[0], *idx], ip=ip)
        ir.Operation.create("sdy.return", operands=[placed.result], ip=ip)
        o.results[0].replace_all_uses_with(mc.result)
        o.erase()

    def scatter_add(self, o, in_unr, out_unr, res_s):
        """A scatter-add of updates split along their scatter dims leaves
        each device the sum of its own updates: partial sums over exactly
        those axes. The operand is counted once (masked where it is whole)."""
        body = list(o.regions[0].blocks[0].operations)
        if len(o.operands) != 3 or len(body) != 2 or op_name(body[0]) != "stablehlo.add":
            raise ShardyUnsafe("an unreduced scatter other than a single-operand scatter-add")
        if in_unr[1] or in_unr[2]:
            raise ShardyUnsafe("a scatter of unreduced indices or updates")
        text = str(o.attributes["scatter_dimension_numbers"])
        m = re.search(r"update_window_dims = \[([0-9, ]*)\]", text)
        window = {int(x) for x in m.group(1).split(",") if x.strip()} if m else set()
        upd = self.sharding(o.operands[2])
        partial = frozenset(a for d, axes in enumerate(upd.dims) if d not in window for a in axes)
        if partial != out_unr - in_unr[0] and partial != out_unr:
            raise ShardyUnsafe("an unreduced scatter-add whose updates are not split over "
                               "exactly the unreduced axes")
        if in_unr[0] - out_unr:
            raise ShardyUnsafe("a scatter-add drops unreduced axes")
        missing = out_unr - in_unr[0]
        if missing:
            v = o.operands[0]
            o.operands[0] = self.mask(v, missing, self.sharding(v), ir.InsertionPoint(o),
                                      o.location, unreduced=out_unr)

    def check_all_reduce(self, o):
        """Shardy's all_reduces get an add body (localize fixes it after a
        max/min reduce); one after any other op must sum unreduced values.
        (jaxlib 0.10.2 exports the reshard of an unreduced argument to a
        replicated result as two all_reduces in a row, and one to a sharded
        result as an all_reduce and a reduce_scatter, which would multiply
        it: the second reads a value that is no longer unreduced.)"""
        src = o.operands[0]
        owner = src.owner
        owner = getattr(owner, "operation", owner)
        if isinstance(owner, ir.Operation) and owner.name in (
                "stablehlo.reduce", "stablehlo.dot_general", "stablehlo.convolution"):
            return
        key = "reduction_axes" if o.name == "sdy.all_reduce" else "reduce_scatter_axes"
        axes = frozenset(re.findall(r'"([^"]+)"', str(o.attributes[key])))
        if not axes <= self.unreduced(src):
            raise ShardyUnsafe("an all_reduce of a value that is not unreduced over its axes")
        self.sums += 1

    def _mask_result(self, o, axes, res_s):
        r = o.results[0]
        uses = list(r.uses)
        ip = _after(o)
        v = self.mask(r, axes, res_s, ip, o.location, unreduced=res_s.unreduced)
        for u in uses:
            u.owner.operands[u.operand_number] = v


def _after(o):
    """The insertion point right after `o` (never the end: a terminator follows)."""
    ops = [x.operation for x in o.block.operations]
    return ir.InsertionPoint(ops[ops.index(o) + 1])


def _is_float_type(t) -> bool:
    et = str(ir.RankedTensorType(t).element_type)
    return et.startswith(("f", "bf", "complex"))


def has_unreduced(main) -> bool:
    return "unreduced=" in str(main)


def lower_unreduced(main, meshes, mesh_name, axes, ids, n) -> int:
    """Rewrites the exported `main` (see the module docstring) in place;
    returns how many all_reduces sum unreduced values (their add body is
    right whatever op their operand comes from)."""
    lowering = _Lowering(main, meshes, mesh_name, axes, ids, n)
    with ir.Location.unknown():
        lowering.visit(main)
    return lowering.sums
