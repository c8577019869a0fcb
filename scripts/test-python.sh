#!/usr/bin/env bash
# Builds the Python package into the venv of scripts/python-venv.sh and runs its tests.
#
#   scripts/test-python.sh [PYTEST ARGS...]
#
# Environment: those of scripts/python-venv.sh, and
#   QEXACT_CLI                the CLI the byte-equality tests compare with (default:
#                             build/release/qexact when it exists, else those tests skip)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/python-venv.sh
venv=${QEXACT_PYTHON_VENV:-build/python-venv}

if [ -z "${QEXACT_CLI:-}" ] && [ -x build/release/qexact ]; then
  export QEXACT_CLI="$PWD/build/release/qexact"
fi
# From the repository root `import qexact` finds the installed package: python/ is not on the path.
exec "$venv/bin/python" -m pytest python/tests "$@"
