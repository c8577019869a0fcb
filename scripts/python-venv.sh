#!/usr/bin/env bash
# Makes the Python environment the Python tests and the peer suite run in: a venv under build/
# with python/requirements-test.txt (numpy, ml_dtypes, pytest and the pinned peers) and qexact
# itself installed by `pip install .`. The extension module links the library of the one build
# (build/release, configured and brought up to date here) instead of compiling it again.
# Prints nothing but errors.
#
#   scripts/python-venv.sh          # then: build/python-venv/bin/python ...
#
# Environment:
#   QEXACT_PYTHON             interpreter that creates the venv (default: python3)
#   QEXACT_PYTHON_VENV        the venv (default: build/python-venv)
#   QEXACT_PYTHON_BUILD_DIR   scikit-build-core's build folder (default: pyproject.toml's)
#   QEXACT_LIBRARY_BUILD_DIR  the build tree whose library the module links (default:
#                             build/release); `standalone` compiles the library inside pip's
#                             build, as a plain `pip install .` does
set -euo pipefail
cd "$(dirname "$0")/.."

python=${QEXACT_PYTHON:-python3}
venv=${QEXACT_PYTHON_VENV:-build/python-venv}
[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
pip=("$venv/bin/python" -m pip --disable-pip-version-check --quiet)

# The build requirements of pyproject.toml are installed here once, so that the build needs no
# isolated environment of its own.
"${pip[@]}" install -r python/requirements-test.txt
"${pip[@]}" install --no-deps -r python/requirements-nodeps.txt
settings=()
[ -n "${QEXACT_PYTHON_BUILD_DIR:-}" ] && settings+=(--config-settings="build-dir=$QEXACT_PYTHON_BUILD_DIR")
library=${QEXACT_LIBRARY_BUILD_DIR:-build/release}
if [ "$library" != standalone ]; then
  log=$(mktemp)
  trap 'rm -f "$log"' EXIT
  if [ ! -f "$library/CMakeCache.txt" ]; then
    [ "$library" = build/release ] || { echo "QEXACT_LIBRARY_BUILD_DIR=$library is not a configured build tree" >&2; exit 1; }
    cmake --preset release >"$log" 2>&1 || { cat "$log" >&2; exit 1; }
  fi
  cmake --build "$library" --target qexact -j2 >"$log" 2>&1 || { cat "$log" >&2; exit 1; }
  settings+=(--config-settings="cmake.define.QEXACT_LIBRARY_BUILD_DIR=$(realpath "$library")")
fi
"${pip[@]}" install --no-build-isolation "${settings[@]}" .
