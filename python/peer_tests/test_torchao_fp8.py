"""torchao 0.18.0 float8 dynamic scaling (``hp_tensor_to_float8_dynamic``: ``tensor_to_scale``
then ``hp_tensor_and_scale_to_float8``, CPU) against qexact's ``fp8.torchao.tensorwise`` and
``fp8.torchao.rowwise`` (``ScalingGranularity.AXISWISE``, ``axiswise_dim=-1``), byte for byte,
both engines: payload bytes and the fp32 scale's bits (torchao's ``_scale``, the multiplier).

Every float8 element (e4m3fn, e5m2) x ``round_scales_to_power_of_2`` (qexact
``scale_pow2=down_log2f``) x f32 / bf16 input, on seeded groups spanning 2^-140 .. 2^120 with
±inf and NaN in some rows, zero and -0.0 rows, and near-overflow rows; and
``to_original_precision`` (the payload divided by the scale) against ``qexact.dequantize``.

One thing is left out of the byte count, and counted apart: the sign of a NaN element's code
where the domain's scale is a NaN of the other sign (an fp32 tensor holding a NaN has the scale
0xFFFFFFFF). torch's multiply then returns either NaN operand depending on which of its loops
(vector body, remainder, peeled first element) handles the element; qexact gives the element's
own NaN (x86's first operand). Those positions must hold one of the two NaN codes.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
import torch
from torchao.float8.config import ScalingGranularity
from torchao.float8.float8_scaling_utils import hp_tensor_to_float8_dynamic
from torchao.float8.float8_training_tensor import LinearMMConfig

import qexact
from conftest import ENGINES, SEED, differing, random_groups

ELEMENTS = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}
GRANULARITY = {"tensorwise": ScalingGranularity.TENSORWISE, "rowwise": ScalingGranularity.AXISWISE}


def material(seed: int, nonfinite: bool) -> list[tuple[str, np.ndarray]]:
    x = random_groups(seed, 48, 160, block=32, nonfinite=False)
    x[4] = 0.0
    x[5] = -0.0
    x[6] = np.float32(3.0e38)
    x[7] = np.float32(2.0 ** -149)
    x[8, ::3] = np.float32(-448.0)
    cases = [("finite", x), ("3-D", x.reshape(6, 8, 160)), ("odd", x[:, :77].copy())]
    if nonfinite:
        y = x.copy()
        y[9, 3] = np.inf
        y[10, 159] = -np.inf
        y[11, 0] = np.nan
        y[11, 80] = np.inf
        y[12, 40] = np.nan
        cases.append(("nonfinite", y))
        cases.append(("one NaN", np.array([np.nan], dtype=np.float32)))
        cases.append(("inf only", np.array([[1.0, np.inf, -2.0, 0.0]], dtype=np.float32)))
    return cases


def as_dtype(x: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "f32":
        return x
    return torch.from_numpy(x.copy()).to(torch.bfloat16).view(torch.int16).numpy().view(ml_dtypes.bfloat16)


def to_torch(x: np.ndarray) -> torch.Tensor:
    if x.dtype == ml_dtypes.bfloat16:
        return torch.from_numpy(x.view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(x.copy())


def peer(x: np.ndarray, element: str, granularity: str, pow2: bool):
    t = hp_tensor_to_float8_dynamic(to_torch(x), ELEMENTS[element], LinearMMConfig(),
                                    scaling_granularity=GRANULARITY[granularity],
                                    axiswise_dim=-1 if granularity == "rowwise" else None,
                                    round_scales_to_power_of_2=pow2)
    payload = t._data.contiguous().view(torch.uint8).numpy()
    scale = t._scale.contiguous().numpy()
    scale = scale.reshape(()) if granularity == "tensorwise" else scale.reshape(x.shape[:-1])
    return t, payload, scale


def unmodelled(x: np.ndarray, scale: np.ndarray, granularity: str) -> np.ndarray:
    """Elements that are NaN where the domain's scale is a NaN of the other sign."""
    xf = x.astype(np.float32)
    s = np.broadcast_to(scale if granularity == "tensorwise" else scale[..., None], xf.shape)
    x_sign = xf.view(np.uint32) >> 31
    s_sign = np.ascontiguousarray(s, dtype=np.float32).view(np.uint32) >> 31
    return np.isnan(xf) & np.isnan(s) & (x_sign != s_sign)


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("pow2", [False, True], ids=["exact", "pow2"])
@pytest.mark.parametrize("granularity", list(GRANULARITY))
@pytest.mark.parametrize("element", list(ELEMENTS))
def test_float8_dynamic(element, granularity, pow2, dtype):
    preset = f"fp8.torchao.{granularity}"
    params = {"element": element, "scale_pow2": "down_log2f" if pow2 else "none"}
    diff = total = apart = 0
    cases = material(SEED + 3, nonfinite=True)
    for name, x32 in cases:
        x = as_dtype(x32, dtype)
        _, payload, scale = peer(x, element, granularity, pow2)
        skip = unmodelled(x, scale, granularity)
        assert np.isin(payload[skip] & 0x7F, [0x7F]).all(), f"{name}: a left-out position is not a NaN code"
        for engine in ENGINES:
            q_payload, q_scale = qexact.quantize(x, preset, engine=engine, **params)
            assert q_scale.dtype == np.float32 and q_scale.shape == scale.shape, name
            d = differing(q_payload[~skip], payload[~skip]) + differing(q_scale, scale)
            assert d == 0, f"{name} ({engine}): {d} differing of {payload.nbytes + scale.nbytes} bytes"
            diff += d
            total += int((~skip).sum()) + scale.nbytes
            apart += int(skip.sum())
    print(f"torchao float8 {granularity} {element} {'pow2' if pow2 else 'exact'} {dtype}: {len(cases)} cases, "
          f"{diff} differing of {total} bytes, {apart} NaN-sign positions left out (seed {SEED + 3})")
    assert diff == 0


@pytest.mark.parametrize("granularity", list(GRANULARITY))
@pytest.mark.parametrize("element", list(ELEMENTS))
def test_to_original_precision(element, granularity):
    """Float8TrainingTensor.to_original_precision (payload / scale, f32) against
    qexact.dequantize of the same bytes. Finite input: a NaN's bits are not a contract."""
    preset = f"fp8.torchao.{granularity}"
    diff = total = 0
    for name, x in material(SEED + 4, nonfinite=False):
        t, payload, scale = peer(x, element, granularity, False)
        theirs = t.to_original_precision().numpy()
        for engine in ENGINES:
            ours = qexact.dequantize(payload, scale, preset, shape=x.shape, engine=engine, element=element)
            d = differing(ours, theirs)
            assert d == 0, f"{name} ({engine}): {d} differing of {theirs.nbytes} bytes"
            diff += d
            total += theirs.nbytes
    print(f"to_original_precision {granularity} {element}: {diff} differing of {total} bytes (seed {SEED + 4})")
