"""qexact's element codec (``qexact.cast``, round to nearest even) against ml_dtypes' casts from
float32, over *every* fp32 bit pattern, both signs, of a range that holds all of a format's
values, the binade below its smallest subnormal and its whole overflow region up to beyond
twice its max; plus every NaN pattern, both infinities, and seeded samples below and above.

Where the two differ, and why (each asserted exactly below):

* float8_e4m3fn (max 448). ml_dtypes rounds to nearest even without saturating: 464, the
  midpoint between 448 and the next step 480, ties to the even 448; every finite |x| > 464
  and ±inf give NaN (0x7F | sign). qexact with ``overflow="nan"`` is identical on every
  pattern, NaN included (0x7F | sign on both). With ``overflow="saturate"`` (the MX payload
  rule) it differs exactly on finite |x| > 464 and ±inf: qexact gives ±448 (0x7E | sign).
* float8_e5m2 (max 57344). ml_dtypes is IEEE-like: 61440, the midpoint between 57344 and the
  next step 65536, ties to the even 65536 = inf; |x| >= 61440 gives ±inf (0x7C | sign).
  qexact with ``overflow="inf"`` is identical on every finite and infinite pattern; with
  ``overflow="saturate"`` it differs exactly on |x| >= 61440 and ±inf: qexact gives ±57344
  (0x7B | sign). NaN: both give a NaN keeping the input's sign, ml_dtypes 0x7E | sign, qexact
  0x7F | sign.
* float4_e2m1fn (max 6), float6_e2m3fn (max 7.5), float6_e3m2fn (max 28). Both saturate (±inf
  -> ±max) and are identical on every finite and infinite pattern. NaN, which these formats
  cannot hold: qexact gives 0, ml_dtypes the negative zero (0x8 / 0x20) for a NaN whose sign
  bit is clear and 0 for one whose sign bit is set.
* float8_e8m0fnu (the MX scale): every one of the 256 codes decodes (through
  ``qexact.dequantize`` of a payload of ones) to ml_dtypes' value, 255 to NaN. ml_dtypes' own
  fp32 -> e8m0 cast (round to nearest power of two) is no qexact scale rule and is not compared.

Part of the peer suite (scripts/test-peers.sh): ml_dtypes is a pinned peer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator

import ml_dtypes
import numpy as np
import pytest

import qexact
from conftest import SEED

CHUNK = 1 << 22
SIGN = np.uint32(0x80000000)


@dataclass(frozen=True)
class Format:
    element: str
    ml_type: Any
    low_exp: int    # the exhaustive range is 2^low_exp <= |x| < 2^high_exp
    high_exp: int
    max_exp: int    # exponent of the format's max: saturation matters from 2^max_exp up
    matching_overflow: str  # qexact's overflow rule that is ml_dtypes' own
    # codes of qexact with overflow="saturate" and of ml_dtypes where the two differ, or None
    saturation: Callable[[np.ndarray], np.ndarray] | None
    qexact_saturated: int
    ml_overflowed: int
    # (qexact code, ml_dtypes code) of a NaN without and with its sign bit
    nan_codes: tuple[tuple[int, int], tuple[int, int]]


FORMATS = [
    # e4m3: smallest subnormal 2^-9, max 448, 2 * max = 896 < 2^10.
    Format("e4m3", ml_dtypes.float8_e4m3fn, -11, 10, 8, "nan", lambda a: a > 464.0, 0x7E, 0x7F,
           ((0x7F, 0x7F), (0xFF, 0xFF))),
    # e5m2: smallest subnormal 2^-16, max 57344, 2 * max = 114688 < 2^17.
    Format("e5m2", ml_dtypes.float8_e5m2, -18, 17, 15, "inf", lambda a: a >= 61440.0, 0x7B, 0x7C,
           ((0x7F, 0x7E), (0xFF, 0xFE))),
    # e2m1: smallest subnormal 2^-1, max 6, 2 * max = 12 < 2^4.
    Format("e2m1", ml_dtypes.float4_e2m1fn, -3, 4, 2, "saturate", None, 0, 0, ((0x0, 0x8), (0x0, 0x0))),
    # e2m3: smallest subnormal 2^-3, max 7.5, 2 * max = 15 < 2^4.
    Format("e2m3", ml_dtypes.float6_e2m3fn, -5, 4, 2, "saturate", None, 0, 0, ((0x0, 0x20), (0x0, 0x0))),
    # e3m2: smallest subnormal 2^-4, max 28, 2 * max = 56 < 2^6.
    Format("e3m2", ml_dtypes.float6_e3m2fn, -6, 6, 4, "saturate", None, 0, 0, ((0x0, 0x20), (0x0, 0x0))),
]
IDS = [f.element for f in FORMATS]


def patterns(first: int, stop: int, sign: np.uint32) -> Iterator[np.ndarray]:
    """Every fp32 bit pattern in [first, stop) with the sign bit ``sign``, in chunks."""
    for start in range(first, stop, CHUNK):
        yield np.arange(start, min(start + CHUNK, stop), dtype=np.uint32) | sign


def exponent_bits(e: int) -> int:
    return (e + 127) << 23


def both(bits: np.ndarray, f: Format, overflow: str) -> tuple[np.ndarray, np.ndarray]:
    x = bits.view(np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        theirs = x.astype(f.ml_type).view(np.uint8)
    return qexact.cast(x, f.element, overflow=overflow), theirs


@pytest.mark.parametrize("f", FORMATS, ids=IDS)
def test_identical_to_ml_dtypes_over_every_pattern_of_the_range(f: Format):
    compared = differing = 0
    for sign in (np.uint32(0), SIGN):
        for bits in patterns(exponent_bits(f.low_exp), exponent_bits(f.high_exp), sign):
            ours, theirs = both(bits, f, f.matching_overflow)
            compared += bits.size
            differing += int(np.count_nonzero(ours != theirs))
    print(f"{f.element}: {differing} differing of {compared} patterns (overflow={f.matching_overflow})")
    assert compared == 2 * (f.high_exp - f.low_exp) << 23
    assert differing == 0


@pytest.mark.parametrize("f", [f for f in FORMATS if f.saturation], ids=lambda f: f.element)
def test_saturation_differs_exactly_beyond_the_overflow_midpoint(f: Format):
    """Over every pattern from 2^max_exp to the top of the range (both signs), and ±inf."""
    compared = 0
    for sign in (np.uint32(0), SIGN):
        chunks = list(patterns(exponent_bits(f.max_exp), exponent_bits(f.high_exp), sign))
        chunks.append(np.array([0x7F800000], dtype=np.uint32) | sign)
        for bits in chunks:
            ours, theirs = both(bits, f, "saturate")
            compared += bits.size
            beyond = f.saturation(np.abs(bits.view(np.float32)))
            sign_code = 0x80 if sign else 0
            assert np.array_equal(ours != theirs, beyond)
            assert np.all(ours[beyond] == (f.qexact_saturated | sign_code))
            assert np.all(theirs[beyond] == (f.ml_overflowed | sign_code))
    assert compared == 2 * (((f.high_exp - f.max_exp) << 23) + 1)


@pytest.mark.parametrize("f", FORMATS, ids=IDS)
def test_every_nan_pattern(f: Format):
    for sign, (ours_code, theirs_code) in zip((np.uint32(0), SIGN), f.nan_codes):
        for bits in patterns(0x7F800001, 0x80000000, sign):
            ours, theirs = both(bits, f, f.matching_overflow)
            assert np.all(ours == ours_code)
            assert np.all(theirs == theirs_code)


@pytest.mark.parametrize("f", FORMATS, ids=IDS)
def test_samples_below_and_above_the_range(f: Format):
    """Below 2^low_exp every value rounds to a signed zero; above 2^high_exp to the overflow
    code: a seeded sample of each region, its end points, zero and the infinities."""
    rng = np.random.default_rng(SEED)
    low, high = exponent_bits(f.low_exp), exponent_bits(f.high_exp)
    below = np.concatenate([rng.integers(0, low, 1 << 20, dtype=np.uint32), [0, 1, low - 1]]).astype(np.uint32)
    above = np.concatenate([rng.integers(high, 0x7F800000, 1 << 20, dtype=np.uint32),
                            [high, 0x7F7FFFFF, 0x7F800000]]).astype(np.uint32)
    for bits in (below, above):
        for sign in (np.uint32(0), SIGN):
            ours, theirs = both(bits | sign, f, f.matching_overflow)
            assert np.array_equal(ours, theirs)
    ours, _ = both(below, f, f.matching_overflow)
    assert np.all(ours == 0)


def test_e8m0_scale_decodes_as_ml_dtypes():
    """Every E8M0 byte, as the scale of a group of E4M3 ones (code 0x38), against ml_dtypes."""
    scale = np.arange(256, dtype=np.uint8).reshape(256, 1)
    payload = np.full((256, 32), 0x38, dtype=np.uint8)
    theirs = np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e8m0fnu).astype(np.float32)
    theirs = np.repeat(theirs[:, None], 32, axis=1)
    for engine in ("reference", "fast"):
        ours = qexact.dequantize(payload, scale, "mx.ocp", shape=(256, 32), engine=engine)
        differing = int(np.count_nonzero(ours.view(np.uint32) != theirs.view(np.uint32)))
        print(f"e8m0 ({engine}): {differing} differing of {ours.size} values")
        assert differing == 0
