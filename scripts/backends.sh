#!/usr/bin/env bash
# Real metrics backends for tests and for trying the estimator by hand, built from source through
# the Go module proxy (released versions) and cached outside the checkout.
#
#   scripts/backends.sh build [ENGINE...]   build (or reuse) the binaries of ENGINE (default: all
#                                           engines below), print each binary directory
#   scripts/backends.sh up DIR ENGINE       start ENGINE with state in DIR, wait until it answers
#                                           queries and takes remote writes, write DIR/env
#   scripts/backends.sh down DIR            stop everything `up DIR` started
#
# ENGINE: prometheus3 (Prometheus 3 as remote-write 1.0 + 2.0 and OTLP receiver); thanos
# (receive + query, multi-tenant by the THANOS-TENANT header, tenancy enforced on queries);
# mimir (monolithic, -target=all, multi-tenant by X-Scope-OrgID, blocks on the filesystem).
# Not here: vmcluster (the module proxy serves VictoriaMetrics' single-node tags only; vminsert,
# vmselect and vmstorage live in its -cluster tags, which it refuses).
#
# DIR/env holds shell assignments: READ_URL (a Prometheus-compatible query root), WRITE_URL
# (remote-write URL), TENANT_HEADER and TENANT (empty when the engine has none), ENGINE (the
# value for the estimator's --prometheus.engine), plus OTLP_URL where the engine takes OTLP.
#
# Loopback only, free ports. The cache is ${XDG_CACHE_HOME:-~/.cache}/greenpipe/NAME-VERSION.
set -euo pipefail

cache_root="${GREENPIPE_BACKENDS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/greenpipe}"
# Prometheus 3.x is published to the module proxy as v0.3XX.Y (3.16.0 = v0.316.0).
prometheus_module=github.com/prometheus/prometheus
prometheus_version=v0.316.0
# The newest Thanos whose go.mod this machine's Go 1.26.8 accepts (v0.42.5 wants 1.26.10).
thanos_module=github.com/thanos-io/thanos
thanos_version=v0.42.0
# Mimir's release tags (mimir-3.0.5) are not semver, so the proxy serves no release; @latest is
# this pseudo-version of main (2026-04-23), whose VERSION file says 3.0.5.
mimir_module=github.com/grafana/mimir
mimir_version=v1.3.1-0.20260423142704-aced80d74930
engines=(prometheus3 thanos mimir)

log() { echo "backends: $*" >&2; }
die() {
  log "$*"
  exit 1
}

bin_dir() {
  case "$1" in
    prometheus3) echo "$cache_root/prometheus-$prometheus_version" ;;
    thanos) echo "$cache_root/thanos-$thanos_version" ;;
    mimir) echo "$cache_root/mimir-$mimir_version" ;;
    *) die "unknown engine '$1' (known: ${engines[*]})" ;;
  esac
}

binaries() {
  case "$1" in
    prometheus3) echo prometheus ;;
    thanos) echo thanos ;;
    mimir) echo mimir ;;
  esac
}

have_binaries() {
  local dir b
  dir="$(bin_dir "$1")"
  for b in $(binaries "$1"); do [[ -x "$dir/$b" ]] || return 1; done
}

# module_dir MODULE VERSION: the module's source in Go's module cache (downloaded once).
module_dir() {
  GOWORK=off GOFLAGS=-mod=mod go mod download -json "$1@$2" |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["Dir"])'
}

