#!/usr/bin/env bash
# The README's first command: installs what is missing, builds the exporter (release), starts it
# on :9910, prints a sample of its /metrics and keeps it running in the foreground until Ctrl-C.
#   --once (or GREENPIPE_QUICKSTART_ONCE=1): print the sample, then stop it and exit 0.
set -euo pipefail
cd "$(dirname "$0")/.."
once=${GREENPIPE_QUICKSTART_ONCE:-0}
for arg in "$@"; do
  case "$arg" in
    --once) once=1 ;;
    *) echo "usage: $0 [--once]" >&2; exit 2 ;;
  esac
done
listen=${GREENPIPE_LISTEN:-:9910}
port=${listen##*:}

scripts/setup.sh
cargo build --release --locked --bin greenpipe-exporter
target=${CARGO_TARGET_DIR:-target}

"$target/release/greenpipe-exporter" --web.listen-address "$listen" &
pid=$!
trap 'kill -TERM "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true' EXIT INT TERM

for _ in $(seq 1 50); do
  curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break
  kill -0 "$pid" 2>/dev/null || { echo "quickstart: exporter exited" >&2; exit 1; }
  sleep 0.2
done
echo "== a sample of http://127.0.0.1:$port/metrics =="
curl -fsS "http://127.0.0.1:$port/metrics" \
  | grep -E '^greenpipe_(node_cpu_seconds_total|node_memory_bytes\{[^}]*state="(total|used)"|container_[a-z_]+\{[^}]*container_id="system"|exporter_(collector_available|cpu_seconds_total|resident_memory_bytes))' \
  || true
series=$(curl -fsS "http://127.0.0.1:$port/metrics" | grep -vc '^#' || true)
echo "== $series series in total; the exporter keeps serving on $listen =="

if [[ "$once" == 1 ]]; then
  exit 0
fi
echo "Ctrl-C to stop."
wait "$pid"
