"""PyTorch tensors in, PyTorch tensors out: torch's own dtypes, the same bytes as the numpy
route, no copies either way, torch's one-byte floats accepted wherever bytes are, and a clear
error for a tensor qexact cannot read."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from conftest import FAMILY, QUANTIZE_PRESETS, import_or_fail, make_input

torch = import_or_fail("torch")

import qexact  # noqa: E402
import qexact.torch as qt  # noqa: E402
from qexact import _core, _torch_io  # noqa: E402

PAYLOAD_DTYPES = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2, "e2m1": torch.float4_e2m1fn_x2,
                  "e2m3": torch.uint8, "e3m2": torch.uint8}


def expected_dtypes(preset: str) -> tuple[torch.dtype, ...]:
    """The torch dtypes of the preset's outputs, in qexact.outputs order."""
    params = qexact.params(preset)
    if FAMILY[preset] == "mx":
        # torch's float4_e2m1fn_x2 means adjacent nibbles: ggml's halves order stays uint8.
        payload = torch.uint8 if params["packing"] == "halves" else PAYLOAD_DTYPES[params["element"]]
        return payload, torch.float8_e8m0fnu
    if FAMILY[preset] == "fp8.scaled":
        return PAYLOAD_DTYPES[params["element"]], torch.float32
    if FAMILY[preset] == "nvfp4":
        tensor_scale = (torch.float32,) if params["tensor_scale"] != "none" else ()
        return (torch.float4_e2m1fn_x2, torch.float8_e4m3fn, *tensor_scale)
    return torch.int8, torch.float16 if params["scale_store"] == "f16" else torch.float32


def tensor_bytes(t: torch.Tensor) -> bytes:
    return t.contiguous().view(torch.uint8).numpy().tobytes() if t.element_size() == 1 else t.numpy().tobytes()


def array_bytes(a: np.ndarray) -> bytes:
    return np.ascontiguousarray(a).tobytes()


def as_torch(x: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(x.view(np.uint16)).view(torch.bfloat16) if x.dtype == ml_dtypes.bfloat16 \
        else torch.from_numpy(x)


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16], ids=["f32", "bf16"])
@pytest.mark.parametrize("preset", QUANTIZE_PRESETS)
def test_quantize_and_dequantize_return_tensors_with_the_numpy_routes_bytes(preset, dtype):
    x = make_input(preset, dtype)
    got = qexact.quantize(as_torch(x), preset)
    want = qexact.quantize(x, preset)
    assert tuple(t.dtype for t in got) == expected_dtypes(preset)
    assert all(t.device.type == "cpu" for t in got)
    assert [tuple(t.shape) for t in got] == [w.shape for w in want]
    assert tensor_bytes(got[0]) == array_bytes(want[0].view(np.uint8 if want[0].itemsize == 1 else np.int8))
    assert [tensor_bytes(t) for t in got[1:]] == [array_bytes(w.view(np.uint8) if w.itemsize == 1 else w)
                                                  for w in want[1:]]
    y = qexact.dequantize(*got[:2], preset, tensor_scale_array=got[2] if len(got) > 2 else None)
    assert y.dtype == torch.float32
    want_y = qexact.dequantize(*want[:2], preset, tensor_scale_array=want[2] if len(want) > 2 else None)
    assert tensor_bytes(y) == array_bytes(want_y)


def test_engine_and_threads_reach_the_core_through_the_ops():
    x = torch.from_numpy(make_input("mxfp8.ascend"))
    fast = qexact.quantize(x, "mxfp8.ascend", threads=3)
    reference = qexact.quantize(x, "mxfp8.ascend", engine="reference")
    assert [tensor_bytes(t) for t in fast] == [tensor_bytes(t) for t in reference]
    with pytest.raises(ValueError, match="unknown engine"):
        qexact.quantize(x, "mxfp8.ascend", engine="gpu")
    with pytest.raises(ValueError, match="threads must be >= 0"):
        qt.fake_quant(x, "mxfp8.ascend", threads=-1)


def test_numpy_in_gives_numpy_out_with_torch_loaded():
    x = make_input("mx.ocp")
    payload, scale = qexact.quantize(x, "mx.ocp")
    assert isinstance(payload, np.ndarray) and payload.dtype == ml_dtypes.float8_e4m3fn
    assert isinstance(scale, np.ndarray) and scale.dtype == np.uint8
    assert isinstance(qexact.hifloat4_fake_quant(make_input("hif4")), np.ndarray)


