//! The cargo-fuzz targets' bodies (fuzz/src/lib.rs, included below) run on stable Rust: each is
//! fed real inputs (the exporter's fixture trees, this machine's own /proc and cgroup files, the
//! bundled model, a written trace, the TLS overlay's web configs, remote-write bodies we encode)
//! and a fixed number of deterministic mutations of them: bytes flipped, inserted and deleted,
//! spans duplicated and spliced across seeds, numbers replaced with overflowing, negative and
//! non-finite ones, truncations. The inputs are the same on every run (a seeded generator, a
//! count, no clock), so a failure reproduces; it prints the input to keep as a regression case.
//! This is not coverage-guided fuzzing (that is scripts/fuzz.sh with libFuzzer, not run by CI);
//! it proves the targets compile and holds them to their properties on every CI run.

#[path = "../../fuzz/src/lib.rs"]
#[allow(dead_code)]
mod targets;

use std::path::Path;

use greenpipe_tests::workspace_root;

/// Mutations per target; with the seeds, ~2 s of the whole suite in a debug build.
const MUTATIONS: usize = 3000;

/// splitmix64: a fixed sequence from a fixed seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const NUMBERS: &[&str] = &[
    "18446744073709551615",
    "18446744073709551616",
    "99999999999999999999999",
    "-1",
    "-9223372036854775808",
    "NaN",
    "nan",
    "+Inf",
    "-Inf",
    "inf",
    "1e309",
    "-0",
    "0x10",
    "1.5",
    "",
    "\u{0}",
    "\"1\"",
    "null",
];

fn mutate(rng: &mut Rng, seeds: &[Vec<u8>]) -> Vec<u8> {
    let mut data = seeds[rng.below(seeds.len())].clone();
    for _ in 0..1 + rng.below(4) {
        let len = data.len();
        match rng.below(8) {
            0 if len > 0 => {
                let i = rng.below(len);
                data[i] ^= 1 << rng.below(8);
            }
            1 => {
                let i = rng.below(len + 1);
                data.insert(i, rng.next() as u8);
            }
            2 if len > 0 => {
                let i = rng.below(len);
                let n = 1 + rng.below((len - i).min(16));
                data.drain(i..i + n);
            }
            3 if len > 0 => {
                let i = rng.below(len);
                let n = 1 + rng.below((len - i).min(64));
                let span = data[i..i + n].to_vec();
                let at = rng.below(len + 1);
                data.splice(at..at, span);
            }
            4 => {
                // Splice in a span of another seed.
                let other = &seeds[rng.below(seeds.len())];
                if !other.is_empty() {
                    let i = rng.below(other.len());
                    let n = 1 + rng.below((other.len() - i).min(64));
                    let at = rng.below(len + 1);
                    data.splice(at..at, other[i..i + n].to_vec());
                }
            }
            5 => {
                // Replace the digits of one number with a hostile one.
                let digits: Vec<usize> = (0..len).filter(|&i| data[i].is_ascii_digit()).collect();
                if !digits.is_empty() {
                    let start = digits[rng.below(digits.len())];
                    let end = (start..len)
                        .find(|&i| !data[i].is_ascii_digit() && data[i] != b'.')
                        .unwrap_or(len);
                    let with = NUMBERS[rng.below(NUMBERS.len())].as_bytes().to_vec();
                    data.splice(start..end, with);
                }
            }
            6 => data.truncate(rng.below(len + 1)),
            _ => {
                // Duplicate a whole line (a repeated key, a repeated device).
                let lines: Vec<&[u8]> = data.split(|&b| b == b'\n').collect();
                let line = lines[rng.below(lines.len())].to_vec();
                let at = rng.below(len + 1);
                let mut with = line;
                with.push(b'\n');
                data.splice(at..at, with);
            }
        }
    }
    data
}

fn files_under(dir: &Path, keep: &dyn Fn(&str) -> bool, out: &mut Vec<Vec<u8>>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<_> = entries.flatten().map(|e| e.path()).collect();
    paths.sort();
    for p in paths {
        if p.is_dir() && !p.is_symlink() {
            files_under(&p, keep, out);
        } else if keep(p.file_name().unwrap().to_str().unwrap()) {
            out.push(std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())));
        }
    }
}

