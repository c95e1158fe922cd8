#!/usr/bin/env bash
# The tests against real storage engines built from Go source (scripts/backends.sh): Prometheus 3
# as a remote-write 2.0 receiver and as an OTLP receiver; Thanos (receive + query, tenants);
# Mimir (monolithic, tenants). scripts/test.sh runs these with the ARM end-to-end tests; on its
# own this re-runs just them.
# Builds are cached under ~/.cache/greenpipe, so a second run starts at once.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
export GREENPIPE_BUILD_BPF=1
scripts/backends.sh build prometheus3 thanos mimir >/dev/null
# The workspace selection the test command's host build made, so nothing rebuilds.
source scripts/e2e-filters.sh
cargo test --workspace --locked --test integration -- --ignored --test-threads=1 "${backend_e2e[@]}"
