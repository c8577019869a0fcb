"""AMD Quark 0.13 (amd-quark, torch 2.15, CPU) against qexact's ``mx.quark.*``, both engines.

Real quantization, as ``export_safetensors`` writes a statically quantized weight
(OCP_MXFP4Spec / OCP_MXFP6E2M3Spec / OCP_MXFP6E3M2Spec with ``is_dynamic=False`` and the default
scale mode "even"): the observer's scale, ``get_real_quantizer(...).to_real_quantize_params`` and
``maybe_convert_and_transpose_scale`` (``to_e8m0_uint8``), compared on the payload codes (Quark
packs fp6 four codes in three bytes, unpacked here; fp4 is two per byte as qexact's) and the E8M0
bytes. MXFP8 (E4M3, E5M2) Quark cannot export on CPU: its fake quantization is compared with
qexact's dequantize of its own bytes, bit for bit (any NaN matching any NaN).

Quark compiles its element kernel (a C++ torch extension, ninja) on first import: into
build/torch-extensions, once.
"""

from __future__ import annotations

import os

from conftest import ROOT

os.environ.setdefault("TORCH_EXTENSIONS_DIR", str(ROOT / "build" / "torch-extensions"))
os.environ.setdefault("QUARK_DISABLE_COMPILE", "1")  # the eager path: the one export runs

import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from quark.torch.export.nn.modules.realquantizer import get_real_quantizer  # noqa: E402
from quark.torch.quantization.config.config import (  # noqa: E402
    OCP_MXFP4Spec,
    OCP_MXFP6E2M3Spec,
    OCP_MXFP6E3M2Spec,
    OCP_MXFP8E4M3Spec,
    OCP_MXFP8E5M2Spec,
)
from quark.torch.quantization.tensor_quantize import FakeQuantizeBase  # noqa: E402

import qexact  # noqa: E402
from conftest import ENGINES, SEED, differing, qexact_cases, random_groups  # noqa: E402
from stack_material import infer_on_peer  # noqa: E402

BF16 = ml_dtypes.bfloat16
REAL = {"mx.quark.e2m1": OCP_MXFP4Spec, "mx.quark.e2m3": OCP_MXFP6E2M3Spec, "mx.quark.e3m2": OCP_MXFP6E3M2Spec}
FAKE = {"mx.quark.e4m3": OCP_MXFP8E4M3Spec, "mx.quark.e5m2": OCP_MXFP8E5M2Spec}


def to_torch(x: np.ndarray) -> torch.Tensor:
    if x.dtype == BF16:
        return torch.from_numpy(x.view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))


def quark_quantizer(spec):
    qs = spec(ch_axis=-1, is_dynamic=False, scale_calculation_mode="even").to_quantization_spec()
    return qs, FakeQuantizeBase.get_fake_quantize(qs, device=torch.device("cpu"))


def quark_real(preset: str, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Quark's exported (codes one per element, E8M0 bytes) of a 2-D x."""
    qs, fq = quark_quantizer(REAL[preset])
    t = to_torch(x)
    with torch.no_grad():
        fq(t)
        rq = get_real_quantizer(qspec=qs, quantizer=fq, reorder=True, real_quantized=True,
                                float_dtype=torch.float32, device=torch.device("cpu"))
        packed = rq.to_real_quantize_params(t).numpy()
        rq.maybe_convert_and_transpose_scale()
    scale = rq.scale.numpy().reshape(x.shape[0], -1)
    if preset == "mx.quark.e2m1":
        return packed.reshape(x.shape[0], -1), scale
    # fp6: four codes in three little-endian bytes, w = v0 | v1 << 6 | v2 << 12 | v3 << 18.
    b = packed.reshape(-1, 3).astype(np.uint32)
    w = b[:, 0] | (b[:, 1] << 8) | (b[:, 2] << 16)
    codes = np.stack([(w >> s) & 0x3F for s in (0, 6, 12, 18)], axis=1).astype(np.uint8)
    return codes.reshape(x.shape[0], -1), scale


def quark_fake(preset: str, x: np.ndarray) -> np.ndarray:
    _, fq = quark_quantizer(FAKE[preset])
    with torch.no_grad():
        y = fq(to_torch(x))
    return y.to(torch.float32).numpy()


def edges() -> np.ndarray:
    """Blocks at the even rule's edges (amax a hair below, at and above 1.75, 1.875, 1.9375 times
    2^k, across the subnormal band and the top), element ties, all-zero and -0.0 blocks, and
    amaxes whose scale clamps at 2^-127 (written 0x01)."""
    rows = []
    for k in list(range(-149, 128, 5)) + [-133, -128, -127, -126, -125, -124, 125, 126, 127]:
        for m in (1.0, 1.5, 1.75, 1.875, 1.9375, 1.99):
            a = np.float32(m * 2.0**k) if np.isfinite(m * 2.0**k) and m * 2.0**k < 3.4e38 else np.float32(3.4e38)
            for amax in (np.nextafter(a, np.float32(0)), a, np.nextafter(a, np.float32(np.inf))):
                if np.isfinite(amax) and amax > 0:
                    r = amax * np.linspace(-1, 1, 32, dtype=np.float32)
                    r[3] = amax
                    rows.append(r)
    ties = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 7.0], dtype=np.float32)
    for e in (-2, 0, 3):
        t = np.zeros(32, np.float32)
        t[:8], t[8:16] = ties * np.float32(2.0**e), -ties * np.float32(2.0**e)
        t[16] = np.float32(6.0 * 2.0**e)
        rows.append(t)
    z = np.zeros(32, np.float32)
    rows.append(z.copy())
    z[::3] = -0.0
    rows.append(z)
    return np.stack(rows)


