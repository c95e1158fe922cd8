//! scikit-learn's answers, kept between runs.
//!
//! A seeded scikit-learn fit is a pure function of the script, the installed packages, its
//! arguments and the files it reads: the same inputs print the same JSON and write the same
//! predictions. The parity tests fit hundreds of forests on the scikit-learn side (about half
//! of their CPU time, 2026-12-06), on inputs that change only when the datasets, the folds or
//! the script do; so a test run keeps each answer under the SHA-256 of everything it depends
//! on, and a later run with the same inputs reads it instead of fitting again. Our side is
//! always computed. The bench (`benches/forest_parity.rs`) times scikit-learn's fits and keeps
//! nothing.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use sha2::{Digest, Sha256};

use super::ParityError;

/// One argument of the script.
#[derive(Debug, Clone, Copy)]
pub enum Arg<'a> {
    /// Passed as is.
    Text(&'a str),
    /// A file the script reads: its content is part of the key.
    Reads(&'a Path),
    /// A file the script writes: kept with the answer, and written again from it.
    Writes(&'a Path),
}

impl Arg<'_> {
    /// The command-line word.
    pub fn word(&self) -> &str {
        match self {
            Arg::Text(s) => s,
            Arg::Reads(p) | Arg::Writes(p) => p.to_str().unwrap_or_default(),
        }
    }
}

/// The key of one run: the script, the Python environment (its `pyvenv.cfg` and every installed
/// distribution's name and version), and each argument (a read file by its content, a written
/// one by its position alone, since its path is a temporary one).
pub fn key(python: &Path, script: &Path, args: &[Arg]) -> Result<String, ParityError> {
    let mut h = Sha256::new();
    let mut part = |tag: &str, bytes: &[u8]| {
        h.update(tag.as_bytes());
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    };
    part("script", &read(script)?);
    for (tag, bytes) in environment(python) {
        part(&tag, &bytes);
    }
    for a in args {
        match a {
            Arg::Text(s) => part("text", s.as_bytes()),
            Arg::Reads(p) => part("reads", &read(p)?),
            Arg::Writes(_) => part("writes", &[]),
        }
    }
    Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

fn read(path: &Path) -> Result<Vec<u8>, ParityError> {
    std::fs::read(path).map_err(|source| ParityError::Read {
        path: path.to_path_buf(),
        source,
    })
}

/// What identifies the Python environment of `python` (`<venv>/bin/python`): `pyvenv.cfg` (the
/// interpreter's version) and the sorted `*.dist-info` names of its site-packages (each
/// installed distribution with its version). An interpreter outside a venv contributes nothing
/// here, and its answers are keyed by the script and the inputs alone.
fn environment(python: &Path) -> Vec<(String, Vec<u8>)> {
    let Some(venv) = python.parent().and_then(Path::parent) else {
        return Vec::new();
    };
    let mut parts = Vec::new();
    if let Ok(cfg) = std::fs::read(venv.join("pyvenv.cfg")) {
        parts.push(("pyvenv.cfg".to_string(), cfg));
    }
    let mut installed: Vec<String> = std::fs::read_dir(venv.join("lib"))
        .into_iter()
        .flatten()
        .flatten()
        .flat_map(|python_dir| std::fs::read_dir(python_dir.path().join("site-packages")))
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".dist-info"))
        .collect();
    installed.sort();
    parts.push(("installed".to_string(), installed.join("\n").into_bytes()));
    parts
}

/// A directory of kept answers, one subdirectory per key: `stdout`, and `writes-<i>` for the
/// i-th written file.
#[derive(Debug, Clone)]
pub struct Answers {
    dir: PathBuf,
}

impl Answers {
    /// Answers kept in `dir` (created when the first is kept).
    pub fn in_dir(dir: impl Into<PathBuf>) -> Answers {
        Answers { dir: dir.into() }
    }

    /// The run's standard output if it was kept, its written files put back where `args` says.
    pub fn get(&self, key: &str, args: &[Arg]) -> Result<Option<String>, ParityError> {
        let entry = self.dir.join(key);
        let Ok(stdout) = std::fs::read_to_string(entry.join("stdout")) else {
            return Ok(None);
        };
        for (i, path) in written(args).enumerate() {
            let kept = entry.join(format!("writes-{i}"));
            std::fs::copy(&kept, path).map_err(|source| ParityError::Write {
                path: path.to_path_buf(),
                source,
            })?;
        }
        Ok(Some(stdout))
    }

