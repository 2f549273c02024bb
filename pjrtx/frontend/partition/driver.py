"""localize(): a multi-device program -> the program each device runs.
It refuses GSPMD programs, inlines calls, runs the partitioner callbacks
(custom_partitioning, inspect_array_sharding), then takes the Shardy path
where the screen lets it and it succeeds, else the global path."""
from __future__ import annotations

import itertools
import os

from jaxlib.mlir import ir

from pjrtx import versions

from pjrtx.frontend.partition.global_path import localize_global
from pjrtx.frontend.partition.partitioner_callbacks import run_partitioner_callbacks
from pjrtx.frontend.partition.shardy_path import localize_shardy, screen
from pjrtx.frontend.partition.sharding import (
    PartitionInfo, ShardyUnsafe, mesh_info, meshes_by_name, sdy,
)
from pjrtx.frontend.partition.walk import attr_names, inline_calls, main_func, nested_ops


def localize(module, num_partitions: int, *, force: str | None = None,
             open_params=()) -> PartitionInfo:
    """Rewrites `module` (an ir.Module, inside its context) in place into the
    program each of `num_partitions` devices runs, and says how.

    `open_params` (allow_spmd_sharding_propagation_to_parameters) names the
    unannotated arguments whose sharding propagation may choose; the others
    stay replicated.

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
    main = main_func(module)
    for o in itertools.chain([main], nested_ops(main)):
        if "mhlo.sharding" in o.attributes and "replicated" not in str(o.attributes["mhlo.sharding"]):
            raise ValueError("pjrtx: GSPMD (mhlo.sharding) programs are not supported; "
                             "keep jax_use_shardy_partitioner on")
    for key in ("arg_attrs", "res_attrs"):
        if key in main.attributes and "mhlo.sharding" in str(main.attributes[key]) \
                and "{devices=" in str(main.attributes[key]):
            raise ValueError("pjrtx: GSPMD (mhlo.sharding) programs are not supported; "
                             "keep jax_use_shardy_partitioner on")
    meshes = meshes_by_name(module) if sdy is not None else {}
    inline_calls(module)
    main = main_func(module)
    # Python callbacks XLA's SPMD partitioner would make (custom_partitioning,
    # inspect_array_sharding).
    if run_partitioner_callbacks(module, n):
        main = main_func(module)

    if force == "global":
        return localize_global(module, n, meshes, "forced")
    if not meshes:
        return localize_global(module, n, meshes, "no sdy.mesh: every value is replicated")
    if versions.shardy().localize is None and force != "shardy":
        return localize_global(module, n, meshes,
                               f"jaxlib {versions.installed_jax()} has no verified Shardy "
                               "localiser (pjrtx/versions.py)")
    if force != "shardy":
        axis_names = {a for m in meshes.values() for a, _ in mesh_info(m, n)[0]}
        outside, inside = screen(main, axis_names)
        if inside:
            return localize_global(module, n, meshes,
                                   f"{inside[0]} inside a partially manual shard_map region "
                                   "is not on the Shardy allow-list")
        if outside:
            return localize_global(module, n, meshes,
                                   f"{outside[0]} is not on the Shardy allow-list")
    # Shardy runs on a copy: a failing pass leaves its module half rewritten.
    work = ir.Module.parse(str(module))
    try:
        info = localize_shardy(work, n, meshes_by_name(work), open_params)
    except (ShardyUnsafe, ir.MLIRError) as e:
        module_meshes = meshes_by_name(module)
        return localize_global(module, n, module_meshes, f"Shardy failed: {str(e)[:500]}")
    _replace_body(module, work)
    return info


def _replace_body(module, work):
    """`module` takes `work`'s ops and attributes (its own sdy.* attributes dropped)."""
    for o in list(module.body.operations):
        o.operation.erase()
    for o in work.body.operations:
        o.operation.clone(ip=ir.InsertionPoint(module.body))
    for a in attr_names(module.operation):
        if a.startswith("sdy."):
            del module.operation.attributes[a]
    for a in attr_names(work.operation):
        module.operation.attributes[a] = work.operation.attributes[a]
