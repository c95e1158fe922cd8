#!/usr/bin/env bash
# The ARM part of the test command (scripts/test.sh calls it):
# 1. unit tests of the crates that run on the boards, cross-built with Debian's rustc-web and run
#    under qemu-user (.cargo/config.toml's runners):
#      aarch64-unknown-linux-gnu      greenpipe-common, greenpipe-exporter (lib + board detection)
#      armv7-unknown-linux-gnueabihf  the same: 32-bit usize/time_t, 64-bit atomics by ldrexd
#    The exporter's integration tests make cargo link the exporter binary too, which step 2 runs.
# 2. with aarch64: the x86-64 test crate's arm_* tests (feature `arm`) on that aarch64 exporter:
#      arm_exporter_qemu_user  under qemu-user next to the x86-64 exporter, a pod-shaped cgroup
#      arm_vm                  a whole arm64 machine (scripts/arm-vm.sh): BPF under arm64's verifier
# Cross builds are cached outside the checkout (GREENPIPE_ARM_TARGET_DIR, default
# ~/.cache/greenpipe/arm-target) so a warm run only rebuilds what changed; the arm64 kernel and
# initramfs in ~/.cache/greenpipe/arm-vm.
#   scripts/test-arm.sh                         # both targets
#   ARM_TARGETS=aarch64-unknown-linux-gnu scripts/test-arm.sh
set -euo pipefail
cd "$(dirname "$0")/.."
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
    nice -n 10 "$CROSS_CARGO" test --locked --target "$target" --no-fail-fast \
      -p greenpipe-common -p greenpipe-exporter --lib --test board_detection --test packaging \
      -- --test-threads=2
    echo "test-arm: $target: built and tested under qemu-user in $(($(date +%s) - start)) s"
  done
)
if [[ " ${targets[*]} " == *" aarch64-unknown-linux-gnu "* ]]; then
  start=$(date +%s)
  GREENPIPE_ARM_TARGET_DIR="$arm_target_dir" cargo test --locked --no-fail-fast \
    -p greenpipe-tests --features arm --test arm_exporter_qemu_user --test arm_vm \
    -- --test-threads=2
  echo "test-arm: aarch64 exporter under qemu-user and in the arm64 VM in $(($(date +%s) - start)) s"
fi
