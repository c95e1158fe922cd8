//! Unit tests of the model file: parsing, checks, selection and prediction per family.

use super::*;

fn interp() -> NodeModel {
    NodeModel {
        name: "uncalibrated-test".into(),
        selector: NodeSelector {
            default: true,
            ..Default::default()
        },
        features: vec![],
        regressor: ModelKind::UtilisationInterpolation {
            cpus: 4.0,
            max_watts: 7.0,
            scale_to_node_cpus: false,
        },
        idle_power_watts: 3.0,
        attribution_weights: vec![AttributionWeight {
            feature: Feature::CpuSecondsPerSecond,
            watts_per_unit: 1.0,
        }],
        training: None,
        scores: Scores::default(),
        source: None,
        baselines: vec![],
        power_bounds: None,
        recalibrations: vec![],
    }
}

#[test]
fn interpolation_predicts_between_idle_and_max() {
    let m = interp();
    let mut x = FeatureValues::default();
    x.set(Feature::CpuSecondsPerSecond, Some(2.0));
    assert_eq!(m.predict(&x), Ok(5.0));
    x.set(Feature::CpuSecondsPerSecond, Some(9.0));
    assert_eq!(m.predict(&x), Ok(7.0));
    x.set(Feature::CpuSecondsPerSecond, None);
    assert!(matches!(m.predict(&x), Err(ModelError::MissingFeature(_))));
}

#[test]
fn an_interpolation_scaled_to_the_node_predicts_for_the_nodes_cpus_only() {
    // Per-vCPU figures: 0.7 W idle and 4 W at full load for each CPU.
    let mut m = interp();
    m.idle_power_watts = 0.7;
    m.regressor = ModelKind::UtilisationInterpolation {
        cpus: 1.0,
        max_watts: 4.0,
        scale_to_node_cpus: true,
    };
    let text = ModelFile {
        schema_version: SCHEMA_VERSION,
        models: vec![m.clone()],
    }
    .to_json();
    assert!(text.contains("\"scale_to_node_cpus\": true"), "{text}");
    assert_eq!(ModelFile::from_json(&text).unwrap().models[0], m);
    let mut x = FeatureValues::default();
    x.set(Feature::CpuSecondsPerSecond, Some(1.0));
    // Without the node's CPU count it does not predict for the machine it was made from.
    assert_eq!(m.predict(&x), Err(ModelError::MissingFeature(NODE_CPUS)));
    assert_eq!(
        m.for_node_cpus(None).unwrap_err(),
        ModelError::MissingFeature(NODE_CPUS)
    );
    assert!(m.for_node_cpus(Some(f64::NAN)).is_err());
    assert!(m.for_node_cpus(Some(0.0)).is_err());
    let two = m.for_node_cpus(Some(2.0)).unwrap();
    assert!((two.idle_power_watts - 1.4).abs() < 1e-12);
    // One CPU of two busy: idle 1.4 W + half of the 6.6 W dynamic range.
    assert!((two.predict(&x).unwrap() - 4.7).abs() < 1e-12);
    x.set(Feature::CpuSecondsPerSecond, Some(5.0));
    assert!((two.predict(&x).unwrap() - 8.0).abs() < 1e-12);
    // A model with its own figures is used as it is, whatever the node.
    let own = interp();
    assert!(matches!(
        own.for_node_cpus(None).unwrap(),
        std::borrow::Cow::Borrowed(_)
    ));
    // A file written before the field existed reads as unscaled.
    let old = ModelFile {
        schema_version: SCHEMA_VERSION,
        models: vec![own.clone()],
    }
    .to_json();
    assert!(!old.contains("scale_to_node_cpus"), "{old}");
}

