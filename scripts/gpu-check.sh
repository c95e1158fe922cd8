#!/usr/bin/env bash
# The GPU device check (issue 43), for a machine with an NVIDIA GPU; under 5 minutes.
#
#   scripts/gpu-check.sh [--exporter PATH] [--seconds-per-batch N]
#
# 1. runs the exporter with `--meter nvml:auto` and the gpu collector (100 ms ticks);
# 2. runs a GPU load (PyTorch, ResNet-50 fp32 inference when torchvision is there, a stack of
#    convolutions otherwise) in a cgroup shaped like a kubelet's pod;
# 3. compares the exporter's GPU energy increase with NVML's own counter, read independently
#    (ctypes on libnvidia-ml.so.1) over the same window, which starts and ends with the GPU
#    idle so the exporter's 100 ms tick cannot move the edges by more than idle power x 0.1 s:
#    within 1 %;
# 4. checks that the load's container carries the GPU utilisation (most of the GPU-busy time);
# 5. prints J per image by batch size (NVML's counter around each batch size's run).
#
# Needs root (cgroups), python3 with torch and CUDA, and a built exporter (the default is
# target/release/greenpipe-exporter; build it on a machine with a toolchain, not here). Exits
# non-zero on any failed check, naming it.
set -euo pipefail
cd "$(dirname "$0")/.."

exporter=target/release/greenpipe-exporter
seconds_per_batch=8
while (($#)); do
  case "$1" in
    --exporter) exporter="$2"; shift 2 ;;
    --seconds-per-batch) seconds_per_batch="$2"; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "gpu-check: unknown argument $1" >&2; exit 2 ;;
  esac
done

die() { echo "gpu-check: FAILED: $*" >&2; exit 1; }
[[ $(id -u) -eq 0 ]] || die "run as root: the load runs in its own cgroup"
[[ -x $exporter ]] || die "$exporter: no exporter binary (build it with cargo build --release -p greenpipe-exporter)"
python3 -c 'import ctypes; ctypes.CDLL("libnvidia-ml.so.1")' 2>/dev/null \
  || die "libnvidia-ml.so.1 does not load: no NVIDIA driver here"
python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null \
  || die "python3 has no torch with CUDA: the load cannot run"
cgroup2="$(awk '$3 == "cgroup2" { print $2; exit }' /proc/self/mounts)"
[[ -n $cgroup2 && -w $cgroup2 ]] || die "no writable cgroup v2 mount"

work="$(mktemp -d)"
top="$cgroup2/greenpipe-gpu-check-$$"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [[ -d $top ]] && find "$top" -depth -type d -exec rmdir {} + 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
"$exporter" --web.listen-address "127.0.0.1:$port" --collection.interval 100ms \
  --meter nvml:auto > "$work/exporter.log" 2>&1 &
pids+=($!)

uid="6a0e2d6e-43c1-4b8f-9c31-0a9d2b7c4e51"
cid="$(printf 'greenpipe-gpu-check' | sha256sum | cut -c1-64)"
leaf="$top/kubepods/besteffort/pod$uid/$cid"
mkdir -p "$leaf"

# Everything below is one Python program: NVML through ctypes (independent of the exporter),
# the exporter's /metrics, and the load, started in the pod's cgroup.
python3 - "$port" "$leaf" "$cid" "$seconds_per_batch" "$work" <<'PY'
import ctypes, os, re, subprocess, sys, time, urllib.request

port, leaf, cid, seconds, work = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), sys.argv[5]
failures = []

nvml = ctypes.CDLL("libnvidia-ml.so.1")
assert nvml.nvmlInit_v2() == 0, "nvmlInit_v2"
count = ctypes.c_uint()
assert nvml.nvmlDeviceGetCount_v2(ctypes.byref(count)) == 0
handles = []
for i in range(count.value):
    h = ctypes.c_void_p()
    assert nvml.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(h)) == 0
    handles.append(h)

def nvml_joules():
    total = 0.0
    for h in handles:
        mj = ctypes.c_ulonglong()
        rc = nvml.nvmlDeviceGetTotalEnergyConsumption(h, ctypes.byref(mj))
        if rc != 0:
            sys.exit(f"gpu-check: FAILED: nvmlDeviceGetTotalEnergyConsumption returned {rc}: "
                     "this GPU has no energy counter to compare with")
        total += mj.value / 1e3
    return total

def scrape():
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        return r.read().decode()

def series(text, name, must=()):
    out = []
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', line.split("}")[0])) if "{" in line else {}
        if all(labels.get(k) == v for k, v in must):
            out.append((labels, float(line.rsplit(" ", 1)[1])))
    return out

def exporter_joules():
    return sum(v for _, v in series(scrape(), "greenpipe_meter_energy_joules_total", [("kind", "nvml")]))

