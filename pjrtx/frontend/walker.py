"""Walks an MLIR module (func + stablehlo) into a pjrtx PlanBuilder."""
from __future__ import annotations

import numpy as np
from jaxlib.mlir import ir

from pjrtx import _pjrtx, versions
from pjrtx.frontend import attrs as A
from pjrtx.frontend.patterns import (
    ELEMENTWISE,
    REMATERIALISED,
    keepdims_uses,
    non_unit,
    pad_tiling,
    reduce_dims,
    size_one_root,
    unit_reshape_cancels,
    window_of_pad,
    zero_sign_free,
)

# Attributes that carry no meaning for a single-device MLX run.
# precision_config: every float32 dot runs in full precision, which meets
# every level (pjrtx sets MLX_ENABLE_TF32=0; see pjrtx/__init__.py).
_IGNORED_ATTRS = frozenset({
    "mhlo.frontend_attributes", "mhlo.sharding", "mhlo.layout_mode", "jax.result_info",
    "precision_config", "result_layout", "operand_layouts", "result_layouts",
    "sdy.sharding", "sdy.sharding_rule", "mhlo.sharding_rule",
})
_TERMINATORS = ("func.return", "stablehlo.return")
# Ops that only steer XLA's sharding propagation and define no values: on
# one device they have nothing to do.
_NO_OP = frozenset({"sdy.sharding_group"})


class FrontendError(ValueError):
    pass


def _flat(value):
    if isinstance(value, (list, tuple)):
        return [x for v in value for x in _flat(v)]
    if hasattr(value, "ravel"):
        return list(value.ravel())
    return [value]


def _loc(op) -> str:
    s = str(op.location)
    return s if len(s) <= 300 else s[:297] + "..."


def _is_f32(value) -> bool:
    return str(ir.RankedTensorType(value.type).element_type) == "f32"


def _in_multiply_add(op, uses) -> bool:
    """Whether copies of `op` would change which float32 multiply-adds the
    backend contracts into one rounding (csrc/backend/mlx/fma_contract.h),
    which reads a multiply's uses as XLA:CPU does: a multiply read by an add
    or subtract (its copies would each have one use, and XLA:CPU's original
    has two), or an add or subtract of a multiply or of its negation (the
    copies would give it two uses)."""
    if not _is_f32(op.results[0]):
        return False
    if op.name == "stablehlo.multiply":
        return any(u.owner.name in ("stablehlo.add", "stablehlo.subtract") for u in uses)
    def producer(v):
        owner = getattr(v, "owner", None)
        return owner if isinstance(getattr(owner, "name", None), str) else None

    for v in op.operands:
        p = producer(v)
        if p is not None and p.name == "stablehlo.negate":
            p = producer(p.operands[0])  # -(a * b) fuses too
        if p is not None and p.name == "stablehlo.multiply":
            return True
    return False


def _types(values) -> list:
    return [A.tensor_type(v.type) for v in values]


def _dense_from_text(text: str, result_type):
    dtype, shape = A.tensor_type(result_type)
    _, npdt = A.element_info(ir.RankedTensorType(result_type).element_type)
    data, splat = A._parse_dense_text(text, dtype, npdt, shape)
    return _pjrtx.Dense(dtype, shape, data, splat)


