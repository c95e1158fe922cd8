//! Reading a `/metrics` page: fetch it and pick samples by name and label values.

use std::time::Duration;

use anyhow::Context;

/// GETs a metrics page.
pub fn fetch(url: &str) -> anyhow::Result<String> {
    let response = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()?
        .get(url)
        .send()
        .with_context(|| format!("GET {url}"))?
        .error_for_status()?;
    Ok(response.text()?)
}

/// Whether a sample line carries every `key="value"` pair.
fn matches(labels: &str, want: &[(&str, &str)]) -> bool {
    want.iter()
        .all(|(k, v)| labels.contains(&format!("{k}=\"{v}\"")))
}

/// Values of the samples of `name` carrying every `key="value"` pair.
pub fn samples(text: &str, name: &str, want: &[(&str, &str)]) -> Vec<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let rest = l.strip_prefix(name)?;
            let (labels, value) = match rest.strip_prefix('{') {
                Some(r) => r.rsplit_once("} ")?,
                None => ("", rest.strip_prefix(' ')?),
            };
            matches(labels, want).then(|| value.trim().parse().ok())?
        })
        .collect()
}

/// The single sample of `name` with these labels, if exactly one exists.
pub fn sample(text: &str, name: &str, want: &[(&str, &str)]) -> Option<f64> {
    match samples(text, name, want).as_slice() {
        [v] => Some(*v),
        _ => None,
    }
}

/// The exporter's page at `url` once its collection counter has advanced by two cycles since
/// the call (the first may have begun before it): every sample on it was taken after the call.
pub fn fresh(url: &str, timeout: Duration) -> anyhow::Result<String> {
    use greenpipe_common::names::exporter::COLLECTIONS_TOTAL;
    let start = sample(&fetch(url)?, COLLECTIONS_TOTAL, &[]).unwrap_or(0.0);
    crate::wait_for(timeout, || {
        let text = fetch(url).ok()?;
        (sample(&text, COLLECTIONS_TOTAL, &[])? >= start + 2.0).then_some(text)
    })
    .with_context(|| format!("{url} did not complete two collection cycles within {timeout:?}"))
}

/// Runs `promtool check metrics` on a metrics page: `Err` carries promtool's complaints.
pub fn promtool_check(text: &str) -> Result<(), String> {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut promtool = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("promtool (Debian package prometheus, scripts/setup.sh): {e}"))?;
    promtool
        .stdin
        .take()
        .expect("piped stdin")
        .write_all(text.as_bytes())
        .map_err(|e| format!("writing to promtool: {e}"))?;
    let output = promtool
        .wait_with_output()
        .map_err(|e| format!("promtool: {e}"))?;
    let problems = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    if output.status.success() && problems.trim().is_empty() {
        Ok(())
    } else {
        Err(problems)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picks_by_name_and_labels() {
        let text =
            "# TYPE a counter\na{node=\"n\",mode=\"user\"} 1.5\na{node=\"n\",mode=\"idle\"} 2\n\
                    ab{node=\"n\"} 9\nb 3\n";
        assert_eq!(sample(text, "a", &[("mode", "user")]), Some(1.5));
        assert_eq!(samples(text, "a", &[]), vec![1.5, 2.0]);
        assert_eq!(sample(text, "b", &[]), Some(3.0));
        assert_eq!(sample(text, "a", &[("mode", "x")]), None);
    }
}
