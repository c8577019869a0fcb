"""The bytes the peer suite checks are those of named releases: the presets say "torchao 0.18.0",
"gguf-py 0.19.0". A venv holding other versions fails here instead of proving something else."""

from __future__ import annotations

import importlib.metadata

import pytest

PINNED = {"torch": "2.15.0", "torchao": "0.18.0", "gguf": "0.19.0", "ml_dtypes": "0.6.0",
          "compressed-tensors": "0.20.1", "nvidia-modelopt": "0.47.0", "onnx": "1.22.0",
          "onnxruntime": "1.31.1", "amd-quark": "0.13", "llmcompressor": "0.14.0.1", "transformers": "5.24.0"}


@pytest.mark.parametrize("package", list(PINNED))
def test_peer_is_the_pinned_release(package):
    # torch's local version label (+cpu, +cu132) names the wheel's build, not its code.
    assert importlib.metadata.version(package).split("+")[0] == PINNED[package]