# go_build ENGINE TMP: builds ENGINE's commands into TMP, from the released module's own go.mod
# and go.sum (its pinned dependencies), in the read-only module cache.
go_build() {
  local engine="$1" tmp="$2" src
  # GOWORK=off: Prometheus ships a go.work naming its tool modules; the command needs none.
  # GOTOOLCHAIN=local: never fetch another Go. -trimpath and -s -w: smaller binaries and
  # build-cache hits whatever the path.
  export GOWORK=off GOTOOLCHAIN=local GOFLAGS=-mod=readonly
  case "$engine" in
    prometheus3)
      src="$(module_dir "$prometheus_module" "$prometheus_version")"
      # Without the builtinassets tag the web UI is served from disk (absent here): the API,
      # remote-write and OTLP receivers are unaffected, and no Node.js build is needed.
      # remove_all_sd (plugins/*.go): the receivers need no service discovery, and the cloud
      # SDKs (AWS, Azure, GCE, Kubernetes client-go ...) are most of the cold build.
      (cd "$src" && go build -trimpath -tags remove_all_sd -o "$tmp/prometheus" -ldflags="-s -w \
        -X github.com/prometheus/common/version.Version=$(cat VERSION) \
        -X github.com/prometheus/common/version.Branch=release \
        -X github.com/prometheus/common/version.Revision=$prometheus_version" ./cmd/prometheus)
      ;;
    thanos)
      src="$(module_dir "$thanos_module" "$thanos_version")"
      # Its release build's tags (.promu.yml): Thanos' gRPC codec casts label sets unsafely,
      # assuming Prometheus' slice labels; without the tag receive panics in Marshal on the
      # first query.
      (cd "$src" && go build -trimpath -tags netgo,slicelabels -o "$tmp/thanos" -ldflags="-s -w \
        -X github.com/prometheus/common/version.Version=${thanos_version#v} \
        -X github.com/prometheus/common/version.Branch=release \
        -X github.com/prometheus/common/version.Revision=$thanos_version" ./cmd/thanos)
      ;;
    mimir)
      src="$(module_dir "$mimir_module" "$mimir_version")"
      # The release build's tags (Makefile GO_TAGS); stringlabels matches mimir-prometheus' labels.
      (cd "$src" && CGO_ENABLED=0 go build -trimpath -tags netgo,stringlabels -o "$tmp/mimir" \
        -ldflags="-s -w -X github.com/grafana/mimir/pkg/util/version.Version=$(cat VERSION) \
        -X github.com/grafana/mimir/pkg/util/version.Branch=main \
        -X github.com/grafana/mimir/pkg/util/version.Revision=$mimir_version" ./cmd/mimir)
      ;;
  esac
}

build_one() {
  local engine="$1" dir
  dir="$(bin_dir "$engine")"
  have_binaries "$engine" && return 0
  command -v go >/dev/null || die "go not found (Go >= 1.26 builds the backends)"
  mkdir -p "$cache_root"
  # One builder at a time: parallel test processes or checkouts wait for the first one.
  exec 8>"$cache_root/backends-build.lock"
  flock 8
  if have_binaries "$engine"; then
    exec 8>&-
    return 0
  fi
  local tmp start
  tmp="$(mktemp -d "$cache_root/build.XXXXXX")"
  start=$(date +%s)
  log "building $engine into $dir (first time on this machine: minutes)"
  go_build "$engine" "$tmp" || {
    rm -rf "$tmp"
    die "go build of $engine failed"
  }
  rm -rf "$dir"
  mv "$tmp" "$dir"
  log "built $engine in $(($(date +%s) - start)) s"
  exec 8>&-
}

# A free loopback TCP port (the kernel picks it; a tiny race until the daemon binds it).
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# daemon DIR NAME CMD...: starts CMD in the background (in this process group), logging to
# DIR/logs/NAME.log.
daemon() {
  local dir="$1" name="$2"
  shift 2
  "$@" >"$dir/logs/$name.log" 2>&1 </dev/null &
  echo "$! $name" >>"$dir/pids"
}

alive_or_die() {
  local dir="$1" pid name
  while read -r pid name; do
    kill -0 "$pid" 2>/dev/null || die "$name exited; last lines of $dir/logs/$name.log:
$(tail -n 20 "$dir/logs/$name.log")"
  done <"$dir/pids"
}

# wait_ready DIR WHAT URL: polls URL (GET) until it answers 2xx, for up to 120 s.
wait_ready() {
  local dir="$1" what="$2" url="$3"
  for _ in $(seq 1 600); do
    alive_or_die "$dir"
    curl -sf "$url" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  die "$what not ready after 120 s ($url); see $dir/logs"
}

