"""compressed-tensors 0.20.1 (torch 2.15, CPU: its eager torch code, Triton is GPU-only) against
qexact's fp8.ct.* presets, byte for byte, both engines: E4M3 payloads and scales.

The peer's calls are the library's own: ``calculate_qparams`` on the per-strategy min / max (what
llm-compressor's min-max observer reduces: amin / amax over each scale domain) and
``forward.quantize`` with the zero point it returns -- the compressor's ``compress`` runs the same
``quantize`` -- and ``compute_dynamic_scales_and_zp`` for dynamic activations. The scale is in the
input's dtype, as the library keeps it (bf16 values are exact in qexact's fp32 scale).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from compressed_tensors.quantization import QuantizationArgs
from compressed_tensors.quantization.lifecycle.forward import quantize as ct_quantize
from compressed_tensors.quantization.utils import calculate_qparams, compute_dynamic_scales_and_zp

import qexact
from conftest import ENGINES, SEED
from stack_material import as_dtype, check_fp8, check_mx, raw, scale_as_f32, to_torch, weights


def args(strategy: str, dynamic: bool = False) -> QuantizationArgs:
    kw = dict(num_bits=8, type="float", symmetric=True, strategy=strategy, dynamic=dynamic)
    if strategy == "group":
        kw["group_size"] = 128
    if strategy == "block":
        kw["block_structure"] = [128, 128]
    return QuantizationArgs(**kw)


def domain_min_max(t: torch.Tensor, strategy: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The min and max of each scale domain of a 2-D weight, shaped as the library's scales."""
    if strategy == "tensor":
        return t.amin().reshape(1), t.amax().reshape(1)
    if strategy == "channel":
        return t.amin(dim=1, keepdim=True), t.amax(dim=1, keepdim=True)
    if strategy == "group":
        g = t.unflatten(-1, (-1, 128))
        return g.amin(dim=-1), g.amax(dim=-1)
    rows, cols = t.shape  # block: zero rows pad the last tile row, as the library pads
    pad = -rows % 128
    p = torch.cat([t, torch.zeros(pad, cols, dtype=t.dtype)]) if pad else t
    tiles = p.reshape(p.shape[0] // 128, 128, cols // 128, 128)
    return tiles.amin(dim=(1, 3)), tiles.amax(dim=(1, 3))


def peer_weight(x: np.ndarray, strategy: str) -> tuple[np.ndarray, np.ndarray]:
    t = to_torch(x)
    a = args(strategy)
    scale, zp = calculate_qparams(*domain_min_max(t, strategy), a)
    q = ct_quantize(t, scale.to(t.dtype), zp, a, dtype=torch.float8_e4m3fn)
    return raw(q), scale_as_f32(scale.to(t.dtype))


def peer_dynamic(x: np.ndarray, strategy: str) -> tuple[np.ndarray, np.ndarray]:
    t = to_torch(x)
    a = args(strategy, dynamic=True)
    scale, zp = compute_dynamic_scales_and_zp(t, a, module=None)
    q = ct_quantize(t, scale, zp, a, dtype=torch.float8_e4m3fn)
    return raw(q), scale_as_f32(scale)


WEIGHT_PRESETS = {"tensor": "fp8.ct.tensor", "channel": "fp8.ct.channel", "group": "fp8.ct.group",
                  "block": "fp8.ct.block"}


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("strategy", list(WEIGHT_PRESETS))
def test_fp8_weights(strategy, dtype):
    cases = [(f"{kind} {rows}x{cols}", as_dtype(weights(SEED + 11 + i, rows, cols, nonfinite=nf), dtype))
             for i, (kind, rows, cols, nf) in enumerate([("finite", 200, 384, False), ("nonfinite", 136, 256, True)])]
    check_fp8("compressed-tensors", WEIGHT_PRESETS[strategy], cases, lambda x: peer_weight(x, strategy))


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("strategy", ["token", "tensor", "group"])
def test_fp8_dynamic_activations(strategy, dtype):
    # Activations (B, T, H): token is one scale per (b, t), a row of qexact's [B*T, H] view.
    x = weights(SEED + 21, 96, 256, nonfinite=True)
    cases = [("activations 4x24x256", as_dtype(x.reshape(4, 24, 256), dtype))]
    preset = {"token": "fp8.ct.token", "tensor": "fp8.ct.tensor", "group": "fp8.ct.group"}[strategy]
    check_fp8("compressed-tensors", preset, cases, lambda x: peer_dynamic(x, strategy))


def test_fp8_probe_bytes():
    """The measured bytes that set the preset's parameters (the library, not a reading of it)."""
    x = np.array([[4.125, -1.140625, -0.0, -1e-6, 1.0, 0.0, 0.0, 0.0]], dtype=np.float32)
    for dtype, scale_bits, second in [("f32", 0x3C16DB6E, 0xEF), ("bf16", 0x3C170000, 0xF0)]:
        xi = as_dtype(x, dtype)
        payload, scale = peer_weight(xi, "tensor")
        assert scale.view(np.uint32)[0] == scale_bits and payload[0, 1] == second
        assert payload[0, 2] == 0x00 and payload[0, 3] == 0x80  # -0.0 + 0 is +0; -1e-6 / s keeps its sign
        for engine in ENGINES:
            q_payload, q_scale = qexact.quantize(xi, "fp8.ct.tensor", engine=engine)
            assert np.asarray(q_payload).view(np.uint8).tobytes() == payload.tobytes(), (dtype, engine)
            assert np.asarray(q_scale).view(np.uint32).reshape(-1)[0] == scale_bits, (dtype, engine)
    zeros = np.zeros((1, 8), dtype=np.float32)
    for dtype, eps in [("f32", 2.0**-23), ("bf16", 2.0**-7)]:
        _, scale = peer_weight(as_dtype(zeros, dtype), "tensor")
        assert scale[0] == eps
        for engine in ENGINES:
            _, q_scale = qexact.quantize(as_dtype(zeros, dtype), "fp8.ct.tensor", engine=engine)
            assert float(np.asarray(q_scale).reshape(-1)[0]) == eps


# ---- MXFP8 / MXFP4 -------------------------------------------------------------------------
# A NaN group's scale depends on which of ATen's loops reduces it (the vector body makes the NaN
# an all-ones pattern: byte 0; the scalar tail keeps it: byte 0x7F). qexact models the vector
# body; these tensors have whole multiples of 32 groups, so no group falls in a scalar tail.

from compressed_tensors.compressors.mxfp4.base import MXFP4PackedCompressor  # noqa: E402
from compressed_tensors.compressors.mxfp8.base import MXFP8QuantizationCompressor  # noqa: E402
from compressed_tensors.quantization import initialize_module_for_quantization, preset_name_to_scheme  # noqa: E402
from compressed_tensors.offload import update_offload_parameter  # noqa: E402

from stack_material import mx_weights  # noqa: E402


def peer_mx_weight(x: np.ndarray, bits: int) -> tuple[np.ndarray, np.ndarray]:
    """The MXFP8A16 / MXFP4A16 weight path: a Linear initialised by the library, its group min /
    max (what the observer reduces), calculate_qparams, the compressor."""
    w = to_torch(x)
    scheme = preset_name_to_scheme("MXFP8A16" if bits == 8 else "MXFP4A16", ["Linear"])
    m = torch.nn.Linear(w.shape[1], w.shape[0], bias=False, dtype=w.dtype)
    m.weight.data.copy_(w)
    initialize_module_for_quantization(m, scheme, force_zero_point=True)
    g = m.weight.data.unflatten(-1, (-1, 32))
    scale, zp = calculate_qparams(g.amin(dim=-1), g.amax(dim=-1), scheme.weights)
    update_offload_parameter(m, "weight_scale", scale)
    if hasattr(m, "weight_zero_point"):
        update_offload_parameter(m, "weight_zero_point", zp)
    compressor = MXFP8QuantizationCompressor if bits == 8 else MXFP4PackedCompressor
    out = compressor.compress({k: v.data for k, v in m.named_parameters()}, scheme)
    payload = out["weight"] if bits == 8 else out["weight_packed"]
    return raw(payload), raw(out["weight_scale"])


def mx_cases(dtype: str):
    return [(f"{kind} {rows}x{cols}", as_dtype(mx_weights(SEED + 61 + i, rows, cols, nf), dtype))
            for i, (kind, rows, cols, nf) in enumerate([("finite", 64, 384, False), ("nonfinite", 128, 256, True)])]


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("bits", [8, 4])
def test_mx_weights(bits, dtype):
    check_mx("compressed-tensors", "mxfp8.ct" if bits == 8 else "mxfp4.ct", mx_cases(dtype),
             lambda x: peer_mx_weight(x, bits), e2m1_nan_sign_free=True)


def test_mx_probe_bytes():
    """amax 448 rounds to 2^9 at E2M1 precision: byte 0x80 (the element's own precision gives 0x7F)."""
    x = np.zeros((1, 32), dtype=np.float32)
    x[0, 0] = 448.0
    _, scale = peer_mx_weight(x, 8)
    assert scale.reshape(-1)[0] == 0x80
    for engine in ENGINES:
        _, q_scale = qexact.quantize(x, "mxfp8.ct", engine=engine)
        assert np.asarray(q_scale).view(np.uint8).reshape(-1)[0] == 0x80


# ---- NVFP4 (nvfp4-pack-quantized) -----------------------------------------------------------------

from compressed_tensors.compressors.nvfp4.base import NVFP4PackedCompressor  # noqa: E402
from compressed_tensors.quantization.utils import generate_gparam  # noqa: E402

from stack_material import check_nvfp4, check_nvfp4_exported, nvfp4_tensors  # noqa: E402


def peer_nvfp4(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The NVFP4A16 weight path as llm-compressor drives it: a Linear initialised by the library,
    the global scale from the weight's min / max (generate_gparam, in the weight's dtype), the
    group min / max through calculate_qparams with that global scale, the compressor."""
    w = to_torch(x)
    scheme = preset_name_to_scheme("NVFP4A16", ["Linear"])
    m = torch.nn.Linear(w.shape[1], w.shape[0], bias=False, dtype=w.dtype)
    m.weight.data.copy_(w)
    initialize_module_for_quantization(m, scheme, force_zero_point=True)
    update_offload_parameter(m, "weight_global_scale", generate_gparam(m.weight.data.amin(), m.weight.data.amax()))
    g = m.weight.data.unflatten(-1, (-1, 16))
    scale, zp = calculate_qparams(g.amin(dim=-1), g.amax(dim=-1), scheme.weights, global_scale=m.weight_global_scale)
    update_offload_parameter(m, "weight_scale", scale)
    if hasattr(m, "weight_zero_point"):
        update_offload_parameter(m, "weight_zero_point", zp)
    out = NVFP4PackedCompressor.compress({k: v.data for k, v in m.named_parameters()}, scheme)
    return raw(out["weight_packed"]), raw(out["weight_scale"]), out["weight_global_scale"].float().numpy().copy()


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_nvfp4_weights(dtype):
    check_nvfp4("compressed-tensors", "nvfp4.ct", nvfp4_tensors(SEED + 91, dtype), peer_nvfp4)


def test_nvfp4_probe_bytes():
    """gs = 2688 / amax as torch's reciprocal times 2688 (amax 7: 0x43C00001, the division gives
    0x43C00000); a zero block's scale 0x20; -0.0 -> 0x0 and -0.1 -> 0x8; the bf16 global scale."""
    x = np.zeros((1, 32), dtype=np.float32)
    x[0, :16] = [7, .25, .75, 1.25, 1.75, 2.5, 3.5, 5, -0.0, -.1, -.25, -5, 0, 1, 2, 4]
    for dtype in ("f32", "bf16"):
        xi = as_dtype(x, dtype)
        payload, scale, gs = peer_nvfp4(xi)
        if dtype == "f32":
            assert gs.view(np.uint32)[0] == 0x43C00001
        assert scale.reshape(-1)[1] == 0x20 and payload.reshape(-1)[4] == 0x80
        check_nvfp4("compressed-tensors", "nvfp4.ct", [(f"probe {dtype}", xi)], peer_nvfp4)