deadline = time.time() + 60
while True:
    try:
        text = scrape()
        if series(text, "greenpipe_meter_energy_joules_total", [("kind", "nvml")]) and \
           series(text, "greenpipe_gpu_busy_seconds_total"):
            break
    except OSError:
        pass
    if time.time() > deadline:
        sys.exit("gpu-check: FAILED: the exporter exposed no nvml meter or gpu series in 60 s; "
                 f"its log: {open(work + '/exporter.log').read()[-2000:]}")
    time.sleep(0.2)
print(f"gpu-check: {len(handles)} GPU(s); exporter on :{port}")

def settle():
    # Let at least two 100 ms ticks pass so the exporter's last sample is the idle one.
    time.sleep(0.5)

settle()
e0, n0 = exporter_joules(), nvml_joules()
busy0 = {l.get("container_id"): v for l, v in series(scrape(), "greenpipe_container_gpu_seconds_total")}

load = r'''
import ctypes, json, sys, time, torch
seconds = float(sys.argv[1])
nvml = ctypes.CDLL("libnvidia-ml.so.1"); nvml.nvmlInit_v2()
h = ctypes.c_void_p(); nvml.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(h))
def joules():
    mj = ctypes.c_ulonglong(); nvml.nvmlDeviceGetTotalEnergyConsumption(h, ctypes.byref(mj)); return mj.value / 1e3
try:
    import torchvision
    model, name = torchvision.models.resnet50(weights=None), "resnet50"
except Exception:
    layers = []
    for i in range(12):
        layers += [torch.nn.Conv2d(3 if i == 0 else 128, 128, 3, padding=1), torch.nn.ReLU()]
    model, name = torch.nn.Sequential(*layers, torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(128, 1000)), "convstack"
model = model.cuda().eval()
torch.backends.cudnn.benchmark = True
rows = []
with torch.no_grad():
    for batch in (1, 8, 32, 128):
        x = torch.randn(batch, 3, 224, 224, device="cuda")
        for _ in range(3):
            model(x)
        torch.cuda.synchronize()
        j0, t0, images = joules(), time.time(), 0
        while time.time() - t0 < seconds:
            model(x); images += batch
            if images % (batch * 8) == 0:
                torch.cuda.synchronize()
        torch.cuda.synchronize()
        dt, dj = time.time() - t0, joules() - j0
        rows.append({"model": name, "batch": batch, "images": images, "seconds": dt, "joules": dj})
print(json.dumps(rows))
'''
open(work + "/load.py", "w").write(load)
proc = subprocess.run(
    ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec python3 "$1" "$2"', leaf, work + "/load.py", str(seconds)],
    capture_output=True, text=True)
if proc.returncode != 0:
    sys.exit(f"gpu-check: FAILED: the load exited {proc.returncode}: {proc.stderr[-2000:]}")
rows = __import__("json").loads(proc.stdout.strip().splitlines()[-1])

settle()
e1, n1 = exporter_joules(), nvml_joules()
busy1 = {l.get("container_id"): v for l, v in series(scrape(), "greenpipe_container_gpu_seconds_total")}

de, dn = e1 - e0, n1 - n0
gap = abs(de - dn) / dn if dn > 0 else float("inf")
print(f"gpu-check: GPU energy over the window: exporter {de:.1f} J, NVML {dn:.1f} J, gap {gap * 100:.3f} %")
if gap > 0.01:
    failures.append(f"exporter energy {de:.1f} J vs NVML {dn:.1f} J: {gap * 100:.2f} % > 1 %")

grew = {k: busy1.get(k, 0.0) - busy0.get(k, 0.0) for k in busy1}
mine, total = grew.get(cid, 0.0), sum(grew.values())
print(f"gpu-check: GPU-busy seconds in the window: load's container {mine:.2f} of {total:.2f} "
      f"({', '.join(f'{k[:12]}={v:.2f}' for k, v in sorted(grew.items()))})")
if mine <= 0 or mine < 0.5 * total:
    failures.append(f"the load's container got {mine:.2f} of {total:.2f} GPU-busy seconds")

print("gpu-check: energy per image (GPU 0, NVML counter around each run)")
print(f"{'model':<10} {'batch':>5} {'images':>8} {'img/s':>9} {'W':>7} {'J/image':>9}")
for r in rows:
    print(f"{r['model']:<10} {r['batch']:>5} {r['images']:>8} {r['images'] / r['seconds']:>9.1f} "
          f"{r['joules'] / r['seconds']:>7.1f} {r['joules'] / r['images']:>9.4f}")
if failures:
    sys.exit("gpu-check: FAILED: " + "; ".join(failures))
print("gpu-check: passed")
PY