start_prometheus3() {
  local dir="$1" bin port url
  bin="$(bin_dir prometheus3)"
  port=$(free_port)
  url="http://127.0.0.1:$port"
  mkdir -p "$dir/data"
  # No scrape targets: it only receives. The out-of-order window lets a restarted estimator
  # write back the ticks it missed, older than the newest ones already stored.
  cat >"$dir/prometheus.yml" <<'YAML'
global:
  scrape_interval: 15s
storage:
  tsdb:
    out_of_order_time_window: 2h
YAML
  daemon "$dir" prometheus "$bin/prometheus" \
    --config.file="$dir/prometheus.yml" \
    --storage.tsdb.path="$dir/data" \
    --web.listen-address="127.0.0.1:$port" \
    --web.enable-remote-write-receiver \
    --web.remote-write-receiver.accepted-protobuf-messages=prometheus.WriteRequest \
    --web.remote-write-receiver.accepted-protobuf-messages=io.prometheus.write.v2.Request \
    --web.enable-otlp-receiver \
    --log.level=warn
  wait_ready "$dir" prometheus "$url/-/ready"
  printf 'READ_URL=%s\nWRITE_URL=%s\nOTLP_URL=%s\nTENANT_HEADER=\nTENANT=\nENGINE=prometheus\n' \
    "$url" "$url/api/v1/write" "$url/api/v1/otlp/v1/metrics" >"$dir/env"
  log "up: prometheus3 at $url"
}

# Thanos receive (one ingesting receiver, tenants by THANOS-TENANT, stored with a tenant_id
# label) and Thanos query over it, enforcing tenancy: a query sees only its tenant's series.
start_thanos() {
  local dir="$1" bin rw http grpc qhttp qgrpc
  bin="$(bin_dir thanos)"
  rw=$(free_port)
  http=$(free_port)
  grpc=$(free_port)
  qhttp=$(free_port)
  qgrpc=$(free_port)
  mkdir -p "$dir/receive"
  daemon "$dir" thanos-receive "$bin/thanos" receive \
    --tsdb.path="$dir/receive" \
    --remote-write.address="127.0.0.1:$rw" \
    --http-address="127.0.0.1:$http" \
    --grpc-address="127.0.0.1:$grpc" \
    --label='receive_replica="0"' \
    --receive.tenant-header=THANOS-TENANT \
    --tsdb.out-of-order.time-window=2h \
    --log.level=warn
  wait_ready "$dir" thanos-receive "http://127.0.0.1:$http/-/ready"
  daemon "$dir" thanos-query "$bin/thanos" query \
    --http-address="127.0.0.1:$qhttp" \
    --grpc-address="127.0.0.1:$qgrpc" \
    --endpoint="127.0.0.1:$grpc" \
    --query.enforce-tenancy \
    --query.tenant-header=THANOS-TENANT \
    --log.level=warn
  wait_ready "$dir" thanos-query "http://127.0.0.1:$qhttp/-/ready"
  printf 'READ_URL=%s\nWRITE_URL=%s\nTENANT_HEADER=THANOS-TENANT\nTENANT=tenant-a\nENGINE=thanos\n' \
    "http://127.0.0.1:$qhttp" "http://127.0.0.1:$rw/api/v1/receive" >"$dir/env"
  log "up: thanos query at http://127.0.0.1:$qhttp, receive at http://127.0.0.1:$rw"
}

