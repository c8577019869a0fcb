"""The Python package and the qexact CLI give the same bytes on the same inputs, and the same
error messages. The CLI is found through QEXACT_CLI, else build/release of
this repository (scripts/test-python.sh sets QEXACT_CLI when it finds one)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import qexact
from conftest import QUANTIZE_PRESETS, make_input

REPO = Path(__file__).resolve().parents[2]


def find_cli() -> Path | None:
    given = os.environ.get("QEXACT_CLI")
    if given:
        return Path(given)
    candidate = REPO / "build/release/qexact"
    return candidate if candidate.is_file() else None


CLI = find_cli()
pytestmark = pytest.mark.skipif(CLI is None, reason="the qexact CLI is not built (set QEXACT_CLI)")


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(CLI), *args], capture_output=True, text=True, check=False)


def cli_ok(*args: str) -> None:
    done = run_cli(*args)
    assert done.returncode == 0, done.stderr


def save_input(x: np.ndarray, path: Path) -> list[str]:
    """Writes x as the CLI reads it; returns the --dtype arguments it needs."""
    if x.dtype == ml_dtypes.bfloat16:
        np.save(path, x.view(np.uint16))
        return ["--dtype", "bf16"]
    np.save(path, x)
    return []


def same_bytes(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and a.tobytes() == b.tobytes()


CASES = [(p, {}) for p in QUANTIZE_PRESETS] + [
    ("int8.token.blaze", {"scale_mode": "before", "scale_min": 1e-6, "range": 128}),
    ("mxfp8.ascend", {"prequant_round": "none", "rounding": "half_away"}),
    ("mx.ocp", {"layout": "swizzled", "tail": "reject", "scale_rule": "even"}),
    ("q8_0.ggml", {"scale_store": "f32"}),
    ("nvfp4.torchao", {"tensor_scale": "amax"}),
    ("fp8.torchao.rowwise", {"element": "e5m2"}),
]


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16], ids=["f32", "bf16"])
@pytest.mark.parametrize("preset,params", CASES, ids=[f"{p}{'+' if o else ''}{'+'.join(o)}" for p, o in CASES])
def test_quantize_and_dequantize_bytes_equal_the_cli(tmp_path, preset, params, dtype):
    x = make_input(preset, dtype)
    dtype_args = save_input(x, tmp_path / "x.npy")
    param_args = [a for k, v in params.items() for a in ("--param", f"{k}={v}")]
    cli_ok("quantize", "--preset", preset, *dtype_args, *param_args, str(tmp_path / "x.npy"), "--out", str(tmp_path / "q"))
    cli_ok("dequantize", str(tmp_path / "q"), "--out", str(tmp_path / "y.npy"))

    outputs = qexact.quantize(x, preset, **params)
    names = [name for name, _, _ in qexact.outputs(preset, x.shape, **params)]
    assert sorted(p.name for p in (tmp_path / "q").iterdir()) == sorted([f"{n}.npy" for n in names] + ["meta.json"])
    payload, scale = outputs[:2]
    cli_payload = np.load(tmp_path / "q" / "payload.npy")
    assert cli_payload.dtype == (np.int8 if payload.dtype == np.int8 else np.uint8)
    assert same_bytes(payload.view(np.uint8), cli_payload.view(np.uint8))
    for name, array in zip(names[1:], outputs[1:]):  # scale, tensor_scale: one-byte codes as uint8
        cli_array = np.load(tmp_path / "q" / f"{name}.npy")
        if array.dtype.itemsize == 1:
            array = array.view(np.uint8)
        assert array.dtype == cli_array.dtype and same_bytes(array, cli_array), name
    tensor_scale = outputs[2] if len(outputs) > 2 else None
    y = qexact.dequantize(payload, scale, preset, shape=x.shape, tensor_scale_array=tensor_scale, **params)
    cli_y = np.load(tmp_path / "y.npy")
    assert y.dtype == cli_y.dtype and same_bytes(y, cli_y)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16], ids=["f32", "f16", "bf16"])
def test_hif4_bytes_equal_the_cli(tmp_path, dtype):
    x = np.ascontiguousarray(np.concatenate([make_input("hif4", dtype)] * 16))  # (64, 128)
    dtype_args = save_input(x, tmp_path / "x.npy")
    for qdim in (-1, 0):
        cli_ok("fake-quant", "--preset", "hif4", "--qdim", str(qdim), *dtype_args, str(tmp_path / "x.npy"),
               "--out", str(tmp_path / "fq.npy"))
        ours = qexact.hifloat4_fake_quant(x, qdim)
        assert same_bytes(ours, np.load(tmp_path / "fq.npy"))
    cli_ok("hif4-pack", *dtype_args, str(tmp_path / "x.npy"), "--out", str(tmp_path / "packed"))
    cli_ok("hif4-unpack", str(tmp_path / "packed"), "--out", str(tmp_path / "y.npy"))
    scale, value = qexact.hif4_pack(x)
    assert same_bytes(scale, np.load(tmp_path / "packed" / "scale.npy"))
    assert same_bytes(value, np.load(tmp_path / "packed" / "value.npy"))
    assert same_bytes(qexact.hif4_unpack(scale, value), np.load(tmp_path / "y.npy"))


def nan_row():
    x = np.ones((3, 40), dtype=np.float32)
    x[1, 17] = np.nan
    return x


ERROR_CASES = {
    "unknown preset": (np.ones((2, 32), np.float32), "nope", {}),
    "unknown parameter": (np.ones((2, 32), np.float32), "int8.token.blaze", {"foo": 1}),
    "bad value": (np.ones((2, 32), np.float32), "int8.token.blaze", {"scale_mode": "sideways"}),
    "impossible contract": (np.ones((2, 32), np.float32), "mx.ocp", {"overflow": "inf"}),
    "NaN in int8 input": (nan_row(), "int8.token.blaze", {}),
    "partial group under tail=reject": (np.ones((2, 48), np.float32), "mxfp8.torchao.floor", {}),
    "hif4 has no quantize": (np.ones((2, 64), np.float32), "hif4", {}),
}


@pytest.mark.parametrize("case", list(ERROR_CASES))
def test_errors_carry_the_cli_message(tmp_path, case):
    x, preset, params = ERROR_CASES[case]
    np.save(tmp_path / "x.npy", x)
    param_args = [a for k, v in params.items() for a in ("--param", f"{k}={v}")]
    done = run_cli("quantize", "--preset", preset, *param_args, str(tmp_path / "x.npy"), "--out", str(tmp_path / "q"))
    assert done.returncode == 2
    prefix = "qexact: error: "
    assert done.stderr.startswith(prefix)
    with pytest.raises(ValueError) as raised:
        qexact.quantize(x, preset, **params)
    assert str(raised.value) == done.stderr[len(prefix):].rstrip("\n")


@pytest.mark.parametrize("preset,device_params", [
    ("mxfp8.ascend", {"prequant_round": "none"}),
    ("mxfp8.ascend", {"nonfinite": "nan", "byte0": "quantize"}),
    ("mx.ocp", {"scale_rule": "rceil"}),
    ("int8.token.blaze", {"int_rounding": "half_away"}),
])
def test_compare_reports_what_the_cli_reports(tmp_path, preset, device_params):
    """qexact.compare is the CLI's compare: the same counts and the same diagnoses, word for word."""
    import json
    x = make_input(preset, shape=(8, 96))
    x[1, :32] *= np.float32(2.0**-125)
    x[2, 5] = np.inf if "nonfinite" in device_params else x[2, 5]
    x[3, 7] = np.float32(255.99)
    x[4, :3] = [127.0, 0.5, 2.5]  # int8.token.blaze: scale 1, two exact ties
    payload, scale = qexact.quantize(x, preset, **device_params)
    report = qexact.compare(x, preset, (payload, scale))
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "payload.npy", payload.view(np.uint8) if payload.dtype.itemsize == 1 and
            payload.dtype != np.int8 else payload)
    np.save(tmp_path / "scale.npy", scale)
    done = run_cli("compare", "--preset", preset, "--input", str(tmp_path / "x.npy"), "--payload",
                   str(tmp_path / "payload.npy"), "--scale", str(tmp_path / "scale.npy"), "--json")
    assert done.returncode == 1, done.stderr
    cli = json.loads(done.stdout)
    assert (report.payload_bytes, report.payload_bytes_differing) == (cli["payload_bytes_total"],
                                                                      cli["payload_bytes_differing"])
    assert (report.scale_bytes, report.scale_bytes_differing) == (cli["scale_bytes_total"], cli["scale_bytes_differing"])
    assert report.scales_differing == cli["scales_differing"]
    assert report.scale_delta_histogram == {int(d): n for d, n in cli["scale_delta_histogram"].items()}
    assert (report.elements_differing, report.rows_differing) == (cli["elements_differing"], cli["rows_differing"])
    assert report.diagnoses, "the altered contract gives no diagnosis"
    assert [(d.signature, dict(d.evidence), d.explanation, d.confirmed) for d in report.diagnoses] == [
        (d["signature"], d["evidence"], d["explanation"], d["confirmed"]) for d in cli["diagnoses"]]


