#!/usr/bin/env bash
# A real Kubernetes control plane for tests and for trying deploy/ by hand, built from source:
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok (fake kubelets).
#
#   scripts/control-plane.sh build       build (or reuse) the binaries and kwok's stage file;
#                                        print the binaries' directory, then the stage file
#
# Starting, readiness and stopping are the test harness's (tests/src/control_plane.rs); by hand,
# `cargo run -p greenpipe-tests --bin greenpipe-control-plane DIR` runs one until Ctrl-C.
# Binaries are cached outside the checkout, keyed on tests/control-plane/go.mod + go.sum, so a
# second run (and every other checkout on the machine) reuses them.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
mod="$root/tests/control-plane"
k8s_version="$(awk '$1 == "k8s.io/kubernetes" { print $2 }' "$mod/go.mod")"
key="$(cat "$mod/go.mod" "$mod/go.sum" | sha256sum | cut -c1-12)"
cache="${GREENPIPE_CONTROL_PLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/greenpipe/control-plane}"
bin="$cache/$k8s_version-$key/bin"
binaries=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok)
# kwok ships its stages (what a fake kubelet does to nodes and pods) as YAML, not built in. Its
# pod-complete stage for Job pods is written below (pod_complete_stage); the chaos stage fails
# the containers of a pod labelled pod-container-running-failed.stage.kwok.x-k8s.io=true.
kwok_stages=(node/fast/node-initialize node/heartbeat-with-lease/node-heartbeat-with-lease
  pod/fast/pod-ready pod/fast/pod-delete pod/chaos/pod-container-running-failed)
# The stage file's name changes with its contents, so a cache made with other stages is redone.
stages_file=kwok-stages-2.yaml

log() { echo "control-plane: $*" >&2; }
die() {
  log "$*"
  exit 1
}

have_binaries() {
  local b
  for b in "${binaries[@]}"; do [[ -x "$bin/$b" ]] || return 1; done
}

# kwok's pod/fast/pod-complete (a Job's pod succeeds once running), with the delay of its
# pod/general sibling read from the standard annotation pod-complete.stage.kwok.x-k8s.io/delay:
# none by default (as fast), so a test can keep a Job's pod running for a while (the campaign's
# --kubernetes steps). Weight 0: the chaos stage wins wherever it applies.
pod_complete_stage() {
  cat <<'YAML'
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-complete
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.status.phase'
      operator: 'In'
      values:
      - 'Running'
    - key: '.metadata.ownerReferences.[].kind'
      operator: 'In'
      values:
      - 'Job'
  delay:
    durationMilliseconds: 0
    durationFrom:
      expressionFrom: '.metadata.annotations["pod-complete.stage.kwok.x-k8s.io/delay"]'
  next:
    statusTemplate: |
      {{ $now := Now }}
      containerStatuses:
      {{ range $index, $item := .spec.containers }}
      - image: {{ $item.image | Quote }}
        name: {{ $item.name | Quote }}
        ready: false
        restartCount: 0
        started: false
        state:
          terminated:
            exitCode: 0
            finishedAt: {{ $now | Quote }}
            reason: Completed
            startedAt: {{ $now | Quote }}
      {{ end }}
      phase: Succeeded
---
YAML
}

# kwok's stage files come from its module source (downloaded by the build).
write_kwok_stages() {
  [[ -s "$bin/$stages_file" ]] && return 0
  local kwok_dir stage
  kwok_dir="$(cd "$mod" && go mod download -json sigs.k8s.io/kwok | python3 -c 'import json, sys; print(json.load(sys.stdin)["Dir"])')"
  {
    for stage in "${kwok_stages[@]}"; do
      cat "$kwok_dir/kustomize/stage/$stage.yaml"
      echo "---"
    done
    pod_complete_stage
  } >"$bin/$stages_file.tmp"
  mv "$bin/$stages_file.tmp" "$bin/$stages_file"
}

build() {
  have_binaries && { write_kwok_stages; return 0; }
  command -v go >/dev/null || die "go not found (Go >= 1.26 is needed to build the control plane)"
  mkdir -p "$cache"
  # One builder at a time: parallel test processes or checkouts wait for the first one.
  exec 9>"$cache/build.lock"
  flock 9
  if have_binaries; then
    write_kwok_stages
    exec 9>&-
    return 0
  fi
  local tmp start
  tmp="$(mktemp -d "$cache/build.XXXXXX")"
  start=$(date +%s)
  log "building $k8s_version binaries into $bin (first time on this machine: tens of minutes)"
  # -trimpath and -s -w: smaller binaries, and build-cache hits whatever the checkout's path.
  # Only the five commands are built; Go's module and build caches make a rebuild after a
  # version bump cheaper.
  (cd "$mod" && go build -trimpath -ldflags='-s -w' -o "$tmp/" \
    k8s.io/kubernetes/cmd/kube-apiserver \
    k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler \
    sigs.k8s.io/kwok/cmd/kwok \
    go.etcd.io/etcd/server/v3) || {
    rm -rf "$tmp"
    die "go build failed"
  }
  mv "$tmp/server" "$tmp/etcd" # go names the etcd command after its module path (…/server/v3)
  mkdir -p "$(dirname "$bin")"
  rm -rf "$bin"
  mv "$tmp" "$bin"
  write_kwok_stages
  log "built in $(($(date +%s) - start)) s"
  exec 9>&-
}

case "${1:-}" in
  build)
    build
    echo "$bin"
    echo "$bin/$stages_file"
    ;;
  *)
    die "usage: $0 build"
    ;;
esac