def _donated_args(f) -> list[int]:
    """Arguments JAX lets the run take over: `tf.aliasing_output = N` (an
    output of the same type reuses it) or `jax.buffer_donor = true` (an
    output of the same type may). As XLA does, a buffer donor with no output
    of its (per-device) type left to take it is not donated: the caller's
    array stays alive (e.g. x of a sharded x @ x.T). XLA pairs them by size
    on the device (OptimizeInputOutputBufferAlias), so a (16, 1) donor may
    become a (16,) result."""
    if "arg_attrs" not in f.attributes:
        return []
    ftype = ir.FunctionType(ir.TypeAttr(f.attributes["function_type"]).value)
    results = [_byte_size(t) for t in ftype.results]
    inputs = [_byte_size(t) for t in ftype.inputs]
    attrs = [ir.DictAttr(d) for d in ir.ArrayAttr(f.attributes["arg_attrs"])]
    free = list(range(len(results)))
    out, donors = [], []
    for i, d in enumerate(attrs):
        if "tf.aliasing_output" in d:
            out.append(i)
            k = ir.IntegerAttr(d["tf.aliasing_output"]).value
            if k in free:
                free.remove(k)
        elif "jax.buffer_donor" in d and ir.BoolAttr(d["jax.buffer_donor"]).value:
            donors.append(i)
    for i in donors:
        match = next((k for k in free if inputs[i] is not None and results[k] == inputs[i]), None)
        if match is not None:
            free.remove(match)
            out.append(i)
    return sorted(out)


