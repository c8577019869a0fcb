"""Model folders in compressed-tensors' format against llm-compressor 0.14.0.1 (on torch 2.15,
CPU), the tool that writes them: a tiny bf16 Llama is quantized by llm-compressor's ``oneshot``
and by ``qexact quantize FOLDER --format compressed-tensors``, and every tensor of the two folders
must be the same bytes (names, dtypes, shapes and data), with the same weights config. Then
transformers 5.24 loads qexact's folder, decompressing it on CPU with compressed-tensors, and its
weights must be qexact's own dequantization of the stored bytes, rounded to bf16.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors import safe_open

import qexact
from conftest import cli
from stack_material import BF16

SCHEMES = {  # llm-compressor scheme -> the qexact preset that writes its weights
    "NVFP4A16": "nvfp4.ct",
    "FP8_DYNAMIC": "fp8.ct.channel",
    "FP8_BLOCK": "fp8.ct.block",
    "MXFP4A16": "mxfp4.ct",
}


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    """A 2-layer Llama (hidden 256, GQA 4/2 heads), random weights from a fixed seed, in bf16."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(20261203)
    config = LlamaConfig(hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, vocab_size=1000)
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    out = tmp_path_factory.mktemp("base") / "llama"
    model.save_pretrained(out)
    return out


