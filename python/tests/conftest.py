"""Shared inputs for the qexact Python tests: one suitable tensor per preset, seeded."""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import Any

import numpy as np
import pytest

import qexact
from qexact import _core

SEED = 20240611

PRESETS = qexact.presets()
FAMILY = {p: _core.contract_family(p, []) for p in PRESETS}
# hif4 fake-quantizes and packs; pool.mean is a pooled mean, not a quantizer.
QUANTIZE_PRESETS = [p for p in PRESETS if FAMILY[p] not in ("hif4", "pool")]
MX_PRESETS = [p for p in PRESETS if FAMILY[p] == "mx"]


def import_or_fail(name: str) -> ModuleType:
    """The module ``name``. Missing, it fails the run in CI (``CI`` set to true, as CI services
    set it) and skips the calling test module elsewhere: the venv of scripts/test-python.sh
    always installs it."""
    try:
        return importlib.import_module(name)
    except ImportError as e:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            raise ImportError(f"{name} is not installed, and CI must run the tests that need it: {e}") from e
        pytest.skip(f"{name} is not installed ({e}); scripts/test-python.sh installs it", allow_module_level=True)


def shape_for(preset: str) -> tuple[int, ...]:
    """A shape the preset accepts: whole groups, and a partial token block for int8.block."""
    family = FAMILY[preset]
    if family == "int8.block" or (family == "fp8.scaled" and
                                  dict(_core.contract_params(preset, []))["granularity"].startswith("head_block")):
        return (2, 100, 3, 16)
    if family == "int8.token":
        return (5, 40)
    if family == "hif4":
        return (4, 128)
    if family == "int8.group" and 96 % int(dict(_core.contract_params(preset, []))["group"]):
        return (6, 384)  # groups of 128 (int8.ct.group)
    return (6, 96)


def make_input(preset: str, dtype: Any = np.float32, seed: int = SEED,
               shape: tuple[int, ...] | None = None) -> np.ndarray:
    """Values spanning many binades (rows scaled by 2^-20 .. 2^20; 2^-8 .. 2^8 for float16), with
    one all-zero group and one tiny group (2^-118) on MX presets, so scale rules and byte-0 rules
    are exercised. Rounded once from fp32 to ``dtype``."""
    rng = np.random.default_rng(seed)
    shape = shape or shape_for(preset)
    spread = 8 if np.dtype(dtype) == np.float16 else 20
    x = rng.standard_normal(shape).astype(np.float32)
    rows = x.reshape(-1, shape[-1])
    rows *= np.exp2(rng.integers(-spread, spread + 1, size=(rows.shape[0], 1))).astype(np.float32)
    if FAMILY[preset] == "mx" and rows.shape[0] >= 3 and shape[-1] >= 32:
        rows[1, :32] = 0.0
        rows[2, :32] *= np.float32(2.0**-118)
    return x.astype(dtype)


@pytest.fixture(autouse=True)
def _print_seed(request: pytest.FixtureRequest) -> None:
    # Seeded inputs: the seed is printed with a failing test's output and kept in its report.
    print(f"seed {SEED}")
    request.node.user_properties.append(("seed", SEED))
