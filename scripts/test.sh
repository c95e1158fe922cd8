#!/usr/bin/env bash
# The README's second command: installs what is missing, then runs every check and test.
# Tests need root (cgroups, eBPF); they start their own Prometheus and exporters on loopback.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
# Incremental state is a second copy of every workspace crate's build; a one-shot test run gains
# nothing from it and the disk is shared.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
export GREENPIPE_BUILD_BPF=1   # build the real BPF objects, never the editor stubs
# The workload's C++ engines, installed by setup.sh (their tests fail without them).
export GREENPIPE_ONNXRUNTIME_LIB="${GREENPIPE_ONNXRUNTIME_LIB:-$PWD/.venv/engines/libonnxruntime.so}"
export GREENPIPE_LITERT_LIB="${GREENPIPE_LITERT_LIB:-$PWD/.venv/engines/libLiteRt.so}"
# The Kubernetes control plane the k8s tests run (built from source once per machine, cached).
scripts/control-plane.sh build >/dev/null
# Helm for deploy/helm (built from the Go module proxy once per machine, cached).
scripts/helm.sh --path >/dev/null
cargo fmt --all -- --check
# cargo fmt reaches only files a plain `mod` line names; check every tracked file on its own so a
# module declared inside a macro cannot hide from the formatter.
git ls-files -z '*.rs' ':!:fuzz/' | xargs -0 -n 20 rustfmt --check --edition 2021 >/dev/null
cargo clippy --workspace --all-targets --locked -- -D warnings
# The workload without tract, as the quick start builds it (ONNX Runtime and LiteRT only).
cargo clippy -p greenpipe-workload --no-default-features --all-targets --locked -- -D warnings
cargo test -p greenpipe-workload --no-default-features --locked --lib -- model::
# Two cores: run test binaries one at a time so timing-sensitive kernel tests are not starved.
cargo test --workspace --locked --no-fail-fast -- --test-threads=2
# Unit tests for aarch64 and armv7 under qemu-user (cross builds cached in ~/.cache/greenpipe).
scripts/test-arm.sh
# The estimator on real Prometheus 3, Thanos and Mimir built from Go source (cached in
# ~/.cache/greenpipe; about 10 min cold on 2 cores, measured in docs/benchmarks.md).
scripts/test-backends.sh
