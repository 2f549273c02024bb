"""The frontend (StableHLO -> plan) on hand-written MLIR: text, plain
bytecode and portable artifacts; constants of every dtype; clear errors for
what the plan cannot hold. End to end, jnp constants of every dtype must run
on pjrtx as on XLA:CPU."""
import io
import re

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jaxlib.mlir.dialects import stablehlo

from pjrtx import frontend, versions
from pjrtx.frontend import parse
from oracle import assert_same

CALL_AND_REDUCE = """
module @calls {
  func.func private @twice(%a: tensor<3xf32>) -> tensor<3xf32> {
    %0 = stablehlo.add %a, %a : tensor<3xf32>
    return %0 : tensor<3xf32>
  }
  func.func public @main(%x: tensor<3xf32>) -> (tensor<f32>, tensor<3xf32>) {
    %0 = func.call @twice(%x) : (tensor<3xf32>) -> tensor<3xf32>
    %c = stablehlo.constant dense<0.0> : tensor<f32>
    %1 = stablehlo.reduce(%0 init: %c) across dimensions = [0]
        : (tensor<3xf32>, tensor<f32>) -> tensor<f32>
      reducer(%p: tensor<f32>, %q: tensor<f32>) {
        %s = stablehlo.maximum %p, %q : tensor<f32>
        stablehlo.return %s : tensor<f32>
      }
    return %1, %0 : tensor<f32>, tensor<3xf32>
  }
}
"""


def build(text, fmt="mlir"):
    code = text.encode() if isinstance(text, str) else text
    return frontend.build_plan(code, fmt, True)


def const_module(value, ty):
    return (f"func.func @main() -> {ty} {{\n"
            f"  %0 = stablehlo.constant {value} : {ty}\n"
            f"  return %0 : {ty}\n}}\n")


def const_text(text):
    """The printed value of the plan's only constant."""
    plan, _ = build(text)
    m = re.search(r"value=dense<(\S+) (splat )?(.*)>\}", plan.text())
    assert m, plan.text()
    return m.group(1), bool(m.group(2)), m.group(3)


# ---- structure -----------------------------------------------------------------

def test_private_function_call_and_reduce_region():
    plan, text = build(CALL_AND_REDUCE)
    assert plan.name == "calls"
    assert "call @twice(" in text  # the module text comes back for dumps
    t = plan.text()
    assert "func private @twice(" in t
    assert re.search(r"func public @main\(%\d+: f32\[3\]\) -> \(f32\[\], f32\[3\]\) entry", t)
    assert 'func.call(%' in t and 'callee="twice"' in t
    # the reduce body is a nested region with two scalar parameters
    assert re.search(r"stablehlo\.reduce\(%\d+, %\d+\) \{dimensions=\[0\]\}", t)
    assert re.search(r"\^\(%\d+: f32\[\], %\d+: f32\[\]\) \{\n\s+%\d+ = stablehlo\.maximum", t)
    # add, call, constant, reduce, maximum (the region's op counts too)
    assert plan.num_instructions == 5
    # every op carries its source location for error messages
    assert 'loc("-":' in t


def test_entry_is_main_among_publics():
    text = """
    func.func public @other(%a: tensor<f32>) -> tensor<f32> { return %a : tensor<f32> }
    func.func public @main(%a: tensor<i32>) -> tensor<i32> { return %a : tensor<i32> }
    """
    t = build(text)[0].text()
    assert re.search(r"func public @main\(%\d+: s32\[\]\) -> \(s32\[\]\) entry", t)
    assert not re.search(r"@other\(.*entry", t)


def test_no_entry_is_an_error():
    text = """
    func.func public @a(%x: tensor<f32>) -> tensor<f32> { return %x : tensor<f32> }
    func.func public @b(%x: tensor<f32>) -> tensor<f32> { return %x : tensor<f32> }
    """
    with pytest.raises(frontend.FrontendError, match="no @main"):
        build(text)


