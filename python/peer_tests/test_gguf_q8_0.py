"""gguf-py 0.19.0 ``gguf.quants`` Q8_0 (ggml's reference quantize_row_q8_0_ref, in numpy) against
qexact's ``q8_0.ggml``, byte for byte on the serialized blocks (fp16 d, then 32 int8), both
engines.

Left out: blocks whose ``fp32(1 / d)`` overflows (d = amax/127 below about 2^-128). ggml then
multiplies by inf and converts inf (or 0 * inf = NaN) to int8: undefined behaviour in C, and
numpy's cast gives whatever the platform's conversion gives. Non-finite inputs likewise (qexact
refuses them). Both are counted and printed.
"""

from __future__ import annotations

import numpy as np
from gguf import GGMLQuantizationType
from gguf.quants import quantize as gguf_quantize

import qexact
from conftest import ENGINES, SEED, differing, qexact_cases, random_groups

import pytest


def ggml_blocks(payload: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """qexact's (int8 payload, fp16 d) as ggml's block_q8_0 bytes: (blocks, 2 + 32)."""
    d = np.ascontiguousarray(scale, dtype=np.float16).reshape(-1, 1).view(np.uint8)
    qs = np.ascontiguousarray(payload).view(np.uint8).reshape(-1, 32)
    return np.concatenate([d, qs], axis=1)


def defined_blocks(x: np.ndarray) -> np.ndarray:
    """Rows of 32 that ggml quantizes without undefined behaviour (finite, 1/d finite)."""
    blocks = x.astype(np.float32).reshape(-1, 32)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        d = np.abs(blocks).max(axis=1) / np.float32(127)
        inv = np.float32(1) / d
    return blocks[np.isfinite(blocks).all(axis=1) & ((d == 0) | np.isfinite(inv))]


@pytest.fixture(scope="session")
def tmp_root(tmp_path_factory):
    return tmp_path_factory.mktemp("gguf")


def test_q8_0_against_gguf(tmp_root):
    material = [(n, x) for n, x in qexact_cases(tmp_root, "q8_0.ggml", {}) if x.shape[-1] % 32 == 0]
    material.append(("random", random_groups(SEED + 3, 256, 256, nonfinite=False)))
    compared = left_out = diff = total = 0
    for name, x in material:
        all_blocks = x.astype(np.float32).reshape(-1, 32).shape[0]
        blocks = defined_blocks(x)
        left_out += all_blocks - blocks.shape[0]
        if blocks.shape[0] == 0:
            continue
        theirs = gguf_quantize(blocks, GGMLQuantizationType.Q8_0).reshape(-1, 34)
        for engine in ENGINES:
            payload, scale = qexact.quantize(blocks, "q8_0.ggml", engine=engine)
            d = differing(ggml_blocks(payload, scale), theirs)
            assert d == 0, f"{name} ({engine}): {d} differing of {theirs.nbytes} bytes"
            diff, total = diff + d, total + theirs.nbytes
        compared += blocks.shape[0]
    print(f"q8_0: {len(material)} cases, {compared} blocks, {diff} differing of {total} bytes; "
          f"{left_out} blocks left out (1/d overflows or non-finite input; seed {SEED + 3})")
    assert compared > 0
