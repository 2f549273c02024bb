"""pjrtx's batched linalg custom calls on Shardy's path: each works matrix
by matrix over leading batch dimensions, so it partitions along the batch
as XLA partitions its own linalg custom calls (num_batch_dims). The
frontend gives each a Shardy sharding rule before propagation and checks,
after the converter, that every device got whole matrices."""
from __future__ import annotations

import json

from jaxlib.mlir import ir

from pjrtx.frontend.partition.sharding import ShardyUnsafe
from pjrtx.frontend.partition.walk import is_ranked, nested_ops, op_name

_BATCH_TAG = "pjrtx.batch_call"
# The targets: each works matrix by matrix over leading batch
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


def _factor_name(i: int) -> str:
    # Shardy's factor names: i..z, then z_1, z_2, ...
    return chr(ord("i") + i) if i < 18 else f"z_{i - 17}"


def batch_layout(o):
    """-> (batch dims, static shapes of operands then results) for a custom
    call of _BATCH_TARGETS whose operands and results share at least one
    leading batch dimension; None otherwise."""
    if op_name(o) != "stablehlo.custom_call":
        return None
    core = _BATCH_TARGETS.get(ir.StringAttr(o.attributes["call_target_name"]).value)
    values = [v.type for v in o.operands] + [r.type for r in o.results]
    if core is None or not values or not all(
            is_ranked(t) and ir.RankedTensorType(t).has_static_shape for t in values):
        return None
    shapes = [list(ir.RankedTensorType(t).shape) for t in values]
    nb = len(shapes[0]) - core
    if nb < 1 or any(len(sh) < nb or sh[:nb] != shapes[0][:nb] for sh in shapes):
        return None
    return nb, shapes


def add_batch_rules(main, mesh_name: str) -> None:
    """Readies each batched custom call for Shardy: a sdy.sharding_rule (the
    batch dims are common factors, every other dim its own factor that
    needs replication), and a sharding constraint on each operand that
    keeps its batch dims open and replicates the rest (jaxlib 0.10.2's
    explicit reshards ignore need_replication: an operand sharded along a
    matrix dimension would reach the call as a slice). The global shapes go
    in _BATCH_TAG for check_batch_calls."""
    for o in list(nested_ops(main)):
        layout = batch_layout(o)
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


def check_batch_calls(main) -> None:
    """After localization each batched custom call must see whole matrices
    (its global non-batch dims) and one batch block in all its operands and
    results; otherwise the program takes the global path."""
    for o in nested_ops(main):
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
