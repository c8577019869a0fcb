"""Checkpoints from Python: ``quantize_checkpoint`` writes the bytes ``qexact quantize`` writes
for the same .safetensors file, and ``quantize_state_dict`` gives the same tensors, summary and
metadata for the same tensors in memory (numpy arrays and torch tensors)."""

from __future__ import annotations

import json
import struct
import subprocess
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
import torch

import qexact
from test_cli_bytes import CLI

ST_NUMPY = {"F32": np.float32, "F16": np.float16, "BF16": ml_dtypes.bfloat16, "I64": np.int64, "U8": np.uint8,
            "I8": np.int8, "F8_E4M3": np.uint8, "F8_E5M2": np.uint8, "F8_E8M0": np.uint8}
NUMPY_ST = {"float32": "F32", "float16": "F16", "bfloat16": "BF16", "int64": "I64"}


def write_safetensors(path: Path, tensors: dict[str, np.ndarray], metadata: dict[str, str]) -> None:
    header: dict = {"__metadata__": metadata} if metadata else {}
    offset, blobs = 0, []
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name])
        header[name] = {"dtype": NUMPY_ST[a.dtype.name], "shape": list(a.shape),
                        "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
        blobs.append(a.tobytes())
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    path.write_bytes(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def read_safetensors(path: Path) -> tuple[dict[str, str], dict[str, tuple[str, tuple[int, ...], bytes]]]:
    data = path.read_bytes()
    (n,) = struct.unpack_from("<Q", data)
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    return meta, {k: (v["dtype"], tuple(v["shape"]), data[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]])
                  for k, v in header.items()}


def model_tensors() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    clamp = np.ones((1, 32), np.float32)
    clamp[0, 5] = 500.0
    return {
        "layer.0.weight": rng.standard_normal((4, 64)).astype(np.float32),
        "layer.0.bias": rng.standard_normal(64).astype(ml_dtypes.bfloat16),
        "layer.1.weight": rng.standard_normal((2, 96)).astype(np.float16),
        "odd": rng.standard_normal((3, 33)).astype(np.float32),
        "clamped": clamp,
        "position_ids": np.arange(4, dtype=np.int64).reshape(1, 4),
    }


@pytest.fixture
def model(tmp_path: Path) -> Path:
    path = tmp_path / "model.safetensors"
    write_safetensors(path, model_tensors(), {"format": "pt"})
    return path


RUNS = [
    ("mxfp8.ascend", {}, [], []),
    ("mx.ocp.e2m1", {}, ["layer.*"], ["*.bias"]),
    ("int8.token.blaze", {"scale_min": 1e-6}, ["*.weight"], []),
    ("q8_0.ggml", {}, [], ["position_ids"]),
    ("mxfp8.torchao.floor", {}, [], []),  # tail=reject: 'odd' is skipped
]


def cli_args(preset: str, params: dict, include: list[str], exclude: list[str]) -> list[str]:
    args = ["--preset", preset]
    for k, v in params.items():
        args += ["--param", f"{k}={v}"]
    for g in include:
        args += ["--include", g]
    for g in exclude:
        args += ["--exclude", g]
    return args


@pytest.mark.skipif(CLI is None, reason="the qexact CLI is not built (set QEXACT_CLI)")
@pytest.mark.parametrize("preset,params,include,exclude", RUNS)
def test_file_bytes_and_summary_equal_the_cli(model, tmp_path, preset, params, include, exclude):
    cli_out, py_out = tmp_path / "cli.safetensors", tmp_path / "py.safetensors"
    done = subprocess.run([str(CLI), "quantize", *cli_args(preset, params, include, exclude), str(model), "--out",
                           str(cli_out)], capture_output=True, text=True, check=True)
    summary = qexact.quantize_checkpoint(model, py_out, preset, params=params, include=include, exclude=exclude)
    cli_bytes, py_bytes = cli_out.read_bytes(), py_out.read_bytes()
    assert len(py_bytes) == len(cli_bytes)
    assert sum(a != b for a, b in zip(py_bytes, cli_bytes)) == 0
    assert summary.text == done.stdout
    assert summary.metadata == read_safetensors(cli_out)[0]


@pytest.mark.parametrize("preset,params,include,exclude", RUNS)
def test_state_dict_equals_the_file(model, tmp_path, preset, params, include, exclude):
    out = tmp_path / "q.safetensors"
    file_summary = qexact.quantize_checkpoint(model, out, preset, params=params, include=include, exclude=exclude)
    meta, stored = read_safetensors(out)
    sd = model_tensors()
    tensors, summary = qexact.quantize_state_dict(sd, preset, params=params, include=include, exclude=exclude,
                                                  metadata={"format": "pt"})
    assert summary == file_summary
    assert summary.metadata == meta
    assert list(tensors) == sorted(stored)
    for name, value in tensors.items():
        if name in sd:
            assert value is sd[name]  # passed through: the very object
            continue
        dtype, shape, raw = stored[name]
        assert value.shape == shape
        assert value.tobytes() == raw, name


def test_torch_state_dict():
    torch.manual_seed(3)
    net = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.LayerNorm(32), torch.nn.Linear(32, 64))
    net[2].to(torch.bfloat16)
    net.register_buffer("steps", torch.tensor(5, dtype=torch.int64))
    sd = net.state_dict()
    tensors, summary = qexact.quantize_state_dict(sd, "mxfp8.ascend", include="*.weight", exclude="1.*")
    assert sorted(tensors) == sorted(["0.bias", "0.weight.payload", "0.weight.scale", "1.bias", "1.weight", "2.bias",
                                      "2.weight.payload", "2.weight.scale", "steps"])
    assert [r.name for r in summary.quantized] == ["0.weight", "2.weight"]
    assert [r.dtype for r in summary.quantized] == ["f32", "bf16"]
    assert summary.copied == ["0.bias", "1.bias", "1.weight", "2.bias", "steps"]
    assert tensors["steps"] is sd["steps"]
    for name in ("0.weight", "2.weight"):
        payload, scale = tensors[name + ".payload"], tensors[name + ".scale"]
        assert payload.dtype == torch.float8_e4m3fn and scale.dtype == torch.float8_e8m0fnu
        w = sd[name]
        ref_payload, ref_scale = qexact.quantize(w.float().numpy().astype(ml_dtypes.bfloat16) if w.dtype == torch.bfloat16
                                                 else w.numpy(), "mxfp8.ascend")
        assert payload.view(torch.uint8).numpy().tobytes() == ref_payload.view(np.uint8).tobytes()
        assert scale.view(torch.uint8).numpy().tobytes() == ref_scale.tobytes()
    assert json.loads(summary.metadata["qexact.quantized"]) == {
        "0.weight": {"dtype": "f32", "shape": [32, 64]}, "2.weight": {"dtype": "bf16", "shape": [64, 32]}}
    # int8: int8 payloads and float32 scales, as torch loads the CLI's file.
    tensors, _ = qexact.quantize_state_dict({"w": sd["0.weight"]}, "int8.token.blaze")
    assert tensors["w.payload"].dtype == torch.int8 and tensors["w.scale"].dtype == torch.float32


