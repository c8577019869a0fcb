"""A preset plus keyword overrides, turned into the "key=value" strings the C++ core parses."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from . import _core


def override_strings(params: Mapping[str, Any]) -> list[str]:
    """``{"scale_min": 1e-6, "signed_zero": False}`` -> ``["scale_min=1e-06", "signed_zero=false"]``.

    Numbers are written as Python writes them, so the core parses the same decimal the CLI's
    ``--param scale_min=1e-06`` would (a correctly rounded fp32, not a double rounded twice).
    """
    out = []
    for key, value in params.items():
        if isinstance(value, (bool, np.bool_)):
            text = "true" if value else "false"
        elif isinstance(value, (int, float, str, np.integer, np.floating)):
            text = str(value)
        else:
            raise TypeError(f"parameter {key}: {type(value).__name__} is not a parameter value (str, int, float, bool)")
        out.append(f"{key}={text}")
    return out


@dataclass(frozen=True)
class ContractInfo:
    """A validated contract: its preset, the overrides given, its family, every parameter and what
    each output's elements are (``codes``: output name -> e4m3, e5m2, e2m3, e3m2, e2m1x2, e2m1x2_halves
    (ggml's nibble order), e8m0, int8, f32 or f16; empty for hif4 and pool)."""

    preset: str
    overrides: tuple[str, ...]
    family: str
    params: Mapping[str, str]
    codes: Mapping[str, str]

    @staticmethod
    def of(preset: str, params: Mapping[str, Any]) -> "ContractInfo":
        if not isinstance(preset, str):
            raise TypeError(f"preset must be a preset name (str), got {type(preset).__name__}")
        overrides = override_strings(params)
        return ContractInfo(
            preset=preset,
            overrides=tuple(overrides),
            family=_core.contract_family(preset, overrides),
            params=dict(_core.contract_params(preset, overrides)),
            codes=dict(_core.output_codes(preset, overrides)),
        )

    def describe(self) -> str:
        """The preset with its overrides, as the CLI spells them: ``mxfp8.ascend (prequant_round=none)``."""
        return self.preset + (f" ({', '.join(self.overrides)})" if self.overrides else "")
