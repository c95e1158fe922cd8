#!/usr/bin/env bash
# Measures what a running exporter costs, from its own self metrics (the figures behind the
# DaemonSet's resource requests, docs/deploy.md): runs the release exporter at 1 s, scrapes it
# once a second like Prometheus does, and prints mean CPU (millicores) and peak RSS (MiB).
#   scripts/measure-exporter-overhead.sh [SECONDS]    (default 120; needs a release build,
#   or EXPORTER_BIN=path/to/greenpipe-exporter)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-120}"
bin="${EXPORTER_BIN:-target/release/greenpipe-exporter}"
[[ -x $bin ]] || { echo "build first: cargo build --release -p greenpipe-exporter" >&2; exit 1; }
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
"$bin" --web.listen-address "127.0.0.1:$port" --node-name overhead --log.level warn &
pid=$!
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true' EXIT
url="http://127.0.0.1:$port/metrics"
for _ in $(seq 50); do curl -fsS "$url" >/dev/null 2>&1 && break; sleep 0.1; done
# awk reads the whole page (no early exit) so curl never sees a closed pipe.
value() { curl -fsS "$url" | awk -v m="$1" '!found && $1 ~ "^"m"({|$)" {print $2; found = 1}'; }
cpu0="$(value greenpipe_exporter_cpu_seconds_total)"
rss_max=0
for _ in $(seq "$seconds"); do
  sleep 1
  rss="$(value greenpipe_exporter_resident_memory_bytes)"
  rss_max="$(python3 -c "print(max($rss_max, $rss))")"
done
cpu1="$(value greenpipe_exporter_cpu_seconds_total)"
python3 - "$cpu0" "$cpu1" "$seconds" "$rss_max" <<'PY'
import sys
cpu0, cpu1, seconds, rss = map(float, sys.argv[1:])
print(f"exporter over {seconds:.0f} s at 1 s collection + 1 scrape/s: "
      f"CPU {1000 * (cpu1 - cpu0) / seconds:.2f} millicores (mean), RSS {rss / 2**20:.1f} MiB (peak)")
PY
