#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, clang with ASan + UBSan: the .npy, safetensors and GGUF
# parsers, and the JSON documents: lab manifests, plans, sweep files, meta.json) and runs each for SECONDS
# (default 60) from its seed corpus under fuzz/corpus/. Fails on any finding; the crashing
# inputs are left under build/fuzz/findings/<target>/.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
build=build/fuzz

# The JSON documents' target links the release tree's library (fuzz/CMakeLists.txt says why):
# brought up to date first (README's commands have built it already; then this is a no-op).
[ -f build/release/CMakeCache.txt ] || cmake --preset release >/dev/null
cmake --build build/release --target qexact -j2 >/dev/null
CXX=clang++ cmake -S fuzz -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DQEXACT_LIBRARY="$PWD/build/release/libqexact.a" >/dev/null
cmake --build "$build" -j2

status=0
for target in npy safetensors gguf json_documents; do
  findings="$build/findings/$target"
  work="$build/corpus/$target"   # grows while fuzzing; the committed seeds stay as they are
  mkdir -p "$findings" "$work"
  echo "fuzzing $target for ${seconds}s"
  if ! "$build/fuzz_$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$findings/" "$work" "fuzz/corpus/$target" >"$build/fuzz_$target.log" 2>&1; then
    echo "fuzz_$target found a problem (log: $build/fuzz_$target.log, inputs: $findings/):"
    tail -n 40 "$build/fuzz_$target.log"
    status=1
  else
    grep -E "^stat::number_of_executed_units|^Done" "$build/fuzz_$target.log" || true
  fi
done
exit "$status"
