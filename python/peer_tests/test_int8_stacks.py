"""int8 of compressed-tensors 0.20.1 and ModelOpt 0.47.0 (torch 2.15, CPU) against qexact's
int8.ct.token / int8.ct.group and int8.modelopt.channel, byte for byte, both engines: int8
payloads and f32 scales (bf16 / f16 scales are exact in f32).

The peers' calls are the libraries' own: compressed-tensors' ``calculate_qparams`` on each
domain's min / max (what llm-compressor's observer reduces) and ``forward.quantize`` for weights,
``compute_dynamic_scales_and_zp`` for dynamic per-token activations; ModelOpt's
``INT8QTensor.quantize(w, axis=0)``. Finite inputs only: qexact's int8 families refuse NaN and
inf (compressed-tensors gives such a row the scale NaN or inf and codes 0; not modelled).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from compressed_tensors.quantization import QuantizationArgs
from compressed_tensors.quantization.lifecycle.forward import quantize as ct_quantize
from compressed_tensors.quantization.utils import calculate_qparams, compute_dynamic_scales_and_zp
from modelopt.torch.quantization.qtensor import INT8QTensor

import qexact
from conftest import ENGINES, SEED, qexact_cases
from stack_material import BF16, as_dtype, infer_on_peer, scale_as_f32, to_torch, weights


def as_f16(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x, dtype=np.float32).astype(np.float16)


def in_dtype(x: np.ndarray, dtype: str) -> np.ndarray:
    return as_f16(x) if dtype == "f16" else as_dtype(x, dtype)


def int8_bytes(t: torch.Tensor) -> np.ndarray:
    return t.detach().contiguous().to(torch.int8).numpy().copy()


def ct_args(strategy: str, dynamic: bool = False) -> QuantizationArgs:
    kw = dict(num_bits=8, type="int", symmetric=True, strategy=strategy, dynamic=dynamic)
    if strategy == "group":
        kw["group_size"] = 128
    return QuantizationArgs(**kw)


def peer_ct_weight(x: np.ndarray, strategy: str) -> tuple[np.ndarray, np.ndarray]:
    t = to_torch(x)
    a = ct_args(strategy)
    if strategy == "channel":
        mn, mx = t.amin(dim=1, keepdim=True), t.amax(dim=1, keepdim=True)
    else:
        g = t.unflatten(-1, (-1, 128))
        mn, mx = g.amin(dim=-1), g.amax(dim=-1)
    scale, zp = calculate_qparams(mn, mx, a)
    q = ct_quantize(t, scale.to(t.dtype), zp, a, dtype=torch.int8)
    return int8_bytes(q), scale_as_f32(scale.to(t.dtype))


def peer_ct_token(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Dynamic per-token activations of a (1, T, H) tensor: one scale per (b, t)."""
    t = to_torch(x).unsqueeze(0)
    a = ct_args("token", dynamic=True)
    scale, zp = compute_dynamic_scales_and_zp(t, a, module=None)
    q = ct_quantize(t, scale, zp, a, dtype=torch.int8)
    return int8_bytes(q[0]), scale_as_f32(scale)


