"""torchao interop: qexact's MX outputs become a torchao MXTensor (scales in torchao's shapes,
swizzled ones 2-D) that dequantizes to qexact's values, and torchao's own MXTensors come back as
payload and scales that match qexact's torchao contracts byte for byte."""

from __future__ import annotations

import pytest

from conftest import import_or_fail, make_input

torch = import_or_fail("torch")
import_or_fail("torchao")

from torchao.prototype.mx_formats.mx_tensor import MXTensor, ScaleCalculationMode  # noqa: E402

import qexact  # noqa: E402
import qexact.torch as qt  # noqa: E402

SWIZZLED = {"layout": "swizzled", "tail": "reject"}
SHAPE = (160, 128)  # a partial 128-row tile for the padded and swizzled layouts


def bits(t: torch.Tensor) -> bytes:
    t = t.contiguous()
    return (t.view(torch.uint8) if t.element_size() == 1 else t.view(torch.int32)).numpy().tobytes()


def x_of(dtype=torch.float32) -> torch.Tensor:
    return torch.from_numpy(make_input("mx.ocp", shape=SHAPE)).to(dtype)


@pytest.mark.parametrize("preset,params", [
    ("mx.ocp", {}), ("mxfp8.ascend", {}), ("mxfp8.te", {}), ("mx.ocp", SWIZZLED), ("mx.ocp.e5m2", {}),
    ("mx.ocp.e2m1", {}), ("mx.ocp.e2m1", SWIZZLED), ("mx.ocp.e2m3", {}), ("mx.ocp.e3m2", {}),
], ids=lambda v: v if isinstance(v, str) else ",".join(f"{k}={w}" for k, w in v.items()) or "-")
def test_an_mxtensor_of_qexact_outputs_dequantizes_to_qexacts_values(preset, params):
    x = x_of()
    payload, scale = qexact.quantize(x, preset, **params)
    t = qt.to_mxtensor(payload, scale, preset, **params)
    assert isinstance(t, MXTensor) and t.shape == x.shape and t.block_size == 32
    assert t.qdata.data_ptr() == payload.data_ptr()
    swizzled = params.get("layout") == "swizzled"
    assert t.is_swizzled_scales == swizzled
    assert tuple(t.scale.shape) == ((2 * 32, 1 * 16) if swizzled else (160, 4))  # torchao's: ceil(M/128)*32, ceil(K/128)*16
    assert bits(t.dequantize(torch.float32)) == bits(qexact.dequantize(payload, scale, preset, **params))
    back_payload, back_scale = qt.from_mxtensor(t)
    if qexact.params(preset, **params)["layout"] in ("rowmajor", "swizzled"):  # the same bytes, no regridding
        assert back_payload.dtype == payload.dtype and back_scale.shape == scale.shape
        assert bits(back_payload) == bits(payload) and bits(back_scale) == bits(scale)


@pytest.mark.parametrize("elem,element", [(torch.float8_e4m3fn, "e4m3"), (torch.float4_e2m1fn_x2, "e2m1")],
                         ids=["e4m3", "e2m1"])