def material(tmp_root, preset):
    cases = [(n, x) for n, x in qexact_cases(tmp_root, preset, {}) if x.ndim and x.size and x.shape[-1] % 32 == 0]
    rnd = random_groups(SEED + 21, 128, 256, nonfinite=True)
    cases += [("random", rnd), ("random-bf16", rnd.astype(BF16)), ("edges", edges()), ("edges-bf16", edges().astype(BF16))]
    return [(n, x.reshape(-1, x.shape[-1])) for n, x in cases]


@pytest.fixture(scope="session")
def tmp_root(tmp_path_factory):
    return tmp_path_factory.mktemp("quark")


@pytest.mark.parametrize("preset", list(REAL))
def test_real_quantization_against_quark(tmp_root, preset):
    diff = total = 0
    worst = {}
    cases = material(tmp_root, preset)
    for name, x in cases:
        codes, scale = quark_real(preset, x)
        for engine in ENGINES:
            payload, got_scale = qexact.quantize(x, preset, engine=engine)
            p = np.asarray(payload).view(np.uint8).reshape(codes.shape)
            d = differing(p, codes) + differing(np.asarray(got_scale).view(np.uint8), scale)
            diff, total = diff + d, total + codes.nbytes + scale.nbytes
            if d:
                worst.setdefault(f"{engine}/{name}", d)
    print(f"{preset}: {diff} differing of {total} bytes over {len(cases)} tensors")
    assert diff == 0, worst


@pytest.mark.parametrize("preset", list(FAKE))
def test_fake_quantization_against_quark(tmp_root, preset):
    diff = total = 0
    worst = {}
    cases = material(tmp_root, preset)
    for name, x in cases:
        want = quark_fake(preset, x)
        for engine in ENGINES:
            payload, scale = qexact.quantize(x, preset, engine=engine)
            got = np.asarray(qexact.dequantize(payload, scale, preset, shape=x.shape, engine=engine))
            if x.dtype == BF16:  # Quark's fake output is in the input's dtype: qexact's values rounded once
                got = got.astype(BF16).astype(np.float32)
            both_nan = np.isnan(got) & np.isnan(want)
            d = int(np.count_nonzero((got.view(np.uint32) != want.view(np.uint32)) & ~both_nan))
            diff, total = diff + d, total + want.size
            if d:
                worst.setdefault(f"{engine}/{name}", d)
    print(f"{preset} fake quant: {diff} differing of {total} values over {len(cases)} tensors")
    assert diff == 0, worst


@pytest.mark.parametrize("preset", ["mx.quark.e2m1", "mx.quark.e2m3"])
def test_infer_names_the_quark_preset(tmp_path, preset):
    def peer(x):
        if x.shape[-1] % 32:
            raise ValueError("Quark's groups of 32 must divide the last axis")
        return quark_real(preset, x)

    result = infer_on_peer(tmp_path, preset, peer)
    assert result["exact"], result
    assert result["preset"] == preset, result