def test_plain_bytecode_and_portable_artifact():
    want = build(CALL_AND_REDUCE)[0].text()
    with parse.parse_module(CALL_AND_REDUCE.encode()) as module:
        buf = io.BytesIO()
        module.operation.write_bytecode(buf)
    plan, _ = build(buf.getvalue())
    assert plan.text() == want
    # What jaxlib sends: a VHLO portable artifact at a given StableHLO version
    # (jaxlib's own _jax.mlir.serialize_portable_artifact does the same);
    # 1.13.7 is jaxlib 0.10.2's target without the plugin attribute, and
    # jaxlib 0.8.0's StableHLO only reaches 1.13.1.
    current = stablehlo.get_current_version()
    older = min("1.13.7", current, key=versions.parse)
    for version in [current, older]:
        artifact = stablehlo.serialize_portable_artifact_str(CALL_AND_REDUCE, version)
        assert artifact.startswith(b"ML\xefR")
        plan, text = build(artifact)
        assert plan.name == "calls"
        assert re.sub(r" loc\(.*\)", "", plan.text()) == re.sub(r" loc\(.*\)", "", want)


def test_text_as_str_and_unsupported_formats():
    plan, text = frontend.build_plan(CALL_AND_REDUCE.encode(), "mlir", False)
    assert text is None and plan.num_instructions == 5
    with pytest.raises(ValueError, match="HLO programs are not supported"):
        build(CALL_AND_REDUCE, "hlo_with_config")
    with pytest.raises(ValueError, match="unsupported program format 'xla'"):
        build(CALL_AND_REDUCE, "xla")
    with pytest.raises(ValueError, match="cannot parse the program as MLIR"):
        build("this is not MLIR")


# ---- constants -----------------------------------------------------------------

@pytest.mark.parametrize("value,ty,want", [
    ("dense<[true, false, true]>", "tensor<3xi1>", "[true,false,true]"),
    ("dense<true>", "tensor<2x2xi1>", "true"),
    ("dense<[-128, 127]>", "tensor<2xi8>", "[-128,127]"),
    ("dense<[[1, -2], [3, 4]]>", "tensor<2x2xi16>", "[1,-2,3,4]"),
    ("dense<-7>", "tensor<5xi32>", "-7"),
    ("dense<[-9223372036854775808, 9223372036854775807]>", "tensor<2xi64>",
     "[-9223372036854775808,9223372036854775807]"),
    ("dense<[0, 255]>", "tensor<2xui8>", "[0,255]"),
    ("dense<65535>", "tensor<ui16>", "[65535]"),
    ("dense<[4294967295, 1]>", "tensor<2xui32>", "[4294967295,1]"),
    ("dense<18446744073709551615>", "tensor<3xui64>", "18446744073709551615"),
    ("dense<[0x7C00, -0.0, 1.5]>", "tensor<3xf16>", "[inf,-0,1.5]"),
    ("dense<[1.5, -2.0, 0x7FC0]>", "tensor<3xbf16>", "[1.5,-2,nan]"),
    ("dense<0.1>", "tensor<4xbf16>", "0.100097656"),
    ("dense<[0.1, 0xFF800000]>", "tensor<2xf32>", "[0.100000001,-inf]"),
    ("dense<[0.1, 1.0e300]>", "tensor<2xf64>", "[0.10000000000000001,1.0000000000000001e+300]"),
    ("dense<[(1.0, 2.0), (-3.0, 0.5)]>", "tensor<2xcomplex<f32>>", "[(1,2),(-3,0.5)]"),
    ("dense<(1.0, -1.0)>", "tensor<3xcomplex<f32>>", "(1,-1)"),
    ("dense<[(0x7F800000, 0xFF800000)]>", "tensor<1xcomplex<f32>>", "[(inf,-inf)]"),
    ("dense<(0.5, 0.25)>", "tensor<complex<f64>>", "[(0.5,0.25)]"),
])
def test_small_constants(value, ty, want):
    _, splat, got = const_text(const_module(value, ty))
    assert got == want
    assert splat == (not want.startswith("["))