def test_a_non_contiguous_tensor_is_read_with_its_strides():
    w = torch.randn(64, 96).t()  # (96, 64), strides (1, 96)
    tensors, _ = qexact.quantize_state_dict({"w": w}, "mxfp8.ascend")
    ref_payload, ref_scale = qexact.quantize(w.contiguous().numpy(), "mxfp8.ascend")
    assert tensors["w.payload"].view(torch.uint8).numpy().tobytes() == ref_payload.view(np.uint8).tobytes()
    assert tensors["w.scale"].view(torch.uint8).numpy().tobytes() == ref_scale.tobytes()


def test_refusals(model, tmp_path):
    out = tmp_path / "q.safetensors"
    qexact.quantize_checkpoint(model, out, "mxfp8.ascend")
    # An existing output is replaced only when asked, as `--force` does.
    before = out.read_bytes()
    with pytest.raises(ValueError, match="already exists; pass --force"):
        qexact.quantize_checkpoint(model, out, "mx.ocp")
    assert out.read_bytes() == before
    qexact.quantize_checkpoint(model, out, "mx.ocp", force=True)
    assert out.read_bytes() != before
    qexact.quantize_checkpoint(model, out, "mxfp8.ascend", force=True)
    with pytest.raises(ValueError, match="already quantized by qexact"):
        qexact.quantize_checkpoint(out, tmp_path / "qq.safetensors", "mxfp8.ascend")
    meta, _ = read_safetensors(out)
    with pytest.raises(ValueError, match="already quantized by qexact"):
        qexact.quantize_state_dict({"w": np.ones((1, 32), np.float32)}, "mxfp8.ascend", metadata=meta)
    with pytest.raises(ValueError, match="output name collision: tensor 'w' would be written as 'w.scale'"):
        qexact.quantize_state_dict({"w": np.ones((1, 32), np.float32), "w.scale": np.ones(1, np.float32)},
                                   "mxfp8.ascend")
    with pytest.raises(ValueError, match=r"tensor 'odd' cannot be quantized \(strict\)"):
        qexact.quantize_state_dict(model_tensors(), "mxfp8.torchao.floor", exclude="position_ids", strict=True)
    nan = np.ones((1, 64), np.float32)
    nan[0, 3] = np.nan
    tensors, summary = qexact.quantize_state_dict({"a": nan}, "int8.token.blaze")
    assert tensors["a"] is not None and "finite inputs only" in summary.skipped["a"]
    with pytest.raises(TypeError, match="has no safetensors name"):
        qexact.quantize_state_dict({"w": np.ones(3, np.complex128)}, "mxfp8.ascend")
    assert not (tmp_path / "qq.safetensors").exists()
