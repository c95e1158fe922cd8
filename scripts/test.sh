#!/usr/bin/env bash
# The README's second command: installs what is missing, then runs every check and test.
# Tests need root (cgroups, eBPF); they start their own Prometheus and exporters on loopback.
#   scripts/test.sh           everything (what CI runs)
#   scripts/test.sh --quick   the inner loop: fmt, clippy, every unit test and the end-to-end
#                             tests that take seconds (CONTRIBUTING.md says when to run which)
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
case "${1:-}" in
  "") ;;
  --quick) quick=1 ;;
  *) echo "usage: scripts/test.sh [--quick]" >&2; exit 2 ;;
esac
started=$(date +%s)
step() { echo "test: $* at $(($(date +%s) - started)) s ($(date -u +%H:%M:%S))" >&2; }
scripts/setup.sh
step "setup done"
# Incremental state is a second copy of every workspace crate's build; a one-shot test run gains
# nothing from it and the disk is shared.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
export GREENPIPE_BUILD_BPF=1   # build the real BPF objects, never the editor stubs
# The host build outside the checkout, like the ARM builds (~/.cache/greenpipe/arm-target): the
# dependencies (tract, aya, the engines' bindings: most of the half hour a cold build takes on 2
# cores) are compiled once per machine and toolchain, keyed by cargo's own fingerprints, and a
# new clone rebuilds only the workspace crates. The workload without tract builds in a directory
# of its own, at the same time (one target directory is one cargo lock).
# Every script caches under ${XDG_CACHE_HOME:-~/.cache}/greenpipe (Go's build cache is under
# XDG_CACHE_HOME too): another XDG_CACHE_HOME is a fresh machine's caches, for measuring one.
cache="${XDG_CACHE_HOME:-$HOME/.cache}/greenpipe"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$cache/host-target}"
no_tract_target_dir="${GREENPIPE_NO_TRACT_TARGET_DIR:-$cache/host-target-no-tract}"
# The workload's C++ engines, installed by setup.sh (their tests fail without them).
export GREENPIPE_ONNXRUNTIME_LIB="${GREENPIPE_ONNXRUNTIME_LIB:-$PWD/.venv/engines/libonnxruntime.so}"
export GREENPIPE_LITERT_LIB="${GREENPIPE_LITERT_LIB:-$PWD/.venv/engines/libLiteRt.so}"

# Each test's wall time in the log (scripts/test-runner.sh), the slowest listed at the end.
export CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUNNER="$PWD/scripts/test-runner.sh"
test_log="$cache/test-times.log"
mkdir -p "$cache"
: >"$test_log"
# Runs cargo test with its output also in $test_log.
cargo_test() {
  cargo test "$@" 2>&1 | tee -a "$test_log"
}
# awk, not head: head exits after ten lines and, once the sorted list outgrows a pipe buffer
# (about 800 tests), sort dies of SIGPIPE and pipefail turns a green run into exit 141.
slowest() {
  echo "test: the ten slowest tests:" >&2
  sed -nE 's/^test (.*) \.\.\. (ok|FAILED) <([0-9.]+)s>$/\3 s  \1/p' "$test_log" |
    sort -rn | awk 'NR <= 10' >&2
}

if ((quick)); then
  cargo fmt --all -- --check
  cargo clippy --workspace --all-targets --locked -- -D warnings
  step "clippy done"
  # The tests that take seconds; those left out (scripts/slow-tests.txt) start a control plane,
  # run a workload or scikit-learn for a minute or more, or cut links (the full command runs them).
  skip_slow=$(sed -e 's/#.*//' scripts/slow-tests.txt | xargs -r printf -- '--skip %s ')
  # shellcheck disable=SC2086 # one word per filter
  cargo_test --workspace --locked --no-fail-fast --lib --bins -- --test-threads=2 $skip_slow
  step "unit tests done"
  # shellcheck disable=SC2086
  cargo_test --workspace --locked --no-fail-fast --test integration -- --test-threads=2 $skip_slow
  step "fast end-to-end tests done"
  slowest
  exit 0
fi

