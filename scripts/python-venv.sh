#!/usr/bin/env bash
# Makes the Python environment the Python tests and the peer suite run in: a venv under build/
# with python/requirements-test.txt (numpy, ml_dtypes, pytest and the pinned peers torch,
# torchao, gguf) and qexact itself built by `pip install .`. Prints nothing but pip's errors.
#
#   scripts/python-venv.sh          # then: build/python-venv/bin/python ...
#
# Environment:
#   QEXACT_PYTHON             interpreter that creates the venv (default: python3)
#   QEXACT_PYTHON_VENV        the venv (default: build/python-venv)
#   QEXACT_PYTHON_BUILD_DIR   scikit-build-core's build folder (default: pyproject.toml's)
set -euo pipefail
cd "$(dirname "$0")/.."

python=${QEXACT_PYTHON:-python3}
venv=${QEXACT_PYTHON_VENV:-build/python-venv}
[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
pip=("$venv/bin/python" -m pip --disable-pip-version-check --quiet)

# The build requirements of pyproject.toml are installed here once, so that the build needs no
# isolated environment of its own.
"${pip[@]}" install -r python/requirements-test.txt
build_dir=()
[ -n "${QEXACT_PYTHON_BUILD_DIR:-}" ] && build_dir=(--config-settings="build-dir=$QEXACT_PYTHON_BUILD_DIR")
"${pip[@]}" install --no-build-isolation "${build_dir[@]}" .