#[test]
fn round_trip_and_version_check() {
    let file = ModelFile {
        schema_version: SCHEMA_VERSION,
        models: vec![interp()],
    };
    let text = file.to_json();
    assert_eq!(ModelFile::from_json(&text).unwrap(), file);
    let old = text.replace("\"schema_version\": 1", "\"schema_version\": 99");
    assert_eq!(
        ModelFile::from_json(&old),
        Err(ModelError::SchemaVersion { found: 99 })
    );
    let unknown = text.replacen("\"models\"", "\"colour\": 1, \"models\"", 1);
    assert!(matches!(
        ModelFile::from_json(&unknown),
        Err(ModelError::Parse(_))
    ));
}

#[test]
fn baselines_are_optional_checked_and_predict() {
    // A file written before baselines were stored still loads, with none.
    let file = ModelFile {
        schema_version: SCHEMA_VERSION,
        models: vec![interp()],
    };
    let text = file.to_json();
    assert!(!text.contains("baselines"));
    assert!(ModelFile::from_json(&text).unwrap().models[0]
        .baselines
        .is_empty());

    let mut m = interp();
    m.baselines.push(BaselineModel {
        name: "baseline_cpu_linear".into(),
        features: vec![FeatureScaling {
            feature: Feature::CpuSecondsPerSecond,
            mean: 1.0,
            scale: 2.0,
        }],
        regressor: ModelKind::Linear {
            intercept: 10.0,
            coefficients: vec![4.0],
        },
        power_bounds: None,
    });
    let file = ModelFile {
        schema_version: SCHEMA_VERSION,
        models: vec![m.clone()],
    };
    let back = ModelFile::from_json(&file.to_json()).unwrap();
    assert_eq!(back, file);
    let mut x = FeatureValues::default();
    x.set(Feature::CpuSecondsPerSecond, Some(5.0));
    // 10 + 4 * (5 - 1) / 2
    assert_eq!(back.models[0].baselines[0].predict(&x), Ok(18.0));

    let mut bad = m.clone();
    bad.baselines[0].regressor = ModelKind::Linear {
        intercept: 0.0,
        coefficients: vec![1.0, 2.0],
    };
    assert!(matches!(bad.check(), Err(ModelError::Inconsistent { .. })));
    let mut bad = m;
    bad.baselines[0].features[0].scale = 0.0;
    assert!(matches!(bad.check(), Err(ModelError::Inconsistent { .. })));
}

#[test]
fn negative_attribution_weight_is_refused() {
    let mut m = interp();
    m.attribution_weights[0].watts_per_unit = -0.5;
    assert!(matches!(m.check(), Err(ModelError::Inconsistent { .. })));
}

#[test]
fn selection_prefers_name_then_labels_then_default() {
    let mut by_name = interp();
    by_name.name = "named".into();
    by_name.selector = NodeSelector {
        node: Some("pi-1".into()),
        ..Default::default()
    };
    let mut by_label = interp();
    by_label.name = "labelled".into();
    by_label.selector = NodeSelector {
        labels: [("board".to_string(), "rpi4".to_string())].into(),
        ..Default::default()
    };
    let file = ModelFile {
        schema_version: SCHEMA_VERSION,
        models: vec![interp(), by_label, by_name],
    };
    let rpi4: BTreeMap<String, String> = [("board".to_string(), "rpi4".to_string())].into();
    assert_eq!(file.select("pi-1", &rpi4).unwrap().name, "named");
    assert_eq!(file.select("pi-2", &rpi4).unwrap().name, "labelled");
    assert_eq!(
        file.select("pi-2", &BTreeMap::new()).unwrap().name,
        "uncalibrated-test"
    );
}

