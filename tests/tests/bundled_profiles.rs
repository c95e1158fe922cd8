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
        let ModelKind::UtilisationInterpolation {
            cpus,
            max_watts,
            scale_to_node_cpus,
        } = m.regressor
        else {
            panic!("{}: expected utilisation_interpolation", path.display());
        };
        // Per-CPU figures: the profile predicts as its instance for a node of that many CPUs,
        // which is the profile's own figures at its own CPU count.
        let scaled = m.for_node_cpus(Some(cpus)).unwrap();
        let m = if scale_to_node_cpus {
            assert!(m.predict(&FeatureValues::default()).is_err());
            &*scaled
        } else {
            m
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
    let vms: Vec<&String> = boards
        .iter()
        .filter(|b| b.starts_with("uncalibrated-vm"))
        .collect();
    // `vm` and one per processor family (exporter/src/board/cpu_family.rs).
    assert_eq!(vms.len(), 18, "{vms:?}");
    assert!(boards.iter().any(|b| b == "uncalibrated-vm"), "{boards:?}");
    boards.retain(|b| !b.starts_with("uncalibrated-vm"));
    assert_eq!(
        boards,
        [
            "uncalibrated-rpi4",
            "uncalibrated-rpi5",
            "uncalibrated-x86-server"
        ]
    );
}

/// What a 2-vCPU guest and a 2-CPU bare x86 machine are predicted at idle and at full load, the
/// guest's within Cloud Carbon Footprint's per-vCPU range across processor families.
#[test]
fn a_two_cpu_guest_and_a_two_cpu_bare_machine_are_predicted_at_their_size() {
    let dir = workspace_root().join("estimator/models/profiles");
    let load = |name: &str| {
        ModelFile::from_json(&std::fs::read_to_string(dir.join(name)).unwrap())
            .unwrap()
            .models
            .remove(0)
    };
    let at = |m: &greenpipe_common::model::NodeModel, cpu: f64| {
        let mut x = FeatureValues::default();
        x.set(Feature::CpuSecondsPerSecond, Some(cpu));
        m.for_node_cpus(Some(2.0)).unwrap().predict(&x).unwrap()
    };
    let vm = load("vm.json");
    let (vm_idle, vm_full) = (at(&vm, 0.0), at(&vm, 2.0));
    // The coefficients' per-vCPU idle spans 0.46 (EPYC 3rd Gen) to 3.68 W (EPYC 5th Gen).
    assert!((2.0 * 0.455..=2.0 * 3.683).contains(&vm_idle), "{vm_idle}");
    assert!(vm_full > vm_idle && vm_full < 2.0 * 8.97, "{vm_full}");
    let server = load("x86-server.json");
    let (bare_idle, bare_full) = (at(&server, 0.0), at(&server, 2.0));
    assert!((bare_idle - 87.5 * 2.0 / 32.0).abs() < 1e-9, "{bare_idle}");
    assert!((bare_full - 208.1 * 2.0 / 32.0).abs() < 1e-9, "{bare_full}");
    eprintln!(
        "2 vCPUs, vm profile: {vm_idle:.2} W idle, {vm_full:.2} W full load; 2 CPUs bare, \
         x86-server: {bare_idle:.2} W idle, {bare_full:.2} W full load"
    );
}
