"""StableHLO -> pjrtx plan, with jaxlib's own MLIR bindings.

The C++ compile step calls :func:`build_plan` under the GIL. Reusing jaxlib's
MLIR at run time means we read exactly the StableHLO version jaxlib writes.
"""
from __future__ import annotations

from pjrtx.frontend.parse import parse_module

__all__ = ["build_plan", "FrontendError"]


def __getattr__(name):
    # walker imports the C++ extension; loading it lazily lets parse and
    # partition (pure jaxlib MLIR) be imported and tested without it.
    if name in ("FrontendError", "build_plan_from_module"):
        from pjrtx.frontend import walker

        return getattr(walker, name)
    raise AttributeError(f"module 'pjrtx.frontend' has no attribute {name!r}")


def _num_partitions(module) -> int:
    attrs = module.operation.attributes
    if "mhlo.num_partitions" not in attrs:
        return 1
    from jaxlib.mlir import ir

    return ir.IntegerAttr(attrs["mhlo.num_partitions"]).value


def _partition(module, ext, open_params=()):
    """A program for several devices (mhlo.num_partitions > 1) becomes the
    program each device runs (pjrtx/frontend/partition/); returns the
    serialized xla.OpSharding of each entry argument and result, which the
    executable reports to JAX, or None on one device. `open_params` are the
    compile options' allow_spmd_sharding_propagation_to_parameters."""
    n = _num_partitions(module)
    if n <= 1:
        return None
    from jaxlib.mlir import ir

    from pjrtx.frontend.partition import localize, op_sharding_proto
    from pjrtx.frontend.partition.walk import main_func

    info = localize(module, n, open_params=open_params)
    if ext.trace_enabled():
        name = module.operation.attributes["sym_name"] if "sym_name" in module.operation.attributes else ""
        why = f" ({info.reason})" if info.reason else ""
        ext.trace_line(f"partition {str(name).strip(chr(34))}: {n} devices, {info.path} path{why}")
    ftype = ir.FunctionType(ir.TypeAttr(main_func(module).attributes["function_type"]).value)

    def proto(vs, t):
        try:
            rank = ir.RankedTensorType(t).rank
        except (TypeError, ValueError):  # a token
            rank = 0
        return op_sharding_proto(info, vs, rank)

    args = [proto(vs, t) for vs, t in zip(info.arg_shardings, ftype.inputs)]
    results = [proto(vs, t) for vs, t in zip(info.result_shardings, ftype.results)]
    return args, results


def build_plan(code: bytes, format: str = "mlir", want_text: bool = False,
               open_params: tuple = ()):
    """Returns (Plan, module text or None). `open_params`: which entry
    arguments' shardings the partitioner may choose (one entry: all)."""
    from pjrtx._contract import load_extension
    from pjrtx.frontend.walker import build_plan_from_module

    ext = load_extension()
    prof = ext.profile_enabled()
    t0 = ext.profile_now_us() if prof else 0
    with parse_module(code, format) as module:
        if prof:
            t1 = ext.profile_now_us()
            ext.profile_event("compile", "parse StableHLO", t0, t1 - t0)
        text = str(module) if want_text else None
        t2 = ext.profile_now_us() if prof else 0
        shardings = _partition(module, ext, open_params)
        if shardings is not None:
            if prof:
                t3 = ext.profile_now_us()
                ext.profile_event("compile", "partition", t2, t3 - t2)
                t2 = t3
            if want_text:
                text += "\n// after pjrtx's partitioning (the program each device runs):\n" + str(module)
        plan = build_plan_from_module(module)
        if shardings is not None:
            plan.set_entry_shardings(*shardings)
        if prof:
            ext.profile_event("compile", "build plan", t2, ext.profile_now_us() - t2)
        return plan, text
