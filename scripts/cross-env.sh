# Sourced by scripts/cross.sh and scripts/test-arm.sh: Debian's rustc-web toolchain, by full
# path, since rustup's shims come first on PATH and have no standard library for ARM.
CROSS_CARGO=/usr/bin/cargo
export RUSTC=/usr/bin/rustc RUSTDOC=/usr/bin/rustdoc
# rustup exports these to the processes it starts; Debian's cargo must not inherit them. Nor the
# test command's clippy-driver (scripts/test.sh): rustup's, it cannot drive Debian's compiler.
unset RUSTUP_TOOLCHAIN RUSTC_WRAPPER RUSTC_WORKSPACE_WRAPPER CLIPPY_ARGS
[[ -x "$CROSS_CARGO" && -x "$RUSTC" ]] || { echo "cross: Debian's rustc-web/cargo-web missing (scripts/setup.sh --cross TARGET)" >&2; exit 1; }