def tokenizer():
    """A word-level tokenizer over the model's 1000 ids: oneshot wants a processor with a dataset."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {f"t{i}": i for i in range(1000)}
    vocab["<unk>"] = 0
    tk = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=tk, unk_token="<unk>", pad_token="<unk>")


def llm_compressor(base: Path, scheme: str, out: Path) -> Path:
    from datasets import Dataset
    from llmcompressor import oneshot
    from llmcompressor.modifiers.quantization import QuantizationModifier
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.bfloat16)
    kw = {}
    if scheme.endswith("A16") or scheme in ("NVFP4", "MXFP4"):  # these pipelines run a calibration pass
        ids = torch.randint(3, 1000, (4, 16), generator=torch.Generator().manual_seed(1))
        ds = Dataset.from_dict({"input_ids": ids.tolist(), "attention_mask": torch.ones_like(ids).tolist()})
        kw = dict(processor=tokenizer(), dataset=ds, num_calibration_samples=4, max_seq_length=16)
    oneshot(model=model, recipe=QuantizationModifier(targets="Linear", scheme=scheme, ignore=["lm_head"]), **kw)
    model.save_pretrained(out, save_compressed=True)
    return out


def tensors(folder: Path) -> dict[str, torch.Tensor]:
    out = {}
    for f in sorted(folder.glob("*.safetensors")):
        with safe_open(f, "pt") as h:
            for k in h.keys():
                out[k] = h.get_tensor(k)
    return out


def as_bytes(t: torch.Tensor) -> np.ndarray:
    return t.contiguous().view(-1).view(torch.uint8).numpy()


def qexact_folder(base: Path, out: Path, fmt: str, preset: str, *options: str) -> Path:
    subprocess.run([cli(), "quantize", str(base), "--format", fmt, "--preset", preset, *options, "--out", str(out)],
                   check=True, capture_output=True)
    return out


def folder_diff(ours: Path, theirs: Path) -> tuple[int, int]:
    """(differing bytes, bytes) over every tensor of two folders, which must hold the same names,
    dtypes and shapes."""
    a, b = tensors(ours), tensors(theirs)
    assert sorted(a) == sorted(b)
    differing = total = 0
    for name in sorted(a):
        assert (a[name].dtype, tuple(a[name].shape)) == (b[name].dtype, tuple(b[name].shape)), name
        x, y = as_bytes(a[name]), as_bytes(b[name])
        differing += int((x != y).sum())
        total += x.size
    return differing, total


@pytest.mark.parametrize("scheme", list(SCHEMES))
def test_qexact_writes_llm_compressors_folder(base, tmp_path, scheme):
    theirs = llm_compressor(base, scheme, tmp_path / "llmc")
    ours = qexact_folder(base, tmp_path / "qexact", "compressed-tensors", SCHEMES[scheme])
    differing, total = folder_diff(ours, theirs)
    print(f"{scheme}: {differing} differing of {total} bytes")
    assert differing == 0 and total > 1_000_000
    qa = json.loads((ours / "config.json").read_text())["quantization_config"]
    qb = json.loads((theirs / "config.json").read_text())["quantization_config"]
    for key in ("format", "ignore", "quant_method", "quantization_status"):
        assert qa[key] == qb[key], key
    assert qa["config_groups"]["group_0"]["weights"] == qb["config_groups"]["group_0"]["weights"]
    # qexact writes weights only: activation scales come from calibration, which it does not run.
    assert qa["config_groups"]["group_0"]["input_activations"] is None


@pytest.mark.parametrize("scheme", [*SCHEMES, "NVFP4"])
def test_verify_passes_llm_compressors_folder(base, tmp_path, scheme):
    """`qexact verify` recomputes every quantized tensor from the source with the recipe the config
    names: 0 differing bytes, no finding. NVFP4 (W4A4) adds calibrated input_global_scales,
    which are checked for dtype, sign and sharing, not recomputed."""
    theirs = llm_compressor(base, scheme, tmp_path / "llmc")
    r = subprocess.run([cli(), "verify", str(theirs), "--source", str(base), "--json"], capture_output=True, text=True)
    v = json.loads(r.stdout)
    print(f"{scheme}: verify {v['preset']}: {v['differing']} differing of {v['bytes']} bytes, "
          f"{v['activation_scales']} activation scales, findings {v['findings']}")
    assert r.returncode == 0 and v["ok"] and v["differing"] == 0 and v["bytes"] > 500_000
    assert v["preset"] == SCHEMES.get(scheme, "nvfp4.ct")
    assert v["activation_scales"] == (14 if scheme == "NVFP4" else 0)
    assert_infer_names(theirs, base, v["preset"])


def assert_infer_names(quantized: Path, base: Path, preset: str) -> None:
    """`qexact infer QUANTIZED --source BASE`: a lab of the folder's smallest tensors (under their own
    amax), and the search names the preset exactly, with no override."""
    r = subprocess.run([cli(), "infer", str(quantized), "--source", str(base), "--json"], capture_output=True, text=True)
    j = json.loads(r.stdout)
    print(f"infer on {quantized.name}: {'exact' if j['exact'] else 'closest'} {j['preset']} {j['overrides']}")
    assert r.returncode == 0 and (j["exact"], j["preset"], j["overrides"]) == (True, preset, {}), r.stdout[-2000:]


DYNAMIC = {"FP8_DYNAMIC": "fp8.ct.channel", "FP8_BLOCK": "fp8.ct.block", "MXFP4": "mxfp4.ct"}


@pytest.mark.parametrize("scheme", list(DYNAMIC))
def test_dynamic_activations_give_llm_compressors_whole_config(base, tmp_path, scheme):
    """llm-compressor's schemes whose activations are quantized at run time (nothing to calibrate):
    with --activations dynamic the whole folder, quantization_config included, is theirs."""
    theirs = llm_compressor(base, scheme, tmp_path / "llmc")
    ours = qexact_folder(base, tmp_path / "qexact", "compressed-tensors", DYNAMIC[scheme], "--activations", "dynamic")
    differing, total = folder_diff(ours, theirs)
    print(f"{scheme} (dynamic activations): {differing} differing of {total} bytes")
    assert differing == 0 and total > 1_000_000
    assert (json.loads((ours / "config.json").read_text())["quantization_config"]
            == json.loads((theirs / "config.json").read_text())["quantization_config"])


def qexact_dequantized(folder: Path, module: str, preset: str) -> np.ndarray:
    t = tensors(folder)
    if preset.startswith("fp8"):
        payload, scale = t[module + ".weight"], t[module + ".weight_scale"]
        scale = scale.float().numpy().reshape(qexact.outputs(preset, payload.shape)[1][2])
        return qexact.dequantize(payload.view(torch.uint8).numpy(), scale, preset)
    payload, scale = t[module + ".weight_packed"].numpy(), as_bytes(t[module + ".weight_scale"])
    shape = (payload.shape[0], payload.shape[1] * 2)
    scale = scale.reshape(qexact.outputs(preset, shape)[1][2])
    if preset.startswith("nvfp4"):
        return qexact.dequantize(payload, scale, preset, tensor_scale_array=t[module + ".weight_global_scale"].numpy()
                                 .reshape(()), shape=shape)
    return qexact.dequantize(payload, scale, preset, shape=shape)


@pytest.mark.parametrize("scheme", list(SCHEMES))
def test_transformers_loads_qexacts_folder_to_qexacts_values(base, tmp_path, scheme):
    from transformers import AutoModelForCausalLM, CompressedTensorsConfig

    preset = SCHEMES[scheme]
    ours = qexact_folder(base, tmp_path / "qexact", "compressed-tensors", preset)
    model = AutoModelForCausalLM.from_pretrained(ours, dtype=torch.bfloat16,
                                                 quantization_config=CompressedTensorsConfig(dequantize=True))
    differing = total = 0
    for layer in range(2):
        for module in ("self_attn.q_proj", "self_attn.k_proj", "mlp.gate_proj", "mlp.down_proj"):
            name = f"model.layers.{layer}.{module}"
            loaded = model.get_submodule(name).weight.detach()
            assert loaded.dtype == torch.bfloat16
            mine = torch.from_numpy(qexact_dequantized(ours, name, preset)).to(torch.bfloat16)
            differing += int((as_bytes(loaded) != as_bytes(mine)).sum())
            total += as_bytes(mine).size
    print(f"{scheme}: {differing} differing of {total} bytes of the decompressed bf16 weights")
    assert differing == 0
    assert_dequantized_folder_is_loaded(ours, model, tmp_path / "dequantized")


def assert_dequantized_folder_is_loaded(quantized: Path, model, out: Path) -> None:
    """`qexact dequantize QUANTIZED --out OUT` writes the bf16 folder whose every tensor is the loaded
    model's (the loader's own decompression): transformers then loads OUT as a plain model."""
    subprocess.run([cli(), "dequantize", str(quantized), "--out", str(out)], check=True, capture_output=True)
    assert "quantization_config" not in json.loads((out / "config.json").read_text())
    mine = tensors(out)
    state = {k: v.detach() for k, v in model.state_dict().items()}
    differing = total = 0
    for name, t in mine.items():
        if name in state:
            differing += int((as_bytes(t) != as_bytes(state[name].to(t.dtype))).sum())
            total += as_bytes(t).size
    print(f"{quantized.name}: qexact dequantize vs the loaded model: {differing} differing of {total} bytes")
    assert differing == 0 and total > 1_000_000
    assert_same_logits(model, out)


def assert_same_logits(model, dequantized: Path) -> None:
    """The model transformers loaded from the quantized folder and the plain model built from
    qexact's dequantized folder give the same logits, byte for byte, on a fixed prompt."""
    from transformers import AutoModelForCausalLM

    plain = AutoModelForCausalLM.from_pretrained(dequantized, dtype=torch.bfloat16)
    ids = torch.tensor([[1, 17, 123, 999, 42, 7, 256, 3]])
    with torch.no_grad():
        a, b = model(ids).logits, plain(ids).logits
    differing = int((as_bytes(a) != as_bytes(b)).sum())
    print(f"{dequantized.name}: logits of the loaded quantized model vs qexact's dequantized model: "
          f"{differing} differing of {as_bytes(a).size} bytes")
    assert differing == 0 and a.shape[-1] == model.config.vocab_size


