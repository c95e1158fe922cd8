#!/usr/bin/env bash
# Fleet-scale benchmark of `greenpipe-estimator serve` (a bench, not a test: it prints figures and
# asserts nothing). For every fleet size N it starts N real exporters with distinct node names on
# this machine, C pod-shaped cgroups (kubelet cgroupfs layout, one sleeping process each) that
# every exporter reports, P real Prometheus servers scraping the exporters every second (P > 1:
# sharded by `hashmod` over `node`, deploy/prometheus/sharding.yml) and K estimator replicas
# (`--shard i/K`, replica i reading Prometheus i mod P and writing back into it). After a warm-up
# it measures, over DURATION seconds:
#   promql ms/tick   Σ PromQL request time per tick (the estimator's own histogram, all queries;
#                    node and container queries run concurrently, so the tick waits less)
#   est cpu ms/tick  estimator user+system CPU per tick, summed over replicas
#   prom cpu ms/s    CPU of all Prometheus servers per second (scrapes, queries, remote writes)
#   expo cpu ms/s    CPU of all N exporters per second (they share this machine with the rest)
#   lag s            largest greenpipe_estimator_lag_seconds seen (now - last tick written; the
#                    default --delay of 2 s is included)
# and finally the largest N whose lag stayed at or below LAG_LIMIT with 1 s ticks (default: the
# estimator's default --delay for the engine + 1 s: 3 s on Prometheus, 6 s on Thanos).
#
# Usage (root, after scripts/setup.sh):
#   NODES="10 20 40" CONTAINERS=25 REPLICAS=1 PROMETHEUS=1 DURATION=60 scripts/scale-bench.sh
# READ_TICKS=N passes --read.ticks-per-query N (N - 1 ticks more lag by design).
# BACKEND=thanos|mimir|prometheus3 (built by scripts/backends.sh, started by greenpipe-backend;
# P must be 1): Prometheus only scrapes and
# remote-writes everything to that engine; the estimator reads through the engine's query path
# and writes back to it, with the engine's tenant header on both sides. "backend cpu ms/s" is
# then the engine's processes' CPU per second.
# PROFILE=debug uses unoptimised binaries (quick check of the script; figures not representative).
set -euo pipefail

NODES=${NODES:-"10 20 40"}
C=${CONTAINERS:-25}
K=${REPLICAS:-1}
P=${PROMETHEUS:-1}
DURATION=${DURATION:-60}
WARMUP=${WARMUP:-20}
READ_TICKS=${READ_TICKS:-1}
BACKEND=${BACKEND:-}
case "$BACKEND" in
  thanos | mimir) LAG_LIMIT=${LAG_LIMIT:-6} ;;
  *) LAG_LIMIT=${LAG_LIMIT:-3} ;;
esac
if [ -n "$BACKEND" ] && [ "$P" -ne 1 ]; then
  echo "scale-bench: BACKEND=$BACKEND takes PROMETHEUS=1 (the engine is the shared store)" >&2
  exit 2
fi

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
PROFILE=${PROFILE:-release}
profile_flag=()
[ "$PROFILE" = release ] && profile_flag=(--release)
cargo build "${profile_flag[@]}" --quiet --bin greenpipe-exporter --bin greenpipe-estimator
if [ -n "$BACKEND" ]; then
  # The test harness's engine starter (tests/src/backends.rs). A build of its own: built with the
  # two above, the tests crate's features (the exporter's fake meters) would enter theirs.
  cargo build "${profile_flag[@]}" --quiet -p greenpipe-tests --bin greenpipe-backend
fi
bin="${CARGO_TARGET_DIR:-$root/target}/$PROFILE"
work=$(mktemp -d /tmp/greenpipe-scale.XXXXXX)
if [ -n "$BACKEND" ]; then
  scripts/backends.sh build "$BACKEND" >/dev/null
fi
# The cgroup hierarchies the exporter reads: v2 (pure or hybrid's unified) and the v1
# controllers it takes usage from on hybrid hosts.
roots=()
for r in /sys/fs/cgroup /sys/fs/cgroup/unified; do
  if [ -f "$r/cgroup.controllers" ]; then roots+=("$r"); break; fi
done
for c in cpuacct memory blkio; do
  [ -f "/sys/fs/cgroup/$c/cgroup.procs" ] && roots+=("/sys/fs/cgroup/$c")
done
parent="greenpipe-scale-$$"
pids=()
sleepers=()

stop_all() {
  local pid
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  pids=()
}

backend_pid=""
# Stops greenpipe-backend, which stops the engine's daemons before it exits.
stop_backend() {
  if [ -n "$backend_pid" ]; then
    kill "$backend_pid" 2>/dev/null || true
    wait "$backend_pid" 2>/dev/null || true
    backend_pid=""
  fi
}

