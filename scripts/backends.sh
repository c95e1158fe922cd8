#!/usr/bin/env bash
# Real metrics backends for tests and benchmarks, built from source through the Go module proxy
# (released versions) and cached outside the checkout.
#
#   scripts/backends.sh build [ENGINE...]   build (or reuse) the binaries of ENGINE (default: all
#                                           engines below), print each binary directory
#
# Starting, readiness and stopping are the test harness's (tests/src/backends.rs); a script that
# needs a running engine uses its `greenpipe-backend DIR ENGINE` binary.
#
# ENGINE: prometheus3 (Prometheus 3 as remote-write 1.0 + 2.0 and OTLP receiver); thanos
# (receive + query, multi-tenant by the THANOS-TENANT header, tenancy enforced on queries);
# mimir (monolithic, -target=all, multi-tenant by X-Scope-OrgID, blocks on the filesystem).
# Not here: vmcluster (the module proxy serves VictoriaMetrics' single-node tags only; vminsert,
# vmselect and vmstorage live in its -cluster tags, which it refuses).
#
# The cache is ${XDG_CACHE_HOME:-~/.cache}/greenpipe/NAME-VERSION.
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
  *)
    die "usage: $0 build [ENGINE...] (ENGINE: ${engines[*]})"
    ;;
esac
