"""NVIDIA ModelOpt 0.47.0 (modelopt.torch.quantization, torch 2.15, CPU) against qexact's
fp8.modelopt.* presets, byte for byte, both engines: FP8QTensor.quantize (per tensor, axis=0,
128x128 blocks) payloads and scales, the HF export's FP8 weight (export/quant_utils.py
to_quantized_weight with an fp32 weight scale), and the fp8_eager fake quant's values against
qexact's quantize + dequantize.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

warnings.filterwarnings("ignore")  # modelopt warns about CUDA extensions and untested transformers

import modelopt.torch.quantization  # noqa: E402,F401  (the peer: an ImportError fails the suite)
from modelopt.torch.export.quant_utils import to_quantized_weight  # noqa: E402
from modelopt.torch.quantization import tensor_quant  # noqa: E402
from modelopt.torch.quantization.qtensor import FP8QTensor  # noqa: E402

import qexact  # noqa: E402
from conftest import ENGINES, SEED  # noqa: E402
from stack_material import BF16, as_dtype, check_fp8, check_mx, raw, scale_as_f32, to_torch, weights  # noqa: E402

KINDS = {"tensor": {}, "channel": {"axis": 0}, "block": {"block_sizes": {-1: 128, -2: 128}}}


def peer_qtensor(x: np.ndarray, kind: str) -> tuple[np.ndarray, np.ndarray]:
    q, s = FP8QTensor.quantize(to_torch(x), **KINDS[kind])
    return raw(q._quantized_data), scale_as_f32(s)


def cases(dtype: str, seed: int):
    return [(f"{kind} {rows}x{cols}", as_dtype(weights(seed + i, rows, cols, nonfinite=nf), dtype))
            for i, (kind, rows, cols, nf) in enumerate([("finite", 200, 384, False), ("nonfinite", 136, 256, True)])]


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_fp8_qtensor(kind, dtype):
    check_fp8("modelopt", f"fp8.modelopt.{kind}", cases(dtype, SEED + 31), lambda x: peer_qtensor(x, kind))


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("kind", ["tensor", "channel"])
def test_fp8_hf_export(kind, dtype):
    """The export's weight_scale is fp32(amax) / 448 in fp32 (amax per tensor, or per output row)."""
    def peer(x):
        t = to_torch(x)
        a = t.abs().amax().float() if kind == "tensor" else t.abs().amax(dim=1, keepdim=True).float()
        scale = a / 448.0
        q = to_quantized_weight(t, scale, "fp8")
        return raw(q), scale.contiguous().numpy().copy()
    check_fp8("modelopt", f"fp8.modelopt.export.{kind}", cases(dtype, SEED + 41), peer)


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_fp8_eager_fake_quant(dtype):
    """fp8_eager(x, amax) with amax = max |x| (a max calibrator) equals qexact's dequantize of its
    own quantize, rounded to x's dtype, value for value; amax at and around the 2^-24 threshold."""
    rng = np.random.default_rng(SEED + 51)
    diff = total = 0
    xs = [weights(SEED + 52, 64, 128)[8:]] + [rng.standard_normal((4, 32)).astype(np.float32) * np.float32(m)
                                             for m in (2.0**-24 / 3, 2.0**-25, 2.0**-23, 3.0, 1e30)]
    xs.append(np.zeros((2, 16), dtype=np.float32))
    for x32 in xs:
        x = as_dtype(x32, dtype)
        t = to_torch(x)
        amax = t.float().abs().amax()
        theirs = raw(tensor_quant.fp8_eager(t, amax))
        for engine in ENGINES:
            payload, scale = qexact.quantize(x, "fp8.modelopt.eager", engine=engine)
            values = np.asarray(qexact.dequantize(payload, scale, "fp8.modelopt.eager", shape=x.shape, engine=engine))
            ours = raw(torch.from_numpy(values).to(torch.bfloat16)) if x.dtype == BF16 else values.view(np.uint32)
            d = int(np.count_nonzero(ours.reshape(-1) != theirs.reshape(-1)))
            assert d == 0, f"amax {float(amax)!r} ({engine}): {d} differing of {theirs.size} values"
            diff += d
            total += theirs.size
    print(f"modelopt fp8_eager {dtype}: {diff} differing of {total} values")