# The servers built from Go source (cached in ~/.cache/greenpipe once per machine): the
# Kubernetes control plane the k8s tests run, Helm for deploy/helm, and Prometheus 3, Thanos and
# Mimir for the backend tests. Cold, they are half an hour of downloads and compiles on 2 cores
# (docs/benchmarks.md), so they start now, in the background at the lowest priority: the
# downloads overlap the Rust build, and the compiles take the CPU the Rust side leaves idle
# (linking, tests that wait on Prometheus). A step waits for the build it needs; a failed build
# fails the run with its log.
bg_logs="$(mktemp -d)"
trap 'rm -rf "$bg_logs"' EXIT
declare -A bg_pid
background() {
  local name="$1"
  shift
  # Its own process group, so that waiting for it can raise the whole build's priority.
  setsid nice -n 19 "$@" >"$bg_logs/$name.log" 2>&1 &
  bg_pid[$name]=$!
}
wait_for() {
  local name="$1"
  # Nothing runs in the foreground while a step waits: give the awaited build the CPU ahead of
  # the other background builds (the processes it starts from now on inherit the priority).
  renice -n 0 -g "${bg_pid[$name]}" >/dev/null 2>&1 || true
  if ! wait "${bg_pid[$name]}"; then
    cat "$bg_logs/$name.log" >&2
    echo "test: $name failed (its log above)" >&2
    exit 1
  fi
  step "$name done"
}
background control-plane scripts/control-plane.sh build
background helm scripts/helm.sh --path
background backends scripts/backends.sh build prometheus3 thanos mimir

cargo fmt --all -- --check
# cargo fmt reaches only files a plain `mod` line names; check every tracked file on its own so a
# module declared inside a macro cannot hide from the formatter.
git ls-files -z '*.rs' ':!:fuzz/' | xargs -0 -n 20 rustfmt --check --edition 2021 >/dev/null
cargo clippy --workspace --all-targets --locked -- -D warnings
step "clippy done"
# The ARM cross builds (two more builds of the workspace, cached in ~/.cache/greenpipe/arm-target
# by their inputs): in the background too, so scripts/test-arm.sh below finds them built.
background arm-build scripts/test-arm.sh --build-only
# The workload without tract, as the quick start builds it (ONNX Runtime and LiteRT only): its
# feature set rebuilds most dependencies (5 min here, cold), so it builds in its target directory
# (above), in the background at the lowest priority like the Go builds, and is waited for at the end.
background no-tract env CARGO_TARGET_DIR="$no_tract_target_dir" sh -c '
  cargo clippy -p greenpipe-workload --no-default-features --all-targets --locked -- -D warnings &&
  cargo test -p greenpipe-workload --no-default-features --locked --lib -- model::'
wait_for control-plane
wait_for helm
# Every test binary, built once for both lanes below.
cargo test --workspace --locked --no-run --message-format=json-render-diagnostics \
  >"$bg_logs/artifacts.json"
step "test build done"
# The scikit-learn parity tests are minutes of pure computation with no clock in them, while the
# end-to-end tests mostly wait on real time: the parity binary runs beside them, at the lowest
# priority (cargo runs one test binary at a time, and a second cargo would wait for the first's
# lock on the target directory).
parity_binary=$(python3 -c '
import json, sys
for line in open(sys.argv[1]):
    m = json.loads(line)
    if (m.get("reason") == "compiler-artifact" and m["target"]["name"] == "greenpipe_offline"
            and m["profile"]["test"] and m.get("executable")):
        print(m["executable"])' "$bg_logs/artifacts.json")
[[ -n "$parity_binary" ]] || { echo "test: greenpipe-offline's unit-test binary not built" >&2; exit 1; }
background parity "$CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUNNER" "$parity_binary" \
  --test-threads=2 parity::tests::
# Two cores: two tests at a time so timing-sensitive kernel tests are not starved.
cargo_test --workspace --locked --no-fail-fast -- --test-threads=2 --skip parity::tests::
step "workspace tests done"
wait_for parity
cat "$bg_logs/parity.log" >>"$test_log"
# The tests that read the whole host, ignored in the run above: alone, one at a time.
cargo_test --workspace --locked --no-fail-fast --test integration -- --ignored --test-threads=1 \
  quickstart:: campaign::ci_plan_end_to_end_with_the_closed_loop_meter
step "whole-host tests done"
# Unit tests for aarch64 and armv7 under qemu-user (cross builds cached in ~/.cache/greenpipe).
wait_for arm-build
scripts/test-arm.sh 2>&1 | tee -a "$test_log"
step "ARM tests done"
# The estimator on real Prometheus 3, Thanos and Mimir (measured in docs/benchmarks.md).
wait_for backends
scripts/test-backends.sh 2>&1 | tee -a "$test_log"
step "backend tests done"
wait_for no-tract
slowest