@pytest.mark.parametrize("dtype,mlir", [
    (np.float32, "f32"), (ml_dtypes.bfloat16, "bf16"), (np.float16, "f16"),
    (np.complex64, "complex<f32>"), (np.int32, "i32"), (np.uint8, "ui8"), (np.bool_, "i1"),
    (np.int64, "i64"),
])
def test_large_constants_printed_as_hex(dtype, mlir):
    # Over 100 elements MLIR prints dense elements as one hex string: a
    # different path in the frontend than the decimal literals above.
    n = 150
    dt = np.dtype(dtype)
    if dt.kind == "c":
        vals = (np.arange(n) * 0.5 - 7 + 1j * np.arange(n)[::-1]).astype(dt)
        body = ", ".join(f"({v.real!r}, {v.imag!r})" for v in vals.tolist())
    elif dt == np.bool_:
        vals = np.arange(n) % 3 == 0
        body = ", ".join("true" if v else "false" for v in vals)
    elif dt.kind in "iu":
        vals = (np.arange(n) * 7 - (0 if dt.kind == "u" else 300)).astype(dt)
        body = ", ".join(str(int(v)) for v in vals)
    else:
        vals = np.linspace(-3, 3, n).astype(dt)
        body = ", ".join(repr(float(v)) for v in vals)
    ty = f"tensor<{n}x{mlir}>"
    text = const_module(f"dense<[{body}]>", ty)
    with parse.parse_module(text.encode()) as m:
        op = m.body.operations[0].regions[0].blocks[0].operations[0]
        assert 'dense<"0x' in op.get_asm(large_elements_limit=None), "no longer printed as hex"
    _, splat, got = const_text(text)
    assert not splat
    items = re.findall(r"\([^)]*\)|[^,\[\]]+", got)
    assert len(items) == 8 + 1 + 2 and items[8] == "..."

    def fmt(v):
        if dt.kind == "c":
            return f"({float(v.real):.9g},{float(v.imag):.9g})"
        if dt == np.bool_:
            return "true" if v else "false"
        if dt.kind in "iu":
            return str(int(v))
        return f"{float(v):.9g}"

    assert items[:8] == [fmt(v) for v in vals[:8]]
    assert items[9:] == [fmt(v) for v in vals[-2:]]


def test_constant_of_unsupported_element_type_is_clear():
    # 6-bit floats have no plan type (2- and 4-bit integers do, and the f8
    # and f4 types: test_ops_f8.py).
    text = """func.func @main() -> tensor<2xf32> {
  %0 = stablehlo.constant dense<1.0> : tensor<2xf6E2M3FN>
  %1 = stablehlo.convert %0 : (tensor<2xf6E2M3FN>) -> tensor<2xf32>
  return %1 : tensor<2xf32>
}"""
    with pytest.raises(frontend.FrontendError,
                       match=r"unsupported element type f6E2M3FN .*stablehlo\.constant at loc\("):
        build(text)
    with pytest.raises(frontend.FrontendError,
                       match=r"unsupported element type f6E2M3FN .*signature of @main"):
        build(const_module("dense<1.0>", "tensor<2xf6E2M3FN>"))


# ---- errors --------------------------------------------------------------------

def test_unknown_op_names_op_and_location():
    text = """func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = "foo.bar"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}"""
    with pytest.raises(Exception, match=r"foo\.bar.*loc\(\"-\":2:8\)"):
        build(text)


def test_dynamic_shapes_are_refused():
    text = """func.func @main(%x: tensor<?xf32>) -> tensor<?xf32> {
  return %x : tensor<?xf32>
}"""
    with pytest.raises(frontend.FrontendError, match=r"dynamic shapes are not supported.*tensor<\?xf32>"):
        build(text)
    # inside the body: the error names the op and its location
    text = """func.func @main(%x: tensor<4xf32>, %n: tensor<1xi32>) -> tensor<4xf32> {
  %0 = stablehlo.dynamic_broadcast_in_dim %x, %n, dims = [0] : (tensor<4xf32>, tensor<1xi32>) -> tensor<?xf32>
  return %x : tensor<4xf32>
}"""
    with pytest.raises(frontend.FrontendError, match=r"dynamic shapes are not supported.*"
                       r"stablehlo\.dynamic_broadcast_in_dim at loc\(\"-\":2:8\)"):
        build(text)


def test_tuple_types_are_refused():
    text = """func.func @main(%x: tensor<4xf32>) -> tuple<tensor<4xf32>> {
  %0 = stablehlo.tuple %x : tuple<tensor<4xf32>>
  return %0 : tuple<tensor<4xf32>>
}"""
    with pytest.raises(frontend.FrontendError, match=r"unsupported type tuple<tensor<4xf32>>"):
        build(text)
    text = """func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.tuple %x : tuple<tensor<4xf32>>
  %1 = stablehlo.get_tuple_element %0[0] : (tuple<tensor<4xf32>>) -> tensor<4xf32>
  return %1 : tensor<4xf32>
}"""
    with pytest.raises(frontend.FrontendError,
                       match=r"unsupported type tuple<tensor<4xf32>>.*stablehlo\.tuple at loc\("):
        build(text)