MODELOPT = {  # ModelOpt 0.47 config -> the qexact preset that writes its weights ("" : verify only)
    "W4A16_NVFP4_CFG": "nvfp4.modelopt",
    "MXFP4_DEFAULT_CFG": "mxfp4.modelopt",
    "FP8_PER_CHANNEL_PER_TOKEN_CFG": "fp8.modelopt.export.channel",
    "NVFP4_DEFAULT_CFG": "",  # + calibrated input_scale
    "FP8_DEFAULT_CFG": "",  # per-tensor weights + calibrated input_scale
}


def modelopt_export(base: Path, config: str, out: Path) -> Path:
    import modelopt.torch.quantization as mtq
    from modelopt.torch.export import export_hf_checkpoint
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.bfloat16)
    ids = torch.randint(3, 1000, (4, 16), generator=torch.Generator().manual_seed(1))

    def forward_loop(m):
        with torch.no_grad():
            m(ids)

    model = mtq.quantize(model, getattr(mtq, config), forward_loop=forward_loop)
    export_hf_checkpoint(model, export_dir=out)
    return out


@pytest.mark.parametrize("config", list(MODELOPT))
def test_modelopt_export_is_qexacts_folder(base, tmp_path, config):
    """ModelOpt 0.47's HF export on CPU against `--format modelopt`: every tensor, hf_quant_config.json
    and quantization_config; then `qexact verify` of ModelOpt's folder (also for the configs with
    calibrated input scales, which qexact does not write)."""
    theirs = modelopt_export(base, config, tmp_path / "modelopt")
    r = subprocess.run([cli(), "verify", str(theirs), "--source", str(base), "--json"], capture_output=True, text=True)
    v = json.loads(r.stdout)
    print(f"{config}: verify {v['preset']}: {v['differing']} differing of {v['bytes']} bytes, "
          f"{v['activation_scales']} activation scales, findings {v['findings']}")
    assert r.returncode == 0 and v["ok"] and v["bytes"] > 500_000
    assert_infer_names(theirs, base, v["preset"])
    if not MODELOPT[config]:
        assert v["activation_scales"] == 14
        return
    ours = qexact_folder(base, tmp_path / "qexact", "modelopt", MODELOPT[config])
    differing, total = folder_diff(ours, theirs)
    print(f"{config}: {differing} differing of {total} bytes")
    assert differing == 0 and total > 1_000_000
    assert json.loads((ours / "hf_quant_config.json").read_text()) == json.loads((theirs / "hf_quant_config.json").read_text())
    qa = json.loads((ours / "config.json").read_text())["quantization_config"]
    qb = json.loads((theirs / "config.json").read_text())["quantization_config"]
    assert qa == qb


