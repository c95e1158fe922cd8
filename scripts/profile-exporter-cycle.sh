#!/usr/bin/env bash
# Instruction profile of the exporter's steady-state cycle (collect + encode, default collectors,
# eBPF included) at the light-exporter bar's size: 100 pod-shaped cgroups, 1,000 processes.
# Instruction counts repeat from run to run where time on a shared VM does not.
#   scripts/profile-exporter-cycle.sh [CYCLES]    (default 20; as root, like the bench)
# Prints instructions per cycle, the allocator's share, and the functions that execute the most
# (inclusive and self). User-space instructions only: the kernel's side of each read is not
# counted (the bench's CPU figures include it). The raw profile is left in target/callgrind/ for
# callgrind_annotate or KCachegrind.
set -euo pipefail
cd "$(dirname "$0")/.."
cycles="${1:-20}"
command -v valgrind >/dev/null || { echo "needs valgrind: apt-get install valgrind" >&2; exit 1; }
bin="$(cargo bench -p greenpipe-exporter --bench overhead --no-run --message-format=json 2>/dev/null |
  jq -r 'select(.target.name == "overhead" and .executable != null) | .executable')"
[[ -x $bin ]] || { echo "building the overhead bench failed: cargo bench -p greenpipe-exporter --bench overhead --no-run" >&2; exit 1; }
out="${CARGO_TARGET_DIR:-target}/callgrind"
mkdir -p "$out"
profile="$out/exporter-cycle.out"
# Collection is on only inside profiled_cycles: set-up, warm-up cycles and exit are not counted.
GREENPIPE_BENCH_PHASE=cycles GREENPIPE_BENCH_CYCLES="$cycles" \
  valgrind --tool=callgrind --collect-atstart=no --toggle-collect='overhead::profiled_cycles' \
  --callgrind-out-file="$profile" "$bin" >"$out/bench.log" 2>"$out/valgrind.log" ||
  { cat "$out/valgrind.log" >&2; exit 1; }
total="$(callgrind_annotate "$profile" | awk '/PROGRAM TOTALS/ && !t {gsub(",", "", $1); t = $1} END {print t}')"
echo "instructions per cycle: $((total / cycles)) (over $cycles cycles; $profile)"
allocator="$(callgrind_annotate --threshold=100 "$profile" |
  awk '/\/malloc\/malloc\.c:/ {gsub(",", "", $1); a += $1} END {print a + 0}')"
echo "in malloc.c (allocation and freeing): $((allocator / cycles)) per cycle ($((100 * allocator / total)) %)"
echo
echo "inclusive, top 40 (instructions over all $cycles cycles):"
callgrind_annotate --inclusive=yes "$profile" | awk '/^-+$/ {n++; next} n >= 5 && NF && ++k <= 40'
echo
echo "self, top 25:"
callgrind_annotate "$profile" | awk '/^-+$/ {n++; next} n >= 5 && NF && ++k <= 25'
