#!/usr/bin/env bash
# Release tarballs, laid out as node_exporter's releases are:
#   dist/greenpipe-VERSION.linux-ARCH.tar.gz   for ARCH in amd64 arm64 armv7
#   dist/sha256sums.txt
# Each tarball holds one directory greenpipe-VERSION.linux-ARCH/ with the five binaries
# (stripped), LICENSE, the systemd unit and example config for running the exporter on a board
# outside Kubernetes (deploy/systemd/), and the bundled uncalibrated model profiles.
#
#   scripts/release.sh                  # every arch, version from Cargo.toml
#   RELEASE_ARCHES="arm64" scripts/release.sh
#   RELEASE_SKIP_BUILD=1 scripts/release.sh   # package what scripts/cross.sh already built
# Builds go through scripts/cross.sh (Debian's rustc-web for every arch, the same compiler
# for all three tarballs). The tarballs are reproducible: sorted entries, owner 0, mtime of the
# last commit.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
version="${1:-$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' Cargo.toml)}"
[[ -n "$version" ]] || { echo "release: no version given and none in Cargo.toml" >&2; exit 1; }
arches=(${RELEASE_ARCHES:-amd64 arm64 armv7})
target_dir="${CARGO_TARGET_DIR:-$root/target}"
dist="$root/dist"
mtime="$(git log -1 --format=%cI 2>/dev/null || date -u +%Y-%m-%dT%H:%M:%SZ)"
bins=(greenpipe-exporter greenpipe-estimator greenpipe-campaign greenpipe-carbon greenpipe-workload)
mkdir -p "$dist"
for arch in "${arches[@]}"; do
  case "$arch" in
    amd64) target=x86_64-unknown-linux-gnu; strip=strip ;;
    arm64) target=aarch64-unknown-linux-gnu; strip=aarch64-linux-gnu-strip ;;
    armv7) target=armv7-unknown-linux-gnueabihf; strip=arm-linux-gnueabihf-strip ;;
    *) echo "release: unknown arch '$arch' (amd64, arm64, armv7)" >&2; exit 2 ;;
  esac
  [[ -n "${RELEASE_SKIP_BUILD:-}" ]] || scripts/cross.sh "$target"
  name="greenpipe-$version.linux-$arch"
  stage="$(mktemp -d)"
  mkdir -p "$stage/$name/systemd" "$stage/$name/models"
  for bin in "${bins[@]}"; do
    src="$target_dir/$target/release/$bin"
    [[ -x "$src" ]] || { echo "release: $src missing (run scripts/cross.sh $target)" >&2; exit 1; }
    "$strip" -o "$stage/$name/$bin" "$src"
  done
  cp LICENSE "$stage/$name/"
  cp deploy/systemd/greenpipe-exporter.service "$stage/$name/systemd/"
  cp deploy/systemd/exporter.toml "$stage/$name/"
  cp estimator/models/default.json estimator/models/profiles/*.json "$stage/$name/models/"
  tar -C "$stage" --sort=name --owner=0 --group=0 --numeric-owner --mtime="$mtime" \
    -cf - "$name" | gzip -n -9 >"$dist/$name.tar.gz"
  rm -rf "$stage"
  echo "release: $dist/$name.tar.gz"
done
# sha256sums.txt covers every tarball of this version in dist/, as node_exporter's does.
(cd "$dist" && sha256sum "greenpipe-$version".linux-*.tar.gz >sha256sums.txt && cat sha256sums.txt)
