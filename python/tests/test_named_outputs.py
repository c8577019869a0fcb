"""Outputs by name (issue 12): ``qexact.outputs`` lists a contract's outputs as the core's
output_specs does; ``quantize`` returns them in that order (a third, the tensor scale, only
for a contract with one), ``dequantize`` and ``out=`` take it; the torch ops' fake kernels give
every output's shape and dtype from the same specs."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import FAMILY, QUANTIZE_PRESETS, import_or_fail, make_input, shape_for

import qexact

AMAX = {"tensor_scale": "amax"}
# The presets whose kernels exist before fp8.scaled and nvfp4 land: their return types are fixed.
EXISTING = [p for p in QUANTIZE_PRESETS if FAMILY[p] not in ("fp8.scaled", "nvfp4")]


def test_every_output_says_what_its_bytes_are():
    """The core's OutputSpec codes, which the numpy and torch dtypes of the outputs follow."""
    from qexact import _core
    assert _core.output_codes("nvfp4.torchao", ["tensor_scale=amax"]) == [
        ("payload", "e2m1x2"), ("scale", "e4m3"), ("tensor_scale", "f32")]
    assert _core.output_codes("mxfp8.ascend", []) == [("payload", "e4m3"), ("scale", "e8m0")]
    assert _core.output_codes("mx.ocp", ["element=e3m2"]) == [("payload", "e3m2"), ("scale", "e8m0")]
    assert _core.output_codes("fp8.torchao.rowwise", ["element=e5m2"]) == [("payload", "e5m2"), ("scale", "f32")]
    assert _core.output_codes("int8.token.blaze", ["scale_store=f16"]) == [("payload", "int8"), ("scale", "f16")]
    assert _core.output_codes("hif4", []) == []
    x = make_input("mx.ocp", shape=(4, 64))
    payload, scale = qexact.quantize(x, "mx.ocp", element="e3m2")
    assert payload.dtype.name == "float6_e3m2fn" and scale.dtype == np.uint8
    payload, scale = qexact.quantize(make_input("nvfp4.torchao", shape=(4, 64)), "nvfp4.torchao")
    assert payload.dtype == np.uint8 and scale.dtype.name == "float8_e4m3fn"


def test_outputs_lists_the_specs_of_every_family():
    assert qexact.outputs("nvfp4.torchao", (4, 64), **AMAX) == [
        ("payload", "u8", (4, 32)), ("scale", "u8", (4, 4)), ("tensor_scale", "f32", ())]
    assert qexact.outputs("nvfp4.torchao", (4, 64)) == [("payload", "u8", (4, 32)), ("scale", "u8", (4, 4))]
    assert qexact.outputs("fp8.torchao.tensorwise", (4, 64)) == [("payload", "u8", (4, 64)), ("scale", "f32", ())]
    assert qexact.outputs("fp8.torchao.rowwise", (4, 64)) == [("payload", "u8", (4, 64)), ("scale", "f32", (4,))]
    assert qexact.outputs("int8.token.blaze", (5, 40)) == [("payload", "i8", (5, 40)), ("scale", "f32", (5,))]
    with pytest.raises(ValueError, match="multiple of the nvfp4 block 16"):
        qexact.outputs("nvfp4.torchao", (4, 40))


@pytest.mark.parametrize("preset", EXISTING)
def test_existing_presets_return_two_arrays_as_the_outputs_list_them(preset):
    x = make_input(preset)
    result = qexact.quantize(x, preset)
    assert isinstance(result, tuple) and len(result) == 2
    specs = qexact.outputs(preset, x.shape)
    assert [name for name, _, _ in specs] == ["payload", "scale"]
    for array, (_, dtype, shape) in zip(result, specs):
        assert array.shape == shape
        assert array.dtype.itemsize == {"u8": 1, "i8": 1, "f16": 2, "f32": 4}[dtype]


def test_a_tensor_scale_is_refused_where_the_contract_has_none():
    x = make_input("int8.token.blaze")
    payload, scale = qexact.quantize(x, "int8.token.blaze")
    with pytest.raises(ValueError, match="no tensor scale"):
        qexact.dequantize(payload, scale, "int8.token.blaze", tensor_scale_array=np.array(1.0, np.float32))
    with pytest.raises(ValueError, match="no tensor scale"):
        qexact.quantize(x, "int8.token.blaze", out=(np.empty_like(payload), np.empty_like(scale),
                                                    np.empty((), np.float32)))


def test_out_takes_two_or_three_arrays():
    x = make_input("int8.token.blaze")
    with pytest.raises(ValueError, match=r"\(payload, scale\) or \(payload, scale, tensor_scale\)"):
        qexact.quantize(x, "int8.token.blaze", out=(np.empty(x.shape, np.int8),))


# ---- the torch ops' fake kernels: every output's shape and dtype, from output_specs ----------

