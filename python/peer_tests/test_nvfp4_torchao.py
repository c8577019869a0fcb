"""torchao 0.18.0 ``nvfp4_quantize`` and ``NVFP4Tensor.dequantize`` against qexact's
``nvfp4.torchao`` preset, byte for byte, both engines: single level (no per-tensor scale) and
two level (``tensor_scale=amax``: torchao given ``per_tensor_amax_to_scale(torch.max(torch.abs(x)))``,
as its dynamic NVFP4 linear computes it), float32 and bfloat16 input, seeded random blocks
(2^-140 .. 2^120, ±inf / ±NaN) and adversarial blocks (E2M1 and E4M3 ties, the 2^-6 clamp,
saturation 7 -> 6, signed zeros, a subnormal or huge tensor amax). Payload, E4M3 scale codes and
the tensor scale's bits must all match (0 differing).

qexact runs through its CLI, whose output directory carries tensor_scale.npy. torch runs on one
thread: torch.max over more than 32768 elements holding a NaN returns 0x7FC00000 on several
threads and 0xFFFFFFFF on one (docs/decisions.md); qexact models the single-thread result, and
the tensors here stay below that size anyway.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
import torch
from torchao.prototype.mx_formats.nvfp4_tensor import NVFP4Tensor, nvfp4_quantize, per_tensor_amax_to_scale

from conftest import ENGINES, SEED, cli, differing, random_groups

torch.set_num_threads(1)

E4M3 = np.array([(m / 8.0) * 2.0 ** -6 if e == 0 else (1 + m / 8.0) * 2.0 ** (e - 7)
                 for e in range(16) for m in range(8)][1:0x7F], dtype=np.float64)
E2M1_TIES = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0]


def adversarial(seed: int, rows: int, k: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    blocks = rows * k // 16
    x = np.zeros((blocks, 16), dtype=np.float64)
    for b in range(blocks):
        s = E4M3[rng.integers(0, E4M3.size)]
        x[b] = rng.uniform(-1, 1, 16) * 6 * s
        kind = b % 8
        if kind == 1:
            x[b, 0] = 6 * s
            x[b, 1:] = [(1 if i % 2 else -1) * E2M1_TIES[i % 7] * s for i in range(1, 16)]
        elif kind == 2:
            j = rng.integers(0, E4M3.size - 1)
            x[b, 3] = -6 * (E4M3[j] + E4M3[j + 1]) / 2
        elif kind == 3:
            x[b] = rng.uniform(-1, 1, 16) * 6 * 2.0 ** -(6 + np.arange(16) % 12)
        elif kind == 4:
            x[b, 5] = 7 * s
        elif kind == 5:
            x[b] = [-0.0 if i % 3 == 0 else 0.0 if i % 3 == 1 else -1e-30 for i in range(16)]
        elif kind == 6:
            x[b] = 0.0
    return x.astype(np.float32).reshape(rows, k)


def tensors() -> list[tuple[str, np.ndarray]]:
    out = [("random", random_groups(SEED, 32, 256, block=16)),
           ("random-finite", random_groups(SEED + 1, 16, 128, block=16, nonfinite=False)),
           ("adversarial", adversarial(SEED, 64, 128))]
    for top in (1e-42, 3e-39, 1e-30, 1.0, 2688.0, 3.0e38):
        x = adversarial(SEED + 2, 8, 64).astype(np.float64)
        x = (x / np.abs(x).max() * top).astype(np.float32)
        x[0, 0] = np.float32(top)
        out.append((f"top{top:g}", x))
    out.append(("zeros", np.zeros((4, 32), dtype=np.float32)))
    out.append(("neg-zeros", np.full((4, 32), -0.0, dtype=np.float32)))
    return out


def as_dtype(x: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "f32":
        return x
    return torch.from_numpy(x).to(torch.bfloat16).view(torch.int16).numpy().view(ml_dtypes.bfloat16)


def to_torch(x: np.ndarray) -> torch.Tensor:
    if x.dtype == ml_dtypes.bfloat16:
        return torch.from_numpy(x.view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(x.copy())


def torchao_nvfp4(x: torch.Tensor, two_level: bool):
    t = per_tensor_amax_to_scale(torch.max(torch.abs(x))) if two_level else None
    scale, payload = nvfp4_quantize(x, 16, t)
    deq = NVFP4Tensor(payload, scale.view(x.shape[0], -1), 16, x.dtype, t).dequantize(torch.float32)
    return payload.numpy(), scale.view(torch.uint8).numpy(), t, deq.numpy()


def qexact_nvfp4(tmp: Path, x: np.ndarray, two_level: bool, engine: str):
    src = tmp / "x.npy"
    bf16 = x.dtype == ml_dtypes.bfloat16
    np.save(src, x.view(np.uint16) if bf16 else x)
    out = tmp / "q"
    cmd = [cli(), "quantize", str(src), "--preset", "nvfp4.torchao", "--out", str(out), "--force",
           "--engine", engine, "--threads", "3"]
    if bf16:
        cmd += ["--dtype", "bf16"]
    if two_level:
        cmd += ["--param", "tensor_scale=amax"]
    subprocess.run(cmd, check=True, capture_output=True)
    payload = np.load(out / "payload.npy")
    scale = np.load(out / "scale.npy")
    t = np.load(out / "tensor_scale.npy") if two_level else None
    subprocess.run([cli(), "dequantize", str(out), "--out", str(tmp / "d.npy"), "--engine", engine],
                   check=True, capture_output=True)
    return payload, scale, t, np.load(tmp / "d.npy")


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("two_level", [False, True], ids=["single", "two_level"])
def test_nvfp4_matches_torchao(tmp_path, engine, dtype, two_level):
    total = 0
    for name, x32 in tensors():
        x = as_dtype(x32, dtype)
        want_p, want_s, want_t, want_d = torchao_nvfp4(to_torch(x), two_level)
        got_p, got_s, got_t, got_d = qexact_nvfp4(tmp_path, x, two_level, engine)
        what = f"{name} {dtype} {'two level' if two_level else 'single'} {engine}"
        assert got_p.shape == want_p.shape and got_s.shape == want_s.shape, what
        n = differing(got_p, want_p)
        assert n == 0, f"{what}: payload {n} differing of {want_p.size} bytes"
        n = differing(got_s, want_s)
        assert n == 0, f"{what}: scale {n} differing of {want_s.size} bytes"
        if two_level:
            tb = want_t.numpy().astype(np.float32).reshape(())
            assert got_t.shape == (), what
            assert got_t.view(np.uint32) == tb.view(np.uint32), f"{what}: tensor scale {got_t!r} != {tb!r}"
        # Dequantize: every value bit for bit; a NaN (its bits carry nothing) as a NaN.
        nan = np.isnan(want_d)
        assert np.array_equal(nan, np.isnan(got_d)), f"{what}: dequantize NaN positions differ"
        n = differing(got_d[~nan], want_d[~nan])
        assert n == 0, f"{what}: dequantize {n} differing of {int((~nan).sum()) * 4} bytes"
        total += want_p.size + want_s.size
    print(f"nvfp4 {dtype} {'two level' if two_level else 'single'} {engine}: 0 differing of {total} bytes")