cleanup() {
  stop_all
  stop_backend
  local pid
  for pid in "${sleepers[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${sleepers[@]}"; do wait "$pid" 2>/dev/null || true; done
  local r
  for r in "${roots[@]}"; do
    if [ -d "$r/$parent" ]; then
      find "$r/$parent" -depth -type d -exec rmdir {} \; 2>/dev/null || true
    fi
  done
  rm -rf "$work"
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# C pod-shaped cgroups: <root>/<parent>/kubepods/burstable/pod<uid>/<64-hex id> in every
# hierarchy, one process each.
for c in $(seq 1 "$C"); do
  uid=$(printf '%08x-%04x-4000-8000-%012x' $$ "$c" "$c")
  id=$(printf '%016x%048x' $$ "$c")
  sleep infinity &
  sleepers+=($!)
  for r in "${roots[@]}"; do
    leaf="$r/$parent/kubepods/burstable/pod$uid/$id"
    mkdir -p "$leaf"
    echo "${sleepers[-1]}" > "$leaf/cgroup.procs"
  done
done

# Arithmetic on decimals (awk: no extra package).
calc() { awk "BEGIN { printf \"%.6f\", $1 }"; }

# CPU seconds (user + system) of a process.
cpu_seconds() {
  awk -v hz="$(getconf CLK_TCK)" '{ print ($14 + $15) / hz }' "/proc/$1/stat"
}

# Sum of an estimator self metric (all label sets) on a metrics URL.
metric() {
  curl -s "$1" | awk -v name="$2" '$1 == name || index($1, name "{") == 1 { s += $2 } END { print s + 0 }'
}

printf '%6s %4s %3s %3s %14s %16s %14s %14s %7s %17s\n' nodes ctrs K P "promql ms/tick" "est cpu ms/tick" "prom cpu ms/s" "expo cpu ms/s" "lag s" "backend cpu ms/s"
largest=0
for n in $NODES; do
  targets=""
  exp_pids=()
  for i in $(seq 0 $((n - 1))); do
    port=$(free_port)
    "$bin/greenpipe-exporter" --node-name "scale-$i" --no-collector.ebpf \
      --web.listen-address "127.0.0.1:$port" 2>/dev/null &
    pids+=($!)
    exp_pids+=($!)
    targets="$targets\"127.0.0.1:$port\", "
  done
  backend_pids=()
  remote_write=""
  if [ -n "$BACKEND" ]; then
    mkdir -p "$work/backend"
    "$bin/greenpipe-backend" "$work/backend" "$BACKEND" &
    backend_pid=$!
    # It writes env once the engine answers queries and takes writes; it exits if it cannot.
    until [ -f "$work/backend/env" ]; do
      kill -0 "$backend_pid" 2>/dev/null || {
        echo "scale-bench: greenpipe-backend $BACKEND failed" >&2
        exit 1
      }
      sleep 0.2
    done
    # shellcheck disable=SC1091
    source "$work/backend/env"
    mapfile -t backend_pids < <(awk '{ print $1 }' "$work/backend/pids")
    tenant=""
    if [ "$BACKEND" = thanos ]; then
      # Series Prometheus 2.42 remote-wrote with a THANOS-TENANT entry under `headers:` were
      # stored under receive's default tenant (2026-12-02, not investigated further): the
      # estimator reads and writes that tenant, where the exporters' series are.
      TENANT=default-tenant
    elif [ -n "$TENANT_HEADER" ]; then
      tenant="    headers:
      $TENANT_HEADER: $TENANT"
    fi
    # Prometheus sends a batch at the latest every 5 s by default; 1 s ticks need 1 s batches.
    remote_write="remote_write:
  - url: $WRITE_URL
    queue_config:
      batch_send_deadline: 1s
$tenant"
  fi
  prom_urls=()
  prom_pids=()
  for p in $(seq 0 $((P - 1))); do
    dir="$work/prometheus-$n-$p"
    mkdir -p "$dir"
    keep=""
    if [ "$P" -gt 1 ]; then
      keep="    metric_relabel_configs:
      - source_labels: [node]
        modulus: $P
        target_label: shard
        action: hashmod
      - source_labels: [shard]
        regex: \"$p\"
        action: keep"
    fi
    cat > "$dir/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
scrape_configs:
  - job_name: greenpipe-exporter
    scrape_interval: 1s
    scrape_timeout: 1s
    static_configs:
      - targets: [${targets%, }]
$keep
$remote_write
EOF
    port=$(free_port)
    prometheus --config.file="$dir/prometheus.yml" --storage.tsdb.path="$dir/data" \
      --web.listen-address="127.0.0.1:$port" --web.enable-remote-write-receiver \
      --storage.tsdb.retention.time=1h 2>"$dir/log" &
    pids+=($!)
    prom_pids+=($!)
    prom_urls+=("http://127.0.0.1:$port")
  done
  for url in "${prom_urls[@]}"; do
    until curl -sf "$url/-/ready" >/dev/null; do sleep 0.5; done
  done
  est_pids=()
  est_metrics=()
  for k in $(seq 0 $((K - 1))); do
    url=${prom_urls[$((k % P))]}
    read_url=$url
    write_url=$url/api/v1/write
    backend_flags=()
    if [ -n "$BACKEND" ]; then
      read_url=$READ_URL
      write_url=$WRITE_URL
      backend_flags=(--prometheus.engine "$ENGINE")
      if [ -n "$TENANT_HEADER" ]; then
        backend_flags+=(--prometheus.header "$TENANT_HEADER=$TENANT" --remote-write.header "$TENANT_HEADER=$TENANT")
      fi
    fi
    port=$(free_port)
    "$bin/greenpipe-estimator" serve --prometheus-url "$read_url" "${backend_flags[@]}" \
      --remote-write-url "$write_url" --shard "$k/$K" --interval 1s --read.ticks-per-query "$READ_TICKS" \
      --web.listen-address "127.0.0.1:$port" --log.level error 2>>"$work/estimator.log" &
    pids+=($!)
    est_pids+=($!)
    est_metrics+=("http://127.0.0.1:$port/metrics")
  done
  sleep "$WARMUP"

  snapshot() {
    local est_cpu=0 ticks=0 query=0 prom_cpu=0 exp_cpu=0 backend_cpu=0 i
    for i in "${!est_pids[@]}"; do
      est_cpu=$(calc "$est_cpu + $(cpu_seconds "${est_pids[$i]}")")
      ticks=$(calc "$ticks + $(metric "${est_metrics[$i]}" greenpipe_estimator_ticks_total)")
      query=$(calc "$query + $(metric "${est_metrics[$i]}" greenpipe_estimator_query_duration_seconds_sum)")
    done
    for i in "${prom_pids[@]}"; do
      prom_cpu=$(calc "$prom_cpu + $(cpu_seconds "$i")")
    done
    for i in "${exp_pids[@]}"; do
      exp_cpu=$(calc "$exp_cpu + $(cpu_seconds "$i")")
    done
    for i in "${backend_pids[@]}"; do
      backend_cpu=$(calc "$backend_cpu + $(cpu_seconds "$i")")
    done
    echo "$est_cpu $ticks $query $prom_cpu $exp_cpu $backend_cpu"
  }
  read -r cpu0 ticks0 query0 prom0 exp0 back0 < <(snapshot)
  t0=$(date +%s.%N)
  max_lag=0
  end=$(( $(date +%s) + DURATION ))
  while [ "$(date +%s)" -lt "$end" ]; do
    sleep 2
    for m in "${est_metrics[@]}"; do
      lag=$(metric "$m" greenpipe_estimator_lag_seconds)
      max_lag=$(calc "($lag > $max_lag) ? $lag : $max_lag")
    done
  done
  read -r cpu1 ticks1 query1 prom1 exp1 back1 < <(snapshot)
  t1=$(date +%s.%N)
  # Ticks of one replica: every replica writes every tick (of its own nodes).
  ticks=$(calc "($ticks1 - $ticks0) / $K")
  if [ "$(calc "($ticks < 1) ? 1 : 0")" = 1.000000 ]; then ticks=1; fi
  printf '%6d %4d %3d %3d %14.1f %16.1f %14.1f %14.1f %7.2f %17.1f\n' "$n" "$C" "$K" "$P" \
    "$(calc "($query1 - $query0) * 1000 / $ticks")" \
    "$(calc "($cpu1 - $cpu0) * 1000 / $ticks")" \
    "$(calc "($prom1 - $prom0) * 1000 / ($t1 - $t0)")" \
    "$(calc "($exp1 - $exp0) * 1000 / ($t1 - $t0)")" \
    "$max_lag" "$(calc "($back1 - $back0) * 1000 / ($t1 - $t0)")"
  if [ "$(calc "($max_lag <= $LAG_LIMIT) ? 1 : 0")" = 1.000000 ]; then largest=$n; fi
  stop_all
  if [ -n "$BACKEND" ]; then
    stop_backend
    rm -rf "$work/backend"
  fi
done
echo "largest fleet holding 1 s ticks with lag <= $LAG_LIMIT s: $largest nodes x $C containers ($((largest * C)) containers), K=$K, P=$P, ticks per query $READ_TICKS${BACKEND:+, backend $BACKEND}"
