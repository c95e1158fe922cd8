#!/usr/bin/env bash
# A whole arm64 machine for the exporter: qemu-system-aarch64 -M virt (TCG; no KVM on x86 hosts)
# boots Debian's arm64 kernel with an initramfs made from Debian arm64 packages (busybox-static,
# libc6, libgcc-s1), mounts pure cgroup v2, starts the given aarch64 exporter, runs a busy
# process in a pod-shaped cgroup and prints what the host-side test (tests/tests/arm_vm.rs)
# checks on the serial console, between GREENPIPE-VM markers.
#   scripts/arm-vm.sh run EXPORTER [CPU]   # CPU: qemu -cpu value, default cortex-a72
#   scripts/arm-vm.sh prepare              # download + build the cached kernel and initramfs
# Cache: ~/.cache/greenpipe/arm-vm/<kernel>_<version>+busybox_<v>+libc6_<v>+libgcc-s1_<v>/
# (GREENPIPE_ARM_VM_CACHE overrides the parent), so a new Debian kernel or libc makes a new one.
# The guest's memory and CPU count: GREENPIPE_ARM_VM_MEM (MiB, 1024), GREENPIPE_ARM_VM_SMP (2).
set -euo pipefail
cd "$(dirname "$0")/.."
cmd="${1:?usage: scripts/arm-vm.sh run EXPORTER [CPU] | prepare}"

scripts/setup.sh --cross aarch64-unknown-linux-gnu
for tool in qemu-system-aarch64 cpio aarch64-linux-gnu-strip; do
  command -v "$tool" >/dev/null || { echo "arm-vm: $tool missing (scripts/setup.sh --cross aarch64-unknown-linux-gnu installs it)" >&2; exit 1; }
done

candidate() { apt-cache policy "$1" | awk '/Candidate:/ {print $2}'; }
# The kernel the linux-image-arm64 metapackage points at: Debian's current arm64 kernel.
kernel_pkg="$(apt-cache depends linux-image-arm64:arm64 | awk '/Depends: linux-image-/ {print $2; exit}')"
kernel_pkg="${kernel_pkg%:arm64}"
[[ -n "$kernel_pkg" ]] || { echo "arm-vm: no linux-image-arm64:arm64 in the apt lists (dpkg --add-architecture arm64; apt-get update)" >&2; exit 1; }
pkgs=("$kernel_pkg" busybox-static libc6 libgcc-s1)
key=""
for p in "${pkgs[@]}"; do
  v="$(candidate "$p:arm64")"
  [[ -n "$v" && "$v" != "(none)" ]] || { echo "arm-vm: no candidate for $p:arm64" >&2; exit 1; }
  key+="${key:++}${p}_${v//:/%}"
done
cache="${GREENPIPE_ARM_VM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/greenpipe/arm-vm}/$key"

