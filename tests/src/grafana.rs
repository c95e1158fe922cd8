//! The PromQL inside the Grafana dashboards, for the tests that parse and run it.

use serde_json::Value;

use crate::{files_with_extension, workspace_root};

/// Every `expr` of every panel of every dashboard, with the panel title.
pub fn dashboard_exprs() -> Vec<(String, String)> {
    let mut out = Vec::new();
    let dir = workspace_root().join("dashboards");
    for file in files_with_extension(&dir, "json") {
        let dash: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        for panel in dash["panels"].as_array().unwrap() {
            for t in panel["targets"].as_array().into_iter().flatten() {
                out.push((
                    format!("{} / {}", dash["title"], panel["title"]),
                    t["expr"].as_str().unwrap().to_string(),
                ));
            }
        }
    }
    out
}

/// Grafana's variables replaced by values a plain query accepts.
pub fn substitute_variables(expr: &str, range: &str) -> String {
    expr.replace("$__rate_interval", "15s")
        .replace("$__range", range)
        .replace("$node", ".+")
}
