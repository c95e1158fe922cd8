#!/usr/bin/env bash
# Helm for deploy/helm/greenpipe, built from source and cached outside the checkout.
#
#   scripts/helm.sh ARGS...     run `helm ARGS...` (building it first, once per machine)
#   scripts/helm.sh --path      build (or reuse) and print the binary's path
#
# Built from the Go module proxy (helm.sh/helm/v3 cmd/helm at a released version) with the same
# ldflags as Helm's own Makefile: its version string, and the Kubernetes version that `helm
# template` and `helm lint` assume (.Capabilities.KubeVersion) taken from the client-go it is
# built with. Cached under ~/.cache/greenpipe/helm/VERSION, like scripts/control-plane.sh does for
# the control plane; change HELM_VERSION to move to another release.
set -euo pipefail

HELM_VERSION=v3.22.0
# k8s.io/client-go v0.37.x in that release's go.mod: Kubernetes 1.37.
HELM_KUBE_MAJOR=1
HELM_KUBE_MINOR=37

cache="${GREENPIPE_HELM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/greenpipe/helm}"
bin="$cache/$HELM_VERSION/bin/helm"

log() { echo "helm.sh: $*" >&2; }
die() {
  log "$*"
  exit 1
}

build() {
  [[ -x "$bin" ]] && return 0
  command -v go >/dev/null || die "go not found (Go >= 1.26 builds Helm $HELM_VERSION)"
  mkdir -p "$cache"
  # One builder at a time: parallel tests or checkouts wait for the first one.
  exec 9>"$cache/build.lock"
  flock 9
  if [[ -x "$bin" ]]; then
    exec 9>&-
    return 0
  fi
  local tmp start pkg=helm.sh/helm/v3
  tmp="$(mktemp -d "$cache/build.XXXXXX")"
  start=$(date +%s)
  log "building Helm $HELM_VERSION into $(dirname "$bin") (first time on this machine: a few minutes)"
  GOBIN="$tmp" CGO_ENABLED=0 go install -trimpath -ldflags="-s -w \
    -X $pkg/internal/version.version=$HELM_VERSION \
    -X $pkg/internal/version.gitTreeState=clean \
    -X $pkg/pkg/lint/rules.k8sVersionMajor=$HELM_KUBE_MAJOR \
    -X $pkg/pkg/lint/rules.k8sVersionMinor=$HELM_KUBE_MINOR \
    -X $pkg/pkg/chartutil.k8sVersionMajor=$HELM_KUBE_MAJOR \
    -X $pkg/pkg/chartutil.k8sVersionMinor=$HELM_KUBE_MINOR" \
    "$pkg/cmd/helm@$HELM_VERSION" || {
    rm -rf "$tmp"
    die "go install $pkg/cmd/helm@$HELM_VERSION failed"
  }
  mkdir -p "$(dirname "$(dirname "$bin")")"
  rm -rf "$(dirname "$bin")"
  mv "$tmp" "$(dirname "$bin")"
  log "built in $(($(date +%s) - start)) s"
  exec 9>&-
}

build
if [[ "${1:-}" == "--path" ]]; then
  echo "$bin"
  exit 0
fi
exec "$bin" "$@"
