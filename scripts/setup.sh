#!/usr/bin/env bash
# Installs what GreenPipe needs on a fresh Debian 12 machine (as root), skipping what is there.
# Idempotent: safe to run before every build and test.
set -euo pipefail
# `setup.sh --cross TARGET...`: the ARM cross toolchains instead (scripts/setup-cross.sh).
if [[ ${1:-} == --cross ]]; then
  exec "$(dirname "$0")/setup-cross.sh" "${@:2}"
fi

packages=(
  clang llvm libbpf-dev bpftool   # BPF programs: compile with clang, inspect with bpftool
  prometheus                      # private Prometheus for quick start and tests (+ promtool)
  prometheus-node-exporter        # the overhead baseline in benches
  victoria-metrics                # second remote-write receiver in tests
  stress-ng                       # real load in tests and benches
  protobuf-compiler               # protoc: the workload's gRPC code and the ONNX messages
  iproute2 procps curl jq python3 python3-venv
  openssl                         # test PKI for the estimator's TLS test
  fonts-dejavu-core               # text in the PNG plots of training and carbon backtest reports
  tmux                            # a real terminal for the live view's test (tests/tests/view_tmux.rs)
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    echo "setup: missing packages ${missing[*]}; run as root or install them" >&2
    exit 1
  fi
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # A mirror mid-sync can serve an index of the wrong size (2026-12-05, longer than these tries:
  # bookworm-security armhf): retry, then install from whatever indices are there.
  for try in 1 2 3; do
    apt-get update -qq && break
    echo "setup: apt-get update failed (try $try of 3)" >&2
    sleep 20
  done
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# Debian's packages start their own services where systemd runs; ours use private instances on
# their own ports, so stop the system ones to keep the machine quiet (ignore failure: no systemd).
for svc in prometheus prometheus-node-exporter victoria-metrics; do
  systemctl stop "$svc" >/dev/null 2>&1 || true
done
command -v cargo >/dev/null || { echo "setup: cargo not found (install Rust stable)" >&2; exit 1; }
# The tests' Kubernetes control plane is built from Go source (scripts/control-plane.sh); Go is a
# test-time tool only. Debian 12's golang is too old for Kubernetes 1.36: Go >= 1.26 must be on
# PATH (it is on the project's machines).
command -v go >/dev/null || { echo "setup: go not found (Go >= 1.26 builds the test control plane)" >&2; exit 1; }
go_minor="$(go env GOVERSION | sed -E 's/^go1\.([0-9]+).*/\1/')"
((go_minor >= 26)) || { echo "setup: $(go env GOVERSION) is too old; Go >= 1.26 builds the test control plane" >&2; exit 1; }
# deploy/ checks: kubectl (kustomize) and pinned Python validators in a venv beside the checkout.
command -v kubectl >/dev/null || { echo "setup: kubectl not found (needed for kubectl kustomize)" >&2; exit 1; }
root="$(cd "$(dirname "$0")/.." && pwd)"
venv="$root/.venv"
# The venv lives once per machine in ~/.cache/greenpipe/venv, .venv a link to it, so a new clone
# (CI's) does not download and unpack the same pinned wheels again. A .venv of its own is kept.
if [[ ! -e $venv && ! -L $venv ]]; then
  cache="${XDG_CACHE_HOME:-$HOME/.cache}/greenpipe"
  mkdir -p "$cache"
  ln -s "$cache/venv" "$venv"
fi
if [[ -L $venv ]]; then
  venv="$(readlink -f "$venv")"
fi
if ! "$venv/bin/python" -c 'import kubernetes_validate, cloudcoil.models.prometheus_operator, cloudcoil.models.cert_manager, dockerfile' 2>/dev/null; then
  echo "setup: creating $venv for the deploy/ checks"
  /usr/bin/python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$root/scripts/requirements-deploy.txt"
fi
# The scikit-learn side of the forest-parity test (offline/src/parity.rs), same venv.
if ! "$venv/bin/python" -c 'import sys, pandas, sklearn; sys.exit(sklearn.__version__ != "1.9.1")' 2>/dev/null; then
  echo "setup: installing scikit-learn into $venv for the forest-parity test"
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$root/scripts/requirements-bench.txt"
fi
# The workload's C++ inference engines (greenpipe-workload --engine onnxruntime|litert) open
# these wheels' C libraries at run time; only the libraries are used, so no Python dependencies
# are installed. Linked under stable names for GREENPIPE_ONNXRUNTIME_LIB / GREENPIPE_LITERT_LIB.
engines="$venv/engines"
pinned_engines() {
  "$venv/bin/python" - "$root/scripts/requirements-engines.txt" 2>/dev/null <<'PY'
import importlib.metadata as m, sys
reqs = [l.split("#")[0].strip() for l in open(sys.argv[1])]
sys.exit(any(m.version(n) != v for n, v in (r.split("==") for r in reqs if r)))
PY
}
if ! [[ -e $engines/libonnxruntime.so && -e $engines/libLiteRt.so ]] || ! pinned_engines; then
  echo "setup: installing the ONNX Runtime and LiteRT libraries into $venv"
  "$venv/bin/pip" install -q --disable-pip-version-check --no-deps -r "$root/scripts/requirements-engines.txt"
  site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  mkdir -p "$engines"
  ln -sfn "$(ls "$site"/onnxruntime/capi/libonnxruntime.so.* | head -n1)" "$engines/libonnxruntime.so"
  ln -sfn "$site/ai_edge_litert/libLiteRt.so" "$engines/libLiteRt.so"
fi
