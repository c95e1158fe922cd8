//! Turns a planned [`Change`] into a JSON patch (RFC 6902) for the Node.
//!
//! JSON patch, not strategic merge: `spec.taints` carries no patch merge key, so a strategic or
//! merge patch would have to send the whole list anyway, and could silently drop a taint another
//! controller added between our read and our write. The patch therefore starts with a `test` of
//! the `resourceVersion` we planned from: if the node changed meanwhile the API server rejects
//! the patch (422) and the next round plans again from fresh state.

use crate::planner::{
    Change, Class, NodeState, FORECAST_ANNOTATION, KEY, SINCE_ANNOTATION, TAINT_EFFECT,
};
use k8s_openapi::api::core::v1::{Node, Taint};
use serde_json::{json, Value};

/// Escapes a map key for a JSON pointer (`/` → `~1`, `~` → `~0`).
fn pointer_key(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// Reads the planner's view of a node. `zone_of(node name, topology zone label)` maps it to a grid
/// zone (config overrides, then the `topology.kubernetes.io/zone` label through aliases).
pub fn node_state(
    node: &Node,
    zone_of: impl Fn(&str, Option<&str>) -> Option<String>,
) -> NodeState {
    let name = node.metadata.name.clone().unwrap_or_default();
    let labels = node.metadata.labels.as_ref();
    let topology = labels
        .and_then(|l| l.get(TOPOLOGY_ZONE_LABEL))
        .map(String::as_str);
    let class = labels
        .and_then(|l| l.get(KEY))
        .and_then(|v| Class::parse(v));
    let tainted = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|ts| ts.iter().any(|t| t.key == KEY));
    let since = node
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(SINCE_ANNOTATION))
        .and_then(|v| v.parse().ok());
    let zone = zone_of(&name, topology);
    NodeState {
        name,
        zone,
        class,
        tainted,
        since,
    }
}

/// The well-known zone label.
pub const TOPOLOGY_ZONE_LABEL: &str = "topology.kubernetes.io/zone";

/// Our taint, stamped with the wall-clock time it is added (unix seconds). `timeAdded` is what
/// the node lifecycle controller records on its own NoExecute taints: it tells an operator when
/// the eviction clock of every pod on the node started.
pub fn taint(added: i64) -> Taint {
    Taint {
        key: KEY.to_string(),
        value: Some(Class::Red.as_str().to_string()),
        effect: TAINT_EFFECT.to_string(),
        time_added: jiff::Timestamp::from_second(added)
            .ok()
            .map(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time),
    }
}

