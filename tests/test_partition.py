"""pjrtx.frontend.partition: multi-device programs -> per-device programs.

The end-to-end cases run tests/partition_harness.py in a subprocess: it needs
8 XLA:CPU host devices set before JAX starts (this process's JAX belongs to
conftest), and it compares every device's output with jax.jit's shards. Only
the screened path (what localize picks) and the forced global path run here:
an unscreened Shardy run can abort the process (LLVM CHECK).
No test here needs the pjrtx C++ extension.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
HARNESS = os.path.join(HERE, "partition_harness.py")

# case -> the path localize must take ("error": it refuses with a ValueError)
EXPECTED = {
    "reduce_sum": "shardy", "reduce_sum_unspecified_out": "shardy",
    "matmul_sharded_contraction": "shardy", "matmul_batch": "shardy", "matmul_T": "shardy",
    "softmax": "shardy", "max_sharded_dim": "shardy", "min_1d": "shardy",
    "uneven_divisible": "shardy", "permuted_mesh": "shardy", "replicated_only": "shardy",
    "uncommitted_arg": "shardy", "sort": "shardy", "concat": "shardy",
    "transpose_reshape": "shardy", "scatter_add": "shardy", "conv_batch": "shardy",
    "bool_int": "shardy", "mlp_grad_step": "shardy",
    # Shardy would insert collective_permute + all_to_all (wrong blocks on 2x4)
    "reshard": "global", "mesh2d_elementwise": "global", "two_axes_one_dim": "global",
    "sharding_constraint": "global",
    # screened out: Shardy aborts, fails or answers wrong on these
    "argmax": "global", "cumsum_sharded_dim": "global", "gather": "global",
    "fori_loop": "global", "dynamic_slice": "global",
    # shard_map / pmap bodies always go through Shardy
    "shard_map_psum": "shardy", "shard_map_all_gather": "shardy", "shard_map_ppermute": "shardy",
    "shard_map_pmax_fori": "shardy", "shard_map_psum_scatter_all_to_all": "shardy",
    "pmap": "shardy",
    "shard_map_then_unsafe": "global",
    # batch-sharded gather/scatter/pad (batched linalg's jvp/vjp, qr) are
    # checked after Shardy's export; a pad of a sharded dim is not taken
    "gather_batch_diagonal": "shardy", "scatter_set_batch": "shardy",
    "gather_batching_dims": "shardy", "pad_unsharded_dim": "shardy", "pad_sharded_dim": "global",
    # unreduced values (partition/unreduced.py), each device's partial value
    # compared with the one XLA leaves on that device
    "unreduced_einsum": "shardy", "unreduced_reduce_sum": "shardy",
    "replicated_to_unreduced": "shardy", "sharded_to_unreduced": "shardy",
    "unreduced_segment_sum": "shardy", "reduced_fwd_unreduced_bwd": "shardy",
    # Shardy exports these with a second reduction of the summed value
    "unreduced_arg_to_replicated": "global", "unreduced_arg_to_sharded": "global",
    # jax.experimental.custom_partitioning: the user's partition callback
    # (partition/partitioner_callbacks.py), its body a manual computation on either path
    "custom_partitioning": "shardy",
}


def _run_harness(*args) -> dict:
    env = dict(os.environ)
    env.pop("XLA_FLAGS", None)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, HARNESS, *args], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=1200)
    recs = {}
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            rec = json.loads(line)
            recs[rec["case"]] = rec
    if proc.returncode != 0:
        pytest.fail(f"harness exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    return recs


@pytest.fixture(scope="module")
def screened():
    return _run_harness(*EXPECTED)


@pytest.fixture(scope="module")
def forced_global():
    # shard_map and pmap bodies run per device inside the global program too
    return _run_harness("--force", "global", *sorted(EXPECTED))


def test_imports_without_extension():
    code = ("import sys; import pjrtx.frontend.partition, pjrtx.frontend.parse; "
            "assert 'pjrtx._pjrtx' not in sys.modules, sorted(sys.modules)")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT,
                   env=dict(os.environ, PYTHONPATH=ROOT))


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_screened_path(screened, case):
    rec = screened[case]
    assert rec["path"] == EXPECTED[case], rec
    if rec["path"] == "error":
        assert "outside the manual computation" in rec["error"], rec
        return
    assert rec["ok"], rec


@pytest.mark.parametrize("case", sorted(EXPECTED))
def test_global_path(forced_global, case):
    rec = forced_global[case]
    assert rec["path"] == "global" and rec["ok"], rec


# ---------------------------------------------------------------- unit level
from pjrtx.frontend import partition  # noqa: E402
from pjrtx.frontend.partition import global_path  # noqa: E402
from pjrtx.frontend.parse import parse_module  # noqa: E402

MAX_MODULE = """
module @m attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["d"=4]>
  func.func public @main(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"d"}]>}) -> (tensor<f32>) {
    %cst = stablehlo.constant dense<0xFF800000> : tensor<f32>
    %0 = stablehlo.reduce(%arg0 init: %cst) applies stablehlo.maximum across dimensions = [0] : (tensor<8xf32>, tensor<f32>) -> tensor<f32>
    return %0 : tensor<f32>
  }
}
"""


def test_max_reduce_gets_a_max_all_reduce():
    with parse_module(MAX_MODULE) as m:
        info = partition.localize(m, 4)
        text = str(m)
    assert info.path == "shardy" and info.arg_shardings[0].dims == (("d",),)
    assert "tensor<2xf32>" in text and "stablehlo.all_reduce" in text
    body = text.split("stablehlo.all_reduce", 1)[1]
    assert "stablehlo.maximum" in body.split("stablehlo.return")[0], text
    assert "sdy." not in text and "pjrtx." not in text


def test_global_path_gathers_and_slices():
    with parse_module(MAX_MODULE) as m:
        info = partition.localize(m, 4, force="global")
        text = str(m)
    assert info.path == "global" and info.reason == "forced"
    assert "stablehlo.all_gather" in text and "replica_groups = dense<[[0, 1, 2, 3]]>" in text
    assert "use_global_device_ids" in text and "func.call" not in text
    assert "func.func public @main(%arg0: tensor<2xf32>) -> tensor<f32>" in text


def test_groups_for_dim_respects_order_sub_axes_and_device_ids():
    axes = (("x", 2), ("y", 4))
    ids = tuple(range(8))
    assert global_path.groups_for_dim(("x",), axes, ids) == [[0, 4], [1, 5], [2, 6], [3, 7]]
    assert global_path.groups_for_dim(("y", "x"), axes, ids) == [[0, 4, 1, 5, 2, 6, 3, 7]]
    # the major half of y: "y":(2)2 has stride 2
    assert global_path.groups_for_dim(("y:(2)2",), axes, ids) == [[0, 2], [1, 3], [4, 6], [5, 7]]
    # mesh position -> partition via device_ids
    assert global_path.groups_for_dim(("x",), (("x", 2),), (1, 0)) == [[1, 0]]


def test_hlo_sharding_text():
    info = partition.PartitionInfo("global", "", 8, (("x", 2), ("y", 4)), tuple(range(8)), [], [])
    vs = partition.ValueSharding((("y",), ()))
    assert info.hlo_sharding(vs, 2) == "{devices=[4,1,2]0,4,1,5,2,6,3,7 last_tile_dim_replicate}"
    assert info.hlo_sharding(partition.ValueSharding((("x",), ("y",))), 2) == "{devices=[2,4]0,1,2,3,4,5,6,7}"
    assert info.hlo_sharding(None, 2) == "{replicated}"


def test_no_mesh_is_replicated():
    text = MAX_MODULE.replace('  sdy.mesh @mesh = <["d"=4]>\n', "").replace(
        ' {sdy.sharding = #sdy.sharding<@mesh, [{"d"}]>}', "")
    with parse_module(text) as m:
        info = partition.localize(m, 4)
        out = str(m)
    assert info.path == "global" and info.arg_shardings == [None] and info.result_shardings == [None]
    assert "tensor<8xf32>" in out


def test_screen_refuses_cumsum_before_shardy():
    text = """
