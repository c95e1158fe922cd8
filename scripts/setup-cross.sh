#!/usr/bin/env bash
# Cross toolchains for ARM boards, installed by `scripts/setup.sh --cross TARGET...` (which
# scripts/cross.sh and scripts/test-arm.sh call). Kept out of the plain setup.sh run so the main
# test setup stays fast. Idempotent, as root on Debian 12. For aarch64 it also installs
# qemu-system-arm and cpio: scripts/arm-vm.sh boots a whole arm64 machine with them.
#
# rustup's toolchain on the project's machines has only the x86-64 standard library and no other
# can be fetched, so cross builds use Debian's rustc-web (Rust 1.96, bookworm-security): its
# standard library for other CPUs comes as multiarch packages, libstd-rust-web-dev:arm64 and
# :armhf. rustc-web installs /usr/bin/rustc and cargo-web /usr/bin/cargo; rustup's shims in
# ~/.cargo/bin stay first on PATH, so scripts/cross.sh calls Debian's by full path.
set -euo pipefail
(($#)) || { echo "setup-cross: usage: setup.sh --cross TARGET..." >&2; exit 2; }

packages=(rustc-web cargo-web qemu-user-static clang llvm libbpf-dev bpftool protobuf-compiler jq)
arches=()
for target in "$@"; do
  case "$target" in
    aarch64-unknown-linux-gnu) arches+=(arm64); packages+=(gcc-aarch64-linux-gnu libc6-dev:arm64 libstd-rust-web-dev:arm64 qemu-system-arm cpio) ;;
    armv7-unknown-linux-gnueabihf) arches+=(armhf); packages+=(gcc-arm-linux-gnueabihf libc6-dev:armhf libstd-rust-web-dev:armhf) ;;
    x86_64-unknown-linux-gnu) ;;
    *) echo "setup-cross: unsupported target '$target' (aarch64-unknown-linux-gnu, armv7-unknown-linux-gnueabihf, x86_64-unknown-linux-gnu)" >&2; exit 2 ;;
  esac
done
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
((${#missing[@]})) || exit 0
if [[ $(id -u) -ne 0 ]]; then
  echo "setup-cross: missing packages ${missing[*]}; run as root or install them" >&2
  exit 1
fi
for arch in "${arches[@]}"; do
  dpkg --print-foreign-architectures | grep -qx "$arch" || dpkg --add-architecture "$arch"
done
echo "setup-cross: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# A mirror mid-sync can serve an index of the wrong size (2026-12-05, longer than these tries:
# bookworm-security armhf): retry, then install from whatever indices are there.
updated=0
for try in 1 2 3; do
  apt-get update -qq && { updated=1; break; }
  echo "setup-cross: apt-get update failed (try $try of 3)" >&2
  sleep 20
done
# A failed update keeps none of the new architectures' bookworm-security indices, and
# libstd-rust-web-dev:ARCH must be the security version of rustc-web (Multi-Arch: same), as must
# linux-libc-dev and libc6 for libc6-dev:ARCH. So each missing index is fetched here: checked
# against the signed InRelease apt did verify, and where the mirror serves a file that does not
# match it (the mid-sync case above, 2026-12-05 and 2026-12-06), used with a warning that says so.
if ((!updated)); then
  lists=/var/lib/apt/lists
  base=http://deb.debian.org/debian-security/dists/bookworm-security
  release="$lists/deb.debian.org_debian-security_dists_bookworm-security_InRelease"
  for arch in "${arches[@]}"; do
    list="$lists/deb.debian.org_debian-security_dists_bookworm-security_main_binary-${arch}_Packages"
    ls "$list"* >/dev/null 2>&1 && continue
    tmp=$(mktemp)
    curl -fsSL --retry 3 -o "$tmp" "$base/main/binary-$arch/Packages.xz"
    want=$(awk -v f="main/binary-$arch/Packages.xz" '$3 == f && length($1) == 64 { print $1; exit }' "$release")
    have=$(sha256sum "$tmp" | cut -d' ' -f1)
    if [[ -n "$want" && "$have" == "$want" ]]; then
      echo "setup-cross: bookworm-security $arch index fetched (matches the signed InRelease)" >&2
    else
      echo "setup-cross: WARNING: the mirror's bookworm-security $arch index does not match its signed InRelease (mirror mid-sync); using it unverified" >&2
    fi
    xz -dc "$tmp" >"$list"
    rm -f "$tmp"
  done
fi
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
