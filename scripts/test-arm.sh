#!/usr/bin/env bash
# The ARM part of the test command (scripts/test.sh calls it):
# 1. unit tests cross-built with Debian's rustc-web and run under qemu-user (.cargo/config.toml's
#    runners), of what runs on a board:
#      aarch64-unknown-linux-gnu      the unit tests of greenpipe-common, the exporter, the
#                                     workload, and the estimator's and offline's libraries (with
#                                     what they depend on: web, remote-write, litert), and the
#                                     exporter's board detection and packaging tests
#      armv7-unknown-linux-gnueabihf  greenpipe-common and greenpipe-exporter: 32-bit usize/time_t,
#                                     64-bit atomics by ldrexd
#    Left out: carbon and campaign (they run on the cluster's control side or a workstation,
#    never on a board) and greenpipe-tests (the x86-64 harness of step 2), and offline's
#    forest-parity tests against scikit-learn (parity is a property of the algorithm, proven on
#    the host; grown emulated in a debug build they took over 15 minutes).
#    Every aarch64 build is one package selection, so the dependencies are compiled for one
#    feature set; the exporter's and the workload's integration binaries are built in it too (the
#    workload binary for step 2 as the test build builds it: tract compiled once). None of the
#    selection depends on the x86-64 harness (greenpipe-tests), so it is not cross-built.
# 2. with aarch64: the x86-64 test crate's ignored arm_* tests on those aarch64 binaries:
#      arm_exporter_qemu_user  under qemu-user next to the x86-64 exporter, a pod-shaped cgroup
#      arm_workload_qemu_user  every model in f32 and int8 on tract, logits against x86-64's
#      arm_vm                  a whole arm64 machine (scripts/arm-vm.sh): BPF under arm64's verifier
# Cross builds are cached outside the checkout (GREENPIPE_ARM_TARGET_DIR, default
# ~/.cache/greenpipe/arm-target) so a warm run only rebuilds what changed; the arm64 kernel and
# initramfs in ~/.cache/greenpipe/arm-vm.
#   scripts/test-arm.sh                         # both targets
#   ARM_TARGETS=aarch64-unknown-linux-gnu scripts/test-arm.sh
#   scripts/test-arm.sh --build-only            # step 1's cross builds only, nothing run
#                                               # (scripts/test.sh builds them in the background)
#   scripts/test-arm.sh --unit-only             # step 1 only (scripts/test.sh runs it, then
#                                               # step 2's tests, beside the x86-64 tests)
set -euo pipefail
cd "$(dirname "$0")/.."
no_run=() done_what="built and tested under qemu-user" e2e=1
case "${1:-}" in
  "") ;;
  --build-only) no_run=(--no-run) done_what="built (not run)" e2e=0 ;;
  --unit-only) e2e=0 ;;
  *) echo "usage: scripts/test-arm.sh [--build-only|--unit-only]" >&2; exit 2 ;;
esac
source scripts/e2e-filters.sh
read -ra targets <<<"${ARM_TARGETS:-aarch64-unknown-linux-gnu armv7-unknown-linux-gnueabihf}"
scripts/setup.sh --cross "${targets[@]}"
arm_target_dir="${GREENPIPE_ARM_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/greenpipe/arm-target}"
export CARGO_INCREMENTAL=0 GREENPIPE_BUILD_BPF=1
# shellcheck source=scripts/claim-target-dirs.sh
source scripts/claim-target-dirs.sh
# The host directory too when one is shared (step 2 builds there); scripts/test.sh has claimed
# both already.
claim_target_dirs "$arm_target_dir" ${CARGO_TARGET_DIR:+"$CARGO_TARGET_DIR"}
# A subshell: Debian's toolchain (cross-env.sh) must not leak into step 2's x86-64 build.
(
  # shellcheck source=scripts/cross-env.sh
  source scripts/cross-env.sh
  export CARGO_TARGET_DIR="$arm_target_dir"
  for target in "${targets[@]}"; do
    start=$(date +%s)
    packages=(-p greenpipe-common -p greenpipe-exporter)
    skip=()
    if [[ "$target" == aarch64-unknown-linux-gnu ]]; then
      packages+=(-p greenpipe-workload -p greenpipe-estimator -p greenpipe-offline)
      skip=(--skip parity::tests::)
    fi
    nice -n 10 "$CROSS_CARGO" test --locked --target "$target" --no-fail-fast "${no_run[@]}" \
      "${packages[@]}" --lib --bins -- --test-threads=2 "${skip[@]}"
    # The integration binaries of the same selection: the exporter's board detection and
    # packaging modules run; the workload's is built for step 2 and runs nothing here.
    nice -n 10 "$CROSS_CARGO" test --locked --target "$target" --no-fail-fast "${no_run[@]}" \
      "${packages[@]}" --test integration -- --test-threads=2 board_detection:: packaging::
    echo "test-arm: $target: $done_what in $(($(date +%s) - start)) s"
  done
)
((e2e)) || exit 0
if [[ " ${targets[*]} " == *" aarch64-unknown-linux-gnu "* ]]; then
  start=$(date +%s)
  # The workspace selection the test command's host build made, so nothing rebuilds.
  GREENPIPE_ARM_TARGET_DIR="$arm_target_dir" cargo test --locked --no-fail-fast --workspace \
    --test integration -- --ignored --test-threads=2 "${arm_e2e[@]}"
  echo "test-arm: aarch64 exporter and workload under qemu-user, exporter in the arm64 VM in $(($(date +%s) - start)) s"
fi
