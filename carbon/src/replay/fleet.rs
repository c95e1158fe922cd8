//! The fleet file (`--nodes FILE.toml`): one `[[node]]` table per node, with its grid zone and a
//! linear power model (idle watts plus watts per busy core). Unknown keys are errors.

use crate::Error;
use std::path::Path;

/// One node of the fleet.
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Node {
    /// Node name (unique).
    pub name: String,
    /// Grid zone; must be one of the `--intensity` zones.
    pub zone: String,
    /// Power when no core is busy, W.
    pub idle_watts: f64,
    /// Extra power per busy core, W.
    pub watts_per_busy_core: f64,
    /// Allocatable cores.
    pub cores: u32,
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    node: Vec<Node>,
}

/// Reads and checks a fleet file; nodes come back sorted by name (the scheduler's tie order).
pub fn read(path: &Path) -> Result<Vec<Node>, Error> {
    let text = std::fs::read_to_string(path).map_err(|error| Error::Io {
        path: path.display().to_string(),
        error,
    })?;
    parse(&text).map_err(|e| Error::Invalid(format!("{}: {e}", path.display())))
}

/// Parses the text of a fleet file.
pub fn parse(text: &str) -> Result<Vec<Node>, Error> {
    let file: File = toml::from_str(text).map_err(|e| Error::Invalid(e.to_string()))?;
    let mut nodes = file.node;
    if nodes.is_empty() {
        return Err(Error::Invalid("no [[node]] tables".into()));
    }
    for n in &nodes {
        let bad = |what: &str| Error::Invalid(format!("node {:?}: {what}", n.name));
        if n.name.is_empty() {
            return Err(Error::Invalid("a node has an empty name".into()));
        }
        if n.zone.is_empty() {
            return Err(bad("empty zone"));
        }
        if !(n.idle_watts.is_finite() && n.idle_watts >= 0.0) {
            return Err(bad("idle_watts must be a finite number ≥ 0"));
        }
        if !(n.watts_per_busy_core.is_finite() && n.watts_per_busy_core >= 0.0) {
            return Err(bad("watts_per_busy_core must be a finite number ≥ 0"));
        }
        if n.cores == 0 {
            return Err(bad("cores must be ≥ 1"));
        }
    }
    nodes.sort_by(|a, b| a.name.cmp(&b.name));
    if let Some(w) = nodes.windows(2).find(|w| w[0].name == w[1].name) {
        return Err(Error::Invalid(format!(
            "node {:?} appears twice",
            w[0].name
        )));
    }
    Ok(nodes)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
[[node]]
name = "b"
zone = "CISO"
idle_watts = 50
watts_per_busy_core = 10.5
cores = 8

[[node]]
name = "a"
zone = "ERCO"
idle_watts = 0
watts_per_busy_core = 0
cores = 1
"#;

    #[test]
    fn nodes_are_read_and_sorted_by_name() {
        let nodes = parse(GOOD).unwrap();
        assert_eq!(nodes.len(), 2);
        assert_eq!(nodes[0].name, "a");
        assert_eq!(nodes[1].zone, "CISO");
        assert_eq!(nodes[1].watts_per_busy_core, 10.5);
        assert_eq!(nodes[1].cores, 8);
    }

    #[test]
    fn bad_fleets_are_refused_with_the_reason() {
        let bad = [
            (GOOD.replace("cores = 1", "cores = 1\ngpus = 2"), "gpus"),
            (GOOD.replace("cores = 1\n", ""), "cores"),
            (GOOD.replace("cores = 1", "cores = 0"), "cores must be"),
            (
                GOOD.replace("idle_watts = 0", "idle_watts = -1"),
                "idle_watts",
            ),
            (
                GOOD.replace("name = \"a\"", "name = \"b\""),
                "appears twice",
            ),
            ("title = \"x\"\n".to_string(), "title"),
            ("node = []\n".to_string(), "no [[node]]"),
        ];
        for (text, want) in bad {
            let err = parse(&text).unwrap_err().to_string();
            assert!(err.contains(want), "{want}: {err}");
        }
        let err = read(Path::new("/nonexistent/fleet.toml")).unwrap_err();
        assert!(
            err.to_string().starts_with("/nonexistent/fleet.toml"),
            "{err}"
        );
    }
}
