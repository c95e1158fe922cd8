//! Model files the estimator tests serve with: small, hand-written models whose predictions a
//! test can work out by hand.

/// `linear-test`, for every node: 3 + 2·cpu + 0.5·network/MB W on node CPU (s/s) and network
/// (bytes/s), idle 3 W; `attribution_weights` is its JSON array of attribution weights.
pub fn linear_test_model(attribution_weights: &str) -> String {
    format!(
        r#"{{
      "name": "linear-test",
      "selector": {{"default": true}},
      "features": [
        {{"feature": "cpu_seconds_per_second", "mean": 0.0, "scale": 1.0}},
        {{"feature": "network_bytes_per_second", "mean": 0.0, "scale": 1000000.0}}
      ],
      "regressor": {{"kind": "linear", "intercept": 3.0, "coefficients": [2.0, 0.5]}},
      "idle_power_watts": 3.0,
      "attribution_weights": {attribution_weights}
    }}"#
    )
}

/// `name`, for every node: 3 W + 2 W per CPU second per second, attribution by CPU.
pub fn cpu_linear_model(name: &str) -> String {
    format!(
        r#"{{
      "name": "{name}",
      "selector": {{"default": true}},
      "features": [{{"feature": "cpu_seconds_per_second", "mean": 0.0, "scale": 1.0}}],
      "regressor": {{"kind": "linear", "intercept": 3.0, "coefficients": [2.0]}},
      "idle_power_watts": 3.0,
      "attribution_weights": [{{"feature": "cpu_seconds_per_second", "watts_per_unit": 2.0}}]
    }}"#
    )
}

/// A model file (schema 1) holding `models`, each a JSON object.
pub fn file_json(models: &[String]) -> String {
    format!(
        "{{\n  \"schema_version\": 1,\n  \"models\": [\n    {}\n  ]\n}}",
        models.join(",\n    ")
    )
}