#[test]
fn power_bounds_clamp_predictions_and_are_checked() {
    let b = PowerBounds::from_training(4.0, 7.0);
    assert_eq!((b.min_watts, b.max_watts), (1.0, 10.0));
    // A constant training power still leaves a tenth of it either side.
    let flat = PowerBounds::from_training(100.0, 100.0);
    assert_eq!((flat.min_watts, flat.max_watts), (90.0, 110.0));
    let mut m = scaled(ModelKind::Linear {
        intercept: 5.0,
        coefficients: vec![100.0, 0.0],
    });
    m.power_bounds = Some(b);
    let mut x = FeatureValues::default();
    x.set(Feature::CpuSecondsPerSecond, Some(1.0));
    x.set(Feature::DiskBytesPerSecond, Some(1.0));
    assert_eq!(m.predict_bounded(&x), Ok((5.0, false)));
    x.set(Feature::CpuSecondsPerSecond, Some(7.0));
    assert_eq!(m.predict_bounded(&x), Ok((10.0, true)));
    let file = ModelFile {
        schema_version: SCHEMA_VERSION,
        models: vec![m.clone()],
    };
    assert_eq!(ModelFile::from_json(&file.to_json()).unwrap(), file);
    m.power_bounds = Some(PowerBounds {
        min_watts: 5.0,
        max_watts: 1.0,
    });
    assert!(m.check().is_err());
}

fn scaled(regressor: ModelKind) -> NodeModel {
    let mut m = interp();
    m.features = [Feature::CpuSecondsPerSecond, Feature::DiskBytesPerSecond]
        .into_iter()
        .map(|feature| FeatureScaling {
            feature,
            mean: 1.0,
            scale: 2.0,
        })
        .collect();
    m.regressor = regressor;
    m
}

fn input(cpu: f64, disk: f64) -> FeatureValues {
    let mut x = FeatureValues::default();
    x.set(Feature::CpuSecondsPerSecond, Some(cpu));
    x.set(Feature::DiskBytesPerSecond, Some(disk));
    x
}

#[test]
fn every_trained_kind_predicts_from_the_file_alone() {
    // Standardised inputs of (cpu 5, disk 3) are (2, 1).
    let x = input(5.0, 3.0);
    let tree = RegressionTree {
        nodes: vec![
            TreeNode::Split {
                feature: 0,
                threshold: 1.5,
                left: 1,
                right: 2,
            },
            TreeNode::Leaf { value: -1.0 },
            TreeNode::Leaf { value: 4.0 },
        ],
    };
    let cases = [
        (
            ModelKind::Polynomial {
                intercept: 10.0,
                linear: vec![1.0, 2.0],
                quadratic: vec![0.5, 1.0, 3.0],
            },
            // 10 + 2 + 2 + 0.5*4 + 1*2 + 3*1
            21.0,
        ),
        (
            ModelKind::NearestNeighbours {
                k: 2,
                points: vec![vec![2.0, 1.1], vec![9.0, 9.0], vec![1.9, 1.0]],
                targets: vec![10.0, 99.0, 20.0],
            },
            15.0,
        ),
        (
            ModelKind::GradientBoosting {
                intercept: 100.0,
                linear: vec![1.0, 0.0],
                learning_rate: 0.5,
                trees: vec![tree.clone(), tree.clone()],
            },
            106.0,
        ),
        (
            ModelKind::RandomForest {
                trees: vec![tree.clone(), tree.clone()],
            },
            4.0,
        ),
        (
            ModelKind::Ensemble {
                members: vec![
                    ModelKind::RandomForest { trees: vec![tree] },
                    ModelKind::Linear {
                        intercept: 1.0,
                        coefficients: vec![0.5, 1.0],
                    },
                ],
            },
            // (4 + 3) / 2
            3.5,
        ),
    ];
    for (kind, want) in cases {
        let file = ModelFile {
            schema_version: SCHEMA_VERSION,
            models: vec![scaled(kind)],
        };
        let back = ModelFile::from_json(&file.to_json()).unwrap();
        assert_eq!(back, file);
        let got = back.models[0].predict(&x).unwrap();
        assert!((got - want).abs() < 1e-12, "{got} != {want}");
        assert_eq!(
            back.models[0].required_features(),
            vec![Feature::CpuSecondsPerSecond, Feature::DiskBytesPerSecond]
        );
    }
}

