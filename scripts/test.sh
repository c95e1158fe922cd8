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
# Each step says the CPU time of every process this script has reaped so far (/proc's cutime +
# cstime: the foreground commands, and each background job once it has ended): on 2 cores the
# CPU work, not waiting, is what sets a run's length (docs/benchmarks.md).
clock_ticks=$(getconf CLK_TCK)
# The reaped children's CPU seconds in a /proc/PID/stat's text, read from file $1.
reaped_cpu_in() {
  local stat
  stat=$(<"$1")
  read -ra stat <<<"${stat##*) }" # fields from the state on: cutime and cstime are 13 and 14
  echo $(((stat[13] + stat[14]) / clock_ticks))
}
step() { echo "test: $* at $(($(date +%s) - started)) s ($(date -u +%H:%M:%S)), $(reaped_cpu_in /proc/$$/stat) CPU-s so far" >&2; }
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
# Every shared target directory this run builds into, claimed before the first build (a touch
# while a build runs would make cargo rebuild what it just built).
source scripts/claim-target-dirs.sh
# The ARM cross builds' directory (scripts/test-arm.sh builds there; the arm_* end-to-end tests
# run the aarch64 binaries from there).
export GREENPIPE_ARM_TARGET_DIR="${GREENPIPE_ARM_TARGET_DIR:-$cache/arm-target}"
claim_target_dirs "$CARGO_TARGET_DIR" "$no_tract_target_dir" "$GREENPIPE_ARM_TARGET_DIR"
# The workload's C++ engines, installed by setup.sh (their tests fail without them).
export GREENPIPE_ONNXRUNTIME_LIB="${GREENPIPE_ONNXRUNTIME_LIB:-$PWD/.venv/engines/libonnxruntime.so}"
export GREENPIPE_LITERT_LIB="${GREENPIPE_LITERT_LIB:-$PWD/.venv/engines/libLiteRt.so}"

# Each test's wall time in the log (scripts/test-runner.sh), the slowest listed at the end.
export CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUNNER="$PWD/scripts/test-runner.sh"
test_log="$cache/test-times.log"
mkdir -p "$cache"
: >"$test_log"
# Clippy lints every workspace crate while it compiles for the tests (-D warnings): clippy-driver
# as the workspace's rustc, with its arguments in CLIPPY_ARGS as `cargo clippy` passes them. A
# separate `cargo clippy` type-checks every dependency once more, without code: 7 CPU-min of a
# fresh machine's run (2026-12-07). Every cargo below builds with these, so the test build's
# artifacts are reused; scripts/cross-env.sh drops them for Debian's ARM toolchain.
sysroot=$(rustc --print sysroot)
export RUSTC_WORKSPACE_WRAPPER="$sysroot/bin/clippy-driver"
[[ -x $RUSTC_WORKSPACE_WRAPPER ]] || { echo "test: no clippy-driver in $sysroot (rustup component add clippy)" >&2; exit 1; }
export CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__"
# Every target of every workspace crate (benches and all), linted and built once; $1 gets
# cargo's JSON messages (the lanes read the test binaries from them).
lint_and_build_tests() {
  cargo test --workspace --all-targets --locked --no-run --message-format=json-render-diagnostics >"$1"
}
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
  lint_and_build_tests /dev/null
  step "clippy and test build done"
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
declare -A bg_pid
# A failed step ends the run: stop what still runs beside it (each in its own process group).
stop_background() {
  local pid
  for pid in "${bg_pid[@]}"; do kill -- -"$pid" 2>/dev/null || true; done
  rm -rf "$bg_logs"
}
trap stop_background EXIT
# Starts job $1 at nice $2: the command after them, its output in $bg_logs/$1.log. It gets its
# own session and process group, so that waiting for it can raise the whole build's priority. A
# new session is also a new scheduling group where the kernel groups by session (autogroup, on in
# Debian's kernels), and groups share the CPU evenly whatever their processes' nice: so the group
# is niced too. Before that, the ARM and no-tract builds took two thirds of the CPU from the test
# build beside them (2026-12-06: 9 min 21 s against 3 min 47 s alone). The command is not exec'd:
# the shell outlives it to write its CPU time (job_cpu) to $bg_logs/$1.stat.
start_job() {
  local name="$1" nice="$2"
  shift 2
  setsid sh -c 'echo "$1" >/proc/self/autogroup 2>/dev/null; n=$1; shift; nice -n "$n" "$@"
    s=$?; cat /proc/$$/stat >"$0.stat"; exit $s' "$bg_logs/$name" "$nice" "$@" \
    >"$bg_logs/$name.log" 2>&1 &
  bg_pid[$name]=$!
}
# A build in the background, at the lowest priority until it is waited for.
background() { start_job "$1" 19 "${@:2}"; }
# The same at the priority of the foreground: a lane of tests that waits on real time.
beside() { start_job "$1" 0 "${@:2}"; }
# Puts a background job at the foreground's priority (the processes it starts from now on
# inherit it).
raise() {
  renice -n 0 -g "${bg_pid[$1]}" >/dev/null 2>&1 || true
  echo 0 >"/proc/${bg_pid[$1]}/autogroup" 2>/dev/null || true
}
wait_for() {
  local name="$1"
  # Nothing runs in the foreground while a step waits: give the awaited build the CPU ahead of
  # the other background builds.
  raise "$name"
  if ! wait "${bg_pid[$name]}"; then
    cat "$bg_logs/$name.log" >&2
    echo "test: $name failed (its log above)" >&2
    exit 1
  fi
  step "$name done ($(job_cpu "$name") CPU-s of its own)"
}
# The CPU seconds a job of background or beside used: its shell's reaped children, written when
# the job ended.
job_cpu() { reaped_cpu_in "$bg_logs/$1.stat"; }
background control-plane scripts/control-plane.sh build
background helm scripts/helm.sh --path
background backends scripts/backends.sh build prometheus3 thanos mimir

