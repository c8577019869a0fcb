#!/usr/bin/env bash
# Installs the Debian packages both README commands need (the build, the Python venv and module,
# the fuzzers, the MPI tests), only those that are missing.
set -euo pipefail
packages=(cmake g++ make python3-venv python3-dev libgtest-dev libcli11-dev nlohmann-json3-dev libhwy-dev libbenchmark-dev clang libclang-rt-14-dev openmpi-bin libopenmpi-dev strace)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then exit 0; fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
echo "installing: ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