def peer_modelopt(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    qt, scale = INT8QTensor.quantize(to_torch(x), axis=0)
    return int8_bytes(qt._quantized_data), scale_as_f32(scale)


PEERS = {
    "int8.ct.token": lambda x: peer_ct_weight(x, "channel"),
    "int8.ct.group": lambda x: peer_ct_weight(x, "group"),
    "int8.modelopt.channel": peer_modelopt,
}


def check_int8(stack: str, preset: str, cases, peer) -> None:
    """Each case through the peer and both engines: 0 differing payload and scale bytes."""
    diff = total = 0
    for name, x in cases:
        payload, scale = peer(x)
        for engine in ENGINES:
            q_payload, q_scale = (np.asarray(a) for a in qexact.quantize(x, preset, engine=engine))
            d = int(np.count_nonzero(q_payload.view(np.uint8).reshape(-1) != payload.view(np.uint8).reshape(-1)))
            ds = int(np.count_nonzero(q_scale.astype(np.float32).view(np.uint32).reshape(-1)
                                      != scale.astype(np.float32).view(np.uint32).reshape(-1)))
            assert q_payload.size == payload.size and q_scale.size == scale.size, (name, engine)
            assert d + ds == 0, f"{name} ({engine}): {d} payload and {ds} scale bytes differ of {payload.size}"
            diff += d + ds
            total += payload.size + scale.size * 4
    print(f"{stack} {preset}: {len(cases)} cases, {diff} differing of {total} bytes")


def seeded(seed: int, dtype: str) -> list[tuple[str, np.ndarray]]:
    """Weights with zero, -0.0, subnormal, tie-laden, huge and one-value rows; f16 rows kept in range."""
    x = weights(seed, 136, 384)
    if dtype == "f16":
        x[4] = np.float32(6.0e4) * np.random.default_rng(seed).random(384).astype(np.float32)
        x = np.clip(x, -6.0e4, 6.0e4)
    return [(f"weights 136x384 {dtype}", in_dtype(x, dtype))]


@pytest.mark.parametrize("dtype", ["f32", "bf16", "f16"])
@pytest.mark.parametrize("preset", list(PEERS))
def test_int8_weights(preset, dtype):
    stack = "ModelOpt" if "modelopt" in preset else "compressed-tensors"
    check_int8(stack, preset, seeded(SEED + 31, dtype), PEERS[preset])


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_int8_dynamic_tokens(dtype):
    x = weights(SEED + 41, 96, 256)
    check_int8("compressed-tensors", "int8.ct.token", [("activations 96x256", as_dtype(x, dtype))], peer_ct_token)


@pytest.mark.parametrize("preset", list(PEERS))
def test_int8_adversarial_cases(tmp_path_factory, preset):
    """Every finite case `qexact cases` exports for the preset, as a 2-D tensor."""
    cases = [(n, x.reshape(-1, x.shape[-1]) if x.ndim != 2 else x)
             for n, x in qexact_cases(tmp_path_factory.mktemp("cases"), preset, {})]
    usable = [(n, x) for n, x in cases
              if x.size and np.isfinite(np.asarray(x, dtype=np.float32)).all()
              and (preset != "int8.ct.group" or x.shape[1] % 128 == 0)]
    assert len(usable) >= 10, [n for n, _ in cases]
    stack = "ModelOpt" if "modelopt" in preset else "compressed-tensors"
    check_int8(stack, preset, usable, PEERS[preset])


def test_int8_probe_bytes():
    """The measured bytes that set the presets' parameters: 127.5 and 127, the bf16 double rounding,
    the zero rows (eps 2^-23 / 2^-7; ModelOpt's scale 0), an underflowing scale."""
    x = np.zeros((3, 8), dtype=np.float32)
    x[0] = [3.0, -3.0, 1.0, -0.0, 0.5, 1.5, 2.9, -1e-3]
    x[2, :2] = [1e-40, -1e-40]
    for dtype, ct_scale, ct_29 in [("f32", 0x3CC0C0C1, 123), ("bf16", 0x3CC10000, 124)]:
        xi = as_dtype(x, dtype)
        payload, scale = peer_ct_weight(xi, "channel")
        assert scale.view(np.uint32)[0, 0] == ct_scale and payload[0, 6] == ct_29
        assert payload[0, 0] == 127 and payload[0, 1] == -128  # -amax / (amax / 127.5) = -127.5 -> -128
        assert scale[1, 0] == (2.0**-23 if dtype == "f32" else 2.0**-7)
        check_int8("compressed-tensors", "int8.ct.token", [("probe " + dtype, xi)], PEERS["int8.ct.token"])
        payload, scale = peer_modelopt(xi)
        assert scale[1, 0] == 0.0 and not payload[1].any()
        check_int8("ModelOpt", "int8.modelopt.channel", [("probe " + dtype, xi)], peer_modelopt)
    # bf16: 2^-133 / 127 rounds to a zero scale, and ModelOpt divides by it: +-inf saturates.
    tiny = np.zeros((2, 8), dtype=np.float32)
    tiny[0, :3] = [2.0**-133, -(2.0**-133), 0.0]
    tiny[1] = 1.0
    payload, scale = peer_modelopt(as_dtype(tiny, "bf16"))
    assert scale[0, 0] == 0.0 and list(payload[0, :3]) == [127, -128, 0]
    check_int8("ModelOpt", "int8.modelopt.channel", [("underflow", as_dtype(tiny, "bf16"))], peer_modelopt)


@pytest.mark.parametrize("preset", ["int8.ct.token", "int8.modelopt.channel"])
def test_infer_names_the_preset(tmp_path, preset):
    """`qexact infer` on the library's own bytes for the exported cases names this preset, exact."""
    r = infer_on_peer(tmp_path, preset, PEERS[preset])
    assert (r["preset"], r["overrides"], r["exact"]) == (preset, {}, True), r
