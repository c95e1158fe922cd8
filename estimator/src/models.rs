//! Loading the model file for `serve`: the operator's file (`--models PATH`) or the bundled
//! uncalibrated profile, so a fresh install predicts at once.

use std::path::Path;

use std::path::PathBuf;

use greenpipe_common::features::Feature;
use greenpipe_common::model::{ModelError, ModelFile};

/// Why a model file was refused.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be read.
    #[error("reading model file {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not a valid model file.
    #[error("loading {origin}")]
    Invalid {
        /// The file, or "the bundled default profile".
        origin: String,
        /// What is wrong with it.
        source: ModelError,
    },
    /// The file is valid and empty.
    #[error("{origin} holds no model")]
    Empty {
        /// The file, or "the bundled default profile".
        origin: String,
    },
}

/// The bundled profile (`estimator/models/default.json`): utilisation interpolation between
/// published idle and full-load figures, named `uncalibrated-*`.
pub const BUNDLED: &str = include_str!("../models/default.json");

/// Reads and checks a model file, or the bundled profile when `path` is `None`.
pub fn load(path: Option<&Path>) -> Result<ModelFile, LoadError> {
    let (text, origin) = match path {
        Some(p) => (
            std::fs::read_to_string(p).map_err(|source| LoadError::Read {
                path: p.to_path_buf(),
                source,
            })?,
            p.display().to_string(),
        ),
        None => (
            BUNDLED.to_string(),
            "the bundled default profile".to_string(),
        ),
    };
    let file = match ModelFile::from_json(&text) {
        Ok(file) => file,
        Err(source) => return Err(LoadError::Invalid { origin, source }),
    };
    if file.models.is_empty() {
        return Err(LoadError::Empty { origin });
    }
    Ok(file)
}

/// Features read at node level (model inputs) and at container level (attribution weights), over
/// all models of the file.
pub fn features_to_read(file: &ModelFile) -> (Vec<Feature>, Vec<Feature>) {
    let mut node: Vec<Feature> = file
        .models
        .iter()
        .flat_map(|m| m.required_features())
        .collect();
    let mut container: Vec<Feature> = file
        .models
        .iter()
        .flat_map(|m| m.attribution_weights.iter().map(|w| w.feature))
        .collect();
    // The `system` entry is node minus containers when the exporter does not report it, which
    // needs the attribution features at node level too.
    node.extend(container.iter().copied());
    for v in [&mut node, &mut container] {
        v.sort();
        v.dedup();
    }
    (node, container)
}

/// Node label keys the selectors match on.
pub fn selector_label_keys(file: &ModelFile) -> Vec<String> {
    let mut keys: Vec<String> = file
        .models
        .iter()
        .flat_map(|m| m.selector.labels.keys().cloned())
        .collect();
    keys.sort();
    keys.dedup();
    keys
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundled_profile_loads_and_is_uncalibrated() {
        let file = load(None).unwrap();
        assert!(file.models.iter().all(|m| m.name.contains("uncalibrated")));
        assert!(file.select("any-node", &Default::default()).is_some());
        let (node, container) = features_to_read(&file);
        assert_eq!(node, [Feature::CpuSecondsPerSecond]);
        assert_eq!(container, [Feature::CpuSecondsPerSecond]);
    }

    #[test]
    fn bad_files_name_the_problem() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.json");
        let cases = [
            ("{", "not valid"),
            (
                &BUNDLED.replace("\"schema_version\": 1", "\"schema_version\": 7"),
                "schema_version 7",
            ),
            (
                &BUNDLED.replace("utilisation_interpolation", "quantum_forest"),
                "quantum_forest",
            ),
            (
                &BUNDLED.replace("\"max_watts\": 6.4", "\"max_watts\": 1.0"),
                "max_watts",
            ),
            (
                &BUNDLED.replace("cpu_seconds_per_second", "gpu_seconds"),
                "gpu_seconds",
            ),
            ("{\"schema_version\": 1, \"models\": []}", "holds no model"),
        ];
        for (text, expected) in cases {
            std::fs::write(&path, text).unwrap();
            // As the binary prints it (anyhow's `{:#}`: the message and its sources).
            let err = crate::error_chain(&load(Some(&path)).unwrap_err());
            assert!(err.contains(expected), "{expected:?} not in {err:?}");
            assert!(err.contains("m.json"), "{err}");
        }
        let err = crate::error_chain(&load(Some(&dir.path().join("absent.json"))).unwrap_err());
        assert!(err.contains("absent.json"), "{err}");
    }
}
