"""Patterns the walker looks for in StableHLO before it emits a plan:
which max reduces need no zero-sign fix, which reduces keep their dims,
pads that fold into a window or tile an axis, element-wise ops that a
unit-dim reshape can move past, and ops worth computing once per reader.
Each reads only the MLIR module; walker.py acts on the answers."""
from __future__ import annotations

import math

from jaxlib.mlir import ir


def _constant_under_broadcasts(value):
    """The stablehlo.constant op under a chain of broadcast_in_dim (JAX
    passes scalars through them), or None (a block argument, another op)."""
    try:
        op = value.owner
        while op.name == "stablehlo.broadcast_in_dim":
            op = op.operands[0].owner
        return op if op.name == "stablehlo.constant" else None
    except AttributeError:
        return None  # a block argument


# Ops whose result holds their operand's elements unchanged: a zero keeps its sign.
_SAME_ELEMENTS = frozenset({"stablehlo.broadcast_in_dim", "stablehlo.reshape",
                            "stablehlo.transpose"})


# Element-wise ops computed once per reader when they have two (see
# _Walker.rematerialise).
REMATERIALISED = frozenset({"stablehlo.subtract", "stablehlo.add", "stablehlo.multiply"})

# Element-wise ops (every operand and the result of one shape) that commute
# with a reshape: op(reshape(a), reshape(b)) == reshape(op(a, b)).
ELEMENTWISE = frozenset("stablehlo." + n for n in (
    "add", "subtract", "multiply", "divide", "remainder", "maximum", "minimum", "and", "or",
    "xor", "not", "negate", "abs", "compare", "select", "convert", "sign", "floor", "ceil",
    "exponential", "log", "sqrt", "rsqrt", "tanh", "logistic", "power", "clamp"))


def non_unit(shape) -> list:
    return [d for d in shape if d != 1]


def size_one_root(value):
    """The constant under broadcasts whose every dim is 1 (one element), or
    None: it broadcasts to any shape of at least its rank."""
    op = _constant_under_broadcasts(value)
    if op is None:
        return None
    root = op.results[0]
    return root if all(d == 1 for d in ir.RankedTensorType(root.type).shape) else None


def unit_reshape_cancels(value, shape, depth: int = 0) -> bool:
    """Whether every path from value (an element-wise result computed on
    reshapes of `shape`) ends in a reshape back to `shape` or a reduce over
    only 1s down to it, through element-wise ops: only then does moving the
    reshape after the op save a node (else the op would only move away
    from the element-wise neighbours MLX fuses it with)."""
    uses = list(value.uses)
    if not uses or depth > 8:
        return False
    for use in uses:
        op = use.owner
        name = op.name
        if len(op.results) != 1:
            return False
        out = list(ir.RankedTensorType(op.results[0].type).shape)
        if name == "stablehlo.reshape" or name == "stablehlo.reduce":
            if out != shape:
                return False
            if name == "stablehlo.reduce":
                src = ir.RankedTensorType(op.operands[0].type).shape
                if any(src[d] != 1 for d in reduce_dims(op)):
                    return False
        elif name in ELEMENTWISE:
            if not unit_reshape_cancels(op.results[0], shape, depth + 1):
                return False
        else:
            return False
    return True


def _is_splat(value, x: float) -> bool:
    """Whether value is a constant, or a broadcast of one, whose every element is x."""
    op = _constant_under_broadcasts(value)
    if op is None:
        return False
    try:
        attr = ir.DenseFPElementsAttr(op.attributes["value"])
    except (ValueError, TypeError):
        return False  # not a float constant
    if not attr.is_splat:
        return False
    v = ir.FloatAttr(attr.get_splat_value()).value
    # A zero must have x's sign too (the bits, not only ==).
    return v == x and math.copysign(1.0, v) == math.copysign(1.0, x)


