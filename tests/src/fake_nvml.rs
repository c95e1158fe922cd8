//! The NVML stand-in (exporter/tests/fixtures/fake_nvml/fake_nvml.c): the real library's ABI,
//! loaded by the exporter binary through `LD_LIBRARY_PATH` as the real `libnvidia-ml.so.1` is,
//! with the values a test writes into its state file. No NVIDIA GPU can exist on the test
//! machine; this is the hardware fake the rules allow, and it speaks the real ABI.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A built stand-in and its state file, in a temporary directory removed on drop.
#[derive(Debug)]
pub struct FakeNvml {
    dir: tempfile::TempDir,
}

impl FakeNvml {
    /// Builds the library with `cc` and writes `state` (the key=value text the C file documents).
    pub fn build(state: &str) -> FakeNvml {
        let dir = tempfile::tempdir().expect("temporary directory");
        let source = crate::workspace_root().join("exporter/tests/fixtures/fake_nvml/fake_nvml.c");
        let out = Command::new("cc")
            .args(["-shared", "-fPIC", "-Wall", "-Werror", "-o"])
            .arg(dir.path().join("libnvidia-ml.so.1"))
            .arg(&source)
            .output()
            .expect("cc (gcc) is installed");
        assert!(
            out.status.success(),
            "building {}: {}",
            source.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        let fake = FakeNvml { dir };
        fake.set(state);
        fake
    }

    /// Replaces the state the library reads on its next call.
    pub fn set(&self, state: &str) {
        let tmp = self.dir.path().join("state.new");
        std::fs::write(&tmp, state).expect("writing the fake NVML state");
        std::fs::rename(&tmp, self.state()).expect("replacing the fake NVML state");
    }

    /// The state file.
    pub fn state(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    /// The directory holding `libnvidia-ml.so.1`.
    pub fn library_dir(&self) -> &Path {
        self.dir.path()
    }

    /// Makes `command` load the stand-in with this state.
    pub fn apply<'c>(&self, command: &'c mut Command) -> &'c mut Command {
        command
            .env("LD_LIBRARY_PATH", self.library_dir())
            .env("FAKE_NVML_STATE", self.state())
    }

    /// One GPU at `util_percent` busy drawing `watts`, with `procs` (`(pid, SM %)`) on it.
    pub fn one_gpu_state(watts: f64, util_percent: u32, procs: &[(u32, u32)]) -> String {
        let procs: Vec<String> = procs
            .iter()
            .map(|(pid, sm)| format!("{pid}:{sm}:1048576"))
            .collect();
        format!(
            "count=1\n0.name=NVIDIA T4\n0.uuid=GPU-1b2c3d4e-0000-1111-2222-333344445555\n\
             0.power_mw={}\n0.energy_mj=1000\n0.util_gpu={util_percent}\n0.util_mem=30\n\
             0.mem_total=16000000000\n0.mem_used=4000000000\n0.clock_sm=1590\n0.procs={}\n",
            (watts * 1e3).round() as u64,
            procs.join(",")
        )
    }
}