/// The JSON patch realising `change` on `node`, planned at time `now` (the dwell clock, which
/// a replay with `--at` sets) and written at wall-clock time `wall` (the taint's `timeAdded`).
pub fn json_patch(
    node: &Node,
    change: &Change,
    now: i64,
    wall: i64,
) -> Result<json_patch::Patch, serde_json::Error> {
    let mut ops: Vec<Value> = Vec::new();
    if let Some(rv) = &node.metadata.resource_version {
        ops.push(json!({"op": "test", "path": "/metadata/resourceVersion", "value": rv}));
    }
    let labels = node.metadata.labels.as_ref();
    let has_label = labels.is_some_and(|l| l.contains_key(KEY));
    let label_path = format!("/metadata/labels/{}", pointer_key(KEY));
    match change.to.class {
        Some(class)
            if labels.and_then(|l| l.get(KEY)).map(String::as_str) != Some(class.as_str()) =>
        {
            if labels.is_none() {
                ops.push(json!({"op": "add", "path": "/metadata/labels", "value": {KEY: class.as_str()}}));
            } else {
                ops.push(json!({"op": "add", "path": label_path, "value": class.as_str()}));
            }
        }
        None if has_label => ops.push(json!({"op": "remove", "path": label_path})),
        _ => {}
    }

    // Annotations record when the label changed (the dwell clock) and on what forecast.
    let annotations = node.metadata.annotations.as_ref();
    let label_changes = change.to.class != change.from;
    let mut set_annotations: Vec<(&str, String)> = Vec::new();
    let mut remove_annotations: Vec<&str> = Vec::new();
    if change.to.class.is_some() {
        if label_changes {
            set_annotations.push((SINCE_ANNOTATION, now.to_string()));
        }
        if let Some(f) = change.forecast {
            set_annotations.push((FORECAST_ANNOTATION, format!("{f:.1}")));
        }
    } else {
        remove_annotations.extend(
            [SINCE_ANNOTATION, FORECAST_ANNOTATION]
                .into_iter()
                .filter(|k| annotations.is_some_and(|a| a.contains_key(*k))),
        );
    }
    if annotations.is_none() && !set_annotations.is_empty() {
        let map: serde_json::Map<String, Value> = set_annotations
            .drain(..)
            .map(|(k, v)| (k.to_string(), Value::String(v)))
            .collect();
        ops.push(json!({"op": "add", "path": "/metadata/annotations", "value": map}));
    }
    for (k, v) in set_annotations {
        ops.push(json!({"op": "add", "path": format!("/metadata/annotations/{}", pointer_key(k)), "value": v}));
    }
    for k in remove_annotations {
        ops.push(
            json!({"op": "remove", "path": format!("/metadata/annotations/{}", pointer_key(k))}),
        );
    }

    if change.taint_changes {
        let current = node.spec.as_ref().and_then(|s| s.taints.clone());
        let mut taints: Vec<Taint> = current
            .clone()
            .unwrap_or_default()
            .into_iter()
            .filter(|t| t.key != KEY)
            .collect();
        if change.to.tainted {
            taints.push(taint(wall));
        }
        let value = serde_json::to_value(&taints)?;
        match (node.spec.is_some(), current.is_some()) {
            (false, _) => {
                ops.push(json!({"op": "add", "path": "/spec", "value": {"taints": value}}))
            }
            (true, false) => ops.push(json!({"op": "add", "path": "/spec/taints", "value": value})),
            (true, true) => {
                ops.push(json!({"op": "replace", "path": "/spec/taints", "value": value}))
            }
        }
    }
    serde_json::from_value(Value::Array(ops))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::planner::{plan, Policy, Target};
    use std::collections::BTreeMap;

    /// A node as `kubectl get node -o json` shows it (trimmed), with someone else's taint.
    fn node_json(labels: Value, taints: Option<Value>) -> Value {
        let mut n = json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": "edge-1",
                "resourceVersion": "4711",
                "labels": labels,
                "annotations": {"node.alpha.kubernetes.io/ttl": "0"}
            },
            "spec": {"podCIDR": "10.244.1.0/24"},
            "status": {"nodeInfo": {"architecture": "arm64", "bootID": "", "containerRuntimeVersion": "containerd://1.7", "kernelVersion": "6.1", "kubeProxyVersion": "", "kubeletVersion": "v1.33.0", "machineID": "", "operatingSystem": "linux", "osImage": "Debian", "systemUUID": ""}}
        });
        if let Some(t) = taints {
            n["spec"]["taints"] = t;
        }
        n
    }

    /// Applies the patch to the JSON and checks the result is still a valid Node.
    fn apply(node: &Value, patch: &json_patch::Patch) -> Node {
        let mut doc = node.clone();
        json_patch::patch(&mut doc, patch).expect("patch applies");
        serde_json::from_value(doc).expect("patched document is a valid Node")
    }

    fn zone_from_label(_: &str, topo: Option<&str>) -> Option<String> {
        topo.map(str::to_string)
    }

    fn round(doc: &Value, forecasts: &[(&str, Option<f64>)], now: i64) -> (Node, Value) {
        let node: Node = serde_json::from_value(doc.clone()).unwrap();
        let state = node_state(&node, zone_from_label);
        let fc: BTreeMap<String, Option<f64>> =
            forecasts.iter().map(|(z, v)| (z.to_string(), *v)).collect();
        let plan = plan(
            &[state],
            &fc,
            &Policy {
                min_dwell: 0,
                ..Policy::default()
            },
            now,
        );
        let change = plan.changes.first().expect("a change");
        let patch = json_patch(&node, change, now, now).unwrap();
        let patched = apply(doc, &patch);
        let mut doc = serde_json::to_value(&patched).unwrap();
        doc["metadata"]["resourceVersion"] = json!("4712"); // the API server bumps it
        (patched, doc)
    }

    #[test]
    fn red_then_green_then_no_forecast_keeps_foreign_taints_and_labels() {
        let foreign = json!([{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]);
        let doc = node_json(
            json!({"topology.kubernetes.io/zone": "B", "kubernetes.io/arch": "arm64"}),
            Some(foreign),
        );
        // B is the dirtiest zone: red + taint.
        let (n, doc) = round(&doc, &[("A", Some(100.0)), ("B", Some(300.0))], 1000);
        let labels = n.metadata.labels.as_ref().unwrap();
        assert_eq!(labels.get(KEY).map(String::as_str), Some("red"));
        assert_eq!(
            labels.get("kubernetes.io/arch").map(String::as_str),
            Some("arm64")
        );
        let taints = n.spec.as_ref().unwrap().taints.as_ref().unwrap();
        assert_eq!(taints.len(), 2);
        assert!(taints.iter().any(|t| t.key == "dedicated"));
        assert!(taints
            .iter()
            .any(|t| t.key == KEY && t.effect == "NoExecute" && t.value.as_deref() == Some("red")));
        let ann = n.metadata.annotations.as_ref().unwrap();
        assert_eq!(ann.get(SINCE_ANNOTATION).map(String::as_str), Some("1000"));
        assert_eq!(
            ann.get(FORECAST_ANNOTATION).map(String::as_str),
            Some("300.0")
        );
        assert!(ann.contains_key("node.alpha.kubernetes.io/ttl"));

        // B becomes the cleanest: green, our taint gone, the foreign one kept.
        let (n, doc) = round(&doc, &[("A", Some(300.0)), ("B", Some(100.0))], 5000);
        assert_eq!(
            n.metadata
                .labels
                .as_ref()
                .unwrap()
                .get(KEY)
                .map(String::as_str),
            Some("green")
        );
        let taints = n.spec.as_ref().unwrap().taints.as_ref().unwrap();
        assert_eq!(
            taints.iter().map(|t| t.key.as_str()).collect::<Vec<_>>(),
            vec!["dedicated"]
        );
        assert_eq!(
            n.metadata
                .annotations
                .as_ref()
                .unwrap()
                .get(SINCE_ANNOTATION)
                .map(String::as_str),
            Some("5000")
        );

        // No forecast for B: label and our annotations removed, everything else intact.
        let (n, _) = round(&doc, &[("A", Some(300.0)), ("B", None)], 9000);
        assert!(!n.metadata.labels.as_ref().unwrap().contains_key(KEY));
        let ann = n.metadata.annotations.as_ref().unwrap();
        assert!(!ann.contains_key(SINCE_ANNOTATION) && !ann.contains_key(FORECAST_ANNOTATION));
        assert!(ann.contains_key("node.alpha.kubernetes.io/ttl"));
        assert_eq!(n.spec.as_ref().unwrap().taints.as_ref().unwrap().len(), 1);
    }

    #[test]
    fn node_without_taints_or_annotations_gets_them_created() {
        let mut doc = node_json(json!({"topology.kubernetes.io/zone": "B"}), None);
        doc["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("annotations");
        let (n, _) = round(&doc, &[("A", Some(100.0)), ("B", Some(300.0))], 42);
        assert_eq!(
            n.spec.as_ref().unwrap().taints.as_ref().unwrap(),
            &vec![taint(42)]
        );
        assert_eq!(
            n.metadata
                .annotations
                .as_ref()
                .unwrap()
                .get(SINCE_ANNOTATION)
                .map(String::as_str),
            Some("42")
        );
    }

    #[test]
    fn stale_resource_version_makes_the_patch_fail() {
        let doc = node_json(json!({"topology.kubernetes.io/zone": "B"}), None);
        let node: Node = serde_json::from_value(doc.clone()).unwrap();
        let change = Change {
            node: "edge-1".into(),
            from: None,
            to: Target {
                class: Some(Class::Red),
                tainted: true,
            },
            taint_changes: true,
            forecast: Some(1.0),
            reason: String::new(),
        };
        let patch = json_patch(&node, &change, 1, 1).unwrap();
        let mut moved = doc.clone();
        moved["metadata"]["resourceVersion"] = json!("4800");
        assert!(json_patch::patch(&mut moved, &patch).is_err());
        // And the patch serialises to the RFC 6902 array kube sends.
        let wire = serde_json::to_value(&patch).unwrap();
        assert_eq!(
            wire[0],
            json!({"op": "test", "path": "/metadata/resourceVersion", "value": "4711"})
        );
        assert_eq!(
            wire[1]["path"],
            json!("/metadata/labels/greenpipe.io~1carbon-intensity")
        );
    }
}