# ---- hf-fp8: transformers' fine-grained FP8 --------------------------------------------------

def transformers_fp8(base: Path, out: Path) -> Path:
    """transformers 5.24 quantizes the bf16 model on load (FineGrainedFP8Config) and saves it, as a
    user with a GPU does. Its quantizer refuses to start without a GPU (validate_environment); the
    conversion it runs is plain torch, so that check alone is bypassed here."""
    from transformers import AutoModelForCausalLM, FineGrainedFP8Config
    from transformers.quantizers.quantizer_finegrained_fp8 import FineGrainedFP8HfQuantizer

    original = FineGrainedFP8HfQuantizer.validate_environment
    FineGrainedFP8HfQuantizer.validate_environment = lambda self, *a, **k: None
    try:
        model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.bfloat16, quantization_config=FineGrainedFP8Config())
    finally:
        FineGrainedFP8HfQuantizer.validate_environment = original
    model.save_pretrained(out)
    return out


def test_qexact_writes_transformers_fp8_folder(base, tmp_path):
    """Every tensor of the folder transformers saves (names, dtypes, shapes, bytes) and its
    quantization_config, but modules_to_not_convert: transformers computes lm_head at load and
    saves null, qexact names it (vLLM reads the list too)."""
    theirs = transformers_fp8(base, tmp_path / "transformers")
    ours = qexact_folder(base, tmp_path / "qexact", "hf-fp8", "fp8.hf.block")
    differing, total = folder_diff(ours, theirs)
    print(f"hf-fp8: {differing} differing of {total} bytes")
    assert differing == 0 and total > 1_000_000
    qa = json.loads((ours / "config.json").read_text())["quantization_config"]
    qb = json.loads((theirs / "config.json").read_text())["quantization_config"]
    assert qa.pop("modules_to_not_convert") == ["lm_head"] and qb.pop("modules_to_not_convert") is None
    assert qa == qb
    r = subprocess.run([cli(), "verify", str(theirs), "--source", str(base), "--json"], capture_output=True, text=True)
    v = json.loads(r.stdout)
    print(f"hf-fp8: verify of transformers' folder: {v['differing']} differing of {v['bytes']} bytes, findings {v['findings']}")
    assert r.returncode == 0 and v["ok"] and v["preset"] == "fp8.hf.block" and v["bytes"] > 1_000_000
    assert_infer_names(theirs, base, "fp8.hf.block")


