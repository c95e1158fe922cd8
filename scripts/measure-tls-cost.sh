#!/usr/bin/env bash
# CPU the exporter spends per scrape: plain HTTP vs TLS with a new connection per scrape
# (handshake + scrape, what Prometheus does when keep-alive is off or the connection was closed)
# vs TLS on a kept-alive connection (scrape only). Reads the exporter's utime+stime from
# /proc/<pid>/stat around N scrapes; the sampler runs once an hour so it does not add noise.
#   scripts/measure-tls-cost.sh [N] [EXPORTER_BINARY]     (default 400, target/debug; an absolute path:
#   the script runs in a temporary directory)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
n="${1:-400}"
bin="${2:-$root/target/debug/greenpipe-exporter}"
dir="$(mktemp -d)"
trap 'kill $plain $tls 2>/dev/null || true; rm -rf "$dir"' EXIT
cd "$dir"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 \
  -subj /CN=ca -keyout ca.key -out ca.pem 2>/dev/null
openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj /CN=127.0.0.1 \
  -keyout server.key -out server.csr 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' > ext
openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 1 \
  -out server.pem -extfile ext 2>/dev/null
printf 'tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\n' > web.yml
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
p1=$(free_port); p2=$(free_port)
"$bin" --web.listen-address "127.0.0.1:$p1" --collection.interval 1h 2>/dev/null & plain=$!
"$bin" --web.listen-address "127.0.0.1:$p2" --collection.interval 1h --web.config.file web.yml 2>/dev/null & tls=$!
for _ in $(seq 100); do
  curl -sf "http://127.0.0.1:$p1/metrics" >/dev/null && curl -sfk "https://127.0.0.1:$p2/metrics" >/dev/null && break
  sleep 0.2
done
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
measure() { # pid, label, curl args...
  local pid=$1 label=$2; shift 2
  local before after
  before=$(ticks "$pid")
  "$@"
  after=$(ticks "$pid")
  awk -v b="$before" -v a="$after" -v n="$n" -v hz="$hz" -v l="$label" \
    'BEGIN { printf "%-34s %8.3f ms CPU per scrape (%d scrapes)\n", l, (a - b) * 1000 / hz / n, n }'
}
urls() { for _ in $(seq "$n"); do printf '%s ' "$1"; done; }
new_conn() { for _ in $(seq "$n"); do curl -sf --cacert ca.pem "$1" >/dev/null; done; }
# One curl, one connection, n requests.
# shellcheck disable=SC2046
kept() { curl -sf --cacert ca.pem $(urls "$1") >/dev/null; }
measure "$plain" "plain HTTP, new connection" new_conn "http://127.0.0.1:$p1/metrics"
measure "$tls" "TLS, new connection (handshake)" new_conn "https://127.0.0.1:$p2/metrics"
measure "$tls" "TLS, kept-alive connection" kept "https://127.0.0.1:$p2/metrics"
measure "$plain" "plain HTTP, kept-alive connection" kept "http://127.0.0.1:$p1/metrics"
