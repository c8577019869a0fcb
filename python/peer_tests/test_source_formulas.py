"""The source-read FP8 group presets against their sources' formulas, written here in torch (CPU)
from the code as read: DeepGEMM's ``per_token_cast_to_fp8(x, use_ue8m0=True)``
(deep_gemm/utils/math.py, pure torch but shipped only with the CUDA package) and vLLM's
``per_token_group_quant_fp8`` (its CUDA op and its Triton fallback, read as IEEE fp32 steps).

Not a peer: neither runs here, so these presets stay verified against "source". What this proves
is that both engines compute the formula as read, byte for byte, on the adversarial cases and on
seeded weights with the rows that decide the rules (zero and tiny groups under each floor, amaxes
at and one ulp around 448 * 2^k, where a power-of-two scale moves), f32 and bf16.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import qexact
from conftest import ENGINES, SEED, qexact_cases
from stack_material import BF16, as_dtype, raw, to_torch, weights

GROUP = 128


def pow2_up(s: torch.Tensor) -> torch.Tensor:
    """The power of two at or above each positive fp32 s, on the bits (DeepGEMM's ceil_to_ue8m0,
    vLLM's register path)."""
    bits = s.view(torch.int32)
    exp = ((bits >> 23) & 0xFF) + (bits & 0x7FFFFF).ne(0).to(torch.int32)
    return (exp.clamp(1, 254) << 23).view(torch.float32)


def grouped(x: torch.Tensor) -> torch.Tensor:
    """[rows, K] as [rows, ceil(K / 128), 128] in fp32, the last group padded with zeros."""
    rows, k = x.shape
    padded = torch.zeros((rows, -(-k // GROUP) * GROUP), dtype=x.dtype)
    padded[:, :k] = x
    return padded.float().view(rows, -1, GROUP)


def deepgemm_ue8m0(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    k = x.shape[1]
    xv = grouped(x)
    sf = pow2_up(xv.abs().amax(dim=2).clamp(1e-4) / 448.0)
    q = (xv * (1.0 / sf.unsqueeze(2))).to(torch.float8_e4m3fn).view(x.shape[0], -1)[:, :k]
    return q, sf


def vllm_group(x: torch.Tensor, ue8m0: bool, triton: bool) -> tuple[torch.Tensor, torch.Tensor]:
    k = x.shape[1]
    xv = grouped(x)
    s = xv.abs().amax(dim=2).clamp_min(1e-10) / 448.0  # the absmax starts at eps
    if ue8m0:
        s = pow2_up(s if triton else s.clamp_min(1e-10))
    q = (xv / s.unsqueeze(2)).clamp(-448.0, 448.0).to(torch.float8_e4m3fn).view(x.shape[0], -1)[:, :k]
    return q, s


FORMULAS = {
    "fp8.deepgemm.1x128.ue8m0": deepgemm_ue8m0,
    "fp8.vllm.group": lambda x: vllm_group(x, ue8m0=False, triton=False),
    "fp8.vllm.group.ue8m0": lambda x: vllm_group(x, ue8m0=True, triton=False),
    "fp8.vllm.group.ue8m0.triton": lambda x: vllm_group(x, ue8m0=True, triton=True),
}


def edge_rows(seed: int, cols: int) -> np.ndarray:
    """Groups whose amax decides the floors and the power of two: 0, amaxes below and above each
    floor's reach (1e-12, 1e-9, 3e-8, 5e-8, 1e-5, 2e-4), 448 * 2^k and one ulp either side."""
    rng = np.random.default_rng(seed)
    amaxes = [0.0, 1e-12, 1e-9, 3e-8, 5e-8, 1e-5, 2e-4]
    for k in (-20, -3, 0, 5, 30):
        a = np.float32(448.0 * 2.0**k)
        amaxes += [a, np.nextafter(a, np.float32(0)), np.nextafter(a, np.float32(np.inf))]
    x = np.zeros((len(amaxes), cols), dtype=np.float32)
    for r, a in enumerate(amaxes):
        x[r] = np.float32(a) * rng.uniform(-1.0, 1.0, cols).astype(np.float32)
        x[r, r % cols] = np.float32(a) * (1 if r % 2 else -1)
    return x


def compare(preset: str, x: np.ndarray) -> tuple[int, int]:
    want_q, want_s = FORMULAS[preset](to_torch(x))
    want = np.concatenate([raw(want_q).reshape(-1), raw(want_s.contiguous()).view(np.uint8).reshape(-1)])
    differing = 0
    for engine in ENGINES:
        payload, scale = (np.asarray(a) for a in qexact.quantize(x, preset, engine=engine))
        got = np.concatenate([payload.view(np.uint8).reshape(-1), scale.astype(np.float32).view(np.uint8).reshape(-1)])
        assert got.shape == want.shape, (preset, engine, got.shape, want.shape)
        differing += int(np.count_nonzero(got != want))
    return differing, 2 * want.size


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("preset", sorted(FORMULAS))
def test_the_formula_as_read(preset: str, dtype: str) -> None:
    inputs = [weights(SEED, rows=64, cols=3 * GROUP), edge_rows(SEED, 2 * GROUP)]
    differing = checked = 0
    for x in inputs:
        d, n = compare(preset, as_dtype(x, dtype))
        differing, checked = differing + d, checked + n
    print(f"{preset} {dtype}: {differing} differing of {checked} bytes (seed {SEED})")
    assert differing == 0


@pytest.mark.parametrize("preset", sorted(FORMULAS))
def test_the_formula_on_the_adversarial_cases(preset: str, tmp_path_factory: pytest.TempPathFactory) -> None:
    differing = checked = cases = 0
    for name, x in qexact_cases(tmp_path_factory.mktemp("cases"), preset, {}):
        if x.ndim != 2 or not np.isfinite(x.astype(np.float32)).all():
            continue  # the presets refuse non-finite input; the formulas take [rows, K]
        if preset.startswith("fp8.vllm") and x.shape[1] % GROUP:
            continue  # vLLM asserts whole groups
        d, n = compare(preset, x)
        differing, checked, cases = differing + d, checked + n, cases + 1
    print(f"{preset}: {cases} cases, {differing} differing of {checked} bytes")
    assert cases > 0
    assert differing == 0
