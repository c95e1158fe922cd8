#!/usr/bin/env bash
# The whole GreenPipe pipeline on one machine, no meter and no cluster needed:
#   setup (apt packages) -> build -> private Prometheus (loopback, own data directory,
#   1 s scrape, remote-write receiver, the rules of deploy/prometheus) -> exporter -> estimator
#   with the bundled uncalibrated profile for this board -> a short demo load in pod-shaped cgroups
#   (stress-ng, local DNN inference, a gRPC inference server and its client) -> a live view of
#   predicted node power (idle and dynamic), the top containers and joules per inference,
#   refreshed every second.
# Ctrl-C stops everything it started (each component runs in its own process group, all are
# stopped on exit); nothing is left running.
#
#   scripts/quickstart.sh                  run until Ctrl-C
#   scripts/quickstart.sh --duration 60    run 60 s, then stop (non-interactive; used by the tests)
# Options: --no-build --bin-dir DIR (use binaries built elsewhere), --prometheus-port N,
#          --run-dir DIR (kept afterwards; default: a temporary directory, removed),
#          --load-seconds N (length of the demo load, default 60).
set -euo pipefail
set +m # background jobs stay in our process group unless setsid moves them

usage() { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "quickstart: $*" >&2; exit 1; }

duration=0
build=1
bin_dir=""
prom_port=""
run_dir=""
load_seconds=60
while (($#)); do
  case "$1" in
    --duration) duration="${2:?}"; shift 2 ;;
    --no-build) build=0; shift ;;
    --bin-dir) bin_dir="${2:?}"; build=0; shift 2 ;;
    --prometheus-port) prom_port="${2:?}"; shift 2 ;;
    --run-dir) run_dir="${2:?}"; shift 2 ;;
    --load-seconds) load_seconds="${2:?}"; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; die "unknown option $1" ;;
  esac
done
[[ $duration =~ ^[0-9]+$ && $load_seconds =~ ^[0-9]+$ ]] || die "--duration and --load-seconds take whole seconds"

root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
[[ $(id -u) -eq 0 ]] || die "run as root: the exporter reads every process and the demo load runs in its own cgroups"

scripts/setup.sh
export GREENPIPE_ONNXRUNTIME_LIB="${GREENPIPE_ONNXRUNTIME_LIB:-$root/.venv/engines/libonnxruntime.so}"
export GREENPIPE_LITERT_LIB="${GREENPIPE_LITERT_LIB:-$root/.venv/engines/libLiteRt.so}"
# The quickstart profile (Cargo.toml) builds for a short first run, not for speed: opt-level 1,
# no LTO, and the workload without tract (the demo's inference runs on ONNX Runtime). The exporter and the
# estimator build first and the pipeline starts; the workload builds while the live view
# already shows predictions.
target_dir="${CARGO_TARGET_DIR:-$root/target}"
if ((build)); then
  echo "quickstart: building the exporter and the estimator (profile quickstart)"
  cargo build --profile quickstart --locked --bin greenpipe-exporter --bin greenpipe-estimator
  bin_dir="$target_dir/quickstart"
fi
bin_dir="${bin_dir:-$target_dir/quickstart}"
for b in greenpipe-exporter greenpipe-estimator; do
  [[ -x $bin_dir/$b ]] || die "$bin_dir/$b not found (build it, or drop --no-build)"
done
((build)) || [[ -x $bin_dir/greenpipe-workload ]] ||
  die "$bin_dir/greenpipe-workload not found (build it, or drop --no-build)"

keep_run_dir=1
if [[ -z $run_dir ]]; then
  run_dir="$(mktemp -d /tmp/greenpipe-quickstart.XXXXXX)"
  keep_run_dir=0
fi
mkdir -p "$run_dir"
run_dir="$(cd "$run_dir" && pwd)"
# Every process started below inherits this marker; the tests look for it to prove that
# nothing survives the quick start.
export GREENPIPE_QUICKSTART_RUN="$run_dir"

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
prom_port="${prom_port:-$(free_port)}"
exporter_port="$(free_port)"
estimator_port="$(free_port)"
prom="http://127.0.0.1:$prom_port"
# The demo's inference workloads serve /metrics here; Prometheus scrapes them with their pod
# UID, which joins inference counts to container power (joules per inference).
infer_local_port="$(free_port)"
infer_server_port="$(free_port)"
infer_int8_port="$(free_port)"
infer_grpc_port="$(free_port)"
demo_uid() { printf '7a3c9e10-0000-4000-8000-%012x' "$1"; }

groups=() # process-group ids of everything started, in start order
cgroup_top=""

stop_group() { kill "-$1" -- "-$2" 2>/dev/null || true; }
group_alive() { kill -0 -- "-$1" 2>/dev/null; }

