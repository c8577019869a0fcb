"""The report of ``qexact.compare``: the C++ compare's counts and diagnoses (the same as
``qexact compare`` prints), held as Python values."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping


@dataclass(frozen=True)
class Diagnosis:
    """One known signature the differences match, as ``qexact compare`` names it.

    signature: a stable id (``amax_fp32_not_bf16``, ``rounding_mode``, ``reciprocal_divisor``,
    ``tail_rule``, ``wraparound``, ``granularity``, ``scale_layout``, ``flush_rule``,
    ``nonfinite_rule``, ``scale_rule``). evidence: counts by name. explanation: one sentence in
    plain words. confirmed: re-running the contract with the suspected change reproduced the
    other side's bytes (else the diagnosis is read from the pattern).
    """

    signature: str
    evidence: Mapping[str, int]
    explanation: str
    confirmed: bool

    def __str__(self) -> str:
        how = "confirmed by a re-run" if self.confirmed else "from the pattern"
        return f"{self.signature} ({how}): {self.explanation}"


@dataclass(frozen=True)
class CompareReport:
    """Counts and diagnoses of one comparison; ``str(report)`` prints them.

    Payload counts are over the payload arrays' bytes and over the elements (x's shape; E2M1
    codes unpacked from their nibbles). Scales are counted on their logical grid (one per
    group, row or token block; ``scales`` of them), ``scale_bytes`` over the stored scale array
    of the expected contract (layout padding included; another contract's scales in another
    layout are laid out in the expected one's first). A scale delta is ``actual - expected``:
    in E8M0 steps (each a power of two) for MX scales, in units in the last place for float
    scales. ``groups_differing`` counts groups with a differing scale or element, ``rows`` the
    rows of x (int8.block: its (b, s, n) rows of D).
    """

    expected: str
    actual: str
    payload_bytes: int
    payload_bytes_differing: int
    elements: int
    elements_differing: int
    scales: int
    scales_differing: int
    scale_bytes: int
    scale_bytes_differing: int
    scale_delta_unit: str
    max_scale_delta: int
    scale_delta_histogram: dict[int, int]
    first_element_difference: tuple[int, ...] | None
    first_scale_difference: tuple[int, ...] | None
    groups_differing: int = 0
    rows: int = 0
    rows_differing: int = 0
    diagnoses: list[Diagnosis] = field(default_factory=list)

    @staticmethod
    def of(core: dict[str, Any], expected: str, actual: str) -> "CompareReport":
        """From the dict the extension returns."""
        diagnoses = [Diagnosis(d["signature"], dict(d["evidence"]), d["explanation"], d["confirmed"])
                     for d in core.pop("diagnoses")]
        return CompareReport(expected=expected, actual=actual, diagnoses=diagnoses, **core)

    @property
    def identical(self) -> bool:
        """True when every payload and scale byte matches."""
        return self.payload_bytes_differing == 0 and self.scale_bytes_differing == 0

    @property
    def signatures(self) -> list[str]:
        """The diagnoses' signatures, in order."""
        return [d.signature for d in self.diagnoses]

    def __str__(self) -> str:
        lines = [f"qexact.compare: expected {self.expected}, actual {self.actual}"]
        first = f", first at element {self.first_element_difference}" if self.first_element_difference else ""
        lines.append(f"  payload: {self.payload_bytes_differing} of {self.payload_bytes} bytes differ "
                     f"({self.elements_differing} of {self.elements} elements){first}")
        first = f", first at {self.first_scale_difference}" if self.first_scale_difference else ""
        lines.append(f"  scales:  {self.scales_differing} of {self.scales} differ "
                     f"({self.scale_bytes_differing} of {self.scale_bytes} bytes){first}")
        if self.scale_delta_histogram:
            histogram = ", ".join(f"{d:+d}: {n}" for d, n in sorted(self.scale_delta_histogram.items()))
            lines.append(f"  scale deltas ({self.scale_delta_unit}): {{{histogram}}}, max |delta| {self.max_scale_delta}")
        if self.identical:
            lines.append("  identical")
        elif self.diagnoses:
            lines.append("  diagnoses:")
            for d in self.diagnoses:
                how = "confirmed by a re-run" if d.confirmed else "from the pattern"
                lines.append(f"  - {d.signature} ({how})")
                lines.append(f"    {d.explanation}")
                lines.append("    evidence: " + " ".join(f"{k}={v}" for k, v in d.evidence.items()))
        else:
            lines.append("  diagnoses: none of the known signatures matches")
        return "\n".join(lines)
