#!/usr/bin/env bash
# A checkpoint quantized against `cp` of the same file (issue 13: >= 0.5 of cp's speed).
# Writes a bf16 .safetensors of TENSORS tensors of ROWS x COLS (default 8 x 8192 x 8192: 1 GiB)
# with a stdlib Python writer, then times, each RUNS times (default 3), median printed:
#   cp IN OUT                      the reference (ends in the page cache, no fsync)
#   cp IN OUT && sync OUT          the same bytes made durable, as qexact's commit makes them
#   qexact quantize --preset P IN  for every preset in PRESETS (staged, fsync'ed, renamed)
# with the CPU seconds (user + system) and peak RSS of each (/usr/bin/time -v); the ratio is
# cp's wall time over the run's. On a shared machine the CPU seconds say more than the wall. The page cache cannot be dropped without
# CAP_SYS_ADMIN, so every run reads a warm input: one untimed read first, then the runs.
#   scripts/bench-checkpoint.sh [QEXACT]   (default build/release/qexact; built if missing)
#   env: TENSORS ROWS COLS RUNS PRESETS THREADS DIR (scratch, default build/bench-ckpt; its files removed after)
set -euo pipefail
cd "$(dirname "$0")/.."
qexact="${1:-build/release/qexact}"
tensors="${TENSORS:-8}" rows="${ROWS:-8192}" cols="${COLS:-8192}" runs="${RUNS:-3}"
presets="${PRESETS:-mxfp8.ascend int8.token.blaze}"
threads="${THREADS:-0}"
dir="${DIR:-build/bench-ckpt}"

if [ ! -x "$qexact" ]; then
  cmake --preset release >/dev/null
  cmake --build --preset release --target qexact_cli -j2 >/dev/null
fi
qexact="$(realpath "$qexact")"
mkdir -p "$dir"
in="$dir/in.safetensors" out="$dir/out.safetensors"
# Only what this script writes (DIR may hold other files); the directory if that leaves it empty.
trap 'rm -f "$in" "$out" "$dir/run.time"; rmdir "$dir" 2>/dev/null || true' EXIT

python3 - "$in" "$tensors" "$rows" "$cols" <<'EOF'
# bf16 values ~ N(0, 0.02) (the top half of each f32: truncation is fine for a speed test), a
# 4 MiB pattern per tensor, rotated so that no two tensors hold the same bytes.
import array, json, random, struct, sys
path, tensors, rows, cols = sys.argv[1], *map(int, sys.argv[2:5])
random.seed(13)
n = 1 << 21
f32 = array.array("f", (random.gauss(0.0, 0.02) for _ in range(n))).tobytes()
pattern = bytearray(2 * n)
pattern[0::2] = f32[2::4]
pattern[1::2] = f32[3::4]
nbytes = rows * cols * 2
header, offset = {}, 0
for t in range(tensors):
    header[f"layers.{t}.weight"] = {"dtype": "BF16", "shape": [rows, cols], "data_offsets": [offset, offset + nbytes]}
    offset += nbytes
text = json.dumps(header, separators=(",", ":")).encode()
text += b" " * (-len(text) % 8)
with open(path, "wb") as f:
    f.write(struct.pack("<Q", len(text)) + text)
    for t in range(tensors):
        shift = (t * 4099 * 2) % len(pattern)
        rotated = pattern[shift:] + pattern[:shift]
        left = nbytes
        while left:
            piece = min(left, len(rotated))
            f.write(rotated[:piece])
            left -= piece
EOF
size=$(stat -c %s "$in")
cat "$in" >/dev/null  # warm

# One timed run of "$@": prints "seconds peak_rss_kB cpu_seconds" (cpu: user + system).
timed() {
  local t="$dir/run.time"
  if ! /usr/bin/time -v -o "$t" "$@" >/dev/null; then
    echo "failed: $*" >&2
    return 1
  fi
  awk -F': ' '/Elapsed \(wall clock\)/ { n = split($2, p, ":"); s = 0; for (i = 1; i <= n; ++i) s = s * 60 + p[i] }
              /Maximum resident set size/ { rss = $2 }
              /User time|System time/ { cpu += $2 }
              END { printf "%.3f %d %.2f\n", s, rss, cpu }' "$t"
}

# The run of median wall time of RUNS runs of "$@" (the output removed before each).
median() {
  local out="$1"; shift
  for ((r = 0; r < runs; ++r)); do
    rm -f "$out"
    timed "$@"
  done | sort -n | awk -v m=$(((runs + 1) / 2)) 'NR == m'
}

rows_out=()
cp_s=""
row() {  # label, the run as "$@"
  local label="$1" result s rss cpu
  shift
  result="$(median "$out" "$@")"  # an assignment: a failed run stops the script (set -e)
  read -r s rss cpu <<<"$result"
  [ -z "$cp_s" ] && cp_s="$s"
  rows_out+=("$(awk -v l="$label" -v s="$s" -v c="$cp_s" -v b="$size" -v r="$rss" -v u="$cpu" \
    'BEGIN { printf "| %-41s | %6.2f | %5.2f | %5.2f | %5.2f | %6.0f |", l, s, b / s / 1e9, c / s, u, r / 1024 }')")
}

row "cp" cp "$in" "$out"
row "cp + sync" sh -c 'cp "$1" "$2" && sync "$2"' sh "$in" "$out"
for p in $presets; do
  row "qexact quantize --preset $p" "$qexact" quantize --preset "$p" --threads "$threads" "$in" --out "$out"
done
rm -f "$out"

echo "input: $tensors x $rows x $cols bf16, $size bytes, warm in the page cache; threads: $threads (0 = all $(nproc)); median of $runs"
echo "| run                                       | wall s |  GB/s | ÷ cp  | CPU s | RSS MB |"
echo "|-------------------------------------------|-------:|------:|------:|------:|-------:|"
printf '%s\n' "${rows_out[@]}"
