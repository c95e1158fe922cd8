#!/usr/bin/env bash
# The tests against real storage engines built from Go source (scripts/backends.sh): Prometheus 3
# as a remote-write 2.0 receiver and as an OTLP receiver; Thanos (receive + query, tenants);
# Mimir (monolithic, tenants). scripts/test.sh runs it last; on its own it re-runs just these.
# Builds are cached under ~/.cache/greenpipe, so a second run starts at once.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
export GREENPIPE_BUILD_BPF=1
scripts/backends.sh build prometheus3 thanos mimir >/dev/null
cargo test -p greenpipe-tests --locked --features backends --test remote_write_v2 \
  --test otlp_prometheus3 --test multi_tenant_backends -- --test-threads=1
