//! The bodies of the fuzz targets, one function per parser that reads outside input. A panic
//! (including a failed assertion) is a crash. They live here, not in `fuzz_targets/`, so that
//! the same code runs twice: under libFuzzer (`fuzz_targets/*.rs`, nightly or scripts/fuzz.sh)
//! and on stable in CI, where tests/tests/fuzz_targets_replay.rs includes this file and feeds
//! it mutated real inputs. This file therefore uses nothing but the crates both depend on.

use greenpipe_exporter::collector::cgroup::parse as cg;
use greenpipe_exporter::collector::{cpu, diskstats, meminfo, netdev, vmstat};
use greenpipe_exporter::meter::{shelly, tasmota};

/// A target: bytes in, a panic on a defect.
pub type Target = fn(&[u8]);

/// Every target by name, as the `[[bin]]`s in fuzz/Cargo.toml are named.
pub const TARGETS: &[(&str, Target)] = &[
    ("proc_files", proc_files),
    ("cgroup_files", cgroup_files),
    ("smart_plugs", smart_plugs),
    ("promql_answer", promql_answer),
    ("remote_write", remote_write),
    ("model_file", model_file),
    ("trace_csv", trace_csv),
    ("toml_config", toml_config),
    ("web_config", web_config),
];

/// /proc/stat, meminfo, vmstat, diskstats and net/dev text.
pub fn proc_files(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let _ = cpu::parse_stat(&text);
    let _ = meminfo::parse_meminfo(&text);
    let _ = vmstat::parse_vmstat(&text);
    let _ = netdev::for_each_interface(&text, |_| {});
    for line in text.lines() {
        let _ = diskstats::parse_line(line);
    }
}

/// cgroup cpu.stat, io.stat, blkio, single-value files, cgroup.procs and cgroup paths.
pub fn cgroup_files(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let _ = cg::cpu_stat_usage_usec(&text);
    let _ = cg::single_u64(&text);
    let _ = cg::io_stat(&text, |_, _| true);
    let _ = cg::blkio_service_bytes(&text, |_, _| true);
    let _ = cg::procs(&text);
    for line in text.lines() {
        if let Some(c) = greenpipe_common::container_id::from_cgroup_path(line) {
            assert_eq!(c.container_id.len(), 64, "container id from {line:?}");
            assert!(
                c.container_id.bytes().all(|b| b.is_ascii_hexdigit()),
                "container id from {line:?}"
            );
        }
    }
}

/// Shelly and Tasmota answer bodies: a reading is a finite number, never a silent zero from
/// garbage (that is the property tests' part; here: finite or an error).
pub fn smart_plugs(data: &[u8]) {
    let Ok(doc) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    for r in [
        shelly::parse(&doc, "http://p"),
        tasmota::parse(&doc, "http://p"),
    ]
    .into_iter()
    .flatten()
    {
        assert!(r.power_watts.is_some_and(f64::is_finite), "{doc}");
    }
}

/// The estimator's PromQL answer decoder.
pub fn promql_answer(data: &[u8]) {
    let _ = greenpipe_estimator::promql::decode_matrix(data);
}

/// Remote-write bodies: decoding never panics, and what decodes re-encodes to the same bytes
/// after one round (our encoder is deterministic and loses nothing it decoded).
pub fn remote_write(data: &[u8]) {
    use greenpipe_remote_write::{decode, encode};
    if let Ok(req) = decode(data) {
        let body = encode(req.timeseries);
        let again = decode(&body).expect("our own body decodes");
        assert_eq!(
            encode(again.timeseries),
            body,
            "re-encoding changed the body"
        );
    }
}

/// The model file (JSON).
pub fn model_file(data: &[u8]) {
    let _ = greenpipe_common::model::ModelFile::from_json(&String::from_utf8_lossy(data));
}

/// The trace CSV, as given and after the canonical header.
pub fn trace_csv(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let _ = greenpipe_common::trace::parse_trace("fuzz.csv", &text);
    let with_header = format!("{}\n{text}", greenpipe_common::features::trace_header());
    let _ = greenpipe_common::trace::parse_trace("fuzz.csv", &with_header);
}

/// The exporter's TOML configuration file.
pub fn toml_config(data: &[u8]) {
    let _ = greenpipe_exporter::config::FileConfig::parse(&String::from_utf8_lossy(data));
}

/// --web.config.file (exporter-toolkit YAML).
pub fn web_config(data: &[u8]) {
    let _ = greenpipe_web::config::WebConfigFile::parse(&String::from_utf8_lossy(data), "fuzz");
}
