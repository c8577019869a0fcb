"""`qexact quantize FOLDER --format gguf` against gguf-py 0.19.0 and transformers 5.24's GGUF loader:
a tiny bf16 Llama with a byte-level BPE tokenizer becomes one GGUF file, which gguf-py's
GGUFReader reads. Every quantized tensor must be gguf-py's own quantization (gguf.quants, the
reference llama.cpp's converter calls) of the weight in llama.cpp's row order (attn_q / attn_k
interleaved for its rope, as convert_hf_to_gguf.py permutes them), every norm its F32 values;
transformers loads the file (model and tokenizer) to qexact's own dequantization of the blocks.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import gguf
import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType as T
from gguf import GGUFReader
from safetensors import safe_open

import qexact
from conftest import cli

PRESETS = {"q8_0.ggml": T.Q8_0, "mxfp4.ggml": T.MXFP4}
HEADS, KV_HEADS, LAYERS = 4, 2, 2


@pytest.fixture(scope="module")
def llama(tmp_path_factory) -> Path:
    """A 2-layer Llama (hidden 256, GQA 4/2 heads) in bf16 with a byte-level BPE tokenizer of 300
    tokens (the model's vocab is 1000: the rest are padding ids)."""
    from tokenizers import ByteLevelBPETokenizer
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    torch.manual_seed(20261205)
    config = LlamaConfig(hidden_size=256, intermediate_size=512, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                         num_key_value_heads=KV_HEADS, vocab_size=1000, bos_token_id=0, eos_token_id=1)
    out = tmp_path_factory.mktemp("llama") / "llama"
    LlamaForCausalLM(config).to(torch.bfloat16).save_pretrained(out)
    tk = ByteLevelBPETokenizer()
    tk.train_from_iterator(["the quick brown fox jumps over the lazy dog " * 20, "qexact quantizes tensors bit for bit"],
                           vocab_size=300, min_frequency=1, special_tokens=["<s>", "</s>", "<unk>"])
    PreTrainedTokenizerFast(tokenizer_object=tk._tokenizer, bos_token="<s>", eos_token="</s>",
                            unk_token="<unk>").save_pretrained(out)
    return out


def source(folder: Path) -> dict[str, np.ndarray]:
    with safe_open(folder / "model.safetensors", "pt") as h:
        return {k: h.get_tensor(k).float().numpy() for k in h.keys()}


def llama_cpp_rows(name: str, w: np.ndarray) -> np.ndarray:
    """convert_hf_to_gguf.py's permutation of attn_q / attn_k rows (per head, the two halves interleaved)."""
    heads = HEADS if name.endswith("q_proj.weight") else KV_HEADS if name.endswith("k_proj.weight") else 0
    if not heads:
        return w
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def gguf_file(folder: Path, out: Path, preset: str) -> GGUFReader:
    r = subprocess.run([cli(), "quantize", str(folder), "--format", "gguf", "--preset", preset, "--out", str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return GGUFReader(out)


def blocks_to_outputs(raw: np.ndarray, kind: T, rows: int, cols: int) -> tuple[np.ndarray, np.ndarray]:
    """(payload, scale) in qexact's layout from ggml's blocks: each block's scale, then its codes."""
    raw = np.asarray(raw, dtype=np.uint8).reshape(rows, cols // 32, -1)
    if kind == T.Q8_0:
        return raw[..., 2:].reshape(rows, cols).view(np.int8), raw[..., :2].copy().view(np.float16).reshape(rows, cols // 32)
    return raw[..., 1:].reshape(rows, cols // 2), raw[..., 0].reshape(rows, cols // 32)


@pytest.mark.parametrize("preset", list(PRESETS))
def test_every_tensor_is_gguf_pys_quantization(llama, tmp_path, preset):
    reader = gguf_file(llama, tmp_path / "model.gguf", preset)
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, LAYERS)
    src = source(llama)
    differing = total = quantized = 0
    for t in reader.tensors:
        hf = next(k for k in src if names.get_name(k, try_suffixes=(".weight", ".bias")) == t.name)
        w = llama_cpp_rows(hf, src[hf])
        if w.ndim == 1:
            assert t.tensor_type == T.F32
            theirs = w.astype(np.float32).view(np.uint8)
        else:
            assert t.tensor_type == PRESETS[preset], t.name
            theirs = gguf.quants.quantize(w.astype(np.float32), PRESETS[preset])
            quantized += 1
        ours = np.asarray(t.data).view(np.uint8).reshape(-1)
        differing += int(np.count_nonzero(ours != theirs.reshape(-1)))
        total += ours.size
    print(f"gguf {preset}: {differing} differing of {total} bytes ({quantized} quantized tensors of {len(reader.tensors)})")
    assert differing == 0 and quantized == 2 + 7 * LAYERS and total > 500_000
    fields = {f.name: f for f in reader.fields.values()}
    value = lambda k: fields[k].contents()  # noqa: E731
    assert value("general.architecture") == "llama" and value("llama.block_count") == LAYERS
    assert value("llama.attention.head_count_kv") == KV_HEADS and value("llama.rope.dimension_count") == 64
    assert value("tokenizer.ggml.model") == "gpt2" and len(value("tokenizer.ggml.tokens")) == 1000
    assert value("qexact.preset") == preset
    r = subprocess.run([cli(), "verify", str(tmp_path / "model.gguf"), "--source", str(llama), "--json"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("preset", list(PRESETS))
def test_transformers_loads_qexacts_gguf_to_qexacts_values(llama, tmp_path, preset):
    """transformers' GGUF loader (gguf-py's dequantize, then its own inverse of the rope
    permutation) gives qexact's dequantized weights, and the vocabulary tokenizes as the source's."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    reader = gguf_file(llama, tmp_path / "model.gguf", preset)
    model = AutoModelForCausalLM.from_pretrained(tmp_path, gguf_file="model.gguf")
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, LAYERS)
    differing = total = 0
    for t in reader.tensors:
        if t.tensor_type == T.F32:
            continue
        hf = next(k for k in source(llama) if names.get_name(k, try_suffixes=(".weight", ".bias")) == t.name)
        rows, cols = int(t.shape[1]), int(t.shape[0])
        payload, scale = blocks_to_outputs(t.data, t.tensor_type, rows, cols)
        mine = np.asarray(qexact.dequantize(payload, scale, preset, shape=(rows, cols)), dtype=np.float32)
        # transformers undoes the permutation: compare in transformers' row order.
        heads = HEADS if hf.endswith("q_proj.weight") else KV_HEADS if hf.endswith("k_proj.weight") else 0
        if heads:
            mine = mine.reshape(heads, mine.shape[0] // heads // 2, 2, cols).swapaxes(1, 2).reshape(rows, cols)
        loaded = model.get_parameter(hf).detach().float().numpy()
        differing += int(np.count_nonzero(loaded.view(np.uint32) != mine.view(np.uint32)))
        total += mine.size
    print(f"gguf {preset}: transformers' weights {differing} differing of {total} values")
    assert differing == 0 and total > 100_000
    theirs = AutoTokenizer.from_pretrained(tmp_path, gguf_file="model.gguf")
    ours = AutoTokenizer.from_pretrained(llama)
    text = "the quick brown fox, qexact"
    assert theirs(text)["input_ids"] == ours(text)["input_ids"]


def test_readmes_round_trip_example_runs():
    """examples/model_round_trip.py, whose output the README shows: every format loads and verifies."""
    import os
    import sys

    root = Path(__file__).resolve().parents[2]
    r = subprocess.run([sys.executable, str(root / "examples" / "model_round_trip.py"), cli()], capture_output=True,
                       text=True, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    assert r.returncode == 0, r.stderr[-3000:]
    lines = [line for line in r.stdout.splitlines() if "verify:" in line]
    print("\n".join(lines))
    assert len(lines) == 5 and all(" 0 differing of " in line and " 0 findings" in line for line in lines), r.stdout


def test_qwen2_is_gguf_pys_and_loads_in_transformers(tmp_path):
    """A qwen2 (biases on q/k/v, NeoX rope: no row permutation): gguf-py's names for the qwen2
    architecture, every weight gguf-py's Q8_0 of it as it stands, biases F32; transformers loads the
    file to qexact's dequantized weights."""
    from transformers import AutoModelForCausalLM, Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(20261205)
    config = Qwen2Config(hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, vocab_size=512, tie_word_embeddings=False)
    src = tmp_path / "qwen2"
    model = Qwen2ForCausalLM(config).to(torch.bfloat16)
    with torch.no_grad():  # biases are initialised to zeros: give them values
        for layer in model.model.layers:
            for p in (layer.self_attn.q_proj.bias, layer.self_attn.k_proj.bias, layer.self_attn.v_proj.bias):
                p.normal_(0, 0.5)
    model.save_pretrained(src)
    reader = gguf_file(src, tmp_path / "q.gguf", "q8_0.ggml")
    fields = {f.name: f for f in reader.fields.values()}
    assert fields["general.architecture"].contents() == "qwen2" and fields["qwen2.block_count"].contents() == 2
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.QWEN2, 2)
    weights = source(src)
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path, gguf_file="q.gguf")
    differing = total = 0
    for t in reader.tensors:
        hf = next(k for k in weights if names.get_name(k, try_suffixes=(".weight", ".bias")) == t.name)
        w = weights[hf]
        theirs = w.astype(np.float32).view(np.uint8) if w.ndim == 1 else gguf.quants.quantize(w.astype(np.float32), T.Q8_0)
        differing += int(np.count_nonzero(np.asarray(t.data).view(np.uint8).reshape(-1) != theirs.reshape(-1)))
        total += theirs.size
        if w.ndim == 2:
            rows, cols = w.shape
            payload, scale = blocks_to_outputs(t.data, T.Q8_0, rows, cols)
            mine = np.asarray(qexact.dequantize(payload, scale, "q8_0.ggml", shape=(rows, cols)), dtype=np.float32)
            differing += int(np.count_nonzero(loaded.get_parameter(hf).detach().float().numpy().view(np.uint32)
                                              != mine.view(np.uint32)))
    print(f"gguf qwen2: {differing} differing of {total} bytes and every loaded weight")
    assert differing == 0 and any(t.name == "blk.0.attn_q.bias" for t in reader.tensors)
