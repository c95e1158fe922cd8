#!/usr/bin/env bash
# Cross-builds every GreenPipe binary and the BPF objects for an ARM board:
#   scripts/cross.sh aarch64-unknown-linux-gnu      # Raspberry Pi 4/5 (64-bit OS), Jetson, Rock 5
#   scripts/cross.sh armv7-unknown-linux-gnueabihf  # 32-bit Raspberry Pi OS
#   scripts/cross.sh x86_64-unknown-linux-gnu       # the same release build for amd64
# Output: ${CARGO_TARGET_DIR:-target}/TARGET/release/greenpipe-{exporter,estimator,carbon,workload}
# and .../release/bpf/*.bpf.o (the objects the exporter embeds, for inspection with bpftool).
#
# The toolchain is Debian's rustc-web (see scripts/setup-cross.sh): rustup's has only the x86-64
# standard library. The linkers and the qemu-user runners are in .cargo/config.toml.
# Extra arguments go to cargo (e.g. --timings). Runs under `nice` on shared build machines.
set -euo pipefail
cd "$(dirname "$0")/.."
target="${1:?usage: scripts/cross.sh TARGET [cargo args...]}"
shift
scripts/setup.sh --cross "$target"
# shellcheck source=scripts/cross-env.sh
source scripts/cross-env.sh
export GREENPIPE_BUILD_BPF=1   # real BPF objects, never the editor stubs
target_dir="${CARGO_TARGET_DIR:-$PWD/target}"
start=$(date +%s)
json="$(mktemp)"
trap 'rm -f "$json"' EXIT
nice -n 10 "$CROSS_CARGO" build --release --locked --target "$target" \
  --bin greenpipe-exporter --bin greenpipe-estimator --bin greenpipe-campaign \
  --bin greenpipe-carbon --bin greenpipe-workload \
  --message-format=json-render-diagnostics "$@" >"$json"
out="$target_dir/$target/release"
# The exporter's build script compiled the BPF objects into its OUT_DIR; cargo names that dir.
bpf_out="$(jq -r 'select(.reason == "build-script-executed" and (.package_id | test("greenpipe-exporter|exporter#"))) | .out_dir' "$json" | tail -1)"
[[ -n "$bpf_out" && -d "$bpf_out" ]] || { echo "cross: no build-script output dir for greenpipe-exporter" >&2; exit 1; }
mkdir -p "$out/bpf"
for obj in "$bpf_out"/*.bpf.o; do
  [[ -s "$obj" ]] || { echo "cross: $obj is empty (a stub)" >&2; exit 1; }
  cp "$obj" "$out/bpf/"
done
for bin in greenpipe-exporter greenpipe-estimator greenpipe-campaign greenpipe-carbon greenpipe-workload; do
  [[ -x "$out/$bin" ]] || { echo "cross: $out/$bin missing" >&2; exit 1; }
done
echo "cross: $target built in $(($(date +%s) - start)) s into $out"
file "$out"/greenpipe-* "$out"/bpf/*.bpf.o 2>/dev/null || ls -l "$out"/greenpipe-* "$out"/bpf/
