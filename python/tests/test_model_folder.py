"""Model folders from Python: qexact.quantize_folder writes the CLI's folder (the same bytes),
qexact.verify_folder gives the CLI's verdict, and a corrupted folder's findings name the damage."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from safetensors.numpy import save_file

import qexact


@pytest.fixture
def cli() -> str:
    """The CLI as test_cli_bytes.py finds it: QEXACT_CLI, else build/release of this repository."""
    path = os.environ.get("QEXACT_CLI") or str(Path(__file__).resolve().parents[2] / "build/release/qexact")
    if not os.access(path, os.X_OK):
        pytest.skip("the qexact CLI is not built (set QEXACT_CLI)")
    return path


@pytest.fixture
def folder(tmp_path):
    rng = np.random.default_rng(20261203)
    d = tmp_path / "llama"
    d.mkdir()
    tensors = {
        "model.embed_tokens.weight": rng.standard_normal((64, 64)),
        "model.layers.0.input_layernorm.weight": rng.standard_normal(64),
        "model.layers.0.self_attn.q_proj.weight": rng.standard_normal((64, 64)) * 0.5,
        "model.layers.0.self_attn.k_proj.weight": rng.standard_normal((32, 64)) * 2,
        "model.layers.0.self_attn.v_proj.weight": rng.standard_normal((32, 64)),
        "model.layers.0.mlp.gate_proj.weight": rng.standard_normal((128, 64)) * 3,
        "model.layers.0.mlp.up_proj.weight": rng.standard_normal((128, 64)),
        "lm_head.weight": rng.standard_normal((64, 64)),
    }
    save_file({k: v.astype(ml_dtypes.bfloat16) for k, v in tensors.items()}, d / "model.safetensors",
              metadata={"format": "pt"})
    (d / "config.json").write_text(json.dumps({"model_type": "llama", "architectures": ["LlamaForCausalLM"]}))
    return d


def test_quantize_folder_is_the_clis_folder(folder, tmp_path, cli):
    summary = qexact.quantize_folder(folder, tmp_path / "py", format="compressed-tensors")
    assert len(summary.quantized) == 5 and "lm_head.weight" in summary.copied
    subprocess.run([cli, "quantize", str(folder), "--format", "compressed-tensors", "--out", str(tmp_path / "cli")],
                   check=True, capture_output=True)
    assert (tmp_path / "py" / "model.safetensors").read_bytes() == (tmp_path / "cli" / "model.safetensors").read_bytes()
    assert (tmp_path / "py" / "config.json").read_text() == (tmp_path / "cli" / "config.json").read_text()
    with pytest.raises(ValueError, match="a preset is needed"):
        qexact.quantize_folder(folder, tmp_path / "q")


def test_verify_folder_passes_and_names_an_inverted_global_scale(folder, tmp_path):
    out = tmp_path / "mo"
    qexact.quantize_folder(folder, out, format="modelopt")
    v = qexact.verify_folder(out, folder)
    assert v.ok and v.format == "modelopt" and v.preset == "nvfp4.modelopt" and v.differing == 0
    assert [d.name for d in v.tensors["model.layers.0.mlp.up_proj.weight"]] == [
        "model.layers.0.mlp.up_proj.weight", "model.layers.0.mlp.up_proj.weight_scale",
        "model.layers.0.mlp.up_proj.weight_scale_2"]
    # The scalar rewritten in place (numpy cannot load the file's F8_E4M3 tensors).
    path = out / "model.safetensors"
    raw = bytearray(path.read_bytes())
    n = int.from_bytes(raw[:8], "little")
    begin = 8 + n + json.loads(raw[8:8 + n])["model.layers.0.mlp.up_proj.weight_scale_2"]["data_offsets"][0]
    value = np.frombuffer(bytes(raw[begin:begin + 4]), np.float32)[0]
    raw[begin:begin + 4] = np.float32(1 / value).tobytes()
    path.write_bytes(bytes(raw))
    v = qexact.verify_folder(out, folder)
    assert not v.ok and v.differing == 4
    assert any("stored the other way round" in f for f in v.findings), v.findings
    assert any("gate_up_proj have different global scales" in f for f in v.findings), v.findings
    # A fused shard is quantized under its group's amax, which compare's diagnoses do not take.
    assert v.diagnoses["model.layers.0.mlp.up_proj.weight"][0].startswith("not diagnosed: quantized under its fused group")


def test_verify_folder_diagnoses_and_gguf(folder, tmp_path):
    out = tmp_path / "ct"
    qexact.quantize_folder(folder, out, "fp8.ct.channel", params={"quotient_arith": "fp32"}, format="compressed-tensors")
    v = qexact.verify_folder(out, folder)
    assert not v.ok and v.preset == "fp8.ct.channel"
    assert all(d[0].startswith("quotient_arith (confirmed by a re-run)") for d in v.diagnoses.values()), v.diagnoses
    # GGUF: one file, verified the same way (a llama's hyperparameters in config.json).
    config = json.loads((folder / "config.json").read_text())
    config.update(hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=128, vocab_size=64)
    (folder / "config.json").write_text(json.dumps(config))
    summary = qexact.quantize_folder(folder, tmp_path / "m.gguf", format="gguf")
    assert len(summary.quantized) == 7 and (tmp_path / "m.gguf").is_file()
    g = qexact.verify_folder(tmp_path / "m.gguf", folder)
    assert g.ok and g.format == "gguf" and g.preset == "q8_0.ggml" and g.differing == 0 and g.bytes > 0


def test_dequantize_folder_and_dynamic_activations_are_the_clis(folder, tmp_path, cli):
    qexact.quantize_folder(folder, tmp_path / "ct", "fp8.ct.channel", format="compressed-tensors", activations="dynamic")
    subprocess.run([cli, "quantize", str(folder), "--format", "compressed-tensors", "--preset", "fp8.ct.channel",
                    "--activations", "dynamic", "--out", str(tmp_path / "cli")], check=True, capture_output=True)
    assert (tmp_path / "ct" / "config.json").read_text() == (tmp_path / "cli" / "config.json").read_text()
    names = qexact.dequantize_folder(tmp_path / "ct", tmp_path / "d")
    assert "model.layers.0.mlp.gate_proj.weight" in names and "lm_head.weight" not in names
    subprocess.run([cli, "dequantize", str(tmp_path / "cli"), "--out", str(tmp_path / "dcli")], check=True, capture_output=True)
    assert (tmp_path / "d" / "model.safetensors").read_bytes() == (tmp_path / "dcli" / "model.safetensors").read_bytes()
    with pytest.raises(ValueError, match="activations"):
        qexact.quantize_folder(folder, tmp_path / "x", format="compressed-tensors", activations="static")


def test_quantize_folder_cuts_shards_as_the_cli(folder, tmp_path, cli):
    qexact.quantize_folder(folder, tmp_path / "py", format="modelopt", max_shard_size="8KiB")
    subprocess.run([cli, "quantize", str(folder), "--format", "modelopt", "--max-shard-size", "8192", "--out",
                    str(tmp_path / "cli")], check=True, capture_output=True)
    names = sorted(p.name for p in (tmp_path / "py").glob("*.safetensors"))
    assert len(names) > 2 and names == sorted(p.name for p in (tmp_path / "cli").glob("*.safetensors"))
    for n in names:
        assert (tmp_path / "py" / n).read_bytes() == (tmp_path / "cli" / n).read_bytes()
    with pytest.raises(ValueError, match="not a positive size"):
        qexact.quantize_folder(folder, tmp_path / "x", format="modelopt", max_shard_size="big")