def test_transformers_loads_qexacts_fp8_folder_to_qexacts_values(base, tmp_path):
    """transformers on CPU dequantizes the folder on load (w = fp32(q) * weight_scale_inv, to
    bf16): qexact's own dequantization of the stored bytes, rounded to bf16."""
    from transformers import AutoModelForCausalLM

    ours = qexact_folder(base, tmp_path / "qexact", "hf-fp8", "fp8.hf.block")
    model = AutoModelForCausalLM.from_pretrained(ours, dtype=torch.bfloat16)
    t = tensors(ours)
    differing = total = 0
    for layer in range(2):
        for module in ("self_attn.q_proj", "self_attn.k_proj", "mlp.gate_proj", "mlp.down_proj"):
            name = f"model.layers.{layer}.{module}"
            loaded = model.get_submodule(name).weight.detach()
            payload, scale = t[name + ".weight"].view(torch.uint8).numpy(), t[name + ".weight_scale_inv"].numpy()
            mine = torch.from_numpy(qexact.dequantize(payload, scale, "fp8.hf.block")).to(torch.bfloat16)
            differing += int((as_bytes(loaded) != as_bytes(mine)).sum())
            total += as_bytes(mine).size
    print(f"hf-fp8: {differing} differing of {total} bytes of the dequantized bf16 weights")
    assert differing == 0 and total > 500_000
    assert_dequantized_folder_is_loaded(ours, model, tmp_path / "dequantized")


# ---- gpt-oss-mxfp4: gpt-oss's MXFP4 experts ---------------------------------------------------

@pytest.fixture(scope="module")
def gpt_oss(tmp_path_factory) -> Path:
    """A 2-layer gpt-oss (hidden 256, 4 experts of intermediate 128, top 2), random weights from a
    fixed seed, in bf16: its experts are `gate_up_proj` [E, H, 2I] and `down_proj` [E, I, H]."""
    from transformers import GptOssConfig, GptOssForCausalLM

    torch.manual_seed(20261205)
    config = GptOssConfig(hidden_size=256, intermediate_size=128, num_hidden_layers=2, num_local_experts=4,
                          num_experts_per_tok=2, num_attention_heads=4, num_key_value_heads=2, head_dim=64,
                          vocab_size=1000, layer_types=["sliding_attention", "full_attention"])
    model = GptOssForCausalLM(config).to(torch.bfloat16)
    with torch.no_grad():  # transformers initialises the experts to zeros: give them values
        for layer in model.model.layers:
            for p in (layer.mlp.experts.gate_up_proj, layer.mlp.experts.down_proj):
                p.copy_(torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel())) * 0.02)
    out = tmp_path_factory.mktemp("gpt-oss") / "gpt-oss"
    model.save_pretrained(out)
    return out


