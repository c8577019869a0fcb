"""fp8.onnx.* against ONNX QuantizeLinear as onnx 1.22.0's ReferenceEvaluator and onnxruntime
1.31.1 (CPU) run it, with the scale given (qexact's quantize with given scales, both engines):
per tensor, per axis 0 of a 2-D tensor and blocked along the last axis (ragged last block),
saturate=1 and 0, float8e4m3fn and float8e5m2, on the exported adversarial cases and seeded
tensors, with the contract's own scales and with scales 2^-6 .. 2^6 times smaller or larger
(so that quotients pass max and overflow), zero, NaN and inf ones. 0 differing bytes.

Named exclusions (docs/decisions.md): the reference writes E5M2 NaN as 0x7E|sign where
onnxruntime and torch write 0x7F|sign (qexact: 0x7F); onnxruntime with saturate=0 gives
448 for E4M3FN quotients in [480, 496) and NaN for E5M2 ones in [61440, 65536), where the
reference (and the OCP rule) gives NaN and inf;
onnxruntime's Python API cannot return float8e5m2 arrays, so its E5M2 bytes are read through
DequantizeLinear (values, NaN as NaN); f16 inputs (the reference divides in f16) are not tested.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import qexact
from conftest import ENGINES, SEED, differing, qexact_cases, random_groups

ELEMENTS = {"e4m3": TensorProto.FLOAT8E4M3FN, "e5m2": TensorProto.FLOAT8E5M2}
# preset -> (the operator's attributes for a 2-D input, block size along the last axis or None)
LAYOUTS = {"fp8.onnx.tensor": {}, "fp8.onnx.axis": {"axis": 0}, "fp8.onnx.block": {"axis": 1, "block_size": 128}}


# onnxruntime's own rounding past max with saturate=0, where the reference (and qexact) round to
# NaN (E4M3FN) or inf (E5M2): quotients in [lo, hi) give 448 (E4M3FN) or NaN (E5M2) there.
ORT_EDGE = {"e4m3": (480.0, 496.0), "e5m2": (61440.0, 65536.0)}


def graph(to: int, saturate: int, attrs: dict, dequantize: bool = False) -> onnx.ModelProto:
    nodes = [helper.make_node("QuantizeLinear", ["x", "s"], ["q"], saturate=saturate, output_dtype=to, **attrs)]
    out = "q"
    if dequantize:  # onnxruntime's Python API has no float8e5m2 array: read its codes as values
        nodes.append(helper.make_node("DequantizeLinear", ["q", "one"], ["y"]))
        out = "y"
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, None),
              helper.make_tensor_value_info("s", TensorProto.FLOAT, None)]
    inits = [helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])] if dequantize else []
    g = helper.make_graph(nodes, "quantize", inputs,
                          [helper.make_tensor_value_info(out, TensorProto.FLOAT if dequantize else to, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    m.ir_version = 10  # onnxruntime 1.31 reads IR <= 13; opset 21 needs IR 10
    return m


def material(tmp_root, preset: str, element: str) -> list[tuple[str, np.ndarray]]:
    cases = [(n, x.astype(np.float32)) for n, x in qexact_cases(tmp_root, preset, {"element": element})
             if x.ndim == 2 and x.size and x.dtype == np.float32]
    cases.append(("random", random_groups(SEED + 21, 64, 300, block=50, nonfinite=True)))
    edges = np.array([0.0, -0.0, 1e-9, -1e-9, 448, 460, 464, np.nextafter(np.float32(464), np.float32(1e9)), 479, 480,
                      495, 496, 500, 57344, 61439, 61440, 65535, 65536, 1e30, np.inf, -np.inf, np.nan, -np.nan,
                      2.0 ** -9, 2.0 ** -10, 3 * 2.0 ** -11, 2.0 ** -16, 3 * 2.0 ** -18], dtype=np.float32)
    cases.append(("edges", np.tile(np.concatenate([edges, -edges]), (3, 5))))
    return cases


def scale_variants(scale: np.ndarray, seed: int) -> list[tuple[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    scale = np.array(scale, dtype=np.float32)  # 0-d stays an array (onnxruntime takes no numpy scalar)
    out = [("own", scale)]
    with np.errstate(over="ignore", invalid="ignore"):
        factor = np.exp2(rng.integers(-6, 7, scale.shape)).astype(np.float32)
        out.append(("scaled", np.array(scale * factor, dtype=np.float32)))
        odd = np.array(scale * np.float32(0.7), dtype=np.float32)
        flat = odd.reshape(-1)
        specials = np.array([0.0, np.nan, np.inf, 2.0 ** -140, 1.0], dtype=np.float32)
        flat[: min(flat.size, specials.size)] = specials[: min(flat.size, specials.size)]
        out.append(("special", odd))
    return out


@pytest.fixture(scope="session")
def tmp_root(tmp_path_factory):
    return tmp_path_factory.mktemp("onnx_fp8")


@pytest.mark.parametrize("preset", sorted(LAYOUTS))
@pytest.mark.parametrize("element", ["e4m3", "e5m2"])
@pytest.mark.parametrize("saturate", [1, 0])
def test_quantize_linear_against_onnx(tmp_root, preset, element, saturate):
    params = {"element": element}
    if not saturate:
        params["overflow"] = "nan" if element == "e4m3" else "inf"
    to = ELEMENTS[element]
    ref_model = ReferenceEvaluator(graph(to, saturate, LAYOUTS[preset]))
    ort_model = ort.InferenceSession(graph(to, saturate, LAYOUTS[preset], dequantize=element == "e5m2")
                                     .SerializeToString(), providers=["CPUExecutionProvider"])
    total = diff_ort = 0
    for name, x in material(tmp_root, preset, element):
        own = np.asarray(qexact.quantize(x, preset, **params)[1])
        for kind, s in scale_variants(own, SEED + x.size):
            want_ref = np.asarray(ref_model.run(None, {"x": x, "s": s})[0]).view(np.uint8)
            got_ort = ort_model.run(None, {"x": x, "s": s})[0]
            for engine in ENGINES:
                payload, scale = qexact.quantize(x, preset, scale=s, engine=engine, **params)
                codes = np.asarray(payload).view(np.uint8)
                assert differing(np.asarray(scale), s) == 0
                # The reference's E5M2 NaN is 0x7E|sign, qexact's (and onnxruntime's) 0x7F|sign.
                mine = codes.copy()
                if element == "e5m2":
                    mine[(mine & 0x7F) == 0x7F] -= 1
                d = differing(mine, want_ref)
                assert d == 0, f"{preset} {element} saturate={saturate} {name} {kind} {engine}: {d} differing of {codes.size} (reference)"
                total += codes.size
                ok = np.ones(codes.shape, bool)
                if not saturate:  # onnxruntime's non-saturating edge (named exclusion)
                    lo, hi = ORT_EDGE[element]
                    with np.errstate(all="ignore"):
                        q = np.abs(x / np.broadcast_to(expand(preset, s, x.shape), x.shape))
                    ok = ~((q >= lo) & (q < hi))
                if element == "e4m3":
                    o = np.asarray(got_ort).view(np.uint8)
                    d = int(np.count_nonzero(o[ok] != codes[ok]))
                else:
                    values = np.asarray(payload).view(ml_dtypes.float8_e5m2).astype(np.float32)
                    both_nan = np.isnan(values) & np.isnan(got_ort)
                    d = int(np.count_nonzero(((values != got_ort) | (np.signbit(values) != np.signbit(got_ort)))
                                             & ~both_nan & ok))
                diff_ort += d
                assert d == 0, f"{preset} {element} saturate={saturate} {name} {kind} {engine}: {d} differing (onnxruntime)"
    print(f"\n{preset} {element} saturate={saturate}: 0 differing of {total} bytes (reference evaluator), "
          f"onnxruntime {diff_ort} differing")


def expand(preset: str, s: np.ndarray, shape) -> np.ndarray:
    """The per-element scale of a 2-D input."""
    if preset == "fp8.onnx.tensor":
        return s.reshape(1, 1)
    if preset == "fp8.onnx.axis":
        return s.reshape(-1, 1)
    return np.repeat(s, 128, axis=1)[:, : shape[1]]


def test_given_scales_of_other_families_follow_the_reference_engine(tmp_root):
    # MX with given E8M0 bytes: the fast engine refuses by name, the reference engine takes them,
    # and given = own reproduces quantize.
    x = random_groups(SEED + 3, 4, 64, nonfinite=False)
    payload, scale = qexact.quantize(x, "mxfp8.ct")
    p2, s2 = qexact.quantize(x, "mxfp8.ct", scale=scale, engine="reference")
    assert differing(np.asarray(p2), np.asarray(payload)) == 0 and differing(np.asarray(s2), np.asarray(scale)) == 0
    with pytest.raises(ValueError, match="fast engine has no mx kernel"):
        qexact.quantize(x, "mxfp8.ct", scale=scale)


from stack_material import infer_on_peer, nan_cases  # noqa: E402


@pytest.mark.parametrize("preset", sorted(LAYOUTS))
def test_infer_names_the_onnx_preset(tmp_path, preset):
    """`qexact infer` on QuantizeLinear's bytes for the exported cases, the scale computed the way a
    caller computes one (fp32(amax / 448) per domain, 1 for an all-zero one, as onnxruntime's
    compute_scale_zp does): the operator takes the scale, so what infer learns from is the element
    step. Inputs holding NaN are left to the caller (a NaN domain's scale is whatever NaN the
    caller's reduction makes, not the operator's); fp8.onnx.* must be among the contracts infer
    finds exact."""
    ref_model = ReferenceEvaluator(graph(ELEMENTS["e4m3"], 1, LAYOUTS[preset]))

    def scale_of(x: np.ndarray) -> np.ndarray:
        a = np.abs(x.astype(np.float32))
        with np.errstate(invalid="ignore"):
            if preset == "fp8.onnx.tensor":
                m = np.array(a.max(), dtype=np.float32)
            elif preset == "fp8.onnx.axis":
                m = a.max(axis=1).astype(np.float32)
            else:
                pad = (-x.shape[1]) % 128
                m = np.pad(a, ((0, 0), (0, pad))).reshape(x.shape[0], -1, 128).max(axis=2).astype(np.float32)
        s = (m / np.float32(448.0)).astype(np.float32)
        return np.where(m == 0, np.float32(1.0), s).astype(np.float32)

    def peer(x: np.ndarray):
        if x.dtype != np.float32 or np.isnan(x).any():
            raise ValueError("f32 only (the reference divides in the input's dtype), and no NaN (its scale is the caller's)")
        s = scale_of(x)
        return np.asarray(ref_model.run(None, {"x": x, "s": s})[0]).view(np.uint8), s

    r = infer_on_peer(tmp_path, preset, peer, answered_only=True)
    found = [r["preset"], *r["also_exact"]]
    print(f"infer on QuantizeLinear ({preset}): {'exact' if r['exact'] else 'closest'} {found}, overrides {r['overrides']}")
    assert r["exact"] and preset in found, r