cleanup() {
  local status=$?
  trap - EXIT INT TERM
  echo
  echo "quickstart: stopping"
  local i pg
  for ((i = ${#groups[@]} - 1; i >= 0; i--)); do stop_group TERM "${groups[i]}"; done
  for _ in $(seq 100); do
    local alive=0
    for pg in "${groups[@]}"; do group_alive "$pg" && alive=1; done
    ((alive)) || break
    sleep 0.1
  done
  for pg in "${groups[@]}"; do group_alive "$pg" && stop_group KILL "$pg"; done
  # Anything that left its process group (a daemonising child) still carries the marker.
  local pid
  for pid in $(grep -lsz "^GREENPIPE_QUICKSTART_RUN=$run_dir\$" /proc/[0-9]*/environ 2>/dev/null | cut -d/ -f3); do
    [[ $pid != "$$" ]] && kill -KILL "$pid" 2>/dev/null || true
  done
  wait 2>/dev/null || true
  if [[ -n $cgroup_top && -d $cgroup_top ]]; then
    find "$cgroup_top" -depth -type d -exec rmdir {} + 2>/dev/null || true
  fi
  if ((keep_run_dir)); then
    echo "quickstart: logs and Prometheus data kept in $run_dir"
  else
    rm -rf "$run_dir"
  fi
  echo "quickstart: everything stopped"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# start NAME CMD...: runs CMD in a new session (so its own process group), logging to the run dir.
start() {
  local name="$1"
  shift
  setsid "$@" >"$run_dir/$name.log" 2>&1 &
  groups+=("$!")
}

wait_http() {
  local url="$1" what="$2" log="$3"
  for _ in $(seq 300); do
    curl -fsS -o /dev/null "$url" 2>/dev/null && return 0
    sleep 0.1
  done
  cat "$run_dir/$log.log" >&2 || true
  die "$what did not come up at $url"
}

# --- Prometheus -----------------------------------------------------------------------------
cat >"$run_dir/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 5s
rule_files:
  - $root/deploy/prometheus/rules/*.yml
scrape_configs:
  - job_name: greenpipe-exporter
    scrape_interval: 1s
    scrape_timeout: 1s
    static_configs:
      - targets: ["127.0.0.1:$exporter_port"]
  - job_name: greenpipe-estimator
    scrape_interval: 1s
    scrape_timeout: 1s
    static_configs:
      - targets: ["127.0.0.1:$estimator_port"]
  - job_name: greenpipe-workload
    scrape_interval: 1s
    scrape_timeout: 1s
    static_configs:
      - targets: ["127.0.0.1:$infer_local_port"]
        labels: {pod_uid: "$(demo_uid 4)"}
      - targets: ["127.0.0.1:$infer_server_port"]
        labels: {pod_uid: "$(demo_uid 5)"}
      - targets: ["127.0.0.1:$infer_int8_port"]
        labels: {pod_uid: "$(demo_uid 7)"}
EOF
promtool check config "$run_dir/prometheus.yml" >/dev/null || die "generated Prometheus config is invalid"
start prometheus prometheus \
  --config.file="$run_dir/prometheus.yml" \
  --storage.tsdb.path="$run_dir/prometheus-data" \
  --storage.tsdb.retention.time=1d \
  --web.listen-address="127.0.0.1:$prom_port" \
  --web.enable-remote-write-receiver
wait_http "$prom/-/ready" Prometheus prometheus

# --- exporter and estimator -----------------------------------------------------------------
node="$(hostname)"
start exporter "$bin_dir/greenpipe-exporter" \
  --web.listen-address "127.0.0.1:$exporter_port" --node-name "$node"
wait_http "http://127.0.0.1:$exporter_port/healthz" exporter exporter

# The exporter's board detection picks the profile, so the quick start and a board's own
# exporter agree (its line: "board rpi4 (device-tree model ...); profile rpi4").
detection="$("$bin_dir/greenpipe-exporter" board)"
echo "quickstart: $detection"
profile="$(sed -n 's/.*; profile \([a-z0-9-]*\).*/\1/p' <<<"$detection")"
[[ -n "$profile" ]] || { echo "quickstart: no profile in the exporter's board line" >&2; exit 1; }
models=()
# "default" is the estimator's built-in uncalibrated profile, used when no --models is given.
[[ "$profile" == default ]] || models=(--models "$root/estimator/models/profiles/$profile.json")
start estimator "$bin_dir/greenpipe-estimator" serve \
  --prometheus-url "$prom" \
  --remote-write-url "$prom/api/v1/write" \
  "${models[@]}" \
  --interval 1s \
  --web.listen-address "127.0.0.1:$estimator_port"
wait_http "http://127.0.0.1:$estimator_port/metrics" estimator estimator

# --- demo load: stress-ng and DNN inference (local, and served over gRPC to a client), each in
# a cgroup shaped like a kubelet's pod -------------------------------------------------------
declare -A pod_names=()
cgroup2="$(awk '$3 == "cgroup2" { print $2; exit }' /proc/self/mounts)"
if [[ -n $cgroup2 && -w $cgroup2 ]]; then
  cgroup_top="$cgroup2/greenpipe-quickstart-$$"
else
  echo "quickstart: no writable cgroup v2 mount; the demo load will show up as 'system'"
fi
# demo_pod INDEX NAME PROGRAM ARGS...: runs PROGRAM in its own pod-shaped cgroup.
demo_pod() {
  local index="$1" name="$2"
  shift 2
  local uid cid
  uid="$(demo_uid "$index")"
  cid="$(printf '%s' "greenpipe-quickstart-$name" | sha256sum | cut -c1-64)"
  pod_names[$uid]="$name"
  if [[ -n $cgroup_top ]]; then
    local leaf="$cgroup_top/kubepods/besteffort/pod$uid/$cid"
    mkdir -p "$leaf"
    start "load-$name" sh -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' "$leaf" "$@"
  else
    start "load-$name" "$@"
  fi
}
# --- the workload, built while the pipeline predicts -----------------------------------------
if ((build && load_seconds > 0)); then
  # Until it is built, the live view shows the node and the host's processes.
  "$bin_dir/greenpipe-estimator" view --prometheus-url "$prom" --idle-split processes &
  early_view=$! # not a process group of its own: on Ctrl-C the marker sweep of cleanup stops it
  # The demo infers on ONNX Runtime: tract, most of the workload's build, is left out unless
  # ONNX Runtime's library is missing (a board its wheel does not exist for).
  workload_features=(--no-default-features)
  [[ -e $GREENPIPE_ONNXRUNTIME_LIB ]] || workload_features=()
  cargo build --profile quickstart --locked -p greenpipe-workload "${workload_features[@]}" \
    --bin greenpipe-workload >"$run_dir/build-workload.log" 2>&1 ||
    { kill "$early_view" 2>/dev/null; cat "$run_dir/build-workload.log" >&2; die "building greenpipe-workload failed"; }
  kill "$early_view" 2>/dev/null || true
  wait "$early_view" 2>/dev/null || true
fi

if ((load_seconds > 0)); then
  stress=(stress-ng --timeout "${load_seconds}s" --temp-path "$run_dir")
  demo_pod 1 cpu-burner "${stress[@]}" --cpu 1 --cpu-load 50
  demo_pod 2 memory-churn "${stress[@]}" --vm 1 --vm-bytes 128M
  demo_pod 3 disk-writer "${stress[@]}" --hdd 1 --hdd-bytes 64M
  workload="$bin_dir/greenpipe-workload"
  # ONNX Runtime, whose int8 kernels are faster than its f32 ones as on the boards users deploy
  # (tract's int8 path is the slower one); tract if its library is missing.
  engine=(--engine onnxruntime)
  [[ -e $GREENPIPE_ONNXRUNTIME_LIB ]] || engine=(--engine tract)
  model=(--model mobilenet_v2 "${engine[@]}" --threads 1)
  # f32 and int8 side by side, so the view shows the precision trade-off in joules.
  demo_pod 4 infer-f32 "$workload" infer "${model[@]}" --precision f32 --duration "${load_seconds}s" \
    --web.listen-address "127.0.0.1:$infer_local_port"
  demo_pod 7 infer-int8 "$workload" infer "${model[@]}" --precision int8 --duration "${load_seconds}s" \
    --web.listen-address "127.0.0.1:$infer_int8_port"
  demo_pod 5 infer-server "$workload" serve "${model[@]}" --precision int8 --duration "${load_seconds}s" \
    --grpc.listen-address "127.0.0.1:$infer_grpc_port" --web.listen-address "127.0.0.1:$infer_server_port"
  # The client's own /metrics goes to a port nobody scrapes: its requests are the server's
  # inferences, not work of its own.
  demo_pod 6 infer-client "$workload" client --target "127.0.0.1:$infer_grpc_port" \
    --model mobilenet_v2 --concurrency 1 --duration "${load_seconds}s" \
    --web.listen-address "127.0.0.1:$(free_port)"
fi

# --- live view -------------------------------------------------------------------------------
# Refreshes in place on a terminal, plain frames otherwise (greenpipe-estimator view).
view_args=(--prometheus-url "$prom" --duration "$duration" --load-seconds "$load_seconds" --idle-split processes)
for uid in "${!pod_names[@]}"; do view_args+=(--pod-name "$uid=${pod_names[$uid]}"); done
"$bin_dir/greenpipe-estimator" view "${view_args[@]}"