def test_hif4_pool_cast_and_decode_return_tensors():
    x = make_input("hif4", ml_dtypes.bfloat16)
    t = as_torch(x)
    y = qexact.hifloat4_fake_quant(t)
    assert y.dtype == torch.bfloat16 and tensor_bytes(y.view(torch.uint16)) == array_bytes(
        qexact.hifloat4_fake_quant(x).view(np.uint16))
    scale, value = qexact.hif4_pack(t)
    want_scale, want_value = qexact.hif4_pack(x)
    assert scale.dtype == value.dtype == torch.uint8
    assert tensor_bytes(scale) == array_bytes(want_scale) and tensor_bytes(value) == array_bytes(want_value)
    unpacked = qexact.hif4_unpack(scale, value)
    assert unpacked.dtype == torch.float32
    assert tensor_bytes(unpacked) == array_bytes(qexact.hif4_unpack(want_scale, want_value))

    seq = np.random.default_rng(3).standard_normal((2, 7, 5)).astype(np.float32)
    pooled = qexact.pooled_block_mean(torch.from_numpy(seq), 3, out="bfloat16")
    assert pooled.dtype == torch.bfloat16
    assert tensor_bytes(pooled.view(torch.uint16)) == array_bytes(
        qexact.pooled_block_mean(seq, 3, out="bfloat16").view(np.uint16))
    sharded = qexact.pooled_block_mean_sharded([torch.from_numpy(seq[:, :3]), torch.from_numpy(seq[:, 3:])], 3)
    assert sharded.dtype == torch.float32 and tensor_bytes(sharded) == array_bytes(qexact.pooled_block_mean(seq, 3))

    codes = qexact.cast(torch.from_numpy(seq), "e4m3")
    assert codes.dtype == torch.uint8 and tensor_bytes(codes) == array_bytes(qexact.cast(seq, "e4m3"))
    values = qexact.decode(codes, "e4m3")
    assert values.dtype == torch.float32 and tensor_bytes(values) == array_bytes(qexact.decode(codes.numpy(), "e4m3"))


@pytest.mark.parametrize("a", [np.arange(6, dtype=np.float32), np.arange(6, dtype=np.uint16),
                               np.arange(6, dtype=np.uint8), np.arange(6, dtype=np.int8),
                               np.arange(6, dtype=np.float32).astype(ml_dtypes.float8_e4m3fn),
                               np.arange(6, dtype=np.float32).astype(ml_dtypes.float8_e5m2),
                               np.arange(6, dtype=np.float32).astype(ml_dtypes.bfloat16)],
                         ids=lambda a: a.dtype.name)
def test_results_become_tensors_over_the_same_memory(a):
    t = _torch_io.from_numpy(a)
    assert t.data_ptr() == a.__array_interface__["data"][0]
    assert tensor_bytes(t.view(torch.uint16) if t.dtype == torch.bfloat16 else t) == a.tobytes()


@pytest.mark.parametrize("call", ["quantize", "dequantize", "fake_quant", "hif4_pack", "hif4_unpack"])
def test_every_op_hands_back_the_cores_memory(call, monkeypatch):
    """The arrays the core returns are the tensors' memory: spied on at the core's boundary."""
    made: list[int] = []

    def spy(name):
        real = getattr(_core, name)

        def wrapper(*args):
            out = real(*args)
            made.extend(a.__array_interface__["data"][0] for a in (out if isinstance(out, tuple) else (out,))
                        if isinstance(a, np.ndarray))
            return out
        monkeypatch.setattr(_core, name, wrapper)

    for name in ("quantize", "dequantize", "hifloat4_fake_quant", "hif4_pack", "hif4_unpack"):
        spy(name)
    x = torch.from_numpy(make_input("hif4"))
    if call == "quantize":
        out = qexact.quantize(x, "mx.ocp")
    elif call == "dequantize":
        p, s = qexact.quantize(x, "mx.ocp")
        made.clear()
        out = (qexact.dequantize(p, s, "mx.ocp"),)
    elif call == "fake_quant":
        out = (qexact.hifloat4_fake_quant(x),)
    elif call == "hif4_pack":
        out = qexact.hif4_pack(x)
    else:
        s, v = qexact.hif4_pack(x)
        made.clear()
        out = (qexact.hif4_unpack(s, v),)
    assert [t.data_ptr() for t in out] == made