def test_fp8_probe_bytes():
    """The measured bytes behind the presets' parameters."""
    x = np.array([[4.125, -1.140625, -0.0, -1e-6, 1.0, 0.0, 0.0, 0.0]], dtype=np.float32)
    for dtype, scale_bits, second in [("f32", 0x3C16DB6E, 0xEF), ("bf16", 0x3C170000, 0xF0)]:
        payload, scale = peer_qtensor(as_dtype(x, dtype), "tensor")
        assert scale.view(np.uint32).reshape(-1)[0] == scale_bits and payload.reshape(-1)[1] == second
        assert payload.reshape(-1)[2] == 0x80  # no zero point: -0.0 keeps its sign
    payload, scale = peer_qtensor(np.zeros((1, 8), dtype=np.float32), "tensor")
    assert float(scale.reshape(-1)[0]) == 0.0 and (payload == 0xFF).all()  # 0 / 0: the x86 default NaN
    for engine in ENGINES:
        q_payload, q_scale = qexact.quantize(np.zeros((1, 8), dtype=np.float32), "fp8.modelopt.tensor", engine=engine)
        assert (np.asarray(q_payload).view(np.uint8) == 0xFF).all() and float(np.asarray(q_scale)) == 0.0
    three = torch.tensor(3.0)
    assert (448.0 / three).view(torch.int32).item() == 0x43155556  # torch's scalar / tensor: a reciprocal


# ---- MXFP8QTensor / MXFP4QTensor ------------------------------------------------------------

from modelopt.torch.quantization.qtensor import MXFP4QTensor, MXFP8QTensor  # noqa: E402

from stack_material import mx_weights  # noqa: E402


def peer_mx(x: np.ndarray, bits: int) -> tuple[np.ndarray, np.ndarray]:
    t = to_torch(x)
    q, s = MXFP8QTensor.quantize(t) if bits == 8 else MXFP4QTensor.quantize(t, 32)
    return raw(q._quantized_data), raw(s)


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("bits", [8, 4])
def test_mx_qtensor(bits, dtype):
    shapes = [("finite", 64, 384, False), ("nonfinite", 128, 256, True)]
    if bits == 8:
        shapes.append(("ragged", 24, 100, True))  # the last dimension zero-padded to whole blocks
    cases = [(f"{kind} {rows}x{cols}", as_dtype(mx_weights(SEED + 71 + i, rows, max(cols, 96), nf)[:, :cols], dtype))
             for i, (kind, rows, cols, nf) in enumerate(shapes)]
    # ModelOpt's NaN groups are all 0x8 (MXFP4): compared exactly.
    check_mx("modelopt", "mxfp8.modelopt" if bits == 8 else "mxfp4.modelopt", cases, lambda x: peer_mx(x, bits),
             e2m1_nan_sign_free=False)


def test_mx_probe_bytes():
    """MXFP4: ties toward zero and every zero 0x8; MXFP8 amax 448 keeps byte 0x7F."""
    x = np.zeros((1, 32), dtype=np.float32)
    x[0, :16] = [6, .25, .75, 1.25, 1.75, 2.5, 3.5, 5, -0.0, -.1, -.25, -5, 0, 1, 2, 4]
    payload, scale = peer_mx(x, 4)
    assert payload.reshape(-1)[:8].tobytes() == bytes([0x07, 0x21, 0x43, 0x65, 0x88, 0xE8, 0x28, 0x64])
    for engine in ENGINES:
        q_payload, q_scale = qexact.quantize(x, "mxfp4.modelopt", engine=engine)
        assert np.asarray(q_payload).view(np.uint8).tobytes() == payload.tobytes()
        assert np.asarray(q_scale).view(np.uint8).tobytes() == scale.tobytes()
    y = np.zeros((1, 32), dtype=np.float32)
    y[0, 0] = 448.0
    assert peer_mx(y, 8)[1].reshape(-1)[0] == 0x7F


# ---- NVFP4QTensor -----------------------------------------------------------------------------

from modelopt.torch.quantization.qtensor import NVFP4QTensor  # noqa: E402

from stack_material import check_nvfp4, check_nvfp4_exported, nvfp4_tensors  # noqa: E402


