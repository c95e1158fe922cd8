//! The models in force, and noticing when the operator (or `recalibrate`) changed them.
//!
//! `--models` names files and directories (the flag may be repeated). A directory holds any
//! number of model files (`*.json`, dot-files ignored, symlinks followed); their models are
//! merged in the order given, a directory's files in name order, and where several files hold a
//! model of the same name the highest version wins. That is how a recalibrated version
//! (`recalibrate` writes `NAME.vN.json`) supersedes its parent without anybody editing the
//! original file, also when the original is a read-only ConfigMap and the versions go to a
//! writable volume (`--models /etc/greenpipe/models/rpi4.json --models /var/lib/greenpipe/models`).
//!
//! Change detection is a `stat` of every file per poll (`serve` polls at every tick boundary),
//! comparing device, inode, size and modification time. Inotify would be cheaper on an idle
//! node but misses the ConfigMap case, where the kubelet swaps the `..data` symlink of the
//! mounted directory: the files' names stay, what they resolve to changes, and only a stat
//! through the symlink sees it. A file that fails to load is refused and named; in a directory
//! the file's last good contents stay in force, so a corrupt new version changes nothing.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use greenpipe_common::model::{ModelFile, NodeModel, SCHEMA_VERSION};

use crate::models;

/// What identifies one file's contents without reading it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime_ns: i128,
}

fn stamp(path: &Path) -> Option<Stamp> {
    let m = std::fs::metadata(path).ok()?;
    Some(Stamp {
        dev: m.dev(),
        ino: m.ino(),
        len: m.len(),
        mtime_ns: m.mtime() as i128 * 1_000_000_000 + m.mtime_nsec() as i128,
    })
}

/// A model file that was not loaded, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    /// The file.
    pub file: PathBuf,
    /// The error, with its context chain.
    pub error: String,
}

/// What a poll found.
#[derive(Debug, Default)]
pub struct Poll {
    /// A model set different from the one in force (not yet in force: see
    /// [`ModelRegistry::apply`]).
    pub candidate: Option<ModelFile>,
    /// Files that changed and could not be loaded.
    pub refused: Vec<Refusal>,
}

