"""gguf-py 0.19.0 ``gguf.quants`` MXFP4 (a numpy port of ggml-quants.c's quantize_row_mxfp4_ref)
against qexact's ``mxfp4.ggml``, byte for byte on the serialized blocks (one E8M0 byte, then 16
bytes pairing element j with j + 16), both engines; and gguf-py's dequantize of those blocks
against qexact's, on the fp32 bits.

gguf-py is the peer, not ggml's C: the C reference leaves NaN out of the amax (``amax <
fabsf(v)`` is false for NaN) where numpy's max propagates it, so a block holding NaN differs
between the two (C: the finite elements' scale; gguf-py: byte 0). An inf amax is an undefined
float-to-uint8 cast in both (numpy on x86 gives 0, as the preset says).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from gguf import GGMLQuantizationType
from gguf.quants import dequantize as gguf_dequantize
from gguf.quants import quantize as gguf_quantize

import qexact
from conftest import ENGINES, SEED, differing, qexact_cases, random_groups
from stack_material import infer_on_peer

PRESET = "mxfp4.ggml"


def gguf_blocks(x: np.ndarray) -> np.ndarray:
    """gguf-py's MXFP4 bytes of x (rows of whole blocks): (rows, k / 32 * 17)."""
    rows = np.asarray(x, dtype=np.float32).reshape(-1, x.shape[-1])
    with warnings.catch_warnings(), np.errstate(invalid="ignore", over="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)  # its uint8 cast of a negative or inf exponent
        return gguf_quantize(rows, GGMLQuantizationType.MXFP4).reshape(rows.shape[0], -1)


def split(blocks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """gguf block bytes as qexact's (payload (rows, k / 2), scale (rows, k / 32))."""
    b = blocks.reshape(blocks.shape[0], -1, 17)
    return b[:, :, 1:].reshape(blocks.shape[0], -1), b[:, :, 0]


def material(tmp_root) -> list[tuple[str, np.ndarray]]:
    cases = [(n, x) for n, x in qexact_cases(tmp_root, PRESET, {}) if x.ndim and x.shape[-1] % 32 == 0 and x.size]
    cases.append(("random", random_groups(SEED + 5, 256, 256, nonfinite=True)))
    # The byte's edges: amax a hair below and at 2^k (fp32's log2 of the first rounds up to k for
    # k != 0), near fp32's top (log2 rounds to 128: byte 253, whose 4 and 6 overflow as
    # products), the wrap below 2^-125, subnormal amaxes, ties of E2M1 at every magnitude.
    special = []
    for k in list(range(-149, 128, 3)) + [-127, -126, -125, -124, 0, 1, 127]:
        for a in (np.float32(2.0**k), np.nextafter(np.float32(2.0**k), np.float32(0)), np.float32(1.75 * 2.0**k)):
            if np.isfinite(a) and a > 0:
                blk = np.float32(a) * np.linspace(-1, 1, 32, dtype=np.float32)
                blk[5] = a
                special.append(blk)
    top = np.float32(3.4028235e38)
    for a in (top, np.nextafter(top, np.float32(0)), np.float32(2.0**127 * 1.99)):
        special.append(np.array([a, -a, a * 0.9, a * 0.74, a * 0.76, a * 0.5] + [a * 0.3] * 26, dtype=np.float32))
    ties = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 7.0], dtype=np.float32)
    for e in (-2, 0, 3, 60):
        blk = np.zeros(32, dtype=np.float32)
        blk[:8], blk[8:16] = ties * np.float32(2.0**e), -ties * np.float32(2.0**e)
        blk[16] = np.float32(6.0 * 2.0**e)
        special.append(blk)
    cases.append(("edges", np.stack(special)))
    return cases


@pytest.fixture(scope="session")
def tmp_root(tmp_path_factory):
    return tmp_path_factory.mktemp("gguf_mxfp4")


def test_mxfp4_against_gguf(tmp_root):
    diff = total = 0
    cases = material(tmp_root)
    for name, x in cases:
        theirs = gguf_blocks(x)
        payload, scale = split(theirs)
        for engine in ENGINES:
            q_payload, q_scale = qexact.quantize(x, PRESET, engine=engine)
            q_payload = np.asarray(q_payload).reshape(payload.shape)
            q_scale = np.asarray(q_scale).view(np.uint8).reshape(scale.shape)
            d = differing(q_payload, payload) + differing(q_scale, scale)
            assert d == 0, f"{name} ({engine}): {d} differing of {theirs.nbytes} bytes"
            diff, total = diff + d, total + theirs.nbytes
    print(f"mxfp4.ggml: {len(cases)} cases, {diff} differing of {total} bytes (seed {SEED + 5})")


def test_mxfp4_dequantize_against_gguf(tmp_root):
    diff = total = 0
    for name, x in material(tmp_root):
        theirs = gguf_blocks(x)
        payload, scale = split(theirs)
        want = np.asarray(gguf_dequantize(theirs, GGMLQuantizationType.MXFP4), dtype=np.float32).reshape(payload.shape[0], -1)
        for engine in ENGINES:
            got = np.asarray(qexact.dequantize(payload, scale, PRESET, shape=want.shape, engine=engine))
            d = int(np.count_nonzero(got.view(np.uint32) != want.view(np.uint32)))
            assert d == 0, f"{name} ({engine}): {d} of {want.size} values differ"
            diff, total = diff + d, total + want.size
    print(f"mxfp4.ggml dequantize: {diff} differing of {total} values")


def test_infer_names_mxfp4_ggml(tmp_path):
    def peer(x):
        return split(gguf_blocks(x))

    result = infer_on_peer(tmp_path, PRESET, peer)
    assert result["exact"], result
    assert result["preset"] == PRESET, result