fn read(path: impl AsRef<Path>) -> Vec<u8> {
    let path = path.as_ref();
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn seeds(target: &str) -> Vec<Vec<u8>> {
    let root = workspace_root();
    let fixtures = root.join("exporter/tests/fixtures");
    let mut out = Vec::new();
    match target {
        "proc_files" => {
            for f in ["stat", "meminfo", "vmstat", "diskstats", "net/dev"] {
                out.push(read(fixtures.join("proc").join(f)));
                out.push(read(Path::new("/proc").join(f)));
            }
        }
        "cgroup_files" => {
            files_under(&fixtures.join("cgroup"), &|_| true, &mut out);
            // This process's own cgroup files (the unified hierarchy, as on CI and on nodes).
            let own = String::from_utf8(read("/proc/self/cgroup")).unwrap();
            out.push(own.clone().into_bytes());
            let path = own.lines().find_map(|l| l.strip_prefix("0::")).unwrap();
            let dir = Path::new("/sys/fs/cgroup").join(path.trim_start_matches('/'));
            for f in ["cpu.stat", "io.stat", "memory.current", "cgroup.procs"] {
                if let Ok(b) = std::fs::read(dir.join(f)) {
                    out.push(b);
                }
            }
            out.push(
                b"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod0b9e1f5c_8d2a_4c3b_9f1e_6a7b8c9d0e1f.slice/cri-containerd-0a0a000000000000000000000000000000000000000000000000000000000000.scope\n\
                  /docker/d0c0333333333333333333333333333333333333333333333333333333333333\n\
                  /kubepods/besteffort/pod7c6d5e4f-3a2b-4c1d-8e9f-0a1b2c3d4e5f/crio-beef222222222222222222222222222222222222222222222222222222222222\n"
                    .to_vec(),
            );
        }
        "smart_plugs" => {
            out.push(br#"{"id":0,"source":"init","output":true,"apower":12.5,"voltage":230.1,"current":0.08,"aenergy":{"total":1234.5,"by_minute":[1,2,3],"minute_ts":1700000000},"temperature":{"tC":40.1,"tF":104.2}}"#.to_vec());
            out.push(br#"{"StatusSNS":{"Time":"2024-01-01T00:00:00","ENERGY":{"TotalStartTime":"2023-01-01T00:00:00","Total":12.345,"Yesterday":0.1,"Today":0.2,"Power":[10,2.5],"ApparentPower":13,"ReactivePower":4,"Factor":0.9,"Voltage":231,"Current":0.056}}}"#.to_vec());
        }
        "promql_answer" => {
            out.push(br#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"__name__":"greenpipe_node_cpu_seconds_total","node":"pi-01","mode":"user"},"values":[[1700000000,"1.5"],[1700000015.5,"NaN"],[1700000030,"+Inf"]]},{"metric":{"node":"pi-02"},"values":[[1700000000,"-Inf"]]}]}}"#.to_vec());
            out.push(
                br#"{"status":"error","errorType":"bad_data","error":"parse error"}"#.to_vec(),
            );
            out.push(br#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1700000000,"3"]}]}}"#.to_vec());
        }
        "remote_write" => {
            use greenpipe_remote_write::{encode, Label, Sample, TimeSeries};
            let series = |name: &'static str, values: &[f64]| TimeSeries {
                labels: vec![
                    Label {
                        name: "__name__".into(),
                        value: name.into(),
                    },
                    Label {
                        name: "node".into(),
                        value: "pi-01".into(),
                    },
                ],
                samples: values
                    .iter()
                    .enumerate()
                    .map(|(i, &value)| Sample {
                        value,
                        timestamp: 1_700_000_000_000 + i as i64 * 15_000,
                    })
                    .collect(),
            };
            out.push(encode(vec![
                series("greenpipe_node_power_watts", &[3.2, 3.4, f64::NAN]),
                series("greenpipe_node_energy_joules_total", &[1e9, f64::INFINITY]),
            ]));
            out.push(encode(vec![]));
        }
        "model_file" => out.push(read(root.join("estimator/models/default.json"))),
        "trace_csv" => {
            use greenpipe_common::features::{Feature, FeatureValues};
            use greenpipe_common::trace::{write_trace, TraceRow};
            let rows: Vec<TraceRow> = (0..3)
                .map(|t| {
                    let mut features = FeatureValues::default();
                    for (i, f) in Feature::ALL.into_iter().enumerate() {
                        features.set(
                            f,
                            (t % 2 == 0 || i % 3 != 0).then_some(i as f64 * 1.5 + t as f64),
                        );
                    }
                    TraceRow {
                        timestamp: 1_700_000_000.0 + t as f64,
                        node: "pi-01".into(),
                        workload: "idle".into(),
                        power_watts: Some(3.25 + t as f64),
                        features,
                    }
                })
                .collect();
            out.push(write_trace(&rows).unwrap().into_bytes());
        }
        "toml_config" => {
            out.push(
                b"node_name = \"pi-01\"\ncollection_interval = \"1s\"\nmeter_timeout = \"500ms\"\n\
                  [web]\nlisten_address = \":9910\"\ntelemetry_path = \"/metrics\"\n\
                  [paths]\nprocfs = \"/host/proc\"\nsysfs = \"/host/sys\"\ncgroupfs = \"/host/sys/fs/cgroup\"\n\
                  [[meters]]\nkind = \"um25c\"\ntarget = \"/dev/rfcomm0\"\nname = \"pi-supply\"\n"
                    .to_vec(),
            );
        }
        "web_config" => {
            files_under(
                &root.join("deploy/overlays/tls/web-config"),
                &|name| name.ends_with(".yml"),
                &mut out,
            );
        }
        other => panic!("no seeds for target {other}"),
    }
    assert!(!out.is_empty(), "{target}: no seeds");
    out
}

#[test]
fn every_fuzz_target_survives_its_seeds_and_their_mutations() {
    assert_eq!(targets::TARGETS.len(), 9);
    for &(name, target) in targets::TARGETS {
        let seeds = seeds(name);
        // One generator per target: adding a target does not change another's inputs.
        let mut rng = Rng(name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
            (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
        }));
        let inputs = seeds
            .iter()
            .cloned()
            .chain((0..MUTATIONS).map(|_| mutate(&mut rng, &seeds)));
        let mut executions = 0;
        for input in inputs {
            let outcome = std::panic::catch_unwind(|| target(&input));
            if outcome.is_err() {
                panic!(
                    "fuzz target {name} crashed on input {:?} (keep it as a regression case)",
                    String::from_utf8_lossy(&input)
                );
            }
            executions += 1;
        }
        println!(
            "{name}: {executions} executions, {} seeds, 0 crashes",
            seeds.len()
        );
    }
}