def _byte_size(t) -> int | None:
    """Bytes of a static tensor type on the device (pred: one byte), None
    for anything else."""
    try:
        rt = ir.RankedTensorType(t)
    except (ValueError, TypeError):
        return None
    if not rt.has_static_shape:
        return None
    et = rt.element_type
    factor = 1
    if isinstance(et, ir.ComplexType) or str(et).startswith("complex"):
        et, factor = ir.ComplexType(et).element_type, 2
    try:
        bits = ir.IntegerType(et).width
    except (ValueError, TypeError):
        try:
            bits = ir.FloatType(et).width
        except (ValueError, TypeError):
            return None
    n = 1
    for d in rt.shape:
        n *= d
    return n * factor * max(1, (bits + 7) // 8)


_DOT = "dot_dimension_numbers."


def _swap_sides(attrs: dict) -> dict:
    """dot_general attributes with lhs and rhs exchanged."""
    out = {}
    for k, v in attrs.items():
        if k.startswith(_DOT + "lhs_"):
            k = _DOT + "rhs_" + k[len(_DOT) + 4:]
        elif k.startswith(_DOT + "rhs_"):
            k = _DOT + "lhs_" + k[len(_DOT) + 4:]
        out[k] = v
    return out


class _Walker:
    def __init__(self):
        self.b = _pjrtx.PlanBuilder()
        self.ids: dict = {}
        self.futures: dict = {}  # async_start's future -> the ids of its results
        self.folded: set = set()  # transpose results already bound to a swapped dot
        self.pads: dict = {}  # pad result -> the pad op, folded into its reduce_window
        self.tilings: dict = {}  # root add result -> (axis, pads): a concatenate
        self.inside_tiling: set = set()  # pads and adds that a tiling's concatenate replaces
        # (value, its reader's first result) -> plan id: the reader's own
        # copy of a rematerialised value (rematerialise)
        self.use_ids: dict = {}
        # plan id -> (plan id, shape): ids that are a reshape adding or
        # dropping only 1s of that id's value (see sink_unit_reshapes)
        self.unit_src: dict = {}

    def transposed_dot(self, op, attrs):
        """The transpose that is a dot_general's only use, when it puts the
        rhs free dims before the lhs free dims (JAX's gradient of a weight,
        dW = (g^T x)^T): then it is the dot with its operands swapped, which
        MLX runs with one transposed view instead of three."""
        if "algorithm" in attrs:
            return None
        uses = list(op.results[0].uses)
        if len(uses) != 1 or uses[0].owner.name != "stablehlo.transpose":
            return None
        t = uses[0].owner
        perm = list(_flat(self.attributes(t)["permutation"]))
        lhs, rhs = ir.RankedTensorType(op.operands[0].type), ir.RankedTensorType(op.operands[1].type)
        nb = len(_flat(attrs.get(_DOT + "lhs_batching_dimensions", [])))
        nl = lhs.rank - nb - len(_flat(attrs.get(_DOT + "lhs_contracting_dimensions", [])))
        nr = rhs.rank - nb - len(_flat(attrs.get(_DOT + "rhs_contracting_dimensions", [])))
        if nl == 0 or nr == 0:
            return None
        swap = list(range(nb)) + list(range(nb + nl, nb + nl + nr)) + list(range(nb, nb + nl))
        return t if perm == swap else None

    def find_tiling(self, pad) -> bool:
        """From a pad, the adds above it (each the only use of the one
        below); the highest whose sum is a tiling (pad_tiling) becomes a
        concatenate, and its pads and inner adds are not emitted."""
        chain, v = [], pad.results[0]
        while True:
            uses = list(v.uses)
            if len(uses) != 1 or uses[0].owner.name != "stablehlo.add":
                break
            chain.append(uses[0].owner)
            v = chain[-1].results[0]
        for root in reversed(chain):
            tiling = pad_tiling(root)
            if tiling is None:
                continue
            self.tilings[root.results[0]] = tiling
            stack = [root.operands[0], root.operands[1]]
            while stack:
                v = stack.pop()
                self.inside_tiling.add(v)
                if v.owner.name == "stablehlo.add":
                    stack.extend([v.owner.operands[0], v.owner.operands[1]])
            return pad.results[0] in self.inside_tiling
        return False

    def emit_tiling(self, op, loc):
        axis, pads = self.tilings[op.results[0]]
        types = _types(op.results)
        parts = self.ids_of([p.operands[0] for p in pads], op)
        cat = self.b.add_op("stablehlo.concatenate", parts, types, {"dimension": axis}, loc, 0)
        dtype, shape = types[0]
        _, npdt = A.element_info(ir.RankedTensorType(op.results[0].type).element_type)
        zero = _pjrtx.Dense(dtype, list(shape), np.zeros(1, npdt).tobytes(), True)
        z = self.b.add_op("stablehlo.constant", [], types, {"value": zero}, loc, 0)
        self.bind(op.results, self.b.add_op("stablehlo.add", cat + z, types, {}, loc, 0))

    def sink_unit_reshapes(self, op, loc) -> bool:
        """An element-wise op on reshapes that only add or drop 1s (and on
        one-element constants) runs on the reshapes' inputs, and the reshape
        moves after it. JAX's take_along_axis reshapes its indices [n, 1]
        -> [n, 1, 1], compares them and reduces the unit dim away: sunk, the
        compare reads the [n, 1] indices, the two reshapes meet and cancel,
        and MLX's compile fuses the compare with its neighbours (it cannot
        fuse across a reshape). Returns whether op was emitted this way."""
        if len(op.results) != 1 or op.regions:
            return False
        ids = self.ids_of(op.operands, op)
        src_shape, parts = None, []
        for v, i in zip(op.operands, ids):
            if i in self.unit_src:
                src, shape = self.unit_src[i]
                if src_shape is not None and shape != src_shape:
                    return False
                src_shape = shape
                parts.append(("value", src))
            elif (root := size_one_root(v)) is not None and root in self.ids:
                parts.append(("splat", root))
            else:
                return False
        if src_shape is None:
            return False
        rtype = ir.RankedTensorType(op.results[0].type)
        if list(rtype.shape) == src_shape or not unit_reshape_cancels(op.results[0], src_shape):
            return False
        dtype, shape = _types(op.results)[0]
        operands = []
        for kind, x in parts:
            if kind == "value":
                operands.append(x)
                continue
            r = ir.RankedTensorType(x.type).rank
            if r > len(src_shape):
                return False
            (xdt, _), = _types([x])
            operands += self.b.add_op(
                "stablehlo.broadcast_in_dim", [self.ids[x]], [(xdt, src_shape)],
                {"broadcast_dimensions": list(range(len(src_shape) - r, len(src_shape)))}, loc, 0)
        inner = self.b.add_op(op.name, operands, [(dtype, src_shape)], self.attributes(op), loc, 0)
        out = self.b.add_op("stablehlo.reshape", inner, [(dtype, shape)], {}, loc, 0)
        self.unit_src[out[0]] = (inner[0], src_shape)
        self.bind(op.results, out)
        return True

    def rematerialise(self, op, operands, attrs, loc) -> bool:
        """A subtract, add or multiply read by exactly two element-wise ops
        is computed once for each: MLX's compile fuses an element-wise node
        into its reader only when it has one reader, so x - max(x) in
        log_softmax (read by exp and by the final subtract) was a kernel of
        its own, and now fuses into both. The second copy is written
        differently but exactly equal (b + a for a + b and b * a for a * b,
        a + (-b) for a - b), or MLX's common-subexpression pass would merge
        the copies again. (a + (-b) gives a NaN of the other sign where b is
        NaN.)"""
        if op.name not in REMATERIALISED or len(op.results) != 1:
            return False
        uses = list(op.results[0].uses)
        readers = {u.owner.results[0] for u in uses if len(u.owner.results) == 1}
        if len(uses) != 2 or len(readers) != 2 or \
                any(u.owner.name not in ELEMENTWISE for u in uses):
            return False
        if _in_multiply_add(op, uses):
            return False
        types = _types(op.results)
        first = self.b.add_op(op.name, operands, types, attrs, loc, 0)
        a, b = operands
        if op.name == "stablehlo.subtract":
            neg = self.b.add_op("stablehlo.negate", [b], types, {}, loc, 0)
            second = self.b.add_op("stablehlo.add", [a] + neg, types, {}, loc, 0)
        else:
            second = self.b.add_op(op.name, [b, a], types, attrs, loc, 0)
        r0, r1 = (u.owner.results[0] for u in uses)
        v = op.results[0]
        self.use_ids[(v, r0)], self.use_ids[(v, r1)] = first[0], second[0]
        self.bind(op.results, first)
        return True

    def note_unit_reshape(self, op):
        """Records a reshape that only adds or drops 1s (sink_unit_reshapes)."""
        src = ir.RankedTensorType(op.operands[0].type)
        dst = ir.RankedTensorType(op.results[0].type)
        if not (src.has_static_shape and dst.has_static_shape):
            return
        if non_unit(src.shape) != non_unit(dst.shape) or list(src.shape) == list(dst.shape):
            return
        # A reduce's result is already a view of an array with the reduced
        # dims kept (the backend squeezes MLX's keepdims result), and a
        # reshape that re-inserts them costs nothing: moving ops onto the
        # squeezed shape would only materialise the squeeze.
        try:
            if op.operands[0].owner.name == "stablehlo.reduce":
                return
        except AttributeError:
            pass  # a block argument
        i = self.ids[op.operands[0]]
        self.unit_src[self.ids[op.results[0]]] = self.unit_src.get(i, (i, list(src.shape)))

    def ids_of(self, values, op, futures_ok=False) -> list[int]:
        out = []
        reader = op.results[0] if self.use_ids and len(op.results) == 1 else None
        for v in values:
            if reader is not None and (v, reader) in self.use_ids:
                out.append(self.use_ids[(v, reader)])
                continue
            if futures_ok and v in self.futures:
                out.extend(self.futures[v])
                continue
            try:
                out.append(self.ids[v])
            except KeyError:
                raise FrontendError(
                    f"pjrtx: {op.name} at {_loc(op)} uses a value defined outside what pjrtx walked"
                ) from None
        return out

    def bind(self, values, ids):
        for v, i in zip(values, ids):
            self.ids[v] = i

    def attributes(self, op) -> dict:
        out = {}
        for name in versions.attribute_names(op.attributes):
            if name in _IGNORED_ATTRS:
                continue
            try:
                value = A.convert(op.attributes[name])
            except TypeError:
                # The bindings cannot wrap some dense element types (complex).
                if name == "value" and op.name == "stablehlo.constant":
                    text = op.get_asm(print_generic_op_form=True, large_elements_limit=None)
                    value = _dense_from_text(text[text.index("value = "):], op.results[0].type)
                else:
                    raise
            if isinstance(value, dict):
                for k, v in value.items():
                    out[f"{name}.{k}"] = v
            else:
                out[name] = value
        return out

    def block(self, block, terminators=_TERMINATORS) -> list[int]:
        for op in block.operations:
            op = op.operation
            if op.name in terminators:
                return self.ids_of(op.operands, op)
            self.op(op)
        raise FrontendError("pjrtx: block without a terminator")

    def op(self, op):
        name = op.name
        loc = _loc(op)
        if name in _NO_OP and len(op.results) == 0:
            return
        if name == "stablehlo.transpose" and op.results[0] in self.folded:
            return
        if name == "stablehlo.pad" and window_of_pad(op) is not None:
            self.pads[op.results[0]] = op
            return
        if name in ("stablehlo.pad", "stablehlo.add") and op.results[0] in self.inside_tiling:
            return
        if name == "stablehlo.pad" and self.find_tiling(op):
            return
        if name == "stablehlo.add" and op.results[0] in self.tilings:
            return self.emit_tiling(op, loc)
        if name in ("stablehlo.async_start", "stablehlo.async_done"):
            return self.async_op(op, loc)
        if name in ELEMENTWISE and self.sink_unit_reshapes(op, loc):
            return
        try:
            attrs = self.attributes(op)
            result_types = _types(op.results)
        except (A.UnsupportedType, ValueError) as e:
            raise FrontendError(f"{e} (in {name} at {loc})") from None
        # control_dep orders an async collective (its future) before other
        # work: it may take a future, which stands for the values it carries.
        values = list(op.operands)
        pad = self.pads.get(values[0]) if name == "stablehlo.reduce_window" else None
        if pad is not None:
            values[0] = pad.operands[0]
        operands = self.ids_of(values, op, futures_ok=attrs.get("call_target_name") == "control_dep")
        if pad is not None:
            lo, hi, interior = (list(_flat(A.convert(pad.attributes[k]))) for k in
                                ("edge_padding_low", "edge_padding_high", "interior_padding"))
            pairs = np.array([[a, b] for a, b in zip(lo, hi)], dtype=np.int64)
            attrs["padding"] = _pjrtx.Dense("s64", [len(lo), 2], pairs.tobytes(), False)
            attrs["base_dilations"] = [i + 1 for i in interior]
        if name == "stablehlo.dot_general":
            t = self.transposed_dot(op, attrs)
            if t is not None:
                results = self.b.add_op(name, operands[::-1], _types(t.results), _swap_sides(attrs),
                                        loc, 0)
                self.bind(t.results, results)
                self.folded.add(t.results[0])
                return
        # Under shape polymorphism a custom call carries its result shapes as
        # extra i32 operands (JAX's `result_shapes`); once shape refinement
        # has made the results static they say nothing a kernel needs.
        if name == "stablehlo.reduce" and len(op.results) == 1 and \
                zero_sign_free(op.results[0], op.operands[0], reduce_dims(op)):
            attrs["pjrtx.zero_sign_free"] = True
        if name == "stablehlo.reduce" and len(op.results) == 1 and keepdims_uses(op.results[0]):
            attrs["pjrtx.keepdims_uses"] = True
        shape_operands = attrs.pop("indices_of_shape_operands", None)
        if shape_operands is not None and name == "stablehlo.custom_call":
            drop = {int(i) for i in _flat(shape_operands)}
            operands = [v for i, v in enumerate(operands) if i not in drop]
        if name in REMATERIALISED and self.rematerialise(op, operands, attrs, loc):
            return
        regions = op.regions
        results = self.b.add_op(name, operands, result_types, attrs, loc, len(regions))
        for region in regions:
            blocks = list(region.blocks)
            if len(blocks) != 1:
                raise FrontendError(
                    f"pjrtx: {name} at {loc}: regions with {len(blocks)} blocks are not supported")
            blk = blocks[0]
            self.bind(blk.arguments, self.b.begin_region(_types(blk.arguments)))
            self.b.end_region(self.block(blk))
        self.bind(op.results, results)
        if name == "stablehlo.reshape":
            self.note_unit_reshape(op)

    def async_op(self, op, loc):
        """async_start(x) {region} -> future; async_done(future) -> values.
        JAX emits the pair for collectives it wants overlapped with other
        work (lax all_gather_start). One MLX stream runs a plan in order and
        a collective over one device has nothing to wait for, so the region
        is inlined where async_start stands and the future is only a name
        for its results, which async_done hands on."""
        if op.name == "stablehlo.async_done":
            try:
                ids = self.futures[op.operands[0]]
            except KeyError:
                raise FrontendError(
                    f"pjrtx: stablehlo.async_done at {loc} waits on a future that does not come "
                    "from an async_start in the same function (futures through control flow or "
                    "calls are not supported)") from None
            if len(ids) != len(op.results):
                raise FrontendError(f"pjrtx: stablehlo.async_done at {loc}: {len(op.results)} "
                                    f"results for a future of {len(ids)} values")
            self.bind(op.results, ids)
            return
        blocks = list(op.regions[0].blocks) if len(op.regions) == 1 else []
        if len(blocks) != 1:
            raise FrontendError(f"pjrtx: stablehlo.async_start at {loc}: expected one region "
                                "of one block")
        self.bind(blocks[0].arguments, self.ids_of(op.operands, op))
        self.futures[op.results[0]] = self.block(blocks[0])

    def function(self, func_op):
        f = func_op.operation
        name = ir.StringAttr(f.attributes["sym_name"]).value
        vis = f.attributes["sym_visibility"] if "sym_visibility" in f.attributes else None
        is_public = vis is None or ir.StringAttr(vis).value == "public"
        ftype = ir.FunctionType(ir.TypeAttr(f.attributes["function_type"]).value)
        blocks = list(f.regions[0].blocks)
        if len(blocks) != 1:
            raise FrontendError(f"pjrtx: function @{name} has {len(blocks)} blocks; expected 1")
        blk = blocks[0]
        try:
            arg_types = _types(blk.arguments)
            result_types = [A.tensor_type(t) for t in ftype.results]
        except A.UnsupportedType as e:
            raise FrontendError(f"{e} (in the signature of @{name})") from None
        self.bind(blk.arguments, self.b.begin_function(name, is_public, arg_types, result_types))
        donors = _donated_args(f)
        if donors:
            self.b.set_donors(donors)
        arg_kinds = _memory_kinds(f, "arg_attrs", len(arg_types))
        res_kinds = _memory_kinds(f, "res_attrs", len(result_types))
        if any(arg_kinds) or any(res_kinds):
            self.b.set_memory_kinds(arg_kinds, res_kinds)
        self.b.end_function(self.block(blk))


def _memory_kinds(func_op, name: str, n: int) -> list[str]:
    """The `mhlo.memory_kind` of each argument or result ("" for none):
    JAX names the memory ("device", "pinned_host") of each jit argument and
    result there, and reads the results' kinds back from the executable."""
    kinds = [""] * n
    if name not in func_op.attributes:
        return kinds
    for i, d in enumerate(ir.ArrayAttr(func_op.attributes[name])):
        d = ir.DictAttr(d)
        if i < n and "mhlo.memory_kind" in d:
            kinds[i] = ir.StringAttr(d["mhlo.memory_kind"]).value
    return kinds


def build_plan_from_module(module):
    w = _Walker()
    entry = None
    publics = []
    for op in module.body.operations:
        if op.operation.name != "func.func":
            continue  # e.g. sdy.mesh declarations
        w.function(op)
        name = ir.StringAttr(op.operation.attributes["sym_name"]).value
        if name == "main":
            entry = name
        vis = op.operation.attributes["sym_visibility"] if "sym_visibility" in op.operation.attributes else None
        if vis is None or ir.StringAttr(vis).value == "public":
            publics.append(name)
    if entry is None:
        if len(publics) != 1:
            raise FrontendError("pjrtx: the module has no @main and not exactly one public function")
        entry = publics[0]
    mod_name = ""
    if "sym_name" in module.operation.attributes:
        mod_name = ir.StringAttr(module.operation.attributes["sym_name"]).value
    return w.b.finish(entry, mod_name)
