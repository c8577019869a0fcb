"""qexact.compare: where another output (a device's, or another contract's) differs from a
contract's bytes, counted, located and, where the differences match a known signature, named.

Scales are compared on their logical grid (one per group, row, or token block, in C order), so
two contracts with different scale layouts can be compared; payloads element by element (E2M1
nibbles unpacked) and byte by byte.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np

from . import _arrays, _core
from ._contract import ContractInfo


@dataclass(frozen=True)
class CompareReport:
    """Counts and diagnoses of one comparison; ``str(report)`` prints them.

    Payload counts are over the payload arrays' bytes and over the elements (x's shape; E2M1
    codes unpacked from their nibbles). Scale counts are over the logical scale grid;
    ``scale_bytes`` are over the stored scale arrays (the layout's padding included) when both
    sides share a layout, else over the grid. A scale delta is ``actual - expected``: in E8M0
    steps (each a power of two) for MX scales, in units in the last place for float scales.
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
    diagnoses: list[str] = field(default_factory=list)

    @property
    def identical(self) -> bool:
        """True when every payload and scale byte matches."""
        return self.payload_bytes_differing == 0 and self.scale_bytes_differing == 0

    def __str__(self) -> str:
        lines = [f"qexact.compare: expected {self.expected}, actual {self.actual}"]
        first = f", first at element {self.first_element_difference}" if self.first_element_difference else ""
        lines.append(f"  payload: {self.payload_bytes_differing} of {self.payload_bytes} bytes differ "
                     f"({self.elements_differing} of {self.elements} elements){first}")
        first = f", first at {self.first_scale_difference}" if self.first_scale_difference else ""
        lines.append(f"  scales:  {self.scales_differing} of {self.scales} differ "
                     f"({self.scale_bytes_differing} of {self.scale_bytes} bytes){first}")
        if self.scales_differing:
            histogram = ", ".join(f"{d:+d}: {n}" for d, n in sorted(self.scale_delta_histogram.items()))
            lines.append(f"  scale deltas ({self.scale_delta_unit}): {{{histogram}}}, max |delta| {self.max_scale_delta}")
        if self.identical:
            lines.append("  identical")
        elif self.diagnoses:
            lines.append("  diagnoses:")
            lines += [f"  - {d}" for d in self.diagnoses]
        else:
            lines.append("  diagnoses: none of the known signatures matches")
        return "\n".join(lines)


def compare(x: Any, preset: str, actual: Any, *, actual_params: Mapping[str, Any] | None = None,
            engine: str = "fast", threads: int = 0, **params: Any) -> CompareReport:
    """Compare another output for ``x`` with the bytes of the contract ``preset`` (+ ``params``).

    actual: either ``(payload, scale)`` arrays another system produced for ``x`` (in the
    contract's layout and dtypes: numpy arrays or DLPack tensors; float8 payloads are read as
    their bytes), or the name of another preset (with ``actual_params`` overrides) to compare
    two contracts on the same input.

    ``diagnoses`` names each known signature the differences match, in plain words:
    every differing E8M0 scale one power of two below (amax taken on fp32 rather than on its
    bf16 rounding) or above; payload differences at exact ties (the tie-breaking rule);
    differences in the last, partial block of each row (the tail rule); in groups whose scale
    byte is 0 (the byte-0 rule); in groups holding NaN or inf (the non-finite rule); in groups
    whose scale differs (they follow from the scale). A tie or scale-step diagnosis is made only
    when every difference it speaks of matches; the others say "all" or "N of M".
    """
    expected_c = ContractInfo.of(preset, params)
    if expected_c.family == "hif4":
        raise ValueError("hif4 has no quantize to compare: compare hif4_pack outputs directly")
    data, bf16_bits = _arrays.as_input(x)
    x_shape = tuple(_core.array_shape(data))

    def run(c: ContractInfo, *extra: str) -> tuple[np.ndarray, np.ndarray]:
        payload, scale, _ = _core.quantize(data, bf16_bits, c.preset, c.with_overrides(*extra), engine, threads)
        return payload, scale

    expected_payload, expected_scale = run(expected_c)
    if isinstance(actual, str):
        actual_c = ContractInfo.of(actual, actual_params or {})
        _check_comparable(expected_c, actual_c)
        actual_payload, actual_scale = run(actual_c)
        actual_name = actual_c.describe()
    else:
        if actual_params is not None:
            raise TypeError("actual_params applies only when actual is a preset name")
        actual_c = expected_c
        actual_payload, actual_scale = _given_pair(actual, expected_payload, expected_scale)
        actual_name = "the given arrays"

    grid = _Grid(expected_c, x_shape)
    e_codes, a_codes = grid.codes(expected_payload), grid.codes(actual_payload)
    e_scales, a_scales = grid.scales(expected_c, expected_scale), grid.scales(actual_c, actual_scale)
    element_diff = e_codes != a_codes
    scale_diff = _bits(e_scales) != _bits(a_scales)
    deltas = (_ordered(a_scales) - _ordered(e_scales))[scale_diff]
    histogram = {int(d): int(n) for d, n in zip(*np.unique(deltas, return_counts=True))}

    if expected_c.params.get("layout") == actual_c.params.get("layout"):
        scale_bytes = expected_scale.nbytes
        scale_bytes_differing = int(np.count_nonzero(_byte_view(expected_scale) != _byte_view(actual_scale)))
    else:
        scale_bytes = e_scales.nbytes
        scale_bytes_differing = int(np.count_nonzero(_byte_view(e_scales) != _byte_view(a_scales)))

    diagnoses = _Diagnoser(expected_c, grid, data, bf16_bits, element_diff, scale_diff, e_scales, deltas,
                           lambda *extra: grid.codes(run(expected_c, *extra)[0])).diagnoses()
    return CompareReport(
        expected=expected_c.describe(),
        actual=actual_name,
        payload_bytes=expected_payload.nbytes,
        payload_bytes_differing=int(np.count_nonzero(_byte_view(expected_payload) != _byte_view(actual_payload))),
        elements=int(e_codes.size),
        elements_differing=int(np.count_nonzero(element_diff)),
        scales=int(e_scales.size),
        scales_differing=int(np.count_nonzero(scale_diff)),
        scale_bytes=int(scale_bytes),
        scale_bytes_differing=scale_bytes_differing,
        scale_delta_unit="E8M0 steps" if grid.e8m0 else f"ulps of {e_scales.dtype.name}",
        max_scale_delta=int(np.max(np.abs(deltas))) if deltas.size else 0,
        scale_delta_histogram=histogram,
        first_element_difference=_first(element_diff),
        first_scale_difference=_first(scale_diff),
        diagnoses=diagnoses,
    )


def _check_comparable(e: ContractInfo, a: ContractInfo) -> None:
    if e.family != a.family:
        raise ValueError(f"cannot compare {e.preset} (family {e.family}) with {a.preset} (family {a.family})")
    for key in ("element", "block", "token_block", "group", "scale_store"):
        if e.params.get(key) != a.params.get(key):
            raise ValueError(f"cannot compare {e.preset} with {a.preset}: {key}={e.params.get(key)} "
                             f"vs {key}={a.params.get(key)} give different payloads or scale grids")


def _given_pair(actual: Any, expected_payload: np.ndarray, expected_scale: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if not isinstance(actual, (tuple, list)) or len(actual) != 2:
        raise TypeError("actual must be a (payload, scale) pair of arrays or a preset name")
    out = []
    for what, given, expected in (("payload", actual[0], expected_payload), ("scale", actual[1], expected_scale)):
        a = _arrays.to_numpy(given, f"actual {what}")
        if a.shape != expected.shape:
            raise ValueError(f"actual {what} has shape {a.shape}, the contract gives {expected.shape}")
        if a.dtype.itemsize != expected.dtype.itemsize:
            raise TypeError(f"actual {what} holds {a.dtype} values, the contract gives {expected.dtype}")
        out.append(np.ascontiguousarray(a))
    return out[0], out[1]


def _byte_view(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).reshape(-1).view(np.uint8)


def _bits(a: np.ndarray) -> np.ndarray:
    """Unsigned integers of a's bit patterns (so that NaNs compare by their bits)."""
    return np.ascontiguousarray(a).view({1: np.uint8, 2: np.uint16, 4: np.uint32}[a.dtype.itemsize])


def _ordered(a: np.ndarray) -> np.ndarray:
    """Integers whose differences count representable steps: E8M0 bytes as they are, float bit
    patterns as signed magnitudes (adjacent floats differ by 1)."""
    b = _bits(a).astype(np.int64)
    if a.dtype == np.uint8:
        return b
    sign_bit = 8 * a.dtype.itemsize - 1
    magnitude = b & ((1 << sign_bit) - 1)
    return np.where(b >> sign_bit, -magnitude, magnitude)


def _first(mask: np.ndarray) -> tuple[int, ...] | None:
    hits = np.argwhere(mask)
    return tuple(int(i) for i in hits[0]) if len(hits) else None


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


class _Grid:
    """The scale grid of a contract's family on an input shape, and how groups map to elements."""

    def __init__(self, c: ContractInfo, x_shape: tuple[int, ...]):
        self.family = c.family
        self.x_shape = x_shape
        self.e8m0 = c.family == "mx"
        self.element = c.params.get("element")
        if c.family in ("mx", "int8.group"):
            self.block = int(c.params["block" if c.family == "mx" else "group"])
            k = x_shape[-1]
            self.groups = _ceil_div(k, self.block)
            self.shape = x_shape[:-1] + (self.groups,)
            self.tail_partial = k % self.block != 0
            self.tail_words = f"columns {(self.groups - 1) * self.block} to {k - 1} of {k}"
        elif c.family == "int8.block":
            self.block = int(c.params["token_block"])
            b, s, n, _ = x_shape
            self.groups = _ceil_div(s, self.block)
            self.shape = (b, n, self.groups)
            self.tail_partial = s % self.block != 0
            self.tail_words = f"tokens {(self.groups - 1) * self.block} to {s - 1} of {s}"
        else:  # int8.token: one scale per row, no blocks
            self.shape = x_shape[:-1]
            self.tail_partial = False

    def codes(self, payload: np.ndarray) -> np.ndarray:
        """One code per element, in x's shape (E2M1 nibbles unpacked, element 2k low)."""
        p = payload.view(np.uint8)
        if self.element != "e2m1":
            return p.reshape(self.x_shape)
        codes = np.empty(p.shape[:-1] + (2 * p.shape[-1],), dtype=np.uint8)
        codes[..., 0::2] = p & 0x0F
        codes[..., 1::2] = p >> 4
        return codes[..., : self.x_shape[-1]]

    def scales(self, c: ContractInfo, scale: np.ndarray) -> np.ndarray:
        """The logical grid of scales, whatever the contract's layout."""
        if self.family != "mx":
            return scale.reshape(self.shape)
        rows = int(np.prod(self.x_shape[:-1], dtype=np.int64))
        g = self.groups
        flat = np.ascontiguousarray(scale).reshape(-1)
        layout = c.params["layout"]
        if layout == "rowmajor":
            grid = flat.reshape(rows, g)
        elif layout == "pairs":
            grid = flat.reshape(rows, 2 * _ceil_div(g, 2))[:, :g]
        elif layout == "padded":
            grid = flat.reshape(_ceil_div(rows, 128) * 128, _ceil_div(g, 4) * 4)[:rows, :g]
        elif layout == "swizzled":
            t = np.arange(rows, dtype=np.int64)[:, None]
            j = np.arange(g, dtype=np.int64)[None, :]
            r = t % 128
            tile = (t // 128) * _ceil_div(g, 4) + j // 4
            grid = flat[tile * 512 + (r % 32) * 16 + (r // 32) * 4 + j % 4]
        else:
            raise ValueError(f"unknown scale layout {layout!r}")
        return grid.reshape(self.shape)

    def expand(self, per_group: np.ndarray) -> np.ndarray:
        """A per-scale mask as a per-element mask of x's shape."""
        if self.family in ("mx", "int8.group"):
            return np.repeat(per_group, self.block, axis=-1)[..., : self.x_shape[-1]]
        if self.family == "int8.block":
            per_token = np.repeat(per_group, self.block, axis=2)[:, :, : self.x_shape[1]]  # (B, N, S)
            return np.broadcast_to(per_token.transpose(0, 2, 1)[..., None], self.x_shape)
        return np.broadcast_to(per_group[..., None], self.x_shape)

    def tail(self) -> np.ndarray:
        last = np.zeros(self.shape, dtype=bool)
        last[..., -1] = True
        return last


class _Diagnoser:
    def __init__(self, c: ContractInfo, grid: _Grid, data: Any, bf16_bits: bool, element_diff: np.ndarray,
                 scale_diff: np.ndarray, expected_scales: np.ndarray, deltas: np.ndarray,
                 codes_with: Callable[..., np.ndarray]):
        self.c, self.grid = c, grid
        self.data, self.bf16_bits = data, bf16_bits
        self.element_diff, self.scale_diff = element_diff, scale_diff
        self.expected_scales, self.deltas = expected_scales, deltas
        self.codes_with = codes_with
        self.n_elements = int(np.count_nonzero(element_diff))
        self.n_scales = int(np.count_nonzero(scale_diff))

    def diagnoses(self) -> list[str]:
        out: list[str] = []
        if self.n_elements + self.n_scales == 0:
            return out
        out += self._scale_steps()
        out += self._ties()
        if self.grid.family != "int8.token" and self.grid.tail_partial:
            out += self._located(self.grid.tail(), f"lie in the last, partial block of their row "
                                 f"({self.grid.tail_words}): the tail is handled differently (e.g. padded, or "
                                 f"divided by the full block)")
        if self.grid.e8m0:
            out += self._located(self.expected_scales == 0, "lie in groups whose expected scale byte is 0: the "
                                 "byte-0 rule differs (flush, quantize, min_normal or unscaled)")
            out += self._located(self._nonfinite_groups(), "lie in groups holding NaN or inf: the non-finite "
                                 "rule differs")
        if self.n_scales and self.n_elements:
            n = int(np.count_nonzero(self.element_diff & self.grid.expand(self.scale_diff)))
            if n:
                out.append(f"{self._share(n, self.n_elements)} differing payload elements lie in groups whose "
                           f"scale differs: they follow from the scale")
        return out

    @staticmethod
    def _share(n: int, total: int) -> str:
        return f"all {total}" if n == total else f"{n} of {total}"

    def _scale_steps(self) -> list[str]:
        if not self.grid.e8m0 or not self.n_scales:
            return []
        if np.all(self.deltas == -1):
            if self.c.params.get("prequant_round") == "bf16" and _core.input_dtype(self.data, self.bf16_bits) == "f32":
                why = ("amax was likely taken on the fp32 input, not on its bf16 rounding (the contract rounds "
                       "to bf16 first, which carries a group maximum just below 2^k up to 2^k)")
            else:
                why = ("the other side's amax or scale rule lands one binade lower (amax taken before a rounding "
                       "that carries it to the next power of two, or a floor rule where the contract rounds up)")
            return [f"every differing scale ({self.n_scales}) is exactly one power of two below the contract's: {why}"]
        if np.all(self.deltas == 1):
            return [f"every differing scale ({self.n_scales}) is exactly one power of two above the contract's: the "
                    f"other side rounds the scale up (rceil, ceil or even) where the contract floors, or rounds amax "
                    f"up across a power of two"]
        return []

    def _ties(self) -> list[str]:
        """Whether every payload difference the scales do not explain sits where the tie-breaking
        rule decides: round-to-even and round-half-away (both exact) give different codes
        exactly at midpoints between two neighbours. Claimed only for all of them: a difference
        at a tie among others proves nothing about rounding."""
        if not self.n_elements:
            return []
        key = "rounding" if self.grid.family == "mx" else "int_rounding"
        unexplained = self.element_diff & ~self.grid.expand(self.scale_diff)
        n = int(np.count_nonzero(unexplained))
        if not n:
            return []
        ties = self.codes_with(f"{key}=rne") != self.codes_with(f"{key}=half_away")
        if np.any(unexplained & ~ties):
            return []
        where = " outside groups whose scale differs" if self.n_scales else ""
        return [f"every differing payload element{where} ({n}) is an exact tie, a midpoint between two neighbours "
                f"that round-to-even and round-half-away settle differently: the tie-breaking rule differs "
                f"(contract: {key}={self.c.params[key]})"]

    def _located(self, group_mask: np.ndarray, words: str) -> list[str]:
        elements = int(np.count_nonzero(self.element_diff & self.grid.expand(group_mask)))
        scales = int(np.count_nonzero(self.scale_diff & group_mask))
        if elements + scales == 0:
            return []
        share = self._share(elements + scales, self.n_elements + self.n_scales)
        return [f"{share} differences ({elements} payload elements, {scales} scales) {words}"]

    def _nonfinite_groups(self) -> np.ndarray:
        values = _core.float32_values(self.data, self.bf16_bits)
        bad = ~np.isfinite(values)
        if not bad.any():
            return np.zeros(self.grid.shape, dtype=bool)
        k = self.grid.x_shape[-1]
        padded = np.zeros(bad.shape[:-1] + (self.grid.groups * self.grid.block,), dtype=bool)
        padded[..., :k] = bad
        return padded.reshape(self.grid.shape + (self.grid.block,)).any(axis=-1)
