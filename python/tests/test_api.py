"""The Python API on every preset: shapes, dtypes, both engines giving the same bytes, and the
convenience functions agreeing with the general ones."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import qexact
from qexact import _core
from conftest import FAMILY, MX_PRESETS, QUANTIZE_PRESETS, make_input

FLOAT_DTYPES = [np.float32, np.float16, ml_dtypes.bfloat16]
PAYLOAD_TYPES = {"e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2,
                 "e2m3": ml_dtypes.float6_e2m3fn, "e3m2": ml_dtypes.float6_e3m2fn, "e2m1": np.uint8}


def same_bytes(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def test_presets_are_the_named_contracts():
    names = qexact.presets()
    for required in ("mxfp8.ascend", "mxfp8.torchao.floor", "mxfp8.torchao.rceil", "mxfp8.te", "mx.ocp",
                     "mx.microxcaling", "int8.block.ascend", "int8.token.blaze", "int8.token.vllm", "q8_0.ggml",
                     "hif4"):
        assert required in names
    assert len(set(names)) == len(names)
    for name in names:
        assert qexact.describe(name)
        assert isinstance(qexact.params(name), dict)


def test_pool_mean_is_listed_but_is_not_a_quantizer():
    assert "pool.mean" in qexact.presets()
    assert qexact.params("pool.mean") == {"pool": "64", "divisor": "true_length", "out": "f32"}
    with pytest.raises(ValueError, match="not a quantizer"):
        qexact.quantize(np.ones((2, 64), np.float32), "pool.mean")


def test_params_apply_overrides_as_the_cli_spells_them():
    p = qexact.params("int8.token.blaze", scale_mode="before", scale_min=1e-6, range=128)
    assert (p["scale_mode"], p["scale_min"], p["range"]) == ("before", "1e-06", "128")
    assert qexact.params("mx.ocp", signed_zero=False)["signed_zero"] == "false"
    assert qexact.params("mx.ocp", signed_zero=np.bool_(True))["signed_zero"] == "true"
    # A float32 value is passed as its shortest float32 decimal, so it arrives unchanged.
    assert qexact.params("int8.token.blaze", scale_min=np.float32(1e-7))["scale_min"] == "1e-07"


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("preset", QUANTIZE_PRESETS)
def test_quantize_every_preset(preset, dtype):
    x = make_input(preset, dtype)
    outputs = qexact.quantize(x, preset)
    assert [a.shape for a in outputs] == [shape for _, _, shape in qexact.outputs(preset, x.shape)]
    payload, scale = outputs[:2]
    tensor_scale = outputs[2] if len(outputs) > 2 else None  # nvfp4 with a tensor scale: f32 ()
    payload_shape, scale_shape = _core.contract_shapes(preset, [], list(x.shape))
    assert payload.shape == tuple(payload_shape)
    assert scale.shape == tuple(scale_shape)
    params = qexact.params(preset)
    if FAMILY[preset] == "mx":
        assert payload.dtype == PAYLOAD_TYPES[params["element"]]
        assert scale.dtype == np.uint8
    elif FAMILY[preset] == "fp8.scaled":
        assert payload.dtype == PAYLOAD_TYPES[params["element"]]
        assert scale.dtype == np.float32
    elif FAMILY[preset] == "nvfp4":
        assert payload.dtype == np.uint8
        assert scale.dtype == ml_dtypes.float8_e4m3fn
    else:
        assert payload.dtype == np.int8
        assert scale.dtype == (np.float16 if params["scale_store"] == "f16" else np.float32)

    if tensor_scale is not None:
        assert tensor_scale.dtype == np.float32 and tensor_scale.shape == ()

    reference = qexact.quantize(x, preset, engine="reference")
    assert len(reference) == len(outputs) and all(same_bytes(a, r) for a, r in zip(outputs, reference))
    one_thread = qexact.quantize(x, preset, threads=1)
    assert len(one_thread) == len(outputs) and all(same_bytes(a, o) for a, o in zip(outputs, one_thread))

    y = qexact.dequantize(payload, scale, preset, shape=x.shape, tensor_scale_array=tensor_scale)
    assert y.dtype == np.float32 and y.shape == x.shape
    assert same_bytes(y, qexact.dequantize(payload, scale, preset, shape=x.shape, tensor_scale_array=tensor_scale,
                                           engine="reference"))


@pytest.mark.parametrize("preset", [p for p in MX_PRESETS if qexact.params(p)["element"] != "e2m1"])
def test_mx_payload_views_read_as_qexact_decodes(preset):
    """The ml_dtypes type a payload comes back as gives each code the value qexact gives it
    (E2M1 payloads, packed two codes per byte, stay uint8)."""
    element = qexact.params(preset)["element"]
    payload, _ = qexact.quantize(make_input(preset), preset)
    ours = qexact.decode(payload.view(np.uint8), element)
    theirs = payload.astype(np.float32)
    assert same_bytes(ours, theirs)


def test_dequantize_infers_the_shape_and_reads_packed_e2m1():
    x = make_input("mx.ocp.e2m1")
    payload, scale = qexact.quantize(x, "mx.ocp.e2m1")
    assert payload.shape == (6, 48)
    assert same_bytes(qexact.dequantize(payload, scale, "mx.ocp.e2m1"),
                      qexact.dequantize(payload, scale, "mx.ocp.e2m1", shape=x.shape))
    odd = make_input("mx.ocp.e2m1", shape=(3, 45))
    payload, scale = qexact.quantize(odd, "mx.ocp.e2m1")
    assert payload.shape == (3, 23)
    assert qexact.dequantize(payload, scale, "mx.ocp.e2m1", shape=odd.shape).shape == (3, 45)


@pytest.mark.parametrize("scale_mode", ["before", "after"])
@pytest.mark.parametrize("scale_min", [0.0, 1e-6, 0.5])
@pytest.mark.parametrize("range_", [127, 128])
def test_int8_per_token_is_the_blaze_preset(scale_mode, scale_min, range_):
    x = make_input("int8.token.blaze")
    x[2] = 0.0
    got = qexact.int8_per_token(x, scale_mode=scale_mode, scale_min=scale_min, range=range_)
    want = qexact.quantize(x, "int8.token.blaze", scale_mode=scale_mode, scale_min=scale_min, range=range_)
    assert same_bytes(got[0], want[0]) and same_bytes(got[1], want[1])
    assert got[1].shape == (5,)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("qdim", [-1, 0])
def test_hifloat4_fake_quant_keeps_shape_and_dtype(dtype, qdim):
    x = make_input("hif4", dtype)
    x = x if qdim == -1 else np.ascontiguousarray(np.concatenate([x] * 16, axis=0))  # 64 rows
    y = qexact.hifloat4_fake_quant(x, qdim)
    assert y.shape == x.shape and y.dtype == x.dtype
    assert same_bytes(y, qexact.hifloat4_fake_quant(x, qdim, engine="reference"))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=lambda t: np.dtype(t).name)
def test_hif4_pack_unpack(dtype):
    x = make_input("hif4", dtype)
    scale, value = qexact.hif4_pack(x)
    assert scale.shape == (4, 2, 4) and scale.dtype == np.uint8
    assert value.shape == (4, 64) and value.dtype == np.uint8
    ref_scale, ref_value = qexact.hif4_pack(x, engine="reference")
    assert same_bytes(scale, ref_scale) and same_bytes(value, ref_value)
    y = qexact.hif4_unpack(scale, value)
    assert y.shape == x.shape and y.dtype == np.float32
    assert same_bytes(y, qexact.hif4_unpack(scale, value, engine="reference"))
    # Storage holds exactly what fake quantization keeps.
    assert same_bytes(y, qexact.hifloat4_fake_quant(x.astype(np.float32)))


@pytest.mark.parametrize("out", ["float32", np.float16, ml_dtypes.bfloat16, "bf16"])
def test_pooled_block_mean(out):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 11, 3)).astype(np.float32)
    y = qexact.pooled_block_mean(x, 4, out=out)
    assert y.shape == (2, 3, 3)
    assert y.dtype == np.dtype({"float32": np.float32, "bf16": ml_dtypes.bfloat16}.get(out, out))
    assert same_bytes(y, qexact.pooled_block_mean(x, 4, out=out, engine="reference"))
    if y.dtype == np.float32:
        # Each cell is the mean of its real elements: the tail cell holds x[:, 8:11].
        np.testing.assert_array_equal(y[:, 2], np.float32(x[:, 8:11].astype(np.float64).mean(axis=1)))

    shards = [x[:, :5], x[:, 5:6], x[:, 6:]]
    assert same_bytes(qexact.pooled_block_mean_sharded(shards, 4, out=out), y)
    uniform = qexact.pooled_block_mean_sharded(shards, 4, out=out, divisor="uniform")
    assert same_bytes(uniform[:, :2], y[:, :2])  # full cells agree
    assert not same_bytes(uniform[:, 2], y[:, 2])  # the tail cell divides by 4, not 3


def test_cast_and_decode_round_trip_every_code():
    for element, bits in (("e4m3", 8), ("e5m2", 8), ("e2m3", 6), ("e3m2", 6), ("e2m1", 4)):
        codes = np.arange(1 << bits, dtype=np.uint8)
        values = qexact.decode(codes, element)
        finite = np.isfinite(values)
        back = qexact.cast(values[finite], element, overflow="inf" if element == "e5m2" else "saturate")
        assert np.array_equal(back, codes[finite]), element
        if element in ("e4m3", "e5m2"):
            nan_codes = codes[np.isnan(values)]
            assert np.array_equal(qexact.cast(values[np.isnan(values)], element), nan_codes & 0x80 | 0x7F)


def test_every_function_has_a_docstring():
    for name in qexact.__all__:
        assert getattr(qexact, name).__doc__, name
    assert qexact.__doc__


def test_docstring_examples_run():
    import doctest

    failed, attempted = doctest.testmod(qexact, extraglobs={"qexact": qexact, "np": np})
    assert attempted > 0 and failed == 0
