#!/usr/bin/env bash
# The ARM part of the test command (scripts/test.sh calls it): unit tests of the crates that run
# on the boards, cross-built with Debian's rustc-web and run under qemu-user
# (.cargo/config.toml's runners):
#   aarch64-unknown-linux-gnu      greenpipe-common, greenpipe-exporter (lib + board detection)
#   armv7-unknown-linux-gnueabihf  the same: 32-bit usize/time_t, 64-bit atomics by ldrexd
# Cross builds are cached outside the checkout (GREENPIPE_ARM_TARGET_DIR, default
# ~/.cache/greenpipe/arm-target) so a warm run only rebuilds what changed.
#   scripts/test-arm.sh                         # both targets
#   ARM_TARGETS=aarch64-unknown-linux-gnu scripts/test-arm.sh
set -euo pipefail
cd "$(dirname "$0")/.."
targets=(${ARM_TARGETS:-aarch64-unknown-linux-gnu armv7-unknown-linux-gnueabihf})
scripts/setup.sh --cross "${targets[@]}"
# shellcheck source=scripts/cross-env.sh
source scripts/cross-env.sh
export CARGO_TARGET_DIR="${GREENPIPE_ARM_TARGET_DIR:-$HOME/.cache/greenpipe/arm-target}"
export CARGO_INCREMENTAL=0 GREENPIPE_BUILD_BPF=1
for target in "${targets[@]}"; do
  start=$(date +%s)
  nice -n 10 "$CROSS_CARGO" test --locked --target "$target" --no-fail-fast \
    -p greenpipe-common -p greenpipe-exporter --lib --test board_detection --test packaging \
    -- --test-threads=2
  echo "test-arm: $target: built and tested under qemu-user in $(($(date +%s) - start)) s"
done
