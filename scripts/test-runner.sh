#!/usr/bin/env bash
# Cargo's runner for the host's test binaries under scripts/test.sh
# (CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUNNER): libtest then prints each test's wall time
# (`test x ... ok <12.345s>`), and scripts/test.sh lists the slowest. `--report-time` is unstable;
# stable libtest takes it where RUSTC_BOOTSTRAP is set, here for the test binary alone, so no
# build sees it (build scripts that probe for nightly, anyhow's among them, would rebuild).
set -euo pipefail
exe="$1"
shift
case " $* " in
  *" --list "*) exec "$exe" "$@" ;; # listing, not running (cargo test -- --list)
esac
RUSTC_BOOTSTRAP=1 exec "$exe" "$@" -Z unstable-options --report-time
