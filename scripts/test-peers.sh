#!/usr/bin/env bash
# The peer suite: qexact against the running peers it claims to reproduce, byte for byte, both
# engines -- torchao 0.18.0 to_mx / MXTensor (torch 2.15.0, CPU, eager and torch.compile),
# compressed-tensors 0.20.1 and ModelOpt 0.47.0 (FP8, MX, NVFP4, int8),
# gguf-py 0.19.0 Q8_0 and MXFP4, ml_dtypes 0.6.0 casts, ONNX QuantizeLinear (onnx 1.22.0's
# reference evaluator and onnxruntime 1.31.1) with given scales, JAX 0.12.0.1 on XLA:CPU (MX and
# NVFP4, in a Python 3.12 venv of its own: scripts/jax-venv.sh), AMD Quark 0.13 (MX real and fake
# quantization), transformers 5.24.0's fine-grained FP8 quantize-on-load op; the model folders
# against llm-compressor 0.14.0.1, ModelOpt's HF export and transformers (write, load, verify);
# and the source-read FP8 group presets
# against their formulas written in torch (test_source_formulas.py). The peers are pinned in
# python/requirements-test.txt (JAX: python/requirements-jax.txt) and installed by
# scripts/python-venv.sh (scripts/jax-venv.sh); one that cannot be
# installed or imported fails the suite (it never skips). Needs the CLI of the release build
# (`cmake --build --preset cli`) for `qexact cases`.
#
#   scripts/test-peers.sh [PYTEST ARGS...]      # e.g. -k gguf, or -s to see the byte counts
#
# Environment: those of scripts/python-venv.sh, and
#   QEXACT_CLI    the CLI whose `cases` exports the adversarial material (default: build/release/qexact)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/python-venv.sh
scripts/jax-venv.sh
venv=${QEXACT_PYTHON_VENV:-build/python-venv}
export QEXACT_CLI="${QEXACT_CLI:-$PWD/build/release/qexact}"
# From the repository root `import qexact` finds the installed package: python/ is not on the path.
exec "$venv/bin/python" -m pytest python/peer_tests -s "$@"
