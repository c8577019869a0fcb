"""out=: results written into arrays the caller owns. Outputs pre-filled with a poison byte come
back byte-identical to the allocating call's, the call returns the caller's own arrays (no
copy), and a wrong output is rejected before anything is written."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import qexact
from conftest import QUANTIZE_PRESETS, make_input

POISON = 0xA5


def poisoned_like(a: np.ndarray) -> np.ndarray:
    out = np.empty_like(a)
    out.reshape(-1).view(np.uint8)[:] = POISON  # reshape first: a 0-d array (a tensor scale) has no byte view
    return out


def same_bytes(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


@pytest.mark.parametrize("preset", QUANTIZE_PRESETS)
@pytest.mark.parametrize("engine", ["fast", "reference"])
def test_quantize_and_dequantize_into_poisoned_outputs(preset, engine):
    x = make_input(preset, ml_dtypes.bfloat16)
    outputs = qexact.quantize(x, preset)  # (payload, scale[, tensor_scale])
    out = tuple(poisoned_like(a) for a in outputs)
    got = qexact.quantize(x, preset, out=out, engine=engine, threads=3)
    assert all(g is o for g, o in zip(got, out)) and len(got) == len(outputs)
    assert all(same_bytes(o, a) for o, a in zip(out, outputs))

    payload, scale = outputs[:2]
    tensor_scale = outputs[2] if len(outputs) > 2 else None
    values = qexact.dequantize(payload, scale, preset, shape=x.shape, tensor_scale_array=tensor_scale)
    y = poisoned_like(values)
    assert qexact.dequantize(payload, scale, preset, out=y, engine=engine, tensor_scale_array=tensor_scale) is y
    assert same_bytes(y, values)


def test_quantize_into_padded_layout_and_uint8_payload_view():
    # Padded scales: rows up to 128 and groups up to 4, the padding written as zeros.
    x = make_input("mxfp8.te", np.float32, shape=(5, 96))
    payload, scale = qexact.quantize(x, "mxfp8.te")
    out = (np.full(payload.shape, POISON, np.uint8), poisoned_like(scale))
    qexact.quantize(x, "mxfp8.te", out=out)
    assert same_bytes(out[0], payload.view(np.uint8)) and same_bytes(out[1], scale)
    assert not out[1][5:].any()


def test_hif4_into_poisoned_outputs():
    x = make_input("hif4", ml_dtypes.bfloat16)
    fq = qexact.hifloat4_fake_quant(x)
    y = poisoned_like(fq)
    assert qexact.hifloat4_fake_quant(x, out=y) is y and same_bytes(y, fq)

    scale, value = qexact.hif4_pack(x)
    out = (poisoned_like(scale), poisoned_like(value))
    qexact.hif4_pack(x, out=out)
    assert same_bytes(out[0], scale) and same_bytes(out[1], value)

    values = qexact.hif4_unpack(scale, value)
    z = poisoned_like(values)
    assert qexact.hif4_unpack(scale, value, out=z) is z and same_bytes(z, values)


def test_wrong_outputs_raise_before_any_write():
    x = make_input("int8.token.vllm", np.float32)
    payload, scale = qexact.quantize(x, "int8.token.vllm")
    good_p, good_s = poisoned_like(payload), poisoned_like(scale)
    with pytest.raises(ValueError, match=r"out payload must be i8 of shape \(5, 40\), got u8"):
        qexact.quantize(x, "int8.token.vllm", out=(good_p.view(np.uint8), good_s))
    with pytest.raises(ValueError, match=r"out scale must be f32 of shape \(5,\), got f32 \(4,\)"):
        qexact.quantize(x, "int8.token.vllm", out=(good_p, good_s[:4]))
    wide = np.full((5, 80), POISON, np.uint8).view(np.int8)
    with pytest.raises(ValueError, match="out payload must be C-contiguous"):
        qexact.quantize(x, "int8.token.vllm", out=(wide[:, ::2], good_s))
    with pytest.raises(ValueError, match="out payload overlaps the input x"):
        qexact.quantize(x, "int8.token.vllm", out=(x.reshape(-1).view(np.int8)[:200].reshape(5, 40), good_s))
    read_only = poisoned_like(payload)
    read_only.flags.writeable = False
    with pytest.raises(ValueError, match="out payload is read-only"):
        qexact.quantize(x, "int8.token.vllm", out=(read_only, good_s))
    with pytest.raises(ValueError, match="differs from out's shape"):
        qexact.dequantize(payload, scale, "int8.token.vllm", shape=(5, 41), out=np.empty((5, 40), np.float32))
    with pytest.raises(ValueError, match=r"out must be bfloat16|out must be bf16"):
        qexact.hifloat4_fake_quant(make_input("hif4", ml_dtypes.bfloat16), out=np.empty((4, 128), np.float32))
    assert (good_p.view(np.uint8) == POISON).all() and (good_s.view(np.uint8) == POISON).all()
    assert (wide.view(np.uint8) == POISON).all()


def test_torch_inputs_with_out_write_the_callers_arrays():
    """A torch x with out= is written into the caller's arrays (out is never ignored)."""
    from conftest import import_or_fail
    torch = import_or_fail("torch")
    x = torch.randn(4, 96, dtype=torch.float32)
    payload, scale = qexact.quantize(x.numpy(), "mxfp8.ascend")
    out = (poisoned_like(payload), poisoned_like(scale))
    got = qexact.quantize(x, "mxfp8.ascend", out=out)
    assert got[0] is out[0] and got[1] is out[1]
    assert same_bytes(out[0], payload) and same_bytes(out[1], scale)
    fq = np.full((4, 64), np.nan, dtype=np.float32)
    assert qexact.hifloat4_fake_quant(x[:, :64].contiguous(), out=fq) is fq
    assert same_bytes(fq, qexact.hifloat4_fake_quant(x[:, :64].contiguous().numpy()))


