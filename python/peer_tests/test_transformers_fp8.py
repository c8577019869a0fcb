"""transformers 5.24.0's fine-grained FP8 (quant_method "fp8", 128x128 weight blocks) against
qexact's fp8.hf.block, byte for byte, both engines. The peer is the op transformers' loader runs
when it quantizes a bf16 model on load (integrations/finegrained_fp8.py Fp8Quantize._quantize_one,
which returns the E4M3 weight and its fp32 weight_scale_inv); the loader itself refuses to run it
without a GPU, the op is plain torch and runs here. It quantizes only weights whose both sides are
multiples of 128 (it returns any other unchanged), so every input here is.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch
from transformers.integrations.finegrained_fp8 import Fp8Quantize
from transformers.utils.quantization_config import FineGrainedFP8Config

import qexact

from conftest import SEED, qexact_cases
from stack_material import as_dtype, check_fp8, infer_on_peer, raw, to_torch, weights

PRESET = "fp8.hf.block"
_op = Fp8Quantize(SimpleNamespace(quantization_config=FineGrainedFP8Config()))


def peer(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(E4M3 payload bytes, weight_scale_inv) of a 2-D weight, or ValueError where transformers
    leaves the weight unquantized (a side that is not a multiple of 128)."""
    out = _op._quantize_one("m.weight", to_torch(x))
    if "m.weight_scale_inv" not in out:
        raise ValueError(f"transformers does not quantize a {x.shape} weight")
    return raw(out["m.weight"]), out["m.weight_scale_inv"].contiguous().numpy().copy()


def refused(cases) -> set[str]:
    """The cases transformers leaves unquantized: a side of the 2-D weight not a multiple of 128."""
    return {n for n, x in cases if x.shape[0] % 128 or x.shape[1] % 128}


def tiles(seed: int, nonfinite: bool) -> np.ndarray:
    """[384, 512]: weights() rows (zero, -0.0, tiny, ties, saturating, NaN / inf) in the first
    row of tiles, then whole tiles that decide the tile rules: all zero, all -0.0, an amax whose
    448-th reciprocal overflows (1e-40: the multiplier is inf), 2^-126, 3e38, and (nonfinite) a
    NaN tile with finite elements beside an inf tile."""
    x = np.concatenate([weights(seed, 128, 512, nonfinite), weights(seed + 1, 256, 512)], axis=0)
    rng = np.random.default_rng(seed + 2)
    t = rng.standard_normal((128, 128)).astype(np.float32)
    x[128:256, 0:128] = 0.0
    x[128:256, 128:256] = -0.0
    x[128:256, 256:384] = t * np.float32(1e-40 / np.abs(t).max())
    x[128:256, 384:512] = t * np.float32(2.0**-126 / np.abs(t).max())
    x[256:384, 0:128] = t * np.float32(3e38 / np.abs(t).max())
    if nonfinite:
        x[256 + 5, 128 + 7] = np.nan
        x[256 + 100, 256 + 127] = np.inf
        x[256 + 3, 384] = -np.inf
    return x


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_fp8_hf_block(dtype):
    cases = [(f"tiles {kind}", as_dtype(tiles(SEED + 71 + i, kind == "nonfinite"), dtype))
             for i, kind in enumerate(["finite", "nonfinite"])]
    check_fp8("transformers", PRESET, cases, peer)


def test_fp8_hf_block_adversarial_cases(tmp_path_factory):
    """Every case `qexact cases` exports for fp8.hf.block that transformers quantizes, as a 2-D
    weight: 37 of 41 (the ragged `tail` and three 32-row activations it leaves unquantized)."""
    cases = [(n, x.reshape(-1, x.shape[-1])) for n, x in qexact_cases(tmp_path_factory.mktemp("cases"), PRESET, {})]
    taken = [(n, x) for n, x in cases if n not in refused(cases)]
    assert len(taken) >= 37
    check_fp8("transformers", PRESET, taken, peer)


def test_infer_names_fp8_hf_block(tmp_path):
    """`qexact infer` on transformers' bytes for the exported cases it quantizes names fp8.hf.block
    exactly, with no override."""
    r = infer_on_peer(tmp_path, PRESET, peer, answered_only=True)
    assert (r["preset"], r["overrides"], r["exact"]) == (PRESET, {}, True), r
    print(f"infer on transformers' bytes: exact {r['preset']} ({r['cases_with_outputs']} cases)")


def test_probe_bytes():
    """The measured facts behind the preset: torch's 448.0 / amax is 448 * fp32(1 / amax), and a
    NaN tile is quantized under the multiplier 1 (its finite elements keep their own codes)."""
    x = np.zeros((128, 128), dtype=np.float32)
    x[0, 0], x[0, 1], x[0, 2] = 3.0, 1.0, -0.3
    payload, scale = peer(x)
    assert scale.view(np.uint32)[0, 0] == np.float32(1 / np.float32(448 * np.float32(1 / np.float32(3)))).view(np.uint32)
    assert (448.0 / torch.tensor(3.0)).view(torch.int32).item() == 0x43155556
    x[5, 5] = np.nan
    payload, scale = peer(x)
    assert float(scale[0, 0]) == 1.0 and payload[0, 0] == 0x44 and payload[0, 1] == 0x38 and payload[0, 2] == 0xAA
    for engine in ("reference", "fast"):
        q, s = qexact.quantize(x, PRESET, engine=engine)
        assert (np.asarray(q).view(np.uint8) == payload).all() and float(np.asarray(s)[0, 0]) == 1.0

