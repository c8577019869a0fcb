"""The model-folder round trip on tiny models, one line per format: qexact quantizes a bf16 model
folder, the loader that reads the format loads it back (transformers: compressed-tensors, hf-fp8,
gpt-oss-mxfp4, gguf; ModelOpt's folders are for vLLM / TensorRT-LLM, so gguf-py-like checks do
not apply and `qexact verify` stands for them), and `qexact verify` recomputes every stored byte.

    build/python-venv/bin/python examples/model_round_trip.py [QEXACT_CLI]

Needs the venv of scripts/python-venv.sh (torch, transformers, gguf) and the CLI (default:
build/release/qexact). Nothing is downloaded: the models are made here from a fixed seed.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import torch


def tiny_llama(out: Path) -> Path:
    from tokenizers import ByteLevelBPETokenizer
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    torch.manual_seed(0)
    config = LlamaConfig(hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=4,
                         num_key_value_heads=2, vocab_size=1000)
    LlamaForCausalLM(config).to(torch.bfloat16).save_pretrained(out)
    tk = ByteLevelBPETokenizer()
    tk.train_from_iterator(["the quick brown fox jumps over the lazy dog"] * 10, vocab_size=300, min_frequency=1,
                           special_tokens=["<s>", "</s>"])
    PreTrainedTokenizerFast(tokenizer_object=tk._tokenizer, bos_token="<s>", eos_token="</s>").save_pretrained(out)
    return out


def tiny_gpt_oss(out: Path) -> Path:
    from transformers import GptOssConfig, GptOssForCausalLM

    torch.manual_seed(0)
    config = GptOssConfig(hidden_size=256, intermediate_size=128, num_hidden_layers=2, num_local_experts=4,
                          num_experts_per_tok=2, num_attention_heads=4, num_key_value_heads=2, head_dim=64,
                          vocab_size=1000, layer_types=["sliding_attention", "full_attention"])
    model = GptOssForCausalLM(config).to(torch.bfloat16)
    with torch.no_grad():
        for layer in model.model.layers:
            for p in (layer.mlp.experts.gate_up_proj, layer.mlp.experts.down_proj):
                p.normal_(0, 0.02)
    model.save_pretrained(out)
    return out


def main() -> int:
    cli = sys.argv[1] if len(sys.argv) > 1 else "build/release/qexact"
    from transformers import AutoModelForCausalLM

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        llama, gpt_oss = tiny_llama(tmp / "llama"), tiny_gpt_oss(tmp / "gpt-oss")
        runs = [("compressed-tensors", llama, "ct"), ("modelopt", llama, "mo"), ("hf-fp8", llama, "fp8"),
                ("gpt-oss-mxfp4", gpt_oss, "oss"), ("gguf", llama, "llama-q8_0.gguf")]
        for fmt, src, name in runs:
            out = tmp / name
            subprocess.run([cli, "quantize", str(src), "--format", fmt, "--out", str(out)], check=True,
                           capture_output=True)
            if fmt == "gguf":
                loaded = AutoModelForCausalLM.from_pretrained(tmp, gguf_file=name)
                how = "transformers (gguf_file=)"
            elif fmt == "modelopt":
                loaded, how = None, "vLLM / TensorRT-LLM (not run here)"
            else:
                loaded = AutoModelForCausalLM.from_pretrained(out)
                how = "transformers"
            v = json.loads(subprocess.run([cli, "verify", str(out), "--source", str(src), "--json"],
                                          capture_output=True, text=True).stdout)
            params = f"{sum(p.numel() for p in loaded.parameters()):,} parameters" if loaded is not None else "-"
            print(f"{fmt:19} {v['preset']:15} loaded by {how:37} {params:20} verify: {v['differing']} differing of "
                  f"{v['bytes']:,} bytes, {len(v['findings'])} findings")
    return 0


if __name__ == "__main__":
    sys.exit(main())