/// Recalibration's correction, folded into every kind, predicts `offset + gain · old`, through a
/// written and read-back file.
#[test]
fn every_kind_folded_predicts_offset_plus_gain_times_the_old_prediction() {
    let tree = RegressionTree {
        nodes: vec![
            TreeNode::Split {
                feature: 0,
                threshold: 0.5,
                left: 1,
                right: 2,
            },
            TreeNode::Leaf { value: 1.0 },
            TreeNode::Leaf { value: 2.5 },
        ],
    };
    let linear = ModelKind::Linear {
        intercept: 3.0,
        coefficients: vec![2.0, 0.5],
    };
    let kinds = [
        linear.clone(),
        ModelKind::Polynomial {
            intercept: 3.0,
            linear: vec![1.0, 0.2],
            quadratic: vec![0.3, 0.1, 0.05],
        },
        ModelKind::NearestNeighbours {
            k: 1,
            points: vec![vec![0.0, 0.0], vec![1.0, 1.0]],
            targets: vec![3.0, 5.0],
        },
        ModelKind::GradientBoosting {
            intercept: 3.0,
            linear: vec![0.5, 0.0],
            learning_rate: 0.5,
            trees: vec![tree.clone(), tree.clone()],
        },
        ModelKind::RandomForest {
            trees: vec![tree.clone()],
        },
        ModelKind::Ensemble {
            members: vec![linear, ModelKind::RandomForest { trees: vec![tree] }],
        },
    ];
    let mut models: Vec<NodeModel> = kinds.into_iter().map(scaled).collect();
    models.push(interp());
    let (offset, gain) = (0.3, 1.15);
    let inputs = [input(0.2, 0.1), input(1.7, 2.0), input(3.0, 0.5)];
    for m in models {
        let folded = m.folded(offset, gain);
        let back = ModelFile::from_json(
            &ModelFile {
                schema_version: SCHEMA_VERSION,
                models: vec![folded.clone()],
            }
            .to_json(),
        )
        .unwrap();
        for x in &inputs {
            let old = m.predict(x).unwrap();
            let new = back.models[0].predict(x).unwrap();
            assert!(
                (new - (offset + gain * old)).abs() < 1e-9,
                "{:?}: {new} vs {old}",
                m.regressor
            );
        }
        assert!((folded.idle_power_watts - (offset + gain * m.idle_power_watts)).abs() < 1e-9);
    }
}

#[test]
fn inconsistent_trained_kinds_are_refused() {
    let looping = RegressionTree {
        nodes: vec![TreeNode::Split {
            feature: 0,
            threshold: 0.0,
            left: 0,
            right: 0,
        }],
    };
    let bad = [
        ModelKind::Linear {
            intercept: 0.0,
            coefficients: vec![1.0],
        },
        ModelKind::Polynomial {
            intercept: 0.0,
            linear: vec![1.0, 1.0],
            quadratic: vec![1.0],
        },
        ModelKind::NearestNeighbours {
            k: 3,
            points: vec![vec![0.0, 0.0]],
            targets: vec![1.0],
        },
        ModelKind::RandomForest {
            trees: vec![looping],
        },
        ModelKind::RandomForest { trees: vec![] },
        ModelKind::Ensemble { members: vec![] },
        ModelKind::Ensemble {
            members: vec![ModelKind::UtilisationInterpolation {
                cpus: 1.0,
                max_watts: 9.0,
                scale_to_node_cpus: false,
            }],
        },
    ];
    for kind in bad {
        let file = ModelFile {
            schema_version: SCHEMA_VERSION,
            models: vec![scaled(kind.clone())],
        };
        assert!(
            matches!(
                ModelFile::from_json(&file.to_json()),
                Err(ModelError::Inconsistent { .. })
            ),
            "{kind:?} accepted"
        );
    }
}