def _row_broadcast(op, dims) -> bool:
    """A broadcast_in_dim that takes a reduce's result (over `dims`) back
    row for row: the operand's dims land on the result dims outside `dims`
    (the keepdims form), or, at equal rank, each on itself."""
    bd = [int(d) for d in ir.DenseI64ArrayAttr(op.attributes["broadcast_dimensions"])]
    rank = ir.RankedTensorType(op.results[0].type).rank
    if len(bd) == rank:
        return bd == list(range(rank))
    return bd == [d for d in range(rank) if d not in dims]


def reduce_dims(op) -> list:
    return sorted(int(d) for d in ir.DenseI64ArrayAttr(op.attributes["dimensions"]))


def _is_log_sum_exp_of(value, v, dims) -> bool:
    """Whether value is log(reduce_add(exp(v), init >= 0)) over `dims`,
    broadcast back without a transpose: JAX's log_softmax normaliser of
    v = x - max(x), row for row (f16/bf16 sum in f32: float converts keep
    a sum >= 2 at >= 2 and exp(0) at 1)."""
    def through(value, names):
        while True:
            op = value.owner
            if op.name not in names:
                return value
            if op.name == "stablehlo.broadcast_in_dim" and not _row_broadcast(op, dims):
                return value
            value = op.operands[0]
    try:
        log = through(value, {"stablehlo.broadcast_in_dim"}).owner
        if log.name != "stablehlo.log":
            return False
        red = through(log.operands[0], {"stablehlo.broadcast_in_dim", "stablehlo.convert"}).owner
        if red.name != "stablehlo.reduce" or len(red.operands) != 2 or reduce_dims(red) != dims:
            return False
        body = [o.operation.name for o in red.regions[0].blocks[0].operations]
        if body[:1] != ["stablehlo.add"] or not _is_splat(red.operands[1], 0.0):
            return False
        exp = through(red.operands[0], {"stablehlo.convert"}).owner
        return exp.name == "stablehlo.exponential" and exp.operands[0] == v
    except AttributeError:
        return False  # a block argument


def zero_sign_free(value, source=None, dims=None, plain: bool = True, depth: int = 0) -> bool:
    """Whether no use of value, the result of a max/min reduce of `source`
    over `dims`, can tell a -0 element from +0; then the reduce needs no
    zero-sign fix. JAX's softmax is exp(x - max(-inf, reduce_max(x))): max
    with -inf and broadcasts pass the zero on unchanged, and x - m differs
    between m = +0 and m = -0 only in the sign of a zero result, which exp
    maps to 1 either way. log_softmax also takes (x - m) - log(sum(exp(x -
    m))): m's sign matters only when m is a zero and x's row holds zeros of
    both signs, and then two terms of the sum are exp(0) = 1, so the log is
    > 0 and no result is a zero. `plain`: m reaches here row for row (only
    broadcasts that put each row's max back on that row), which that
    argument needs."""
    uses = list(value.uses)
    if not uses or depth > 16:
        return False
    for use in uses:
        op = use.owner
        name = op.name
        if name in _SAME_ELEMENTS:
            keeps = name == "stablehlo.broadcast_in_dim" and _row_broadcast(op, dims)
            ok = zero_sign_free(op.results[0], source, dims, plain and keeps, depth + 1)
        elif name in ("stablehlo.maximum", "stablehlo.minimum"):
            other = op.operands[1 - use.operand_number]
            inf = float("-inf") if name == "stablehlo.maximum" else float("inf")
            ok = _is_splat(other, inf) and zero_sign_free(op.results[0], source, dims, plain,
                                                          depth + 1)
        elif name == "stablehlo.subtract":
            v = op.results[0]
            row_max = plain and use.operand_number == 1 and op.operands[0] == source
            after = list(v.uses)
            ok = bool(after) and all(
                u.owner.name == "stablehlo.exponential"
                or (row_max and u.owner.name == "stablehlo.subtract" and u.operand_number == 0
                    and _is_log_sum_exp_of(u.owner.operands[1], v, dims))
                for u in after)
        else:
            ok = False
        if not ok:
            return False
    return True


