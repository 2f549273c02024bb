"""Multi-device programs -> one per-device (SPMD) program.

JAX sends a program for N > 1 devices as one StableHLO module with
``mhlo.num_partitions = N``, an ``sdy.mesh`` and either ``sdy.sharding``
annotations over global shapes (jit) or ``sdy.manual_computation`` regions
with local shapes and explicit collectives (shard_map, pmap). The runtime runs
one program on each device, with ``stablehlo.partition_id`` = the device's
position in the device assignment, and collectives whose ``replica_groups`` /
``source_target_pairs`` hold those partition indices. :func:`localize`
rewrites the module into that per-device program, in place, in one of two
ways:

``shardy``
    Shardy's own passes (propagation, explicit reshards, global-to-local)
    partition the program. jaxlib 0.10.2's converter aborts the process on
    some ops (an LLVM CHECK: reduce_window or gather over a sharded dim),
    fails on others (while, dynamic_slice) and silently builds an all_reduce
    with an add body after a max/min reduce, so the path is taken only when
    every op is on :data:`shardy_path.SHARDY_SAFE_OPS` (verified against
    XLA:CPU in tests/test_partition.py) and the all_reduce bodies are
    repaired after.
``global``
    Every device runs the whole global program: main all-gathers its
    arguments' shards, runs the original body, and slices each result down to
    its own shard with ``partition_id``. Always correct; costs N times the
    compute and a gather of every sharded argument.

Shardings are described in :class:`ValueSharding` / :class:`PartitionInfo` so
the runtime can report parameter and output shardings back to JAX.

The modules, each importing only those listed before it:

- ``walk``: walking and editing the MLIR (ops, funcs, inlining calls);
- ``sharding``: ValueSharding, PartitionInfo, mesh coordinates, reading
  Shardy's shardings, and ShardyUnsafe;
- ``checks``, ``batch_calls``, ``unreduced``: steps of the Shardy path
  (checks after Shardy's export, batched linalg custom calls, unreduced
  values);
- ``partitioner_callbacks``: custom_partitioning and
  inspect_array_sharding, run before either path;
- ``shardy_path``, ``global_path``: the two ways;
- ``driver``: :func:`localize`, which picks one.
"""
from pjrtx.frontend.partition.driver import localize
from pjrtx.frontend.partition.sharding import (
    PartitionInfo, ShardyUnsafe, ValueSharding, op_sharding_proto,
)

__all__ = ["PartitionInfo", "ShardyUnsafe", "ValueSharding", "localize", "op_sharding_proto"]