module @m attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["d"=4]>
  func.func public @main(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"d"}]>}) -> (tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"d"}]>}) {
    %cst = stablehlo.constant dense<0.0> : tensor<f32>
    %0 = "stablehlo.reduce_window"(%arg0, %cst) <{padding = dense<[[7, 0]]> : tensor<1x2xi64>, window_dimensions = array<i64: 8>}> ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = stablehlo.add %a, %b : tensor<f32>
      stablehlo.return %s : tensor<f32>
    }) : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
    return %0 : tensor<8xf32>
  }
}
"""
    with parse_module(text) as m:
        info = partition.localize(m, 4)
        out = str(m)
    assert info.path == "global" and "reduce_window" in info.reason
    assert "func.func public @main(%arg0: tensor<2xf32>) -> tensor<2xf32>" in out
    assert "stablehlo.partition_id" in out and "sdy" not in out


BATCH_CALL_MODULE = """
module @m attributes {mhlo.num_partitions = 2 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["i"=2]>
  func.func public @main(%arg0: tensor<8x6x6xf32> {sdy.sharding = #sdy.sharding<@mesh, [SPEC]>}) -> (tensor<8x6x6xf32>, tensor<8x5xf32>) {
    %0:2 = stablehlo.custom_call @pjrtx_hessenberg(%arg0) {api_version = 2 : i32, backend_config = ""} : (tensor<8x6x6xf32>) -> (tensor<8x6x6xf32>, tensor<8x5xf32>)
    return %0#0, %0#1 : tensor<8x6x6xf32>, tensor<8x5xf32>
  }
}
"""


def test_batched_linalg_call_partitions_along_its_batch():
    # XLA partitions its linalg custom calls along their batch dimensions;
    # pjrtx's get a Shardy rule: no collective for a sharded batch ...
    with parse_module(BATCH_CALL_MODULE.replace("SPEC", '{"i"}, {}, {}')) as m:
        info = partition.localize(m, 2)
        text = str(m)
    assert info.path == "shardy", info.reason
    assert "(tensor<4x6x6xf32>) -> (tensor<4x6x6xf32>, tensor<4x5xf32>)" in text, text
    assert "all_gather" not in text and "sdy." not in text
    # ... and an all_gather where a matrix dimension is sharded
    with parse_module(BATCH_CALL_MODULE.replace("SPEC", '{}, {"i"}, {}')) as m:
        info = partition.localize(m, 2)
        text = str(m)
    assert info.path == "shardy", info.reason
    assert "stablehlo.all_gather" in text and "(tensor<8x6x6xf32>) -> (" in text, text


def test_callback_on_a_maximal_mesh_runs_on_its_device_only():
    text = """
module @m attributes {mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32} {
  sdy.mesh @mesh = <["d"=4]>
  sdy.mesh @maximal_mesh_2 = <[], device_ids=[2]>
  func.func public @main(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"d"}]>}) -> (tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"d"}]>}) {
    %0 = stablehlo.custom_call @pjrtx_callback(%arg0) {api_version = 2 : i32, backend_config = "7", has_side_effect = true, sdy.sharding = #sdy.sharding_per_value<[<@maximal_mesh_2, []>]>} : (tensor<8xf32>) -> tensor<8xf32>
    return %0 : tensor<8xf32>
  }
}
"""
    with parse_module(text) as m:
        info = partition.localize(m, 4)
        out = str(m)
    assert info.path == "global"
    # the call sits in `if partition_id == 2`; its result reaches every
    # device through an all_gather sliced at 2
    assert '"stablehlo.if"' in out and "dense<2> : tensor<ui32>" in out, out
    assert out.count("stablehlo.custom_call") == 1 and "stablehlo.slice" in out
    assert "sdy." not in out


def test_as_text_spells_collectives_as_hlo_does():
    from pjrtx.jax_plugin import hlo_spelled_collectives

    text = "%1 = stablehlo.all_gather(%0) {}\n%2 = stablehlo.all_reduce(%1)\n%3 = stablehlo.add(%2, %2)"
    assert hlo_spelled_collectives(text) == "%1 = all-gather(%0) {}\n%2 = all-reduce(%1)\n%3 = stablehlo.add(%2, %2)"