cargo fmt --all -- --check
# cargo fmt reaches only files a plain `mod` line names; check every tracked file on its own so a
# module declared inside a macro cannot hide from the formatter.
git ls-files -z '*.rs' ':!:fuzz/' | xargs -0 -n 20 rustfmt --check --edition 2021 >/dev/null
step "fmt done"
# The ARM cross builds (two more builds of the workspace, cached in ~/.cache/greenpipe/arm-target
# by their inputs): in the background too, so scripts/test-arm.sh below finds them built.
background arm-build scripts/test-arm.sh --build-only
# The workload without tract, as the quick start builds it (ONNX Runtime and LiteRT only), every
# target linted and built as above: its feature set rebuilds most dependencies (5 min here,
# cold), so it builds in its target directory (above), in the background at the lowest priority
# like the Go builds, and is waited for before the whole-host tests.
background no-tract env CARGO_TARGET_DIR="$no_tract_target_dir" sh -c '
  cargo test -p greenpipe-workload --no-default-features --all-targets --locked --no-run &&
  cargo test -p greenpipe-workload --no-default-features --locked --lib -- model::'
wait_for control-plane
wait_for helm
# Every test binary, linted and built once for the lanes below.
lint_and_build_tests "$bg_logs/artifacts.json"
step "clippy and test build done"
# The test build is what everything waits for; from here the builds still running share the CPU
# evenly with the tests, which mostly wait. Left at the lowest priority they got nothing until
# the end-to-end tests were done, and the run waited for them then (2026-12-06: 28 min 36 s
# against 26 min 42 s with no priorities at all).
raise arm-build
raise no-tract
# The doc tests (cargo runs them with the rest; the lanes below run test binaries only).
cargo_test --workspace --locked --doc
# Four lanes from here, so that the CPU left idle by tests that wait on real time is used:
# - the end-to-end binary (tests/), two tests at a time (two cores, so timing-sensitive kernel
#   tests are not starved);
# - the closed-loop recalibration tests from the same binary, one at a time beside it
#   (scripts/e2e-filters.sh says why);
# - in the foreground, every other test binary: the crates' unit and integration tests, which
#   took minutes before the end-to-end binary's turn when one cargo test ran them all in a row;
# - the pure computation: the scikit-learn parity tests (minutes of it, no clock in them), then,
#   once their cross builds are done, the ARM unit tests under qemu-user and the end-to-end
#   tests on the aarch64 binaries (qemu-user and the arm64 VM).
# The backend end-to-end tests run in the foreground after the crate tests, once the Go servers
# are built. Before, the ARM and backend tests ran after every lane was done, and the run waited
# on them: their 2 min 13 s came after the end-to-end lanes (2026-12-07, 19619fa).
# A second cargo would wait for the first's lock on the target directory, so the lanes run the
# binaries cargo test built above, through the same runner, each from its package's directory
# as cargo test does.
source scripts/e2e-filters.sh
# Every test binary of the build: package directory, target source, executable, target name.
python3 -c '
import json, os, sys
for line in open(sys.argv[1]):
    m = json.loads(line)
    # Benches are built (and linted) with the tests, never run as tests.
    if m.get("reason") == "compiler-artifact" and m["profile"]["test"] and m.get("executable") \
            and "bench" not in m["target"]["kind"]:
        d = os.path.dirname(m["manifest_path"])
        src = os.path.relpath(m["target"]["src_path"], d)
        print("\t".join([d, src, m["executable"], m["target"]["name"]]))' \
  "$bg_logs/artifacts.json" | sort >"$bg_logs/binaries.tsv"
