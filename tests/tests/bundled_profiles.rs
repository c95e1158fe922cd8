//! The bundled per-board profiles (estimator/models/profiles) load with the model-file reader,
//! are labelled uncalibrated, cite their source, and interpolate between their published idle
//! and full-load figures.

use greenpipe_common::features::{Feature, FeatureValues};
use greenpipe_common::model::{ModelFile, ModelKind};
use greenpipe_tests::workspace_root;

#[test]
fn every_profile_loads_and_interpolates_between_idle_and_full_load() {
    let dir = workspace_root().join("estimator/models/profiles");
    let mut boards = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let file = ModelFile::from_json(&std::fs::read_to_string(&path).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(file.models.len(), 1, "{}", path.display());
        let m = &file.models[0];
        assert!(
            m.name.contains("uncalibrated"),
            "{}: {}",
            path.display(),
            m.name
        );
        assert!(
            m.source.as_deref().is_some_and(|s| s.len() > 80),
            "{}: cite the measurements in `source`",
            path.display()
        );
        let ModelKind::UtilisationInterpolation { cpus, max_watts } = m.regressor else {
            panic!("{}: expected utilisation_interpolation", path.display());
        };
        let mut x = FeatureValues::default();
        x.set(Feature::CpuSecondsPerSecond, Some(0.0));
        assert_eq!(m.predict(&x).unwrap(), m.idle_power_watts);
        x.set(Feature::CpuSecondsPerSecond, Some(cpus));
        assert_eq!(m.predict(&x).unwrap(), max_watts);
        // Attribution spreads exactly the dynamic range over the board's CPUs.
        let w = m
            .attribution_weights
            .iter()
            .find(|w| w.feature == Feature::CpuSecondsPerSecond)
            .expect("cpu attribution weight");
        let dynamic = (max_watts - m.idle_power_watts) / cpus;
        assert!(
            (w.watts_per_unit - dynamic).abs() < 0.01,
            "{}: weight {} vs (max - idle) / cpus = {dynamic}",
            path.display(),
            w.watts_per_unit
        );
        // Without a node-specific model, a bundled profile is the fallback for any node.
        assert!(m.selector.default, "{}", path.display());
        boards.push(m.name.clone());
    }
    boards.sort();
    assert_eq!(
        boards,
        [
            "uncalibrated-rpi4",
            "uncalibrated-rpi5",
            "uncalibrated-x86-server"
        ]
    );
}