def test_fake_kernels_give_the_new_families_shapes_and_dtypes():
    torch = import_or_fail("torch")
    import qexact.torch  # noqa: F401  (registers the ops)

    x = torch.empty((4, 64), device="meta")
    outs = torch.ops.qexact.quantize_outputs(x, "nvfp4.torchao", ["tensor_scale=amax"], "fast", 0)
    assert [(o.device.type, tuple(o.shape), o.dtype) for o in outs] == [
        ("meta", (4, 32), torch.float4_e2m1fn_x2), ("meta", (4, 4), torch.float8_e4m3fn), ("meta", (), torch.float32)]
    outs = torch.ops.qexact.quantize(x, "fp8.torchao.rowwise", ["element=e5m2"], "fast", 0)
    assert [(tuple(o.shape), o.dtype) for o in outs] == [((4, 64), torch.float8_e5m2), ((4,), torch.float32)]
    outs = torch.ops.qexact.quantize(x, "fp8.torchao.tensorwise", [], "fast", 0)
    assert [(tuple(o.shape), o.dtype) for o in outs] == [((4, 64), torch.float8_e4m3fn), ((), torch.float32)]
    with pytest.raises(ValueError, match="quantize_outputs"):
        torch.ops.qexact.quantize(x, "nvfp4.torchao", ["tensor_scale=amax"], "fast", 0)
    p, s, t = (torch.empty(o.shape, dtype=o.dtype, device="meta")
               for o in torch.ops.qexact.quantize_outputs(x, "nvfp4.torchao", ["tensor_scale=amax"], "fast", 0))
    y = torch.ops.qexact.dequantize(p, s, None, "nvfp4.torchao", ["tensor_scale=amax"], "fast", 0, t)
    assert (tuple(y.shape), y.dtype) == ((4, 64), torch.float32)
    with pytest.raises(ValueError, match="needs its tensor_scale"):
        torch.ops.qexact.dequantize(p, s, None, "nvfp4.torchao", ["tensor_scale=amax"], "fast", 0)


# ---- end to end: these need the fp8.scaled and nvfp4 kernels (branches h-fp8, h-nvfp4) ----------

def test_nvfp4_with_a_tensor_scale_round_trips_through_numpy_and_out():
    x = make_input("nvfp4.torchao", shape=(6, 96))
    payload, scale, tensor_scale = qexact.quantize(x, "nvfp4.torchao", **AMAX)
    assert payload.dtype == np.uint8 and payload.shape == (6, 48)
    assert scale.dtype.name == "float8_e4m3fn" and scale.shape == (6, 6)
    assert tensor_scale.dtype == np.float32 and tensor_scale.shape == ()
    y = qexact.dequantize(payload, scale, "nvfp4.torchao", tensor_scale_array=tensor_scale, **AMAX)
    assert y.shape == x.shape
    with pytest.raises(ValueError, match="needs its tensor_scale"):
        qexact.dequantize(payload, scale, "nvfp4.torchao", **AMAX)
    out = (np.empty_like(payload), np.empty(scale.shape, np.uint8), np.empty((), np.float32))
    assert qexact.quantize(x, "nvfp4.torchao", out=out, **AMAX) is out
    assert [o.tobytes() for o in out] == [payload.tobytes(), scale.view(np.uint8).tobytes(), tensor_scale.tobytes()]
    y_out = np.empty(x.shape, np.float32)
    qexact.dequantize(*out[:2], "nvfp4.torchao", tensor_scale_array=out[2], out=y_out, **AMAX)
    assert y_out.tobytes() == y.tobytes()


@pytest.mark.parametrize("preset", [p for p in QUANTIZE_PRESETS if FAMILY[p] == "fp8.scaled"])
def test_fp8_scaled_payloads_are_float8_with_float32_scales(preset):
    x = make_input(preset, shape=shape_for(preset))
    payload, scale = qexact.quantize(x, preset)
    element = dict(qexact.params(preset))["element"]
    assert payload.dtype.name == {"e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2"}[element]
    assert scale.dtype == np.float32
    assert [(a.shape) for a in (payload, scale)] == [s for _, _, s in qexact.outputs(preset, x.shape)]
    y = qexact.dequantize(payload, scale, preset)
    assert y.shape == x.shape


def test_torch_tensors_carry_the_tensor_scale():
    torch = import_or_fail("torch")
    x = torch.from_numpy(make_input("nvfp4.torchao", shape=(6, 96)))
    payload, scale, tensor_scale = qexact.quantize(x, "nvfp4.torchao", **AMAX)
    assert (payload.dtype, scale.dtype, tensor_scale.dtype) == (torch.float4_e2m1fn_x2, torch.float8_e4m3fn,
                                                                torch.float32)
    want = qexact.quantize(x.numpy(), "nvfp4.torchao", **AMAX)
    assert [t.view(torch.uint8).numpy().tobytes() if t.element_size() == 1 else t.numpy().tobytes()
            for t in (payload, scale, tensor_scale)] == [w.tobytes() for w in want]
    y = qexact.dequantize(payload, scale, "nvfp4.torchao", tensor_scale_array=tensor_scale, **AMAX)
    assert y.numpy().tobytes() == qexact.dequantize(*want[:2], "nvfp4.torchao", tensor_scale_array=want[2],
                                                    **AMAX).tobytes()


def test_a_state_dict_gets_every_output_by_name():
    x = make_input("nvfp4.torchao", shape=(6, 96))
    tensors, summary = qexact.quantize_state_dict({"w": x}, "nvfp4.torchao", params=AMAX)
    assert sorted(tensors) == ["w.payload", "w.scale", "w.tensor_scale"]
    want = qexact.quantize(x, "nvfp4.torchao", **AMAX)
    got = [tensors["w.payload"], tensors["w.scale"], tensors["w.tensor_scale"]]
    assert [a.dtype for a in got] == [w.dtype for w in want]
    assert [a.tobytes() for a in got] == [w.tobytes() for w in want]
    assert summary.quantized[0].bytes_out == sum(w.nbytes for w in want)