@pytest.mark.parametrize("swizzled", [False, True], ids=["grid", "swizzled"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
def test_torchaos_mxtensor_matches_qexacts_contract_byte_for_byte(elem, element, swizzled, dtype):
    """x holds a group whose scale byte is 0: torchao 0.18's to_mx quantizes it against 2^-126,
    as the mxfp8.torchao.floor preset does (byte0=min_normal)."""
    x = x_of(dtype)
    theirs = MXTensor.to_mx(x, elem, 32, ScaleCalculationMode.FLOOR, is_swizzled_scales=swizzled)
    preset = "mxfp8.torchao.floor"
    params = {"element": element, **(SWIZZLED if swizzled else {})}
    ours = qt.to_mxtensor(*qexact.quantize(x, preset, **params), preset, orig_dtype=dtype, **params)
    assert ours.scale.shape == theirs.scale.shape and ours.qdata.shape == theirs.qdata.shape
    report = qexact.compare(x, preset, qt.from_mxtensor(theirs), **params)
    assert (report.payload_bytes_differing, report.scale_bytes_differing) == (0, 0), str(report)
    assert report.payload_bytes == x.numel() // (2 if elem == torch.float4_e2m1fn_x2 else 1)


def test_what_torchao_cannot_hold_is_refused():
    x = x_of()
    with pytest.raises(ValueError, match="family int8.token"):
        qt.to_mxtensor(*qexact.quantize(x, "int8.token.blaze"), "int8.token.blaze")
    partial = x[:, :80]
    with pytest.raises(ValueError, match="whole blocks of 32"):
        qt.to_mxtensor(*qexact.quantize(partial, "mx.ocp"), "mx.ocp", shape=partial.shape)
    three_d = x.reshape(2, 80, 128)
    with pytest.raises(ValueError, match="M = 80 to be a multiple of 128"):
        qt.to_mxtensor(*qexact.quantize(three_d, "mx.ocp", **SWIZZLED), "mx.ocp", **SWIZZLED)
    with pytest.raises(ValueError, match="packing=halves"):
        qt.to_mxtensor(*qexact.quantize(x, "mxfp4.ggml"), "mxfp4.ggml")


# ---- NVFP4Tensor ------------------------------------------------------------------------------

from torchao.prototype.mx_formats.nvfp4_tensor import NVFP4Tensor  # noqa: E402


def nvfp4_x(dtype=torch.float32) -> torch.Tensor:
    return torch.from_numpy(make_input("nvfp4.torchao", shape=(64, 128))).to(dtype)


@pytest.mark.parametrize("tensor_scale", ["none", "amax"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_to_nvfp4tensor_is_torchaos_own_nvfp4tensor(tensor_scale, dtype):
    """qexact's nvfp4.torchao outputs as an NVFP4Tensor hold torchao's bytes for the same x (its
    to_nvfp4, with the per-tensor scale from the tensor's amax), and dequantize as torchao's."""
    x = nvfp4_x(dtype)
    outs = qt.quantize(x, "nvfp4.torchao", tensor_scale=tensor_scale)
    t = qt.to_nvfp4tensor(outs[0], outs[1], "nvfp4.torchao", tensor_scale=tensor_scale,
                          tensor_scale_array=outs[2] if len(outs) > 2 else None, orig_dtype=dtype)
    assert isinstance(t, NVFP4Tensor) and t.shape == x.shape and t.dtype == dtype
    per_tensor = None
    if tensor_scale == "amax":
        from torchao.prototype.mx_formats.nvfp4_tensor import per_tensor_amax_to_scale
        per_tensor = per_tensor_amax_to_scale(x.abs().amax().float())
    theirs = NVFP4Tensor.to_nvfp4(x, per_tensor_scale=per_tensor)
    assert bits(t.qdata) == bits(theirs.qdata) and bits(t.scale) == bits(theirs.scale)
    if per_tensor is not None:
        assert bits(t.per_tensor_scale) == bits(theirs.per_tensor_scale.float())
    assert bits(t.dequantize(torch.float32)) == bits(theirs.dequantize(torch.float32))
    assert t.qdata.data_ptr() == outs[0].data_ptr()  # shared, not copied
    # torchao's matmul path on CPU (F.linear with the NVFP4Tensor weight) gives its own product
    a = torch.from_numpy(make_input("nvfp4.torchao", shape=(8, 128), seed=5)).to(dtype)
    assert bits(torch.nn.functional.linear(a, t)) == bits(torch.nn.functional.linear(a, theirs))


def test_from_nvfp4tensor_gives_qexacts_outputs():
    x = nvfp4_x()
    theirs = NVFP4Tensor.to_nvfp4(x)
    payload, scale = qt.from_nvfp4tensor(theirs)
    mine = qt.quantize(x, "nvfp4.torchao")
    assert payload.dtype == mine[0].dtype and scale.dtype == mine[1].dtype
    assert bits(payload) == bits(mine[0]) and bits(scale) == bits(mine[1])
    assert bits(qexact.dequantize(payload, scale, "nvfp4.torchao")) == bits(qexact.dequantize(*mine, "nvfp4.torchao"))


def test_nvfp4tensor_refuses_what_it_cannot_hold():
    x = nvfp4_x()
    p, s, t = qt.quantize(x, "nvfp4.ct")
    with pytest.raises(ValueError, match="tensor_scale=multiplier, another quantity"):
        qt.to_nvfp4tensor(p, s, "nvfp4.ct", tensor_scale_array=t)
    p, s = qt.quantize(x, "nvfp4.torchao")
    with pytest.raises(ValueError, match="has no tensor scale"):
        qt.to_nvfp4tensor(p, s, "nvfp4.torchao", tensor_scale_array=torch.tensor(1.0))
    with pytest.raises(ValueError, match="family mx"):
        qt.to_nvfp4tensor(p, s, "mx.ocp")
    with pytest.raises(ValueError, match="swizzled"):
        qt.from_nvfp4tensor(NVFP4Tensor.to_nvfp4(x, is_swizzled_scales=True))


# ---- like="torchao" / "scaled_mm" -----------------------------------------------------------------

from torchao.float8.config import ScalingGranularity  # noqa: E402
from torchao.float8.float8_scaling_utils import hp_tensor_to_float8_dynamic  # noqa: E402
from torchao.float8.float8_training_tensor import LinearMMConfig  # noqa: E402


@pytest.mark.parametrize("granularity", ["tensorwise", "rowwise"])
def test_like_torchao_gives_torchaos_float8_scale(granularity):
    x = torch.from_numpy(make_input("fp8.torchao.rowwise", shape=(48, 64)))
    theirs = hp_tensor_to_float8_dynamic(
        x, torch.float8_e4m3fn, LinearMMConfig(),
        scaling_granularity=ScalingGranularity.TENSORWISE if granularity == "tensorwise" else ScalingGranularity.AXISWISE,
        axiswise_dim=-1 if granularity == "rowwise" else None)
    payload, scale = qt.quantize(x, f"fp8.torchao.{granularity}", like="torchao")
    assert scale.shape == theirs._scale.shape
    assert bits(payload) == bits(theirs._data) and bits(scale) == bits(theirs._scale)
    assert bits(qt.quantize(x, f"fp8.torchao.{granularity}")[1].reshape(scale.shape)) == bits(scale)


def test_like_torchao_gives_mxtensors_scales():
    x = x_of()
    for params in ({}, SWIZZLED):
        payload, scale = qt.quantize(x, "mxfp8.torchao.floor", like="torchao", **params)
        mx = qt.to_mxtensor(*qt.quantize(x, "mxfp8.torchao.floor", **params), "mxfp8.torchao.floor", **params)
        assert scale.shape == mx.scale.shape and bits(scale) == bits(mx.scale)


def test_like_scaled_mm_feeds_torch_scaled_mm_as_torchao_does():
    """Descales in _scaled_mm's shapes: the product is the one torchao's own float8 tensors give."""
    a = torch.from_numpy(make_input("fp8.torchao.rowwise", shape=(32, 64)))
    b = torch.from_numpy(make_input("fp8.torchao.rowwise", shape=(48, 64), seed=7))
    qa, sa = qt.quantize(a, "fp8.torchao.rowwise", like="scaled_mm")
    qb, sb = qt.quantize(b, "fp8.torchao.rowwise", like="scaled_mm")
    assert sa.shape == (32, 1) and sb.shape == (48, 1)
    y = torch._scaled_mm(qa, qb.t(), scale_a=sa, scale_b=sb.t(), out_dtype=torch.float32)
    ta, tb = (hp_tensor_to_float8_dynamic(t, torch.float8_e4m3fn, LinearMMConfig(),
                                          scaling_granularity=ScalingGranularity.AXISWISE, axiswise_dim=-1)
              for t in (a, b))
    want = torch._scaled_mm(ta._data, tb._data.t(), scale_a=ta._scale.reciprocal(), scale_b=tb._scale.reciprocal().t(),
                            out_dtype=torch.float32)
    assert bits(y) == bits(want)
    # a descale preset keeps its scales' values
    qd, sd = qt.quantize(a, "fp8.ascend.token", like="scaled_mm")
    assert bits(sd.reshape(-1)) == bits(qt.quantize(a, "fp8.ascend.token")[1])
    with pytest.raises(ValueError, match="like='scaled_mm' is for fp8.scaled presets"):
        qt.quantize(a, "mxfp8.torchao.floor", like="scaled_mm")
    with pytest.raises(ValueError, match="like must be"):
        qt.quantize(a, "fp8.ascend.token", like="numpy")
