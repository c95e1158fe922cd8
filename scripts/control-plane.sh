#!/usr/bin/env bash
# A real Kubernetes control plane for tests and for trying deploy/ by hand, built from source:
# etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok (fake kubelets).
#
#   scripts/control-plane.sh build       build (or reuse) the binaries, print their directory
#   scripts/control-plane.sh up DIR      start everything with state in DIR, wait until the API
#                                        server is ready, write DIR/kubeconfig (admin) and DIR/env
#   scripts/control-plane.sh down DIR    stop everything `up DIR` started
#
# Loopback only, free ports, certificates made here with openssl, Pod Security admission on.
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

# A free loopback TCP port (the kernel picks it; a tiny race until the daemon binds it).
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Certificates: one CA; the API server's serving certificate for 127.0.0.1/localhost; client
# certificates for the admin (system:masters), the controller manager and the scheduler (their
# RBAC bootstrap identities); the service-account signing key pair.
make_pki() {
  local pki="$1" name subj
  mkdir -p "$pki"
  (
    cd "$pki"
    openssl req -x509 -newkey rsa:2048 -nodes -days 30 -keyout ca.key -out ca.crt \
      -subj "/CN=greenpipe-test-ca" 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -keyout apiserver.key -out apiserver.csr \
      -subj "/CN=kube-apiserver" 2>/dev/null
    printf '%s\n' 'subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc' \
      'extendedKeyUsage=serverAuth' >apiserver.ext
    openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 30 \
      -extfile apiserver.ext -out apiserver.crt 2>/dev/null
    printf '%s\n' 'extendedKeyUsage=clientAuth' >client.ext
    for name in admin controller-manager scheduler; do
      case "$name" in
        admin) subj="/O=system:masters/CN=greenpipe-admin" ;;
        controller-manager) subj="/CN=system:kube-controller-manager" ;;
        scheduler) subj="/CN=system:kube-scheduler" ;;
      esac
      openssl req -newkey rsa:2048 -nodes -keyout "$name.key" -out "$name.csr" \
        -subj "$subj" 2>/dev/null
      openssl x509 -req -in "$name.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 30 \
        -extfile client.ext -out "$name.crt" 2>/dev/null
    done
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
    rm -f ./*.csr ./*.ext
  )
}

# kubeconfig PKI NAME SERVER: a kubeconfig with NAME's client certificate embedded.
kubeconfig() {
  local pki="$1" name="$2" server="$3"
  cat <<YAML
apiVersion: v1
kind: Config
clusters:
  - name: greenpipe-test
    cluster:
      server: $server
      certificate-authority-data: $(base64 -w0 <"$pki/ca.crt")
users:
  - name: $name
    user:
      client-certificate-data: $(base64 -w0 <"$pki/$name.crt")
      client-key-data: $(base64 -w0 <"$pki/$name.key")
contexts:
  - name: greenpipe-test
    context: {cluster: greenpipe-test, user: $name}
current-context: greenpipe-test
YAML
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

# Runs as the leader of a new process group (see `up`): every daemon inherits the group, so
# `down`, and the test harness, stop them all with one signal to it.
start() {
  local dir="$1"
  echo "$$" >"$dir/pgid"
  : >"$dir/pids"
  mkdir -p "$dir/logs" "$dir/etcd"
  make_pki "$dir/pki"
  local pki="$dir/pki" etcd_port peer_port api_port kwok_port server
  etcd_port=$(free_port)
  peer_port=$(free_port)
  api_port=$(free_port)
  kwok_port=$(free_port)
  server="https://127.0.0.1:$api_port"
  kubeconfig "$pki" admin "$server" >"$dir/kubeconfig"
  kubeconfig "$pki" controller-manager "$server" >"$dir/controller-manager.kubeconfig"
  kubeconfig "$pki" scheduler "$server" >"$dir/scheduler.kubeconfig"
  printf 'KUBECONFIG=%s\nAPISERVER=%s\nETCD=http://127.0.0.1:%s\nBIN=%s\n' \
    "$dir/kubeconfig" "$server" "$etcd_port" "$bin" >"$dir/env"

  # fsync off: throw-away test data, and the shared machine's disk would otherwise dominate.
  daemon "$dir" etcd "$bin/etcd" --name=default --data-dir="$dir/etcd" \
    --listen-client-urls="http://127.0.0.1:$etcd_port" \
    --advertise-client-urls="http://127.0.0.1:$etcd_port" \
    --listen-peer-urls="http://127.0.0.1:$peer_port" \
    --initial-advertise-peer-urls="http://127.0.0.1:$peer_port" \
    --initial-cluster="default=http://127.0.0.1:$peer_port" \
    --unsafe-no-fsync --log-level=warn
  # Audit log of pod and node writes: tests read exact (µs) server-side times of evictions,
  # bindings and patches from it.
  cat >"$dir/audit-policy.yaml" <<'YAML'
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: Metadata
    verbs: ["create", "delete", "patch", "update"]
    resources: [{group: "", resources: ["pods", "pods/binding", "nodes"]}]
  - level: None
YAML
  # Pod Security admission is in the default plugin set; named here so it cannot go missing.
  daemon "$dir" kube-apiserver "$bin/kube-apiserver" \
    --etcd-servers="http://127.0.0.1:$etcd_port" \
    --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$api_port" \
    --endpoint-reconciler-type=none \
    --tls-cert-file="$pki/apiserver.crt" --tls-private-key-file="$pki/apiserver.key" \
    --client-ca-file="$pki/ca.crt" \
    --authorization-mode=Node,RBAC \
    --enable-admission-plugins=NodeRestriction,PodSecurity \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$pki/sa.pub" \
    --service-account-signing-key-file="$pki/sa.key" \
    --service-cluster-ip-range=10.96.0.0/16 \
    --audit-policy-file="$dir/audit-policy.yaml" --audit-log-path="$dir/logs/audit.log" \
    --allow-privileged=true --profiling=false
  local ready=""
  for _ in $(seq 1 600); do
    alive_or_die "$dir"
    if curl -sf --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" \
      "$server/readyz" >/dev/null 2>&1; then
      ready=1
      break
    fi
    sleep 0.2
  done
  [[ -n "$ready" ]] || die "kube-apiserver not ready after 120 s; see $dir/logs/kube-apiserver.log"
  # The taint-eviction controller (NoExecute taint → evict after tolerationSeconds) is in the
  # default set; each controller uses its own service account, as in a real cluster.
  daemon "$dir" kube-controller-manager "$bin/kube-controller-manager" \
    --kubeconfig="$dir/controller-manager.kubeconfig" \
    --authentication-kubeconfig="$dir/controller-manager.kubeconfig" \
    --authorization-kubeconfig="$dir/controller-manager.kubeconfig" \
    --bind-address=127.0.0.1 --secure-port=0 --leader-elect=false \
    --use-service-account-credentials=true \
    --service-account-private-key-file="$pki/sa.key" --root-ca-file="$pki/ca.crt" \
    --controllers='*'
  daemon "$dir" kube-scheduler "$bin/kube-scheduler" \
    --kubeconfig="$dir/scheduler.kubeconfig" \
    --authentication-kubeconfig="$dir/scheduler.kubeconfig" \
    --authorization-kubeconfig="$dir/scheduler.kubeconfig" \
    --bind-address=127.0.0.1 --secure-port=0 --leader-elect=false
  # Fake kubelets for the Nodes annotated kwok.x-k8s.io/node=fake (kwok's default), nothing
  # else. Node and pod IPs are status fields only: no traffic goes to them.
  daemon "$dir" kwok "$bin/kwok" --config="$bin/$stages_file" \
    --kubeconfig="$dir/kubeconfig" \
    --manage-all-nodes=false \
    --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
    --manage-nodes-with-label-selector= \
    --server-address="127.0.0.1:$kwok_port" \
    --node-lease-duration-seconds=40 \
    --cidr=10.244.0.1/16 --node-ip=10.0.0.1
  # Usable means: the controllers run (the default ServiceAccount exists) and nothing died.
  for _ in $(seq 1 600); do
    alive_or_die "$dir"
    if kubectl --kubeconfig="$dir/kubeconfig" get serviceaccount default -n default \
      >/dev/null 2>&1; then
      log "up: $server (kubeconfig $dir/kubeconfig)"
      return 0
    fi
    sleep 0.2
  done
  die "the controller manager did not create the default ServiceAccount in 120 s"
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

# Stops the daemons in the reverse order of their start (the API server's graceful shutdown is
# quick while etcd is still up), then clears the whole process group.
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
    build
    echo "$bin"
    ;;
  up)
    [[ -n "${2:-}" ]] || die "usage: $0 up DIR"
    build
    mkdir -p "$2"
    dir="$(cd "$2" && pwd)"
    stop "$dir"
    # setsid: the daemons get a process group of their own, so `down` reaches every one.
    setsid --wait "$0" _start "$dir" || {
      stop "$dir"
      exit 1
    }
    ;;
  _start)
    start "$2"
    ;;
  down)
    [[ -n "${2:-}" ]] || die "usage: $0 down DIR"
    stop "$(cd "$2" && pwd)"
    ;;
  *)
    die "usage: $0 build | up DIR | down DIR"
    ;;
esac