prepare() {
  [[ -s "$cache/vmlinuz" && -s "$cache/base.cpio.gz" ]] && return
  local work
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' RETURN
  local start=$SECONDS
  (cd "$work" && apt-get download -qq -o APT::Sandbox::User=root "${pkgs[@]/%/:arm64}" >/dev/null)
  mkdir -p "$work/root" "$work/kernel"
  for deb in "$work"/*.deb; do
    case "$(basename "$deb")" in
      linux-image-*) dpkg-deb -x "$deb" "$work/kernel" ;;
      *) dpkg-deb -x "$deb" "$work/root" ;;
    esac
  done
  local root="$work/root"
  # Only what the exporter and busybox need: no modules (cgroup v2, BPF, BTF, perf and the PL011
  # console are built into Debian's arm64 kernel), no docs.
  rm -rf "${root:?}/usr/share" "${root:?}/etc"
  mkdir -p "$root"/{bin,dev,proc,sys,tmp,run} "$root/lib"
  # ld.so's path baked into aarch64 binaries.
  ln -sf aarch64-linux-gnu/ld-linux-aarch64.so.1 "$root/lib/ld-linux-aarch64.so.1"
  mkdir -p "$cache"
  (cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) >"$cache/base.cpio.gz.tmp"
  cp "$work"/kernel/boot/vmlinuz-* "$cache/vmlinuz.tmp"
  mv "$cache/base.cpio.gz.tmp" "$cache/base.cpio.gz"
  mv "$cache/vmlinuz.tmp" "$cache/vmlinuz"
  echo "arm-vm: kernel and initramfs for $key built in $((SECONDS - start)) s" >&2
}

# The guest's /init: pure cgroup v2, the exporter, a busy shell loop in a container-shaped cgroup.
guest_init() {
  cat <<'EOF'
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t cgroup2 cgroup2 /sys/fs/cgroup
ip link set lo up
say() { echo "GREENPIPE-VM: $*"; }
say "kernel $(uname -r) $(uname -m)"
[ -r /sys/kernel/btf/vmlinux ] && say "btf $(wc -c </sys/kernel/btf/vmlinux)"
say "pmu $(ls /sys/bus/event_source/devices | tr '\n' ' ')"
id=$(printf '%064x' 2864434397)
uid=7a1c5e2f-3b4d-4c6e-9f80-a1b2c3d4e5f6
parent=/sys/fs/cgroup/greenpipe-vm
cg=$parent/pod$uid/docker-$id.scope
mkdir -p "$cg"
for d in /sys/fs/cgroup "$parent" "$parent/pod$uid"; do
  echo "+cpu +memory +io +pids" >"$d/cgroup.subtree_control"
done
say "container $id pod $uid"
/bin/greenpipe-exporter --web.listen-address 127.0.0.1:9910 --node-name arm64-vm \
  --collection.interval 1s >/exporter.log 2>&1 &
up=
for i in $(seq 1 300); do
  if wget -q -O /m0 http://127.0.0.1:9910/metrics 2>/dev/null; then up=1; break; fi
  sleep 1
done
say "exporter up=${up:-no} after ${i} s"
cycles() { wget -q -O - http://127.0.0.1:9910/metrics | awk '/^greenpipe_exporter_collections_total/ {print int($2)}'; }
# Two whole cycles after $1 cycles: the page then holds only samples taken after the call.
settle() { c0=$(cycles); while [ "$(cycles)" -lt $((c0 + 2)) ]; do sleep 1; done; }
if [ -n "$up" ]; then
  sh -c "echo \$\$ >$cg/cgroup.procs; exec sh -c 'while :; do :; done'" &
  busy=$!
  sleep 15
  kill $busy
  wait $busy 2>/dev/null
  settle
  say "cpu.stat $(tr '\n' ' ' <"$cg/cpu.stat")"
  echo "GREENPIPE-VM-METRICS-BEGIN"
  wget -q -O - http://127.0.0.1:9910/metrics
  echo "GREENPIPE-VM-METRICS-END"
fi
echo "GREENPIPE-VM-LOG-BEGIN"
cat /exporter.log
echo "GREENPIPE-VM-LOG-END"
say "done"
poweroff -f
EOF
}

case "$cmd" in
  prepare) prepare; echo "$cache" ;;
  run)
    exporter="${2:?usage: scripts/arm-vm.sh run EXPORTER [CPU]}"
    cpu="${3:-cortex-a72}"
    prepare
    run="$(mktemp -d)"
    trap 'rm -rf "$run"' EXIT
    mkdir -p "$run/root/bin"
    # Stripped: a debug build's symbols would triple what the guest unpacks into RAM.
    aarch64-linux-gnu-strip -o "$run/root/bin/greenpipe-exporter" "$exporter"
    guest_init >"$run/root/init"
    chmod +x "$run/root/init"
    # The kernel unpacks concatenated cpio archives in order: the cached base, then this run's.
    (cd "$run/root" && find . | cpio -o -H newc --quiet | gzip -1) >"$run/run.cpio.gz"
    cat "$cache/base.cpio.gz" "$run/run.cpio.gz" >"$run/initrd.gz"
    start=$SECONDS
    # A hung guest must fail the test, not the CI job: TCG boots in tens of seconds, so 15 min
    # is far past any healthy run.
    nice -n 10 timeout 900 qemu-system-aarch64 -M virt -cpu "$cpu" \
      -smp "${GREENPIPE_ARM_VM_SMP:-2}" -m "${GREENPIPE_ARM_VM_MEM:-1024}" \
      -display none -monitor none -serial stdio -nic none -no-reboot \
      -kernel "$cache/vmlinuz" -initrd "$run/initrd.gz" \
      -append "console=ttyAMA0 rdinit=/init panic=-1 quiet" </dev/null
    echo "GREENPIPE-VM-HOST: qemu exited after $((SECONDS - start)) s"
    ;;
  *) echo "arm-vm: unknown command '$cmd' (run, prepare)" >&2; exit 2 ;;
esac