    /// Keeps a run's standard output and the files it wrote. The entry is written under a
    /// temporary name and renamed, so a concurrent or interrupted run never sees half of one.
    pub fn put(&self, key: &str, args: &[Arg], stdout: &str) -> Result<(), ParityError> {
        let write_err = |path: &Path| {
            let path = path.to_path_buf();
            move |source| ParityError::Write { path, source }
        };
        // Unique per process and call: two test threads may keep answers at the same time.
        static STAGED: AtomicU64 = AtomicU64::new(0);
        let staging = self.dir.join(format!(
            ".staging-{}-{}",
            std::process::id(),
            STAGED.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&staging).map_err(write_err(&staging))?;
        let out = staging.join("stdout");
        std::fs::write(&out, stdout).map_err(write_err(&out))?;
        for (i, path) in written(args).enumerate() {
            let kept = staging.join(format!("writes-{i}"));
            std::fs::copy(path, &kept).map_err(|source| ParityError::Read {
                path: path.to_path_buf(),
                source,
            })?;
        }
        let entry = self.dir.join(key);
        let renamed = std::fs::rename(&staging, &entry);
        if renamed.is_err() {
            let _ = std::fs::remove_dir_all(&staging);
        }
        match renamed {
            Ok(()) => Ok(()),
            // Another run kept the same answer first.
            Err(_) if entry.join("stdout").is_file() => Ok(()),
            Err(source) => Err(ParityError::Write {
                path: entry,
                source,
            }),
        }
    }
}

fn written<'a>(args: &'a [Arg<'a>]) -> impl Iterator<Item = &'a Path> {
    args.iter().filter_map(|a| match a {
        Arg::Writes(p) => Some(*p),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parity::Sklearn;

    /// A "Python" that counts its runs in `runs` and answers with the sum of the numbers in its
    /// input file, on stdout and in its output file.
    fn counting(dir: &Path) -> Sklearn {
        let script = dir.join("sum.sh");
        std::fs::write(
            &script,
            "echo run >> \"$(dirname \"$0\")/runs\"\n\
             sum=0; while read -r n; do sum=$((sum + n)); done < \"$1\"\n\
             echo \"$sum $2\"\n\
             echo \"$sum\" > \"$3\"\n",
        )
        .unwrap();
        Sklearn {
            python: "/bin/sh".into(),
            script,
            answers: None,
        }
        .keeping_answers(Answers::in_dir(dir.join("answers")))
    }

    fn runs(dir: &Path) -> usize {
        std::fs::read_to_string(dir.join("runs"))
            .unwrap_or_default()
            .lines()
            .count()
    }

    #[test]
    fn the_same_inputs_are_answered_from_the_kept_run_and_changed_ones_are_run() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let sk = counting(d);
        let (input, output) = (d.join("in.txt"), d.join("out.txt"));
        let args = |tag| [Arg::Reads(&input), Arg::Text(tag), Arg::Writes(&output)];
        std::fs::write(&input, "1\n2\n").unwrap();

        assert_eq!(sk.run(&args("a")).unwrap(), "3 a\n");
        assert_eq!(runs(d), 1);
        // Kept: the same answer, the written file put back, nothing run.
        std::fs::remove_file(&output).unwrap();
        assert_eq!(sk.run(&args("a")).unwrap(), "3 a\n");
        assert_eq!(std::fs::read_to_string(&output).unwrap(), "3\n");
        assert_eq!(runs(d), 1);
        // Another text argument, another read content, another script: each is run.
        assert_eq!(sk.run(&args("b")).unwrap(), "3 b\n");
        assert_eq!(runs(d), 2);
        std::fs::write(&input, "1\n5\n").unwrap();
        assert_eq!(sk.run(&args("a")).unwrap(), "6 a\n");
        assert_eq!(std::fs::read_to_string(&output).unwrap(), "6\n");
        assert_eq!(runs(d), 3);
        let script = std::fs::read_to_string(&sk.script).unwrap();
        std::fs::write(&sk.script, format!("{script}# changed\n")).unwrap();
        assert_eq!(sk.run(&args("a")).unwrap(), "6 a\n");
        assert_eq!(runs(d), 4);
        // Without kept answers every call runs.
        let fresh = Sklearn {
            answers: None,
            ..sk.clone()
        };
        fresh.run(&args("a")).unwrap();
        assert_eq!(runs(d), 5);
    }

    #[test]
    fn a_failed_run_keeps_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let sk = counting(d);
        let missing = d.join("missing.txt");
        let output = d.join("out.txt");
        let args = [Arg::Reads(&missing), Arg::Text("a"), Arg::Writes(&output)];
        // The key needs the read file's content: refused before anything runs.
        assert!(matches!(sk.run(&args), Err(ParityError::Read { .. })));
        assert_eq!(runs(d), 0);
        // A script that fails is reported and not kept.
        std::fs::write(
            &sk.script,
            "echo run >> \"$(dirname \"$0\")/runs\"; exit 3\n",
        )
        .unwrap();
        std::fs::write(&missing, "1\n").unwrap();
        assert!(matches!(sk.run(&args), Err(ParityError::Python { .. })));
        assert!(matches!(sk.run(&args), Err(ParityError::Python { .. })));
        assert_eq!(runs(d), 2);
    }
}
