"""Memory kinds: the device's memories ("device", "pinned_host",
"unpinned_host") as XLA:CPU offers them, device_put between them, jit
results placed by out_shardings or by device_put inside the program (the
annotate_device_placement custom call), and host offloading. XLA:CPU is the
oracle for every kind JAX reports and every value."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.ad_checkpoint import checkpoint_name
from jax.sharding import SingleDeviceSharding

from oracle import run_mlir_on

KINDS = ["device", "pinned_host", "unpinned_host"]


def on(device, kind):
    return SingleDeviceSharding(device, memory_kind=kind)


def test_memories_match_xla_cpu(pjrtx_device, cpu_device):
    ours = pjrtx_device.addressable_memories()
    want = cpu_device.addressable_memories()
    assert [m.kind for m in ours] == [m.kind for m in want] == KINDS  # zip below drops none
    assert pjrtx_device.default_memory().kind == cpu_device.default_memory().kind == "device"
    assert pjrtx_device.default_memory() == ours[0]
    assert len({str(m) for m in ours}) == len(ours)  # distinct memories
    for kind, m in zip(KINDS, ours):
        assert pjrtx_device.memory(kind) == m
        assert m.addressable_by_devices() == [pjrtx_device]
        assert kind in str(m) or kind in repr(m)
    with pytest.raises(Exception, match="hbm"):
        pjrtx_device.memory("hbm")


@pytest.mark.parametrize("kind", KINDS)
def test_device_put_to_each_kind(kind, pjrtx_device, cpu_device):
    # A strided host view (every other column) exercises the byte_strides path.
    host = np.arange(48, dtype=np.float32).reshape(6, 8)[:, ::2]
    got = jax.device_put(host, on(pjrtx_device, kind))
    want = jax.device_put(host, on(cpu_device, kind))
    assert got.sharding.memory_kind == want.sharding.memory_kind == kind
    assert got.sharding.device_set == {pjrtx_device}
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


@pytest.mark.parametrize("src", KINDS)
@pytest.mark.parametrize("dst", KINDS)
def test_device_put_between_kinds(src, dst, pjrtx_device, cpu_device):
    host = (np.arange(12, dtype=np.int32) * 7 - 40).reshape(3, 4)
    got = jax.device_put(jax.device_put(host, on(pjrtx_device, src)), on(pjrtx_device, dst))
    want = jax.device_put(jax.device_put(host, on(cpu_device, src)), on(cpu_device, dst))
    assert got.sharding.memory_kind == want.sharding.memory_kind == dst
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def _jit_on(device, f, *args, **jit_kwargs):
    placed = [jax.device_put(a, on(device, k)) for a, k in args]
    return jax.jit(f, **jit_kwargs)(*placed)


def _assert_same_placed(got, want):
    got_l, want_l = jax.tree.leaves(got), jax.tree.leaves(want)
    assert len(got_l) == len(want_l)
    for g, w in zip(got_l, want_l):
        assert g.sharding.memory_kind == w.sharding.memory_kind
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(np.asarray(g), np.asarray(w))


@pytest.mark.parametrize("out_kind", KINDS)
def test_jit_out_shardings_place_results(out_kind, pjrtx_device, cpu_device):
    x = np.linspace(-3, 3, 10, dtype=np.float32)

    def f(a):
        return a * 2 + 1, a - 1

    def run(dev):
        return _jit_on(dev, f, (x, "device"), out_shardings=(on(dev, out_kind), on(dev, "device")))

    got, want = run(pjrtx_device), run(cpu_device)
    assert got[0].sharding.memory_kind == out_kind
    _assert_same_placed(got, want)
    # A result placed by out_shardings goes through the custom call JAX
    # emits for XLA's transfer (identity on unified memory).
    lowered = jax.jit(f, out_shardings=(on(pjrtx_device, out_kind), on(pjrtx_device, "device")))
    text = lowered.lower(jax.device_put(x, pjrtx_device)).as_text()
    # (all-default kinds emit none)
    assert text.count("annotate_device_placement") == (0 if out_kind == "device" else 2)


def test_executable_reports_output_memory_kinds(pjrtx_device, cpu_device):
    x = np.ones(4, np.float32)

    def kinds(dev):
        f = jax.jit(lambda a: (a + 1, a * 3, a),
                    out_shardings=(on(dev, "pinned_host"), on(dev, "device"),
                                   on(dev, "unpinned_host")))
        return f.lower(jax.device_put(x, dev)).compile().runtime_executable() \
            .get_output_memory_kinds()

    assert kinds(pjrtx_device) == kinds(cpu_device)
    assert kinds(pjrtx_device) == [["pinned_host", "device", "unpinned_host"]]


def test_pinned_host_argument(pjrtx_device, cpu_device):
    # An argument living in host memory; the program reads it on the device
    # side after moving it there, as JAX's host offloading does.
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    y = np.full((2, 3), 0.5, np.float32)

    def f(a, b):
        return jax.device_put(a, jax.memory.Space.Device) * b

    def run(dev):
        return _jit_on(dev, f, (x, "pinned_host"), (y, "device"),
                       in_shardings=(on(dev, "pinned_host"), on(dev, "device")),
                       out_shardings=on(dev, "device"))

    _assert_same_placed(run(pjrtx_device), run(cpu_device))


def test_offload_inside_jit(pjrtx_device, cpu_device):
    # device_put to a memory space inside a program: the result that JAX
    # propagates as host memory must land there, the one moved back on the
    # device.
    x = np.linspace(0, 1, 8, dtype=np.float32)

    def f(a):
        h = jax.device_put(jnp.sin(a), jax.memory.Space.Host)
        d = jax.device_put(h, jax.memory.Space.Device)
        return h, d * 2

    got, want = _jit_on(pjrtx_device, f, (x, "device")), _jit_on(cpu_device, f, (x, "device"))
    assert got[0].sharding.memory_kind == "pinned_host"
    _assert_same_placed(got, want)


def test_remat_offload_policy_gradient(pjrtx_device, cpu_device):
    # jax.checkpoint with an offload policy saves residuals to pinned_host
    # between the forward and backward pass of one program.
    policy = jax.checkpoint_policies.save_and_offload_only_these_names(
        names_which_can_be_saved=[], names_which_can_be_offloaded=["y"],
        offload_src="device", offload_dst="pinned_host")

    def loss(w, x):
        def layer(w, x):
            y = checkpoint_name(jnp.tanh(x @ w), "y")
            return jnp.sum(y * y)
        return jax.checkpoint(layer, policy=policy)(w, x)

    w = (np.arange(12, dtype=np.float32).reshape(4, 3) - 6) / 10
    x = (np.arange(8, dtype=np.float32).reshape(2, 4) - 3) / 5
    g = jax.grad(loss)
    got = _jit_on(pjrtx_device, g, (w, "device"), (x, "device"))
    want = _jit_on(cpu_device, g, (w, "device"), (x, "device"))
    assert got.sharding.memory_kind == want.sharding.memory_kind
    # tanh and a 4-term dot: a few ulps of the largest term per element.
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=0,
                               atol=16 * np.finfo(np.float32).eps * np.abs(np.asarray(want)).max())


def test_unknown_memory_kind_in_program_is_a_compile_error(pjrtx_device):
    text = """
    module @m {
      func.func public @main(%a: tensor<2xf32>) -> (tensor<2xf32> {mhlo.memory_kind = "hbm"}) {
        return %a : tensor<2xf32>
      }
    }"""
    with pytest.raises(Exception, match="no memory of kind 'hbm'"):
        run_mlir_on(pjrtx_device, text, np.ones(2, np.float32))


def test_memory_kind_attributes_from_stablehlo(pjrtx_device, cpu_device):
    # A hand-written program whose result names pinned_host: both back ends
    # report the kind, and the buffer JAX gets back is in that memory.
    text = """
    module @m {
      func.func public @main(%a: tensor<3xf32> {mhlo.memory_kind = "device"})
          -> (tensor<3xf32> {mhlo.memory_kind = "pinned_host"}, tensor<3xf32>) {
        %0 = stablehlo.add %a, %a : tensor<3xf32>
        %1 = stablehlo.custom_call @annotate_device_placement(%0) {has_side_effect = true,
               mhlo.frontend_attributes = {_xla_buffer_placement = "pinned_host"}}
               : (tensor<3xf32>) -> tensor<3xf32>
        return %1, %a : tensor<3xf32>, tensor<3xf32>
      }
    }"""
    from jax._src import compiler
    from jax._src.interpreters import mlir as jax_mlir
    from jax._src.lib import xla_client as xc
    from jaxlib.mlir import ir

    x = np.array([1.5, -2.0, 0.25], np.float32)
    outs = {}
    for dev in (pjrtx_device, cpu_device):
        with jax_mlir.make_ir_context():
            module = ir.Module.parse(text)
            exe = compiler.backend_compile_and_load(dev.client, module, xc.DeviceList((dev,)),
                                                    xc.CompileOptions(), [])
        assert exe.get_output_memory_kinds() == [["pinned_host", "device"]]
        res = exe.execute([jax.device_put(x, dev)])
        outs[dev.platform] = [np.asarray(r) for r in res]
    assert len(outs["pjrtx"]) == len(outs["cpu"]) == 2
    for g, w in zip(outs["pjrtx"], outs["cpu"]):
        np.testing.assert_array_equal(g, w)
