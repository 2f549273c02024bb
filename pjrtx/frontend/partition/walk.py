"""Walking and editing the MLIR of a program, for every partitioning
strategy: the ops under an op, a module's functions and their argument and
result attributes, inlining calls, and the text of a zero constant."""
from __future__ import annotations

from jaxlib.mlir import ir


def is_ranked(t) -> bool:
    """Whether type `t` is a ranked tensor (not a token or tuple)."""
    try:
        ir.RankedTensorType(t)
        return True
    except ValueError:
        return False


def attr_names(op) -> list[str]:
    """The names of op's attributes."""
    attrs = op.attributes
    return [attrs[i].name for i in range(len(attrs))]


def op_name(op) -> str:
    return op.operation.name


def nested_ops(op):
    """Every op inside op's regions, depth first (not op itself)."""
    for region in op.regions:
        for block in region.blocks:
            for o in block.operations:
                yield o.operation
                yield from nested_ops(o.operation)


def funcs_by_name(module) -> dict:
    """The module's func.func ops by symbol name."""
    return {o.attributes["sym_name"].value: o.operation for o in module.body.operations
            if op_name(o) == "func.func"}


def main_func(module):
    """The module's @main."""
    main = funcs_by_name(module).get("main")
    if main is None:
        raise ValueError("pjrtx: the module has no @main")
    return main


def func_attr_list(func, key: str, n: int) -> list:
    """A function's arg_attrs or res_attrs (`key`): one DictAttr each of its n values."""
    if key not in func.attributes:
        return [ir.DictAttr.get({}) for _ in range(n)]
    arr = func.attributes[key]
    return [ir.DictAttr(arr[i]) for i in range(len(arr))]


def dict_without_sdy(d) -> dict:
    """A DictAttr's entries but Shardy's (sdy.*)."""
    return {d[i].name: d[i].attr for i in range(len(d)) if not d[i].name.startswith("sdy.")}


def func_type(func) -> ir.FunctionType:
    return ir.FunctionType(ir.TypeAttr(func.attributes["function_type"]).value)


def inline_calls(module) -> int:
    """Inlines every func.call reachable from @main and erases the private
    callees; returns how many calls it inlined. (jaxlib's registered `inline`
    pass has no func inliner interface and changes nothing.)"""
    funcs = funcs_by_name(module)
    main = main_func(module)
    count = 0
    while True:
        calls = [o for o in nested_ops(main) if op_name(o) == "func.call"]
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
        for o in nested_ops(todo.pop()):
            ref = {"stablehlo.composite": "decomposition", "func.call": "callee"}.get(op_name(o))
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


def zero_text(element_type) -> str:
    """The MLIR literal of zero for an element type (in a dense<...> constant)."""
    t = str(element_type)
    if t == "i1":
        return "false"
    if t.startswith("complex"):
        return "(0.000000e+00,0.000000e+00)"
    if t.startswith(("i", "ui", "si")):
        return "0"
    return "0.000000e+00"