def test_inputs_are_read_in_place_even_when_they_require_grad():
    x = torch.from_numpy(make_input("mx.ocp")).requires_grad_()
    data, _ = qexact._arrays.as_input(x)
    assert _core.data_pointer(data) == x.data_ptr()
    assert qexact.quantize(x, "mx.ocp")[0].dtype == torch.float8_e4m3fn


def test_torch_one_byte_floats_are_accepted_wherever_bytes_are():
    x = make_input("mx.ocp")
    for preset in ("mxfp8.torchao.floor", "mx.ocp.e2m1", "int8.token.vllm"):
        p, s = qexact.quantize(torch.from_numpy(x), preset)
        assert qexact.compare(x, preset, (p, s)).identical  # float8 / float4_e2m1fn_x2 payload, E8M0 scale
        assert qexact.compare(torch.from_numpy(x), preset, (p, s)).identical
        want = qexact.dequantize(*qexact.quantize(x, preset), preset)
        # dequantize through the numpy route's byte reading: numpy scale, torch payload
        assert tensor_bytes(qexact.dequantize(p, s.numpy() if s.element_size() > 1 else s.view(torch.uint8).numpy(),
                                              preset)) == array_bytes(want)
    codes = qexact.cast(x, "e5m2")
    assert array_bytes(qexact.decode(torch.from_numpy(codes), "e5m2").numpy()) == array_bytes(qexact.decode(codes, "e5m2"))


def test_a_payload_of_another_float_type_is_refused():
    p, s = qexact.quantize(torch.from_numpy(make_input("mx.ocp")), "mx.ocp")
    with pytest.raises(TypeError, match=r"^payload holds torch\.float8_e5m2 values; mx\.ocp's payload is "
                                        r"torch\.float8_e4m3fn \(or its bytes as uint8\)$"):
        qexact.dequantize(p.view(torch.float8_e5m2), s, "mx.ocp")
    assert tensor_bytes(qexact.dequantize(p.view(torch.uint8), s, "mx.ocp")) == tensor_bytes(
        qexact.dequantize(p, s, "mx.ocp"))


def test_numpy_and_tensors_may_be_mixed_in_dequantize():
    x = make_input("mx.ocp")
    p, s = qexact.quantize(x, "mx.ocp")
    y = qexact.dequantize(torch.from_numpy(p.view(np.uint8)), s, "mx.ocp")
    assert isinstance(y, torch.Tensor) and tensor_bytes(y) == array_bytes(qexact.dequantize(p, s, "mx.ocp"))


CALLS = {
    "quantize": lambda t: qexact.quantize(t, "mx.ocp"),
    "dequantize": lambda t: qexact.dequantize(t.to(torch.uint8), t.to(torch.uint8)[:, :1], "mx.ocp"),
    "hifloat4_fake_quant": lambda t: qexact.hifloat4_fake_quant(t),
    "fake_quant": lambda t: qt.fake_quant(t, "mxfp8.ascend"),
    "hif4_pack": lambda t: qexact.hif4_pack(t),
    "hif4_unpack": lambda t: qexact.hif4_unpack(t.to(torch.uint8), t.to(torch.uint8)),
    "compare": lambda t: qexact.compare(t, "mx.ocp", "mxfp8.torchao.floor"),
    "pooled_block_mean": lambda t: qexact.pooled_block_mean(t, 2),
    "cast": lambda t: qexact.cast(t, "e4m3"),
    "FakeQuantize": lambda t: qt.FakeQuantize("hif4")(t),
}


@pytest.mark.parametrize("call", list(CALLS))
def test_a_meta_tensor_gets_an_error_naming_its_device(call):
    with pytest.raises(TypeError, match=r"^\w+ is a meta tensor \(device 'meta'\)"):
        CALLS[call](torch.zeros(4, 64, device="meta"))


def test_a_tensor_on_another_device_gets_an_error_naming_it():
    class OnDevice:  # no accelerator here: the check sees only .device
        device = torch.device("cuda", 1)

    with pytest.raises(TypeError, match=r"^x is on device 'cuda:1'; qexact computes on the CPU: pass x\.cpu\(\)"):
        _torch_io.check_cpu(OnDevice(), "x")
