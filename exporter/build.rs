//! Compiles the BPF programs of `bpf/` with clang into `OUT_DIR`.
//!
//! `GREENPIPE_BUILD_BPF=1` (set by scripts/test.sh, so by CI) makes every failure a build error.
//! Without it, a machine lacking clang or kernel BTF gets empty stub objects so `cargo check`
//! and clippy work on a laptop; the loader refuses an empty object with a clear error, so a
//! stub can never be what runs.
//!
//! `vmlinux.h` is generated here from the build host's BTF (`bpftool btf dump`), not committed:
//! it is 5+ MB of generated text that would churn with every kernel, and CO-RE relocations make
//! the object portable to other kernels anyway. `GREENPIPE_VMLINUX_H` points at a pre-generated
//! header for hosts without BTF (e.g. cross builds for a Raspberry Pi).

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Every BPF object, by source stem (`bpf/<stem>.bpf.c` → `$OUT_DIR/<stem>.bpf.o`).
/// Keep in sync with `exporter/src/bpf/mod.rs` (one `static` per object the exporter loads;
/// `verifier_reject` is a fixture of `exporter/tests/bpf_fallback.rs`, `bench_floor` of
/// `exporter/benches/ebpf_overhead.rs`).
const BPF_OBJECTS: &[&str] = &["accounting", "verifier_reject", "bench_floor"];

fn main() {
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let bpf_dir = manifest.join("../bpf");
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("set by cargo"));
    println!("cargo:rerun-if-env-changed=GREENPIPE_BUILD_BPF");
    println!("cargo:rerun-if-env-changed=GREENPIPE_VMLINUX_H");
    println!("cargo:rerun-if-env-changed=CLANG");
    println!("cargo:rerun-if-env-changed=BPFTOOL");
    println!("cargo:rerun-if-env-changed=LLVM_STRIP");
    println!(
        "cargo:rerun-if-changed={}",
        bpf_dir.join("include").display()
    );
    let required = env::var_os("GREENPIPE_BUILD_BPF").is_some_and(|v| !v.is_empty() && v != "0");
    let result = vmlinux_header(&out).and_then(|_| {
        for stem in BPF_OBJECTS {
            let src = bpf_dir.join(format!("{stem}.bpf.c"));
            println!("cargo:rerun-if-changed={}", src.display());
            compile(&src, &bpf_dir.join("include"), &out, stem)?;
        }
        Ok(())
    });
    if let Err(err) = result {
        if required {
            panic!("GREENPIPE_BUILD_BPF is set but the BPF programs did not build: {err}");
        }
        println!(
            "cargo:warning=BPF programs not built ({err}); writing empty stubs. \
             Set GREENPIPE_BUILD_BPF=1 to make this an error."
        );
        for stem in BPF_OBJECTS {
            std::fs::write(out.join(format!("{stem}.bpf.o")), b"").expect("write stub object");
        }
    }
}

fn vmlinux_header(out: &Path) -> Result<(), String> {
    let dest = out.join("vmlinux.h");
    if let Some(given) = env::var_os("GREENPIPE_VMLINUX_H") {
        std::fs::copy(&given, &dest)
            .map_err(|e| format!("copying GREENPIPE_VMLINUX_H {given:?}: {e}"))?;
        return Ok(());
    }
    let btf = Path::new("/sys/kernel/btf/vmlinux");
    if !btf.exists() {
        return Err(format!(
            "{} absent (kernel without BTF); set GREENPIPE_VMLINUX_H",
            btf.display()
        ));
    }
    println!("cargo:rerun-if-changed={}", btf.display());
    // Debian installs bpftool in /usr/sbin, which a non-login shell's PATH may lack.
    let candidates = match env::var("BPFTOOL") {
        Ok(given) => vec![given],
        Err(_) => vec!["bpftool".to_string(), "/usr/sbin/bpftool".to_string()],
    };
    let mut last_error = String::new();
    let mut found = None;
    for bpftool in &candidates {
        match Command::new(bpftool)
            .args(["btf", "dump", "file"])
            .arg(btf)
            .args(["format", "c"])
            .output()
        {
            Ok(output) => {
                found = Some((bpftool.clone(), output));
                break;
            }
            Err(e) => last_error = format!("running {bpftool}: {e}"),
        }
    }
    let (bpftool, output) = found.ok_or(last_error)?;
    if !output.status.success() {
        return Err(format!(
            "{bpftool} btf dump failed: {}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    std::fs::write(&dest, output.stdout).map_err(|e| format!("writing {}: {e}", dest.display()))
}

fn compile(src: &Path, include: &Path, out: &Path, stem: &str) -> Result<(), String> {
    let clang = env::var("CLANG").unwrap_or_else(|_| "clang".into());
    let obj = out.join(format!("{stem}.bpf.o"));
    let output = Command::new(&clang)
        .args(["-target", "bpf", "-O2", "-g", "-Wall", "-Werror"])
        .arg(target_arch_define()?)
        .arg("-I")
        .arg(out)
        .arg("-I")
        .arg(include)
        .arg("-c")
        .arg(src)
        .arg("-o")
        .arg(&obj)
        .output()
        .map_err(|e| format!("running {clang}: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "{clang} failed on {}:\n{}",
            src.display(),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    // -g is what makes clang emit BTF, but the DWARF that comes with it is 90 % of the object
    // and is embedded in the exporter binary: drop it, keeping .BTF and .BTF.ext. An object
    // that keeps its DWARF (no llvm-strip) loads the same, so a missing tool is not an error.
    let strip = env::var("LLVM_STRIP").unwrap_or_else(|_| "llvm-strip".into());
    match Command::new(&strip).arg("-g").arg(&obj).status() {
        Ok(status) if status.success() => {}
        Ok(status) => println!("cargo:warning={strip} -g {}: {status}", obj.display()),
        Err(e) => println!("cargo:warning={strip} not run ({e}); BPF objects keep their DWARF"),
    }
    Ok(())
}

/// libbpf's `bpf_tracing.h` picks the `pt_regs` layout (PT_REGS_PARM*, BPF_KPROBE) from
/// `__TARGET_ARCH_<arch>`. The programs use BTF tracepoints, whose arguments are the same u64
/// array on every CPU, but a kprobe added later must see the layout of the CPU the exporter is
/// built for (Cargo's target, not the build host): x86, arm64 or arm.
fn target_arch_define() -> Result<String, String> {
    let arch =
        env::var("CARGO_CFG_TARGET_ARCH").map_err(|e| format!("CARGO_CFG_TARGET_ARCH: {e}"))?;
    let libbpf = match arch.as_str() {
        "x86_64" => "x86",
        "aarch64" => "arm64",
        "arm" => "arm",
        "riscv64" => "riscv",
        "powerpc64" => "powerpc",
        "s390x" => "s390",
        other => return Err(format!("no libbpf __TARGET_ARCH for target arch {other}")),
    };
    Ok(format!("-D__TARGET_ARCH_{libbpf}"))
}