def test_transformers_loads_qexacts_gpt_oss_folder_to_qexacts_values(gpt_oss, tmp_path):
    """transformers 5.24 loads `--format gpt-oss-mxfp4` on CPU (it dequantizes the experts on
    load: lut[nibble] * 2^(byte - 127) in bf16, transposed back to [E, in, out]) to qexact's own
    dequantization of the stored blocks and scales, rounded to bf16; everything else is the source's."""
    from transformers import AutoModelForCausalLM

    ours = qexact_folder(gpt_oss, tmp_path / "qexact", "gpt-oss-mxfp4", "mxfp4.triton")
    stored, source = tensors(ours), tensors(gpt_oss)
    assert json.loads((ours / "config.json").read_text())["quantization_config"] == {
        "modules_to_not_convert": ["model.layers.*.self_attn", "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"],
        "quant_method": "mxfp4"}
    model = AutoModelForCausalLM.from_pretrained(ours, dtype=torch.bfloat16)
    differing = total = 0
    for layer in range(2):
        for proj in ("gate_up_proj", "down_proj"):
            name = f"model.layers.{layer}.mlp.experts.{proj}"
            assert name not in stored and source[name].dtype == torch.bfloat16
            blocks, scales = stored[name + "_blocks"].numpy(), stored[name + "_scales"].numpy()
            e, out, groups, _ = blocks.shape
            assert scales.shape == (e, out, groups) and source[name].shape == (e, groups * 32, out)
            # The stored bytes: the contract's of the expert transposed to [E, out, in].
            w = np.ascontiguousarray(np.swapaxes(source[name].view(torch.int16).numpy(), 1, 2)).view(BF16)
            want_blocks, want_scales = qexact.quantize(w, "mxfp4.triton")
            assert (np.asarray(want_blocks).reshape(-1) == blocks.reshape(-1)).all(), name
            assert (np.asarray(want_scales).reshape(-1) == scales.reshape(-1)).all(), name
            values = qexact.dequantize(blocks.reshape(e, out, groups * 16), scales, "mxfp4.triton", shape=(e, out, groups * 32))
            mine = torch.from_numpy(np.ascontiguousarray(np.swapaxes(values, 1, 2))).to(torch.bfloat16)
            loaded = getattr(model.model.layers[layer].mlp.experts, proj).detach()
            differing += int((as_bytes(loaded) != as_bytes(mine)).sum())
            total += as_bytes(mine).size
    for name, t in source.items():
        if not name.endswith(("experts.gate_up_proj", "experts.down_proj")):
            assert torch.equal(stored[name].view(torch.uint8), t.view(torch.uint8)), name
    print(f"gpt-oss-mxfp4: {differing} differing of {total} bytes of the dequantized bf16 experts")
    assert differing == 0 and total > 1_000_000
    assert_dequantized_folder_is_loaded(ours, model, tmp_path / "dequantized")
    r = subprocess.run([cli(), "verify", str(ours), "--source", str(gpt_oss), "--json"], capture_output=True, text=True)
    v = json.loads(r.stdout)
    assert r.returncode == 0 and v["ok"] and v["preset"] == "mxfp4.triton", v


def test_transformers_loads_a_folder_cut_by_max_shard_size(base, tmp_path):
    """`--max-shard-size` cuts the output as save_pretrained does (model-0000i-of-0000N and the
    index): transformers loads it to the same model as the uncut folder."""
    from transformers import AutoModelForCausalLM, CompressedTensorsConfig

    whole = qexact_folder(base, tmp_path / "whole", "compressed-tensors", "nvfp4.ct")
    cut = qexact_folder(base, tmp_path / "cut", "compressed-tensors", "nvfp4.ct", "--max-shard-size", "300KB")
    assert len(list(cut.glob("model-*-of-*.safetensors"))) > 2 and (cut / "model.safetensors.index.json").exists()
    cfg = CompressedTensorsConfig(dequantize=True)
    a = AutoModelForCausalLM.from_pretrained(whole, dtype=torch.bfloat16, quantization_config=cfg).state_dict()
    b = AutoModelForCausalLM.from_pretrained(cut, dtype=torch.bfloat16, quantization_config=cfg).state_dict()
    assert sorted(a) == sorted(b) and all(torch.equal(a[k], b[k]) for k in a)
