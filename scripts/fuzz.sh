#!/usr/bin/env bash
# Runs every cargo-fuzz target in fuzz/ for a bounded time and records executions and crashes.
#   scripts/fuzz.sh [SECONDS_PER_TARGET]        (default 60)
# Builds on plain stable Rust with the flags `cargo fuzz build --sanitizer none` passes (all -C
# flags: sanitizer coverage for libFuzzer, debug assertions and overflow checks on). No
# AddressSanitizer (that needs nightly's -Zsanitizer): the parsers are safe Rust, panics and
# overflows are what is looked for. Not run by CI (tests/tests/fuzz_targets_replay.rs is).
# With nightly and cargo-fuzz: `cd fuzz && cargo fuzz run <target>` runs the same targets.
# Crashing inputs land in fuzz/artifacts/<target>/; keep each as a regression test beside the
# parser's property tests. Results: fuzz/results.tsv.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
seconds="${1:-60}"
cd "$root/fuzz"
export RUSTFLAGS="-Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares --cfg fuzzing -Cdebug-assertions -Coverflow-checks"
export CARGO_TARGET_DIR="$root/fuzz/target"
# --target keeps the flags off build scripts and proc macros (as cargo fuzz does).
triple="$(rustc -vV | sed -n 's/^host: //p')"
cargo build --release --bins --target "$triple"
targets=$(sed -n 's/^name = "\(.*\)"$/\1/p' Cargo.toml | grep -v '^greenpipe-fuzz$')
printf 'target\tseconds\texecutions\tcrashes\n' > results.tsv
for t in $targets; do
  mkdir -p "corpus/$t" "artifacts/$t"
  log="$CARGO_TARGET_DIR/$t.log"
  set +e
  "$CARGO_TARGET_DIR/$triple/release/$t" -max_total_time="$seconds" -print_final_stats=1 \
    -artifact_prefix="artifacts/$t/" -rss_limit_mb=1024 "corpus/$t" >"$log" 2>&1
  set -e
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  crashes=$(find "artifacts/$t" -type f | wc -l)
  printf '%s\t%s\t%s\t%s\n' "$t" "$seconds" "${execs:-?}" "$crashes" | tee -a results.tsv
done