def test_uniform_quantized_types_are_refused():
    text = """func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = stablehlo.uniform_quantize %x : (tensor<4xf32>) -> tensor<4x!quant.uniform<i8:f32, 0.5:3>>
  %1 = stablehlo.uniform_dequantize %0 : (tensor<4x!quant.uniform<i8:f32, 0.5:3>>) -> tensor<4xf32>
  return %1 : tensor<4xf32>
}"""
    with pytest.raises(ValueError, match=r"(?s)uniform quantized types .* not supported.*uniform_quantize"):
        build(text)


def test_multi_block_region_is_refused():
    text = """func.func @main(%x: tensor<f32>) -> tensor<f32> {
  cf.br ^bb1
^bb1:
  return %x : tensor<f32>
}"""
    with pytest.raises(Exception, match=r"@main has 2 blocks"):
        build(text)


# ---- end to end: constants of every dtype through jax.jit ----------------------

@pytest.fixture
def x64():
    with jax.enable_x64(True):
        yield


CONST_DTYPES = [np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
                np.uint32, np.uint64, np.float16, ml_dtypes.bfloat16, np.float32, np.float64,
                np.complex64]


@pytest.mark.parametrize("dtype", CONST_DTYPES, ids=[np.dtype(d).name for d in CONST_DTYPES])
def test_jit_constants_every_dtype(dtype, x64):
    dt = np.dtype(dtype)
    if dt == np.bool_:
        small, big = np.array([True, False, True]), np.arange(130) % 3 == 0
    elif dt.kind in "iu":
        info = np.iinfo(dt)
        small = np.array([info.min, info.max, 1], dtype=dt)
        big = (np.arange(130) * 3).astype(dt)
    elif dt.kind == "c":
        small = np.array([1 + 2j, complex(np.inf, -1), -0.0], dtype=dt)
        big = (np.arange(130) - 1j * np.arange(130)).astype(dt)
    else:
        small = np.array([np.inf, -0.0, 0.1], dtype=dt)
        big = np.linspace(-2, 2, 130).astype(dt)
    splat = np.full((2, 3), small[1], dtype=dt)

    def f(x):
        # x keeps the constants from being folded into the result by JAX
        return (jnp.asarray(small) + x[:3] * 0, jnp.asarray(big), jnp.asarray(splat),
                jnp.asarray(small[2]))

    got = assert_same(f, np.zeros(3, dt))
    np.testing.assert_array_equal(got[1], big)


def test_zero_size_constant_is_not_a_splat():
    # MLIR reports an empty dense attribute as a splat; it carries no bytes.
    import jax.numpy as jnp
    from oracle import assert_same

    assert_same(lambda x: x + jnp.zeros((0, 4), jnp.int32).sum(), np.int32(3))
    assert_same(lambda: jnp.array(np.zeros((0, 4), np.int32)) + 1)


@pytest.mark.skipif(not versions.jax_at_least(versions.STABLEHLO_ASYNC),
                    reason="this jaxlib's StableHLO has no async_start or !stablehlo.future "
                           "(added in 0.10.0): no program it sends holds one")
def test_async_future_outside_its_pair_is_refused():
    # A future may reach async_done or control_dep; an op that reads it as a
    # tensor (here through a function call) is refused by name, not misread.
    text = """module {
func.func private @g(%f: !stablehlo.future<tensor<4xf32>>) -> tensor<4xf32> {
  %d = "stablehlo.async_done"(%f) : (!stablehlo.future<tensor<4xf32>>) -> tensor<4xf32>
  return %d : tensor<4xf32>
}
func.func public @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %f = "stablehlo.async_start"(%x) ({
  ^bb0(%a: tensor<4xf32>):
    %n = "stablehlo.all_gather"(%a) <{all_gather_dim = 0 : i64,
        replica_groups = dense<0> : tensor<1x1xi64>}> : (tensor<4xf32>) -> tensor<4xf32>
    stablehlo.return %n : tensor<4xf32>
  }) : (tensor<4xf32>) -> !stablehlo.future<tensor<4xf32>>
  %r = func.call @g(%f) : (!stablehlo.future<tensor<4xf32>>) -> tensor<4xf32>
  return %r : tensor<4xf32>
}
}"""
    with pytest.raises(frontend.FrontendError, match=r"unsupported type !stablehlo\.future.*@g"):
        build(text)
