"""quantize(x, preset, scale=s): quantize with given scales (ONNX QuantizeLinear's scale input).
Every quantizing preset gives back its own payload from its own scales on the reference engine
(and on the fast one for fp8.scaled); fp8.onnx.* with other scales is x / s cast by ml_dtypes
(saturating) and by the OCP rule (overflow=nan); wrong scales are refused naming the shape and
dtype they must have."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import qexact
from conftest import FAMILY, QUANTIZE_PRESETS, import_or_fail, make_input


def raw(a) -> np.ndarray:
    a = np.asarray(a)
    return a.reshape(-1).view(np.uint8)


@pytest.mark.parametrize("preset", QUANTIZE_PRESETS)
def test_own_scales_given_back_reproduce_quantize(preset):
    x = make_input(preset)
    outs = qexact.quantize(x, preset)
    engines = ["reference", "fast"] if FAMILY[preset] == "fp8.scaled" else ["reference"]
    for engine in engines:
        again = qexact.quantize(x, preset, scale=outs[1], engine=engine)
        assert len(again) == len(outs)
        for a, b in zip(again, outs):
            assert np.count_nonzero(raw(a) != raw(b)) == 0, (preset, engine)


@pytest.mark.parametrize("engine", ["fast", "reference"])
@pytest.mark.parametrize("element, overflow", [("e4m3", "saturate"), ("e4m3", "nan"), ("e5m2", "saturate"),
                                               ("e5m2", "inf")])
def test_onnx_axis_is_x_over_the_given_scale(engine, element, overflow):
    rng = np.random.default_rng(11)
    x = (rng.standard_normal((6, 40)) * 100).astype(np.float32)
    s = np.exp2(rng.integers(-8, 3, 6)).astype(np.float32) * np.float32(0.3)
    payload, scale = qexact.quantize(x, "fp8.onnx.axis", scale=s, engine=engine, element=element, overflow=overflow)
    assert scale.tobytes() == s.tobytes()
    q = x / s[:, None]
    dt = ml_dtypes.float8_e4m3fn if element == "e4m3" else ml_dtypes.float8_e5m2
    fmax = float(ml_dtypes.finfo(dt).max)
    if overflow == "saturate":
        want = np.clip(q, -fmax, fmax).astype(dt)
    else:
        want = q.astype(dt)  # ml_dtypes: RNE, what rounds past max is NaN (E4M3FN) / inf (E5M2)
    assert np.count_nonzero(raw(payload) != raw(want)) == 0
    assert (overflow == "saturate") or np.count_nonzero(~np.isfinite(np.asarray(payload).astype(np.float32))) > 0


def test_wrong_scales_are_refused():
    x = np.ones((4, 8), dtype=np.float32)
    with pytest.raises(ValueError, match=r"must be f32 \(4,\)"):
        qexact.quantize(x, "fp8.onnx.axis", scale=np.ones(3, dtype=np.float32))
    with pytest.raises((TypeError, ValueError)):
        qexact.quantize(x, "fp8.onnx.axis", scale=np.ones(4, dtype=np.float64))
    with pytest.raises(ValueError, match="scale= and out= together"):
        qexact.quantize(x, "fp8.onnx.axis", scale=np.ones(4, dtype=np.float32),
                        out=(np.empty((4, 8), np.uint8), np.empty(4, np.float32)))
    with pytest.raises(ValueError, match="fast engine has no mx kernel"):
        payload, scale = qexact.quantize(np.ones((2, 32), np.float32), "mx.ocp")
        qexact.quantize(np.ones((2, 32), np.float32), "mx.ocp", scale=scale)


def test_torch_tensors_take_given_scales_too():
    torch = import_or_fail("torch")
    x = torch.linspace(-3, 3, 64).reshape(4, 16)
    payload, scale = qexact.quantize(x, "fp8.onnx.block", granularity="group:8")
    p2, s2 = qexact.quantize(x, "fp8.onnx.block", scale=scale * 0.5, granularity="group:8")
    assert p2.dtype == torch.float8_e4m3fn and torch.equal(s2, scale * 0.5)
    want = torch.clamp(x / (scale * 0.5).repeat_interleave(8, dim=1), -448, 448).to(torch.float8_e4m3fn)
    assert torch.equal(p2.view(torch.uint8), want.view(torch.uint8))
