#!/usr/bin/env bash
# Makes the JAX peer's environment: a Python 3.12 venv under build/ with python/requirements-jax.txt
# (jaxlib 0.12 has no Python 3.11 wheel; the rest of the peer suite runs on the machine's 3.11).
# Prints nothing but errors; fails, naming what it looked for, when no Python 3.12 is found.
#
#   scripts/jax-venv.sh          # then: build/jax-venv/bin/python python/peer_tests/jax_runner.py ...
#
# Environment:
#   QEXACT_JAX_PYTHON       interpreter that creates the venv (default: python3.12 on PATH, else
#                           pyenv's newest 3.12)
#   QEXACT_JAX_VENV         the venv (default: build/jax-venv)
set -euo pipefail
cd "$(dirname "$0")/.."

venv=${QEXACT_JAX_VENV:-build/jax-venv}
if [ ! -x "$venv/bin/python" ]; then
  python=${QEXACT_JAX_PYTHON:-}
  if [ -z "$python" ]; then
    if command -v python3.12 >/dev/null 2>&1 && python3.12 -c '' 2>/dev/null; then
      python=python3.12
    else
      # pyenv's shim answers for a version that is installed but not selected: take the binary.
      root=$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")
      python=$(ls -d "$root"/versions/3.12*/bin/python3.12 2>/dev/null | sort -V | tail -n 1 || true)
    fi
  fi
  if [ -z "$python" ] || ! "$python" -c 'import sys; assert sys.version_info[:2] == (3, 12)' 2>/dev/null; then
    echo "scripts/jax-venv.sh: no Python 3.12 found (python3.12 on PATH or pyenv's versions/3.12*;" \
         "set QEXACT_JAX_PYTHON): jaxlib 0.12 needs it" >&2
    exit 1
  fi
  "$python" -m venv "$venv"
fi
"$venv/bin/python" -m pip --disable-pip-version-check --quiet install -r python/requirements-jax.txt