# ---- qexact's adversarial cases and probes through the library ---------------------------------

from conftest import qexact_cases  # noqa: E402


def two_d(x: np.ndarray) -> np.ndarray:
    return x.reshape(-1, x.shape[-1]) if x.ndim != 2 else x


@pytest.mark.parametrize("strategy", list(WEIGHT_PRESETS))
def test_fp8_adversarial_cases(tmp_path_factory, strategy):
    """Every case `qexact cases` exports for the preset (ties, amax at 2^k, the max outside the first
    vector, tails, zero / tiny / NaN / inf groups, f32 and bf16) that the library's strategy can take
    (group and block need whole groups of 128 along the last axis), as a 2-D weight."""
    preset = WEIGHT_PRESETS[strategy]
    cases = [(n, two_d(x)) for n, x in qexact_cases(tmp_path_factory.mktemp("cases"), preset, {})]
    usable = [(n, x) for n, x in cases if x.size and (strategy in ("tensor", "channel") or x.shape[1] % 128 == 0)]
    assert len(usable) >= (10 if strategy in ("tensor", "channel") else 1), [n for n, _ in cases]
    check_fp8("compressed-tensors", preset, usable, lambda x: peer_weight(x, strategy))


@pytest.mark.parametrize("bits", [8, 4])
def test_mx_adversarial_cases(tmp_path_factory, bits):
    preset = "mxfp8.ct" if bits == 8 else "mxfp4.ct"
    cases = [(n, two_d(x)) for n, x in qexact_cases(tmp_path_factory.mktemp("cases"), preset, {})]
    # A NaN group's bytes depend on ATen's loop (see above): cases holding NaN run when they have
    # a whole multiple of 32 groups, so that no group falls in the scalar tail.
    usable = [(n, x) for n, x in cases if x.size and x.shape[1] % 32 == 0 and
              ((x.size // 32) % 32 == 0 or not np.isnan(np.asarray(x, dtype=np.float32)).any())]
    check_mx("compressed-tensors", preset, usable, lambda x: peer_mx_weight(x, bits), e2m1_nan_sign_free=True)
    assert usable, [n for n, _ in cases]


# ---- the lab names the library's recipe ---------------------------------------------------------

from stack_material import infer_on_peer, nan_cases  # noqa: E402


# The lab's cases are a few groups each, so all their NaN groups fall in ATen's scalar tail (byte
# 0x7F, not nonfinite=ct's vector-body byte 0): there infer may settle on another `nonfinite`.
@pytest.mark.parametrize("preset,peer,free", [("fp8.ct.channel", lambda x: peer_weight(x, "channel"), set()),
                                              ("mxfp4.ct", lambda x: peer_mx_weight(x, 4), {"nonfinite"})])
def test_infer_names_the_preset(tmp_path, preset, peer, free):
    """`qexact infer` on the library's own bytes for the exported cases names this preset, with no
    override but of a parameter only non-finite groups tell; what it cannot reproduce lies only in
    cases holding NaN or inf (NaN signs and a NaN scale's bits, which torch's loops decide)."""
    r = infer_on_peer(tmp_path, preset, peer)
    assert r["preset"] == preset and set(r["overrides"]) <= free, r
    assert set(r.get("residual", {}).get("cases", {})) <= nan_cases(r["lab"]), r["residual"]
    print(f"infer on compressed-tensors' bytes: {'exact' if r['exact'] else 'closest'} {r['preset']}, "
          f"residual in {sorted(r.get('residual', {}).get('cases', {}))}")



def test_nvfp4_adversarial_cases(tmp_path_factory):
    """Every finite case `qexact cases` exports for nvfp4.ct, through the library."""
    check_nvfp4_exported(tmp_path_factory.mktemp("cases"), "compressed-tensors", "nvfp4.ct", peer_nvfp4)


def test_nvfp4_infer_names_the_preset(tmp_path):
    """`qexact infer` on compressed-tensors's NVFP4 bytes (payload, block scales, tensor scale) for the
    exported cases names nvfp4.ct, exact, with no override."""
    r = infer_on_peer(tmp_path, "nvfp4.ct", peer_nvfp4)
    assert (r["preset"], r["overrides"], r["exact"]) == ("nvfp4.ct", {}, True), r