def keepdims_uses(value, depth: int = 0) -> bool:
    """Whether every use of a reduce's result re-inserts dims with a
    broadcast_in_dim (JAX's keepdims, mean and softmax), possibly after a
    max(-inf)/min(+inf), which the backend lowers to nothing: the backend
    then keeps the reduced dims, and the broadcast needs no reshape."""
    uses = list(value.uses)
    if not uses or depth > 4:
        return False
    for use in uses:
        op = use.owner
        if op.name == "stablehlo.broadcast_in_dim":
            continue
        if op.name in ("stablehlo.maximum", "stablehlo.minimum"):
            inf = float("-inf") if op.name == "stablehlo.maximum" else float("inf")
            if _is_splat(op.operands[1 - use.operand_number], inf) and \
                    keepdims_uses(op.results[0], depth + 1):
                continue
        return False
    return True


def _scalar_constant(value):
    """The value attribute's text of a scalar constant (JAX may pass it
    through a rank-0 broadcast_in_dim), or None."""
    op = _constant_under_broadcasts(value)
    return None if op is None else str(op.attributes["value"])


def _same_constant(a, b) -> bool:
    ca = _scalar_constant(a)
    return a == b or (ca is not None and ca == _scalar_constant(b))


def window_of_pad(pad):
    """The reduce_window that can take pad's padding as its own, or None.
    reduce_window pads with its init value (edges, and base dilation as
    interior padding), so a pad by the same value whose only use is the
    window's operand is the window's own padding: one op, and the window
    lowering sees which elements are real (JAX's gradient of avg_pool is a
    pad then a sum window)."""
    uses = list(pad.results[0].uses)
    if len(uses) != 1 or uses[0].operand_number != 0:
        return None
    win = uses[0].owner
    if win.name != "stablehlo.reduce_window" or len(win.operands) != 2:
        return None
    if not _same_constant(pad.operands[1], win.operands[1]):
        return None
    a = win.attributes
    if "base_dilations" in a and any(int(x) != 1 for x in ir.DenseI64ArrayAttr(a["base_dilations"])):
        return None
    if "padding" in a and any(int(x) != 0 for x in ir.DenseIntElementsAttr(a["padding"])):
        return None
    p = pad.attributes
    if any(int(x) < 0 for k in ("edge_padding_low", "edge_padding_high")
           for x in ir.DenseI64ArrayAttr(p[k])):
        return None
    return win


def pad_tiling(root):
    """(axis, pads ordered along it) when the add `root` sums, through adds
    used once, pads by +0 (each used once, no interior padding) that all
    pad the same one axis and whose operands tile it, one after another:
    JAX's gradient of slices that split an array (attention's q, k, v).
    That sum is the operands concatenated, plus +0 (every element meets at
    least one +0 of another pad, which turns a -0 into +0). Else None."""
    pads, shape = [], list(ir.RankedTensorType(root.results[0].type).shape)

    def collect(v, top):
        op = v.owner  # AttributeError for a block argument
        if not top and len(list(v.uses)) != 1:
            raise ValueError
        if op.name == "stablehlo.add":
            collect(op.operands[0], False)
            collect(op.operands[1], False)
        elif op.name == "stablehlo.pad" and not top:
            pads.append(op)
        else:
            raise ValueError

    try:
        collect(root.results[0], True)
        axis, spans = None, []
        for pad in pads:
            if not _is_splat(pad.operands[1], 0.0):
                return None
            lo, hi, interior = ([int(x) for x in ir.DenseI64ArrayAttr(pad.attributes[k])]
                                for k in ("edge_padding_low", "edge_padding_high", "interior_padding"))
            moved = [d for d in range(len(shape)) if lo[d] or hi[d]]
            if any(interior) or len(moved) != 1 or (axis is not None and moved[0] != axis):
                return None
            axis = moved[0]
            if lo[axis] < 0 or hi[axis] < 0:
                return None
            spans.append((lo[axis], shape[axis] - hi[axis], pad))
    except (AttributeError, ValueError, TypeError):
        return None
    if len(spans) < 2:
        return None
    spans.sort(key=lambda t: t[0])
    end = 0
    for start, stop, _ in spans:
        if start != end or stop <= start:
            return None
        end = stop
    if end != shape[axis]:
        return None
    return axis, [p for _, _, p in spans]
