#!/bin/sh
# One resource per completion index of the Indexed Job (0 cpu, 1 memory, 2 disk, 3 network),
# each swept over load levels with an idle gap between steps. Every step prints a line
#   greenpipe-profile workload=<name> start=<unix s> end=<unix s>
# so the trace extractor can label the samples with the workload that produced them.
set -eu
step="${STEP_SECONDS:-60}"
gap="${GAP_SECONDS:-15}"
index="${JOB_COMPLETION_INDEX:?run as an Indexed Job}"
cd /scratch

run() {
  name="$1"
  shift
  start="$(date +%s)"
  stress-ng "$@" --timeout "${step}s" --metrics-brief
  echo "greenpipe-profile workload=${name} start=${start} end=$(date +%s)"
  sleep "$gap"
}

idle() {
  start="$(date +%s)"
  sleep "$step"
  echo "greenpipe-profile workload=idle start=${start} end=$(date +%s)"
}

idle
case "$index" in
  0)
    for load in 25 50 75 100; do run "cpu-${load}" --cpu 0 --cpu-load "$load"; done
    run cpu-matrix --matrix 0
    ;;
  1)
    for share in 10 25 50; do run "memory-${share}" --vm 1 --vm-bytes "${share}%" --vm-keep; done
    run memory-stream --stream 1
    ;;
  2)
    run disk-write --hdd 1 --hdd-bytes 256M --hdd-opts wr-seq
    run disk-read --hdd 1 --hdd-bytes 256M --hdd-opts rd-seq
    run disk-iomix --iomix 1 --iomix-bytes 128M
    ;;
  3)
    run network-tcp --sock 2
    run network-udp --udp 2
    ;;
  *)
    echo "unknown completion index ${index}" >&2
    exit 2
    ;;
esac
