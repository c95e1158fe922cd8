#!/usr/bin/env bash
# What pushing costs the exporter against being scraped (docs/benchmarks.md, "Edge push"). Runs
# the exporter at 1 s collection three ways, SECONDS each, one after the other:
#   scraped  no push, /metrics fetched once a second (as Prometheus scrapes it)
#   pushed   --push.remote-write-url to a local Prometheus (remote-write receiver), no scrapes
#   outage   --push.remote-write-url to a port nobody listens on: every sample stays on disk
# and prints, per way, CPU (utime + stime from /proc/PID/stat, after a 10 s warm-up), RSS
# (VmRSS at the end, VmHWM peak), bytes the process wrote to disk (/proc/PID/io write_bytes) and
# the buffer directory's size at the end, each also per minute.
#   scripts/push-cost.sh [SECONDS]   (default 120; EXPORTER_BIN=path, default the release build,
#   else the debug one; needs root for /proc/PID/io and Debian's prometheus for the receiver)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-120}"
target="${CARGO_TARGET_DIR:-target}"
bin="${EXPORTER_BIN:-}"
if [[ -z $bin ]]; then
  for candidate in "$target/release/greenpipe-exporter" "$target/debug/greenpipe-exporter"; do
    [[ -x $candidate ]] && { bin="$candidate"; break; }
  done
fi
[[ -n $bin && -x $bin ]] || { echo "build first: cargo build --release -p greenpipe-exporter" >&2; exit 1; }
command -v prometheus >/dev/null || { echo "needs prometheus (scripts/setup.sh installs it)" >&2; exit 1; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
work="$(mktemp -d)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

prom_port="$(free_port)"
printf 'global:\n  scrape_interval: 15s\n' >"$work/prometheus.yml"
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/tsdb" \
  --web.listen-address="127.0.0.1:$prom_port" --web.enable-remote-write-receiver \
  --log.level=warn 2>"$work/prometheus.log" &
pids+=($!)
for _ in $(seq 100); do curl -fsS "http://127.0.0.1:$prom_port/-/ready" >/dev/null 2>&1 && break; sleep 0.2; done
dead_port="$(free_port)"   # nobody listens there: the outage

cpu_seconds() { python3 -c "
import os, sys
f = open('/proc/$1/stat').read().rsplit(')', 1)[1].split()
print((int(f[11]) + int(f[12])) / os.sysconf('SC_CLK_TCK'))"; }
status_kib() { awk -v k="$2:" '$1 == k {print $2}' "/proc/$1/status"; }
write_bytes() { awk '$1 == "write_bytes:" {print $2}' "/proc/$1/io"; }

echo "exporter $bin, ${seconds} s each way, 1 s collection; $(nproc) CPUs, load $(cut -d' ' -f1 /proc/loadavg)"
printf '%-8s %12s %12s %10s %10s %14s %14s\n' way "CPU ms/s" "CPU s total" "RSS MiB" "peak MiB" "disk KiB/min" "buffer KiB"
for way in scraped pushed outage; do
  port="$(free_port)"
  buffer="$work/buffer-$way"
  args=(--web.listen-address "127.0.0.1:$port" --node-name push-cost --collection.interval 1s --log.level error)
  case $way in
    pushed) args+=(--push.remote-write-url "http://127.0.0.1:$prom_port/api/v1/write" --push.buffer.dir "$buffer") ;;
    outage) args+=(--push.remote-write-url "http://127.0.0.1:$dead_port/api/v1/write" --push.buffer.dir "$buffer" --push.max-backoff 10s) ;;
  esac
  "$bin" "${args[@]}" 2>"$work/exporter-$way.log" &
  pid=$!
  pids+=("$pid")
  url="http://127.0.0.1:$port/metrics"
  for _ in $(seq 100); do curl -fsS "$url" >/dev/null 2>&1 && break; sleep 0.1; done
  sleep 10
  [[ $way == scraped ]] && echo "series per tick: $(curl -fsS "$url" | grep -vc '^#')"
  cpu0="$(cpu_seconds "$pid")"
  disk0="$(write_bytes "$pid")"
  for _ in $(seq "$seconds"); do
    [[ $way == scraped ]] && curl -fsS "$url" >/dev/null
    sleep 1
  done
  cpu1="$(cpu_seconds "$pid")"
  disk1="$(write_bytes "$pid")"
  rss="$(status_kib "$pid" VmRSS)"
  hwm="$(status_kib "$pid" VmHWM)"
  buf=0
  [[ -d $buffer ]] && buf="$(du -sk "$buffer" | cut -f1)"
  python3 - "$way" "$cpu0" "$cpu1" "$seconds" "$rss" "$hwm" "$disk0" "$disk1" "$buf" <<'PY'
import sys
way = sys.argv[1]
cpu0, cpu1, seconds, rss, hwm, d0, d1, buf = map(float, sys.argv[2:])
print(f"{way:<8} {1000 * (cpu1 - cpu0) / seconds:12.2f} {cpu1 - cpu0:12.2f} {rss / 1024:10.1f} "
      f"{hwm / 1024:10.1f} {(d1 - d0) / 1024 / seconds * 60:14.0f} {buf:14.0f}")
PY
  kill "$pid"
  wait "$pid" 2>/dev/null || true
done
