#!/usr/bin/env bash
# The ARM part of the test command (scripts/test.sh calls it):
# 1. unit tests cross-built with Debian's rustc-web and run under qemu-user (.cargo/config.toml's
#    runners):
#      aarch64-unknown-linux-gnu      every library crate's (and binary's) unit tests, and the
#                                     exporter's board detection and packaging tests
#      armv7-unknown-linux-gnueabihf  greenpipe-common and greenpipe-exporter: 32-bit usize/time_t,
#                                     64-bit atomics by ldrexd
#    The exporter's integration tests make cargo link the exporter binary too, which step 2 runs;
#    the aarch64 workload binary is built for step 2 as well.
# 2. with aarch64: the x86-64 test crate's arm_* tests (feature `arm`) on those aarch64 binaries:
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
set -euo pipefail
cd "$(dirname "$0")/.."
no_run=() done_what="built and tested under qemu-user"
if [[ "${1:-}" == --build-only ]]; then
  no_run=(--no-run) done_what="built (not run)"
fi
read -ra targets <<<"${ARM_TARGETS:-aarch64-unknown-linux-gnu armv7-unknown-linux-gnueabihf}"
scripts/setup.sh --cross "${targets[@]}"
arm_target_dir="${GREENPIPE_ARM_TARGET_DIR:-$HOME/.cache/greenpipe/arm-target}"
export CARGO_INCREMENTAL=0 GREENPIPE_BUILD_BPF=1
# A subshell: Debian's toolchain (cross-env.sh) must not leak into step 2's x86-64 build.
(
  # shellcheck source=scripts/cross-env.sh
  source scripts/cross-env.sh
  export CARGO_TARGET_DIR="$arm_target_dir"
  for target in "${targets[@]}"; do
    start=$(date +%s)
    nice -n 10 "$CROSS_CARGO" test --locked --target "$target" --no-fail-fast "${no_run[@]}" \
      -p greenpipe-common -p greenpipe-exporter --lib --test board_detection --test packaging \
      -- --test-threads=2
    if [[ "$target" == aarch64-unknown-linux-gnu ]]; then
      # greenpipe-tests is step 2's x86-64 harness (Prometheus, kube, the VM), never on a
      # board; common and exporter ran above.
      nice -n 10 "$CROSS_CARGO" test --locked --target "$target" --no-fail-fast "${no_run[@]}" \
        --workspace --exclude greenpipe-tests --exclude greenpipe-common \
        --exclude greenpipe-exporter --lib --bins -- --test-threads=2
      # The workload binary for step 2, built as the test build builds it (dev-dependency
      # features included) so tract is compiled once, not once per feature set.
      nice -n 10 "$CROSS_CARGO" test --locked --target "$target" --no-run -p greenpipe-workload \
        --test models
    fi
    echo "test-arm: $target: $done_what in $(($(date +%s) - start)) s"
  done
)
((${#no_run[@]})) && exit 0
if [[ " ${targets[*]} " == *" aarch64-unknown-linux-gnu "* ]]; then
  start=$(date +%s)
  GREENPIPE_ARM_TARGET_DIR="$arm_target_dir" cargo test --locked --no-fail-fast \
    -p greenpipe-tests --features arm --test arm_exporter_qemu_user --test arm_workload_qemu_user \
    --test arm_vm \
    -- --test-threads=2
  echo "test-arm: aarch64 exporter and workload under qemu-user, exporter in the arm64 VM in $(($(date +%s) - start)) s"
fi