def peer_nvfp4(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """NVFP4QTensor.quantize(x, 16): packed codes, E4M3 block scales, weights_scaling_factor_2."""
    q, s, t = NVFP4QTensor.quantize(to_torch(x), 16)
    return raw(q._quantized_data), raw(s), t.detach().float().reshape(-1).numpy().copy()


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_nvfp4_qtensor(dtype):
    check_nvfp4("ModelOpt", "nvfp4.modelopt", nvfp4_tensors(SEED + 81, dtype), peer_nvfp4)


def test_nvfp4_probe_bytes():
    """The measured bytes behind nvfp4.modelopt's steps: x / fp32(s * t) (x = 0x3E7DB844 gives 1.25,
    code 2, where (x / t) / s gives 1.2500001, code 3), -0.0 -> 0x0, a zero block's scale 1.0."""
    x = np.zeros((1, 32), dtype=np.float32)
    x[0, :16] = [6, .25, .75, 1.25, 1.75, 2.5, 3.5, 5, -0.0, -.1, -.25, -5, 0, 1, 2, 4]
    payload, scale, _ = peer_nvfp4(x)
    check_nvfp4("ModelOpt", "nvfp4.modelopt", [("probe", x)], peer_nvfp4)
    assert scale.reshape(-1)[1] == 0x38  # the all-zero second block: 1.0
    assert payload.reshape(-1)[4] & 0xF == 0x0  # -0.0


# ---- qexact's adversarial cases and probes through the library ---------------------------------

from conftest import qexact_cases  # noqa: E402


@pytest.mark.parametrize("kind", list(KINDS))
def test_fp8_adversarial_cases(tmp_path_factory, kind):
    """Every case `qexact cases` exports for the preset, as a 2-D weight (block: 128x128 tiles of it)."""
    preset = f"fp8.modelopt.{kind}"
    cases = [(n, x.reshape(-1, x.shape[-1]) if x.ndim != 2 else x)
             for n, x in qexact_cases(tmp_path_factory.mktemp("cases"), preset, {})]
    usable = [(n, x) for n, x in cases if x.size]
    assert len(usable) >= 10, [n for n, _ in cases]
    check_fp8("modelopt", preset, usable, lambda x: peer_qtensor(x, kind))


@pytest.mark.parametrize("bits", [8, 4])
def test_mx_adversarial_cases(tmp_path_factory, bits):
    preset = "mxfp8.modelopt" if bits == 8 else "mxfp4.modelopt"
    cases = [(n, x.reshape(-1, x.shape[-1]) if x.ndim != 2 else x)
             for n, x in qexact_cases(tmp_path_factory.mktemp("cases"), preset, {})]
    usable = [(n, x) for n, x in cases if x.size and (bits == 8 or x.shape[1] % 32 == 0)]
    assert len(usable) >= 10, [n for n, _ in cases]
    check_mx("modelopt", preset, usable, lambda x: peer_mx(x, bits), e2m1_nan_sign_free=False)


# ---- the lab names the library's recipe ---------------------------------------------------------

from stack_material import infer_on_peer, nan_cases  # noqa: E402


@pytest.mark.parametrize("preset,peer", [("fp8.modelopt.channel", lambda x: peer_qtensor(x, "channel")),
                                         ("mxfp4.modelopt", lambda x: peer_mx(x, 4)),
                                         ("mxfp8.modelopt", lambda x: peer_mx(x, 8))])
def test_infer_names_the_preset(tmp_path, preset, peer):
    """`qexact infer` on ModelOpt's own bytes for the exported cases names this preset with no
    override; what it cannot reproduce lies only in cases holding NaN or inf (NaN signs and bits)."""
    r = infer_on_peer(tmp_path, preset, peer)
    assert r["preset"] == preset and r["overrides"] == {}, r
    assert set(r.get("residual", {}).get("cases", {})) <= nan_cases(r["lab"]), r["residual"]
    print(f"infer on ModelOpt's bytes: {'exact' if r['exact'] else 'closest'} {r['preset']}, "
          f"residual in {sorted(r.get('residual', {}).get('cases', {}))}")



def test_nvfp4_adversarial_cases(tmp_path_factory):
    """Every finite case `qexact cases` exports for nvfp4.modelopt, through the library."""
    check_nvfp4_exported(tmp_path_factory.mktemp("cases"), "ModelOpt", "nvfp4.modelopt", peer_nvfp4)


def test_nvfp4_infer_names_the_preset(tmp_path):
    """`qexact infer` on ModelOpt's NVFP4 bytes (payload, block scales, tensor scale) for the
    exported cases names nvfp4.modelopt, exact, with no override."""
    r = infer_on_peer(tmp_path, "nvfp4.modelopt", peer_nvfp4)
    assert (r["preset"], r["overrides"], r["exact"]) == ("nvfp4.modelopt", {}, True), r