/// Why the model set could not be (re)loaded.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// A file named explicitly (or the bundled profile) did not load.
    #[error(transparent)]
    Load(#[from] models::LoadError),
    /// A `--models` directory could not be listed.
    #[error("listing {}", path.display())]
    List {
        /// The directory.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// No file of the set loaded.
    #[error("{paths:?} hold no loadable model file")]
    NothingLoadable {
        /// `--models`.
        paths: Vec<PathBuf>,
    },
}

/// The model set in force and the state of the files behind it.
#[derive(Debug)]
pub struct ModelRegistry {
    paths: Vec<PathBuf>,
    stamps: BTreeMap<PathBuf, Option<Stamp>>,
    /// Last good contents per file.
    good: BTreeMap<PathBuf, ModelFile>,
    active: Arc<ModelFile>,
}

impl ModelRegistry {
    /// Loads `--models` (files and directories, merged in the order given; the bundled profile
    /// when none). A file named explicitly must load; in a directory, files that do not load
    /// are logged and left out. At least one model must remain.
    pub fn open(paths: &[PathBuf]) -> Result<ModelRegistry, RegistryError> {
        let mut registry = ModelRegistry {
            paths: paths.to_vec(),
            stamps: BTreeMap::new(),
            good: BTreeMap::new(),
            // Empty until loaded, so the first poll always yields the files' models.
            active: Arc::new(ModelFile {
                schema_version: SCHEMA_VERSION,
                models: Vec::new(),
            }),
        };
        if paths.is_empty() {
            registry.active = Arc::new(models::load(None)?);
            return Ok(registry);
        }
        for p in paths.iter().filter(|p| !p.is_dir()) {
            models::load(Some(p))?;
        }
        let poll = registry.poll(true)?;
        for r in &poll.refused {
            tracing::warn!(file = %r.file.display(), error = %r.error, "model file refused");
        }
        let merged = poll
            .candidate
            .ok_or_else(|| RegistryError::NothingLoadable {
                paths: paths.to_vec(),
            })?;
        registry.active = Arc::new(merged);
        Ok(registry)
    }

    /// The models in force.
    pub fn active(&self) -> Arc<ModelFile> {
        self.active.clone()
    }

    /// Puts a candidate from [`ModelRegistry::poll`] in force.
    pub fn apply(&mut self, models: ModelFile) {
        self.active = Arc::new(models);
    }

    /// Files of the model set, in merge order.
    fn files(&self) -> Result<Vec<PathBuf>, RegistryError> {
        let mut out = Vec::new();
        for path in &self.paths {
            if !path.is_dir() {
                out.push(path.clone());
                continue;
            }
            let mut in_dir = Vec::new();
            let list = |source| RegistryError::List {
                path: path.clone(),
                source,
            };
            for entry in std::fs::read_dir(path).map_err(list)? {
                let entry = entry.map_err(list)?;
                let name = entry.file_name();
                let name = name.to_string_lossy();
                // `..data` and `..2026_12_01_...` of a ConfigMap mount, editors' swap files,
                // files being written by `recalibrate`.
                if name.starts_with('.') || !name.ends_with(".json") {
                    continue;
                }
                if entry.path().is_file() {
                    in_dir.push(entry.path());
                }
            }
            in_dir.sort();
            out.extend(in_dir);
        }
        Ok(out)
    }

    /// Looks for changes (`force`: read every file again even if none changed, as on SIGHUP).
    /// Returns the merged model set when it differs from the one in force, and the files refused.
    pub fn poll(&mut self, force: bool) -> Result<Poll, RegistryError> {
        let mut poll = Poll::default();
        if self.paths.is_empty() {
            return Ok(poll);
        }
        let files = self.files()?;
        let stamps: BTreeMap<PathBuf, Option<Stamp>> =
            files.iter().map(|f| (f.clone(), stamp(f))).collect();
        if !force && stamps == self.stamps {
            return Ok(poll);
        }
        for (file, st) in &stamps {
            if !force && self.stamps.get(file) == Some(st) {
                continue;
            }
            match models::load(Some(file)) {
                Ok(m) => {
                    self.good.insert(file.clone(), m);
                }
                Err(e) => poll.refused.push(Refusal {
                    file: file.clone(),
                    error: crate::error_chain(&e),
                }),
            }
        }
        // A file removed from the directory takes its models with it.
        self.good.retain(|f, _| stamps.contains_key(f));
        self.stamps = stamps;
        // Merge order is --models order, not the map's path order.
        let good: Vec<&ModelFile> = files.iter().filter_map(|f| self.good.get(f)).collect();
        let merged = match good.as_slice() {
            [one] => Some((*one).clone()),
            many => merge(many.iter().copied()),
        };
        if let Some(m) = merged {
            if m != *self.active {
                poll.candidate = Some(m);
            }
        }
        Ok(poll)
    }
}

/// The models of several files: file order, then model order; of models sharing a name, only
/// the highest version is kept (in the place of the first of them).
pub fn merge<'a>(files: impl IntoIterator<Item = &'a ModelFile>) -> Option<ModelFile> {
    let mut out: Vec<NodeModel> = Vec::new();
    for file in files {
        for m in &file.models {
            match out.iter_mut().find(|o| o.name == m.name) {
                Some(o) if m.version() > o.version() => *o = m.clone(),
                Some(_) => {}
                None => out.push(m.clone()),
            }
        }
    }
    (!out.is_empty()).then_some(ModelFile {
        schema_version: SCHEMA_VERSION,
        models: out,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use greenpipe_common::model::Recalibration;

    fn versioned(version: u32) -> ModelFile {
        let mut file = models::load(None).unwrap();
        file.models.truncate(1);
        for v in 2..=version {
            file.models[0].recalibrations.push(Recalibration {
                version: v,
                parent_version: v - 1,
                accepted_at: 0.0,
                method: "test".into(),
                node: "n".into(),
                window_from: 0.0,
                window_to: 1.0,
                fit_samples: 1,
                held_out_samples: 1,
                parameters: Default::default(),
                scores: Default::default(),
            });
        }
        file
    }

    #[test]
    fn a_directory_keeps_the_newest_version_and_the_last_good_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.json"), versioned(1).to_json()).unwrap();
        let mut r = ModelRegistry::open(&[dir.path().to_path_buf()]).unwrap();
        assert_eq!(r.active().models[0].version(), 1);
        assert!(r.poll(false).unwrap().candidate.is_none());

        std::fs::write(dir.path().join("a.v2.json"), versioned(2).to_json()).unwrap();
        let poll = r.poll(false).unwrap();
        let c = poll.candidate.expect("new version noticed");
        assert_eq!(c.models.len(), 1);
        assert_eq!(c.models[0].version(), 2);
        assert!(c.models[0].label().ends_with("@v2"));
        r.apply(c);

        // A corrupt third version is refused by name; nothing changes.
        std::fs::write(
            dir.path().join("a.v3.json"),
            "{\"schema_version\": 1, \"mod",
        )
        .unwrap();
        let poll = r.poll(false).unwrap();
        assert!(poll.candidate.is_none());
        assert_eq!(poll.refused.len(), 1);
        assert!(poll.refused[0].file.ends_with("a.v3.json"));
        // Unchanged files are not read again, so the refusal is not repeated every tick...
        assert!(r.poll(false).unwrap().refused.is_empty());
        // ...unless forced (SIGHUP).
        assert_eq!(r.poll(true).unwrap().refused.len(), 1);
        assert_eq!(r.active().models[0].version(), 2);
    }

    #[test]
    fn a_configmap_symlink_swap_is_noticed() {
        let dir = tempfile::tempdir().unwrap();
        let mount = dir.path().join("mount");
        std::fs::create_dir(&mount).unwrap();
        let old = mount.join("..2026_01");
        std::fs::create_dir(&old).unwrap();
        std::fs::write(old.join("models.json"), versioned(1).to_json()).unwrap();
        std::os::unix::fs::symlink("..2026_01", mount.join("..data")).unwrap();
        std::os::unix::fs::symlink("..data/models.json", mount.join("models.json")).unwrap();
        let file = mount.join("models.json");
        let mut r = ModelRegistry::open(std::slice::from_ref(&file)).unwrap();
        assert!(r.poll(false).unwrap().candidate.is_none());

        // What the kubelet does: new timestamped dir, new `..data_tmp` link renamed over `..data`.
        let new = mount.join("..2026_02");
        std::fs::create_dir(&new).unwrap();
        std::fs::write(new.join("models.json"), versioned(2).to_json()).unwrap();
        std::os::unix::fs::symlink("..2026_02", mount.join("..data_tmp")).unwrap();
        std::fs::rename(mount.join("..data_tmp"), mount.join("..data")).unwrap();
        let c = r.poll(false).unwrap().candidate.expect("swap noticed");
        assert_eq!(c.models[0].version(), 2);

        // The same through the directory.
        let mut r = ModelRegistry::open(std::slice::from_ref(&mount)).unwrap();
        assert_eq!(r.active().models[0].version(), 2);
        assert!(r.poll(false).unwrap().candidate.is_none());
    }
}