# The executable of target $2 of the package in directory $1.
binary_of() {
  awk -F'\t' -v dir="$PWD/$1" -v name="$2" '$1 == dir && $4 == name { print $3 }' \
    "$bg_logs/binaries.tsv"
}
parity_binary=$(binary_of offline greenpipe_offline)
e2e_binary=$(binary_of tests integration)
for b in parity_binary e2e_binary; do
  [[ -n "${!b}" ]] || { echo "test: $b not among the test build's artifacts" >&2; exit 1; }
done
runner="$CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUNNER"
skip_closed_loop=()
for t in "${closed_loop_e2e[@]}"; do skip_closed_loop+=(--skip "$t"); done
beside e2e env -C tests "$runner" "$e2e_binary" --test-threads=2 "${skip_closed_loop[@]}"
beside closed-loop env -C tests "$runner" "$e2e_binary" --test-threads=1 "${closed_loop_e2e[@]}"
beside computation sh -c '
  runner=$1 parity=$2 e2e=$3
  shift 3
  status=0
  "$runner" "$parity" --test-threads=2 parity::tests:: || status=1
  scripts/test-arm.sh --unit-only || status=1
  echo "     Running tests/main.rs ($e2e) [arm]"
  env -C tests "$runner" "$e2e" --ignored --test-threads=2 "$@" || status=1
  exit $status' computation "$runner" "$parity_binary" "$e2e_binary" "${arm_e2e[@]}"
# Every binary but the end-to-end one, with cargo test's "Running" lines (the log's readers
# use them), on through failures as with --no-fail-fast.
crate_tests() {
  local status=0 dir src exe name
  while IFS=$'\t' read -r dir src exe name; do
    [[ "$exe" == "$e2e_binary" ]] && continue
    echo "     Running $src ($exe)"
    (cd "$dir" && "$runner" "$exe" "$@") || status=1
  done <"$bg_logs/binaries.tsv"
  return "$status"
}
crate_tests_failed=0
crate_tests --test-threads=2 --skip parity::tests:: 2>&1 | tee -a "$test_log" || crate_tests_failed=1
step "crate tests done"
# The ignored tests that need Prometheus 3, Thanos and Mimir, built from Go source.
wait_for backends
echo "     Running tests/main.rs ($e2e_binary) [backends]" | tee -a "$test_log"
(cd tests && "$runner" "$e2e_binary" --ignored --test-threads=2 "${backend_e2e[@]}") 2>&1 |
  tee -a "$test_log" || crate_tests_failed=1
step "backend end-to-end tests done"
for lane in e2e closed-loop; do
  wait_for "$lane"
  { echo "     Running tests/main.rs ($e2e_binary) [$lane]"; cat "$bg_logs/$lane.log"; } >>"$test_log"
done
if ((crate_tests_failed)); then
  echo "test: a crate's or a backend's tests failed (above)" >&2
  exit 1
fi
wait_for arm-build
wait_for computation
cat "$bg_logs/computation.log" >>"$test_log"
# The no-tract build runs at full priority since the test build: done before the whole host is
# read.
wait_for no-tract
# The tests that read the whole host, ignored in the runs above: alone, one at a time.
cargo_test --workspace --locked --no-fail-fast --test integration -- --ignored --test-threads=1 \
  "${whole_host_e2e[@]}"
step "whole-host tests done"
slowest