@pytest.mark.parametrize("preset", QUANTIZE_PRESETS)
def test_out_takes_the_torch_dtypes_quantize_returns(preset):
    """out= takes the tensors qexact.torch.quantize returns (float8 / E8M0 / float4_x2 and the
    rest), and their uint8 views, and writes the same bytes into them."""
    from conftest import import_or_fail
    torch = import_or_fail("torch")
    import qexact.torch as qt
    x = torch.from_numpy(make_input(preset, np.float32))
    want = qt.quantize(x, preset)
    for view in (False, True):
        out = tuple(torch.empty_like(t) for t in want)
        given = tuple(o.view(torch.uint8) if view and o.element_size() == 1 and o.dtype != torch.int8 else o
                      for o in out)
        got = qexact.quantize(x, preset, out=given)
        assert all(g is o for g, o in zip(got, given))
        for o, w in zip(out, want):
            assert o.dtype == w.dtype
            assert o.reshape(-1).view(torch.uint8).numpy().tobytes() == w.reshape(-1).view(torch.uint8).numpy().tobytes()


def test_one_byte_floats_of_another_type_are_named():
    from conftest import import_or_fail
    torch = import_or_fail("torch")
    x = make_input("mxfp8.ascend", np.float32)
    payload, scale = qexact.quantize(x, "mxfp8.ascend")
    # numpy: an E5M2 array for an E4M3 payload would take the codes under the wrong type
    with pytest.raises(TypeError, match=r"out payload holds float8_e5m2 values; mxfp8.ascend's payload is "
                                        r"float8_e4m3fn \(or its bytes as uint8\)"):
        qexact.quantize(x, "mxfp8.ascend", out=(np.zeros(payload.shape, ml_dtypes.float8_e5m2), poisoned_like(scale)))
    t_payload = torch.empty(payload.shape, dtype=torch.float8_e5m2)
    t_scale = torch.empty(scale.shape, dtype=torch.float8_e8m0fnu)
    with pytest.raises(TypeError, match=r"out payload holds torch\.float8_e5m2 values; mxfp8.ascend's payload is "
                                        r"torch\.float8_e4m3fn"):
        qexact.quantize(torch.from_numpy(x), "mxfp8.ascend", out=(t_payload, t_scale))
    # dequantize under another preset names the tensor's dtype, not its storage
    import qexact.torch as qt
    p, s = qt.quantize(torch.from_numpy(x), "mxfp8.ascend")
    with pytest.raises(TypeError, match=r"scale holds torch\.float8_e8m0fnu values; fp8.ascend.token's scale is "
                                        r"torch\.float32"):
        qexact.dequantize(p, s, "fp8.ascend.token")
