"""The Shardy path of pjrtx's partitioning: Shardy's own passes
(propagation, explicit reshards, global-to-local) partition the program.
screen decides beforehand whether a program may take it (the ops on
SHARDY_SAFE_OPS); localize_shardy runs the passes with the steps jaxlib
0.10.2's passes leave out (batch_calls, unreduced) and the checks that send
a program they would get wrong to the global path (checks)."""
from __future__ import annotations

import re

from jaxlib.mlir import ir
from jaxlib.mlir import passmanager

from pjrtx import versions
from pjrtx.frontend.partition import unreduced
from pjrtx.frontend.partition.batch_calls import add_batch_rules, batch_layout, check_batch_calls
from pjrtx.frontend.partition.checks import (
    check_divisible, check_inserted_collectives, check_pads_gathers_scatters, check_partial_sums,
    fix_all_reduce_bodies, reduce_kind, tag_user_collectives, untag_user_collectives,
)
from pjrtx.frontend.partition.sharding import PartitionInfo, ShardyUnsafe, mesh_info, read_shardings
from pjrtx.frontend.partition.walk import (
    func_attr_list, func_type, is_ranked, main_func, nested_ops, op_name,
)

# The pipelines (partition, then localize) are the installed jaxlib's, from
# pjrtx/versions.py: jaxlibs without a verified localiser have None there and
# every sharded program takes the global path (driver.localize).

# Ops jaxlib 0.10.2's Shardy pipeline partitions correctly wherever their
# operands are sharded (each family is checked against jax.jit on XLA:CPU in
# tests/test_partition.py). Not here, and why:
#   reduce_window (cumsum), gather: LLVM CHECK aborts the process
#     (convert_global_to_local.cc:2747, :2108);
#   while, case, if: region types are not converted (pass error);
#   dynamic_slice, dynamic_update_slice: sliced sizes are not localized;
#   custom_call (but see batch_calls.py), rng ops, fft, select_and_scatter,
#   reverse, chlo.*: not verified.
# pad, gather and scatter pass the screen but are checked after Shardy's
# export (checks.check_pads_gathers_scatters): a pad only where no sharded dimension is padded,
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
# Ops the screen lets through that checks.py checks once their
# shardings are known (after Shardy's export, before the converter).
_CHECKED_AFTER_EXPORT = frozenset({"stablehlo.pad", "stablehlo.gather"})
# Ops whose regions are scalar computations (not partitioned; not screened).
_SCALAR_BODY_OPS = {"stablehlo.reduce", "stablehlo.sort", "stablehlo.scatter",
                    "stablehlo.all_reduce", "stablehlo.reduce_scatter"}


def screen(main, mesh_axis_names: set) -> tuple[list[str], list[str]]:
    """-> (unsafe ops outside manual computations, unsafe ops inside them)."""
    outside, inside = [], []

    def visit(op, in_manual_full: bool, in_manual: bool):
        for region in op.regions:
            for block in region.blocks:
                for o in block.operations:
                    o = o.operation
                    name = op_name(o)
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
                    elif name == "stablehlo.custom_call" and batch_layout(o) is not None:
                        pass
                    elif name not in SHARDY_SAFE_OPS and name not in _CHECKED_AFTER_EXPORT:
                        bad = name
                    elif name == "stablehlo.reduce" and reduce_kind(o) is None:
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


def _open_args(open_params, nargs: int) -> list:
    """The compile options' allow_spmd_sharding_propagation_to_parameters, one
    flag per argument: XLA reads a single entry as all of them, and any other
    length as none (JAX sends one per argument, ordered-effect tokens first)."""
    flags = [bool(b) for b in open_params]
    if len(flags) == 1:
        return flags * nargs
    return flags if len(flags) == nargs else [False] * nargs


def _close_unannotated_args(main, mesh_name: str, open_params=()):
    """Arguments JAX sent without a sharding hold the whole value on every
    device: pin them replicated so propagation cannot shard them, unless the
    compile options leave that argument's sharding to the compiler (a NumPy
    input to jit); then Shardy's propagation chooses it, JAX reads the choice
    back (Shardings extension) and transfers the argument that way."""
    ftype = func_type(main)
    attrs = func_attr_list(main, "arg_attrs", len(ftype.inputs))
    opened = _open_args(open_params, len(ftype.inputs))
    changed = False
    new = []
    for t, d, is_open in zip(ftype.inputs, attrs, opened):
        entries = {d[i].name: d[i].attr for i in range(len(d))}
        if "sdy.sharding" not in entries and is_ranked(t) and not is_open:
            rank = ir.RankedTensorType(t).rank
            entries["sdy.sharding"] = ir.Attribute.parse(
                "#sdy.sharding<@%s, [%s]>" % (mesh_name, ", ".join(["{}"] * rank)))
            changed = True
        new.append(ir.DictAttr.get(entries))
    if changed:
        main.attributes["arg_attrs"] = ir.ArrayAttr.get(new)


def localize_shardy(module, n: int, meshes: dict, open_params=()) -> PartitionInfo:
    """Partitions `module` in place with Shardy's passes (localize hands it a
    copy: a failing pass leaves it half rewritten). Raises ShardyUnsafe (or
    the passes' ir.MLIRError) for a program this path would get wrong."""
    main = main_func(module)
    # A mesh without axes (JAX's @empty_mesh for scalars outside a
    # shard_map) only says "replicated"; Shardy reads it as such.
    real = {k: m for k, m in meshes.items() if len(list(m.axes)) > 0}
    if len(real) != 1:
        raise ShardyUnsafe(f"{len(real)} meshes with axes in the module")
    mesh_name, mesh_attr = next(iter(real.items()))
    axes, ids = mesh_info(mesh_attr, n)
    _close_unannotated_args(main, mesh_name, open_params)
    tag_user_collectives(main)
    add_batch_rules(main, mesh_name)
    localize = versions.shardy().localize
    if localize is None:
        raise ShardyUnsafe(f"jaxlib {versions.installed_jax()} has no verified Shardy localiser "
                           "(sdy-convert-global-to-local; pjrtx/versions.py)")
    partition_pipeline, local_pipeline = localize
    passmanager.PassManager.parse(partition_pipeline).run(module.operation)
    main = main_func(module)

    sums_of_unreduced = 0
    if unreduced.has_unreduced(main):
        sums_of_unreduced = unreduced.lower_unreduced(
            main, meshes, mesh_name, axes, ids, n)
    check_partial_sums(main)
    check_divisible(main, meshes)
    check_pads_gathers_scatters(main, meshes)
    args, _, _ = read_shardings(main, meshes, "arg")
    results, _, _ = read_shardings(main, meshes, "result")
    passmanager.PassManager.parse(local_pipeline).run(module.operation)
    main = main_func(module)
    left = sorted({op_name(o) for o in nested_ops(module.operation)
                   if op_name(o).startswith("sdy.")})
    if left:
        raise ShardyUnsafe(f"sdy ops remain after the pipeline: {left}")
    check_inserted_collectives(main)
    check_batch_calls(main)
    fix_all_reduce_bodies(main, sums_of_unreduced > 0)
    untag_user_collectives(main)
    return PartitionInfo("shardy", "", n, axes, ids, args, results)
