#!/usr/bin/env bash
# Re-vendors cert-manager's CRDs into tests/control-plane/crds (deploy_applied_k8s.rs installs
# them so that deploy/overlays/tls, which targets cert-manager v1.17, applies to a real API server).
# Source: the Go module github.com/cert-manager/cert-manager (its deploy/crds are Helm templates
# whose directives sit in comments; the four placeholders are filled with the chart's defaults).
# Not run by CI: the rendered files are committed.
set -euo pipefail
version="${1:-v1.17.1}"
root="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
printf 'module vendor\ngo 1.22\n' >"$work/go.mod"
info="$(cd "$work" && go mod download -json "github.com/cert-manager/cert-manager@$version")"
dir="$(python3 -c 'import json, sys; print(json.loads(sys.argv[1])["Dir"])' "$info")"
sum="$(python3 -c 'import json, sys; print(json.loads(sys.argv[1])["Sum"])' "$info")"
for f in "$dir"/deploy/crds/crd-*.yaml; do
  name="$(basename "$f" .yaml)"
  out="$root/tests/control-plane/crds/cert-manager.io_${name#crd-}.yaml"
  {
    echo "# cert-manager $version CRD, from the Go module github.com/cert-manager/cert-manager@$version"
    echo "# (proxy.golang.org, $sum), deploy/crds/$(basename "$f"), its Helm placeholders"
    echo "# filled with the chart's defaults by scripts/vendor-cert-manager-crds.sh; schema unchanged."
    sed -e "s/'{{ template \"cert-manager.name\" . }}'/'cert-manager'/" \
      -e "s/'{{ .Release.Name }}'/'cert-manager'/" \
      -e "s/^    # Generated labels {{- include \"labels\" . | nindent 4 }}\$/    app.kubernetes.io\\/version: \"$version\"/" \
      -e '/^# START crd\|^# END crd\|^# {{- include\|^  # START annotations\|^  # END annotations/d' "$f"
  } >"$out.tmp"
  if grep -q '{{' "$out.tmp"; then
    echo "unrendered Helm template left in $f" >&2
    exit 1
  fi
  mv "$out.tmp" "$out"
done
