"""The peer suite: qexact against the running peers it claims to reproduce (torchao, gguf-py,
ml_dtypes, compressed-tensors, ModelOpt, ONNX, AMD Quark, llm-compressor; JAX in its own venv), byte for byte, with both engines. A peer that cannot be imported fails the suite
(the imports below are unconditional): it never skips.

Inputs: the adversarial cases and probes ``qexact cases`` exports for the contract under test,
and seeded random tensors whose groups span 2^-140 .. 2^120 with ±inf / ±NaN in the first,
middle and last position of some groups. Every seed is printed (``pytest -s`` or the header).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import gguf  # noqa: F401  (peers: an ImportError fails the suite)
import ml_dtypes
import numpy as np
import pytest
import torch  # noqa: F401
import torchao  # noqa: F401
import compressed_tensors  # noqa: F401
import onnx  # noqa: F401
import onnxruntime  # noqa: F401
import quark  # noqa: F401
import llmcompressor  # noqa: F401

SEED = 20261201
ENGINES = ("reference", "fast")
ROOT = Path(__file__).resolve().parents[2]


def pytest_report_header(config):
    return f"qexact peer suite: seed {SEED}"


def cli() -> str:
    """The qexact CLI whose `cases` exports the adversarial material (a build of this tree)."""
    path = os.environ.get("QEXACT_CLI") or str(ROOT / "build" / "default" / "qexact")
    if not os.access(path, os.X_OK):
        pytest.fail(f"the qexact CLI is needed for `qexact cases`: {path} (build it, or set QEXACT_CLI)")
    return path


def load_cases(out: Path) -> list[tuple[str, np.ndarray]]:
    """(name, float32 or bfloat16 array) of every case `qexact cases` wrote to ``out``."""
    manifest = json.loads((out / "manifest.json").read_text())
    cases = []
    for case in manifest["cases"]:
        x = np.load(out / case["name"] / "input.npy")
        if x.dtype == np.uint16:  # bf16 bits
            x = x.view(ml_dtypes.bfloat16)
        cases.append((case["name"], x))
    return cases


_cases_cache: dict[tuple[str, tuple[str, ...]], list[tuple[str, np.ndarray]]] = {}


def qexact_cases(tmp_root: Path, preset: str, params: dict[str, str], seed: int = SEED) -> list[tuple[str, np.ndarray]]:
    key = (preset, tuple(f"{k}={v}" for k, v in sorted(params.items())))
    if key not in _cases_cache:
        out = tmp_root / ("cases-" + "-".join([preset, *key[1]]).replace("=", "_"))
        cmd = [cli(), "cases", "--preset", preset, "--out", str(out), "--seed", str(seed)]
        for kv in key[1]:
            cmd += ["--param", kv]
        subprocess.run(cmd, check=True, capture_output=True)
        _cases_cache[key] = load_cases(out)
    return _cases_cache[key]


def random_groups(seed: int, rows: int, k: int, block: int = 32, nonfinite: bool = True) -> np.ndarray:
    """float32 (rows, k): each group of ``block`` is normal values times 2^e, e uniform in
    [-140, 120] (subnormal and near-overflow groups included); with ``nonfinite``, about one
    group in six holds +inf, -inf, NaN or -NaN (or inf and NaN) at its first, middle or last
    position."""
    rng = np.random.default_rng(seed)
    g = rows * k // block
    e = rng.integers(-140, 121, g)
    v = rng.standard_normal((g, block)) * np.exp2(e.astype(np.float64))[:, None]
    with np.errstate(over="ignore"):
        x = v.astype(np.float32)
    x[~np.isfinite(x)] = np.float32(3.0e38)  # overflow from the f64 product: keep finite here
    if nonfinite:
        neg_nan = np.array([0xFFC00000], dtype=np.uint32).view(np.float32)[0]
        specials = [np.float32(np.inf), np.float32(-np.inf), np.float32(np.nan), neg_nan]
        for i in np.flatnonzero(rng.random(g) < 1 / 6):
            for pos in rng.choice([0, block // 2 - 1, block - 1], size=rng.integers(1, 3), replace=False):
                x[i, pos] = specials[rng.integers(0, 4)]
    # A few fixed groups: all zero, all -0.0, bf16-subnormal-sized, one 2^-149.
    x[0] = 0.0
    x[1] = -0.0
    x[2] = np.float32(2.0 ** -133)
    x[3, :] = 0.0
    x[3, 5] = np.float32(-(2.0 ** -149))
    return x.reshape(rows, k)


def differing(a: np.ndarray, b: np.ndarray) -> int:
    a = np.ascontiguousarray(a).view(np.uint8).ravel()
    b = np.ascontiguousarray(b).view(np.uint8).ravel()
    assert a.size == b.size, f"{a.size} bytes against {b.size}"
    return int(np.count_nonzero(a != b))
