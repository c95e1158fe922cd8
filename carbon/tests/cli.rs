//! End to end through `greenpipe-carbon ...` on the shared carbon series (a copy in
//! `tests/data/`, so the suite needs nothing outside the repository): intensity written by remote
//! write into a real Prometheus, the placement dry run, and the queries.

use greenpipe_tests::{workspace_root, Prometheus};
use std::process::Command;

const AT: &str = "2022-06-01T12:00:00Z";
const AT_UNIX: i64 = 1_654_084_800;

fn csv_path(zone: &str) -> std::path::PathBuf {
    workspace_root().join(format!("carbon/tests/data/eia-dcrl-2022/{zone}.csv"))
}

fn series(zone: &str) -> String {
    format!("{zone}=csv:{}", csv_path(zone).display())
}

fn carbon(args: &[&str]) -> (bool, String, String) {
    // Built by cargo test for this package's tests: no cargo build from inside the test.
    let out = Command::new(env!("CARGO_BIN_EXE_greenpipe-carbon"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn intensity_is_remote_written_to_prometheus() {
    let prom = Prometheus::start(&[], "1s").unwrap();
    let (ciso, bpat) = (series("CISO"), series("BPAT"));
    let (ok, stdout, stderr) = carbon(&[
        "intensity",
        "--source",
        &ciso,
        "--source",
        &bpat,
        "--at",
        AT,
        "--remote-write-url",
        &prom.remote_write_url(),
    ]);
    assert!(ok, "{stdout}\n{stderr}");
    // The actual written is the CSV's value for the hour of --at.
    let csv = greenpipe_carbon::sources::csv::read(&csv_path("CISO")).unwrap();
    let want = csv.value_at(AT_UNIX).unwrap();
    let got = prom
        .query_scalar(r#"greenpipe_grid_carbon_intensity_grams_per_kwh{zone="CISO",kind="actual",source="csv"}"#)
        .unwrap()
        .expect("actual sample in Prometheus");
    assert!((got - want).abs() < 1e-9, "got {got}, want {want}");
    // Forecasts for every default horizon and both zones, from our regression.
    let f = prom
        .query(r#"greenpipe_grid_carbon_intensity_grams_per_kwh{kind="forecast"}"#)
        .unwrap();
    assert_eq!(f.len(), 2 * 6, "{f:?}");
    assert!(
        f.iter()
            .all(|s| s["metric"]["source"] == "greenpipe_regression"),
        "{f:?}"
    );
    let h24 = prom
        .query_scalar(r#"greenpipe_grid_carbon_intensity_grams_per_kwh{zone="BPAT",kind="forecast",horizon_hours="24"}"#)
        .unwrap()
        .unwrap();
    assert!((5.0..500.0).contains(&h24), "{h24}");
}

#[test]
fn placement_dry_run_plans_labels_and_taints() {
    let nodes = format!("{}/tests/fixtures/nodes.json", env!("CARGO_MANIFEST_DIR"));
    let (ciso, bpat) = (series("CISO"), series("BPAT"));
    let (ok, stdout, stderr) = carbon(&[
        "place",
        "--dry-run",
        "--once",
        "--nodes-file",
        &nodes,
        "--source",
        &ciso,
        "--source",
        &bpat,
        "--zone-alias",
        "us-west-2a=CISO",
        "--at",
        AT,
        "--horizon",
        "2h",
    ]);
    assert!(ok, "{stdout}\n{stderr}");
    // BPAT (hydro, tens of g/kWh) is always cleaner than CISO (hundreds): CISO red, BPAT green.
    assert!(
        stdout.contains("zone BPAT: green") && stdout.contains("zone CISO: red"),
        "{stdout}"
    );
    assert!(
        stdout.contains("node edge-ciso: none -> red, taint"),
        "{stdout}"
    );
    assert!(
        stdout.contains("node edge-bpat: none -> green, untaint"),
        "{stdout}"
    );
    assert!(
        stdout.contains("node edge-unknown: green -> none (node has no zone)"),
        "{stdout}"
    );
    assert!(
        stdout.contains(r#""op":"test","path":"/metadata/resourceVersion","value":"10""#),
        "{stdout}"
    );
    // Inside an override window everything is forced off.
    let (ok, stdout, _) = carbon(&[
        "place",
        "--dry-run",
        "--once",
        "--nodes-file",
        &nodes,
        "--source",
        &ciso,
        "--source",
        &bpat,
        "--zone-alias",
        "us-west-2a=CISO",
        "--at",
        AT,
        "--override-off",
        "2022-06-01T00:00:00Z/2022-06-02T00:00:00Z",
    ]);
    assert!(ok);
    assert!(
        stdout.contains("node edge-bpat: none -> none, untaint (override window: forced off)"),
        "{stdout}"
    );
    // A nodes file without --dry-run is refused.
    let (ok, _, stderr) = carbon(&["place", "--once", "--nodes-file", &nodes, "--source", &ciso]);
    assert!(!ok && stderr.contains("--dry-run"), "{stderr}");
}

#[test]
fn queries_answer_on_the_shared_series() {
    let (ciso, bpat) = (series("CISO"), series("BPAT"));
    let (ok, stdout, stderr) = carbon(&[
        "best-zone",
        "--source",
        &ciso,
        "--source",
        &bpat,
        "--at",
        AT,
        "--horizon",
        "3h",
    ]);
    assert!(ok, "{stderr}");
    assert!(stdout.contains("best: BPAT"), "{stdout}");

    let (ok, stdout, stderr) = carbon(&[
        "window",
        "--source",
        &ciso,
        "--zone",
        "CISO",
        "--duration",
        "3h",
        "--at",
        AT,
    ]);
    assert!(ok, "{stderr}");
    // CISO is cleanest around midday Pacific (solar): the best 3 h start is 48 h away at most.
    let start = stdout
        .split("start ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .unwrap();
    let start = greenpipe_carbon::time::parse(start).unwrap();
    assert!((AT_UNIX..=AT_UNIX + 48 * 3600).contains(&start), "{stdout}");

    let (ok, stdout, stderr) = carbon(&[
        "low-since",
        "--source",
        &ciso,
        "--zone",
        "CISO",
        "--hours",
        "24",
        "--at",
        AT,
        "--below",
        "1000",
    ]);
    assert!(ok, "{stderr}");
    assert!(
        stdout.contains("past 24 h: 24 low, 0 missing") && stdout.contains("low for all 24 h: yes"),
        "{stdout}"
    );
    // Unknown zone is a clear error.
    let (ok, _, stderr) = carbon(&[
        "window",
        "--source",
        &ciso,
        "--zone",
        "NOPE",
        "--duration",
        "1h",
        "--at",
        AT,
    ]);
    assert!(!ok && stderr.contains("NOPE"), "{stderr}");
}

#[test]
fn replay_writes_summary_report_and_plots() {
    let dir = tempfile::tempdir().unwrap();
    let fleet = dir.path().join("fleet.toml");
    std::fs::write(
        &fleet,
        "[[node]]\nname = \"ciso-1\"\nzone = \"CISO\"\nidle_watts = 50\nwatts_per_busy_core = 10\ncores = 8\n\n\
         [[node]]\nname = \"erco-1\"\nzone = \"ERCO\"\nidle_watts = 50\nwatts_per_busy_core = 10\ncores = 8\n",
    )
    .unwrap();
    // A month of jobs: one every 5 h (2-6 cores, 3 h, deadline a day later), and a service.
    let jobs = dir.path().join("jobs.csv");
    let mut text = String::from("arrival,cores,duration,deadline,tolerates_red\n");
    text.push_str("2022-03-01T00:00:00Z,2,720h,none,no\n");
    for k in 0..24 * 30 / 5 {
        let arrival = 1_646_092_800 + k * 5 * 3600;
        text.push_str(&format!(
            "{arrival},{},3h,{},{}\n",
            2 + k % 5,
            arrival + 27 * 3600,
            if k % 4 == 0 { "yes" } else { "no" }
        ));
    }
    std::fs::write(&jobs, text).unwrap();
    let out = dir.path().join("out");
    let (ciso, erco) = (csv_path("CISO"), csv_path("ERCO"));
    let intensity = |z: &str, p: &std::path::Path| format!("{z}={}", p.display());
    let args = |fleet: &std::path::Path| {
        vec![
            "replay".to_string(),
            "--intensity".into(),
            intensity("CISO", &ciso),
            "--intensity".into(),
            intensity("ERCO", &erco),
            "--nodes".into(),
            fleet.display().to_string(),
            "--jobs".into(),
            jobs.display().to_string(),
            "--forecast".into(),
            "seasonal-naive,regression".into(),
            "--out".into(),
            out.display().to_string(),
        ]
    };
    let a = args(&fleet);
    let (ok, stdout, stderr) = carbon(&a.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(ok, "{stdout}\n{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines[0],
        "policy,forecast,kg_co2e,kwh,saved_percent_vs_blind,share_of_oracle_savings,deadlines_missed,evictions"
    );
    let policies: Vec<&str> = lines[1..]
        .iter()
        .map(|l| l.rsplitn(7, ',').last().unwrap())
        .collect();
    assert_eq!(
        policies,
        [
            "carbon-blind,none",
            "greenpipe,seasonal-naive",
            "greenpipe,regression",
            "oracle,oracle"
        ]
    );
    let kg = |line: &str| line.split(',').nth(2).unwrap().parse::<f64>().unwrap();
    // The oracle (the same controller knowing each hour's intensity) beats carbon-blind here.
    assert!(kg(lines[4]) < kg(lines[1]), "{stdout}");
    assert_eq!(
        std::fs::read_to_string(out.join("summary.csv")).unwrap(),
        stdout
    );
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(report.contains("| oracle | oracle |"), "{report}");
    assert!(report.contains("| CISO | regression |"), "{report}");
    for png in ["intensity.png", "emissions.png"] {
        let bytes = std::fs::read(out.join(png)).unwrap();
        assert!(bytes.starts_with(b"\x89PNG"), "{png}");
    }
    // Unknown keys in the fleet are errors naming the file and the key.
    let bad = dir.path().join("bad.toml");
    std::fs::write(
        &bad,
        "[[node]]\nname = \"n\"\nzone = \"CISO\"\nidle_watts = 1\nwatts_per_busy_core = 1\ncores = 1\nram = 4\n",
    )
    .unwrap();
    let a = args(&bad);
    let (ok, _, stderr) = carbon(&a.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(
        !ok && stderr.contains("bad.toml") && stderr.contains("ram"),
        "{stderr}"
    );
}