# Mimir in one process (-target=all: distributor, ingester, querier, query-frontend,
# store-gateway, compactor), multi-tenant (X-Scope-OrgID required), blocks on the local
# filesystem, its rings gossiped by memberlist on loopback only. Queries go through the query
# frontend under /prometheus, writes to /api/v1/push.
start_mimir() {
  local dir="$1" bin http grpc gossip
  bin="$(bin_dir mimir)"
  http=$(free_port)
  grpc=$(free_port)
  gossip=$(free_port)
  mkdir -p "$dir/mimir"
  cat >"$dir/mimir.yaml" <<YAML
target: all
multitenancy_enabled: true
server:
  http_listen_address: 127.0.0.1
  http_listen_port: $http
  grpc_listen_address: 127.0.0.1
  grpc_listen_port: $grpc
  log_level: warn
memberlist:
  bind_addr: [127.0.0.1]
  bind_port: $gossip
  advertise_addr: 127.0.0.1
  advertise_port: $gossip
distributor:
  ring:
    instance_addr: 127.0.0.1
ingester:
  ring:
    instance_addr: 127.0.0.1
    replication_factor: 1
    # One ingester: ready as soon as it has joined, nothing to hand over on stop.
    min_ready_duration: 0s
    final_sleep: 0s
store_gateway:
  sharding_ring:
    instance_addr: 127.0.0.1
    replication_factor: 1
compactor:
  data_dir: $dir/mimir/compactor
  sharding_ring:
    instance_addr: 127.0.0.1
frontend:
  address: 127.0.0.1
blocks_storage:
  backend: filesystem
  filesystem:
    dir: $dir/mimir/blocks
  tsdb:
    dir: $dir/mimir/tsdb
  bucket_store:
    sync_dir: $dir/mimir/tsdb-sync
ruler_storage:
  backend: filesystem
  filesystem:
    dir: $dir/mimir/rules
# Their defaults are relative to the working directory (./metrics-activity.log, ./data-ruler/).
activity_tracker:
  filepath: $dir/mimir/metrics-activity.log
ruler:
  rule_path: $dir/mimir/data-ruler
limits:
  # A restarted estimator writes back the ticks it missed, older than the newest ones stored.
  out_of_order_time_window: 2h
YAML
  # Started in its state directory, so that any other relative default path lands there too.
  daemon "$dir" mimir sh -c 'cd "$0" && exec "$@"' "$dir/mimir" "$bin/mimir" -config.file="$dir/mimir.yaml"
  wait_ready "$dir" mimir "http://127.0.0.1:$http/ready"
  printf 'READ_URL=%s\nWRITE_URL=%s\nTENANT_HEADER=X-Scope-OrgID\nTENANT=tenant-a\nENGINE=mimir\n' \
    "http://127.0.0.1:$http/prometheus" "http://127.0.0.1:$http/api/v1/push" >"$dir/env"
  log "up: mimir at http://127.0.0.1:$http (queries under /prometheus, writes to /api/v1/push)"
}

# Runs as the leader of a new process group (see `up`): every daemon inherits the group, so
# `down`, and the test harness, stop them all with one signal to it.
start() {
  local dir="$1" engine="$2"
  echo "$$" >"$dir/pgid"
  : >"$dir/pids"
  mkdir -p "$dir/logs"
  rm -f "$dir/env"
  "start_$engine" "$dir"
}

# stop_pid PID SECONDS: SIGTERM, wait up to SECONDS for it to exit.
stop_pid() {
  local pid="$1" tries=$(($2 * 10))
  kill -TERM "$pid" 2>/dev/null || return 0
  while ((tries-- > 0)); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  return 1
}

# Stops the daemons in the reverse order of their start, then clears the whole process group.
stop() {
  local dir="$1" pgid pid name
  [[ -f "$dir/pgid" ]] || return 0
  pgid="$(cat "$dir/pgid")"
  if [[ -f "$dir/pids" ]]; then
    tac "$dir/pids" | while read -r pid name; do
      stop_pid "$pid" 10 || log "down: $name ($pid) ignored SIGTERM for 10 s"
    done
  fi
  kill -KILL -- "-$pgid" 2>/dev/null || true
  for _ in $(seq 1 50); do
    kill -0 -- "-$pgid" 2>/dev/null || break
    sleep 0.1
  done
  rm -f "$dir/pgid"
}

case "${1:-}" in
  build)
    shift
    (($#)) || set -- "${engines[@]}"
    for engine in "$@"; do
      bin_dir "$engine" >/dev/null
      build_one "$engine"
      bin_dir "$engine"
    done
    ;;
  up)
    [[ -n "${2:-}" && -n "${3:-}" ]] || die "usage: $0 up DIR ENGINE (ENGINE: ${engines[*]})"
    bin_dir "$3" >/dev/null
    build_one "$3"
    mkdir -p "$2"
    dir="$(cd "$2" && pwd)"
    stop "$dir"
    # setsid: the daemons get a process group of their own, so `down` reaches every one.
    setsid --wait "$0" _start "$dir" "$3" || {
      stop "$dir"
      exit 1
    }
    ;;
  _start)
    start "$2" "$3"
    ;;
  down)
    [[ -n "${2:-}" ]] || die "usage: $0 down DIR"
    stop "$(cd "$2" && pwd)"
    ;;
  *)
    die "usage: $0 build [ENGINE...] | up DIR ENGINE | down DIR (ENGINE: ${engines[*]})"
    ;;
esac
