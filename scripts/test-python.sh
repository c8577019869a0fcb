#!/usr/bin/env bash
# Builds the Python package (`pip install .`) into a virtual environment under build/ and runs
# its tests. Needs the Debian packages of scripts/install-deps.sh and PyPI.
#
#   scripts/test-python.sh [PYTEST ARGS...]
#
# Environment:
#   QEXACT_PYTHON             interpreter that creates the venv (default: python3)
#   QEXACT_PYTHON_VENV        the venv (default: build/python-venv)
#   QEXACT_PYTHON_BUILD_DIR   scikit-build-core's build folder (default: pyproject.toml's)
#   QEXACT_CLI                the CLI the byte-equality tests compare with (default:
#                             build/default/qexact when it exists, else those tests skip)
set -euo pipefail
cd "$(dirname "$0")/.."

python=${QEXACT_PYTHON:-python3}
venv=${QEXACT_PYTHON_VENV:-build/python-venv}
[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
pip=("$venv/bin/python" -m pip --disable-pip-version-check --quiet)

# The build requirements of pyproject.toml, installed once so that the build needs no isolated
# environment of its own, then the runtime and test requirements.
"${pip[@]}" install "scikit-build-core>=0.10" "nanobind>=2.2" "numpy>=1.22" "ml_dtypes>=0.5" "pytest>=7"
build_dir=()
[ -n "${QEXACT_PYTHON_BUILD_DIR:-}" ] && build_dir=(--config-settings="build-dir=$QEXACT_PYTHON_BUILD_DIR")
"${pip[@]}" install --no-build-isolation "${build_dir[@]}" .

if [ -z "${QEXACT_CLI:-}" ] && [ -x build/default/qexact ]; then
  export QEXACT_CLI="$PWD/build/default/qexact"
fi
# From the repository root `import qexact` finds the installed package: python/ is not on the path.
exec "$venv/bin/python" -m pytest python/tests "$@"