@pytest.mark.parametrize("engine", ["fast", "reference"])
def test_cli_scale_file_gives_the_python_given_scales_bytes(tmp_path, engine):
    x = make_input("fp8.onnx.block", shape=(8, 300))
    own = np.asarray(qexact.quantize(x, "fp8.onnx.block")[1])
    given = (own * np.float32(0.25)).astype(np.float32)
    given.reshape(-1)[0] = 0.0
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "s.npy", given)
    cli_ok("quantize", "--preset", "fp8.onnx.block", "--param", "overflow=nan", "--engine", engine, "--scale",
           str(tmp_path / "s.npy"), str(tmp_path / "x.npy"), "--out", str(tmp_path / "q"))
    payload, scale = qexact.quantize(x, "fp8.onnx.block", scale=given, overflow="nan")
    assert np.load(tmp_path / "q" / "payload.npy").tobytes() == np.asarray(payload).tobytes()
    assert np.load(tmp_path / "q" / "scale.npy").tobytes() == given.tobytes()
    # A scale file of the wrong shape: an error naming the shape it must have, and no output.
    np.save(tmp_path / "bad.npy", given[:, :1])
    done = run_cli("quantize", "--preset", "fp8.onnx.block", "--engine", engine, "--scale", str(tmp_path / "bad.npy"),
                   str(tmp_path / "x.npy"), "--out", str(tmp_path / "q2"))
    assert done.returncode == 2 and "must be f32 (8, 3)" in done.stderr, done.stderr
    assert not (tmp_path / "q2").exists()
