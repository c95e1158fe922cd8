//! `--web.config.file` end to end: a real Prometheus scrapes the exporter over TLS with a client
//! certificate and basic auth (and fails to with the wrong certificate, no certificate or the
//! wrong password, as its /api/v1/targets tells), the estimator serves its own metrics over TLS
//! to a Prometheus it also reads from, certificates rotate without a restart, and a bad web
//! config stops start-up with a message naming the problem.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use greenpipe_tests::pki::{self, Issued};
use greenpipe_tests::{free_port, wait_for, workspace_binary, Guard, Prometheus};

fn start_exporter(port: u16, web_config: &Path, log: &Path) -> Guard {
    let child = Command::new(workspace_binary("greenpipe-exporter"))
        .args([
            "--web.listen-address",
            &format!("127.0.0.1:{port}"),
            "--node-name",
            "tls-node",
            "--web.config.file",
        ])
        .arg(web_config)
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .expect("starting exporter");
    Guard::new("exporter", child)
}

/// A client trusting `ca`, presenting `identity` when given, one connection per request.
fn client(ca: &Path, identity: Option<&Issued>) -> reqwest::blocking::Client {
    let mut b = reqwest::blocking::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(&std::fs::read(ca).unwrap()).unwrap())
        .pool_max_idle_per_host(0)
        .tls_info(true)
        .timeout(Duration::from_secs(10));
    if let Some(id) = identity {
        let mut pem = std::fs::read(&id.cert).unwrap();
        pem.extend(std::fs::read(&id.key).unwrap());
        b = b.identity(reqwest::Identity::from_pem(&pem).unwrap());
    }
    b.build().unwrap()
}

fn tls_job(name: &str, port: u16, ca: &Path, cert: Option<&Issued>, password: &str) -> String {
    let cert = cert
        .map(|c| {
            format!(
                "      cert_file: {}\n      key_file: {}\n",
                c.cert.display(),
                c.key.display()
            )
        })
        .unwrap_or_default();
    format!(
        "  - job_name: {name}\n    scheme: https\n    scrape_interval: 1s\n    scrape_timeout: 1s\n    \
         tls_config:\n      ca_file: {}\n{cert}    basic_auth:\n      username: prometheus\n      \
         password: {password}\n    static_configs:\n      - targets: ['127.0.0.1:{port}']\n",
        ca.display()
    )
}

/// `(health, lastError)` of each job's target, once every job has been scraped at least once.
fn target_health(prom: &Prometheus, jobs: &[&str]) -> Option<Vec<(String, String, String)>> {
    let body: serde_json::Value = reqwest::blocking::get(format!("{}/api/v1/targets", prom.url))
        .ok()?
        .json()
        .ok()?;
    let targets = body["data"]["activeTargets"].as_array()?;
    let mut out = Vec::new();
    for job in jobs {
        let t = targets.iter().find(|t| t["labels"]["job"] == *job)?;
        let health = t["health"].as_str()?.to_string();
        if health == "unknown" {
            return None;
        }
        out.push((
            job.to_string(),
            health,
            t["lastError"].as_str().unwrap_or("").to_string(),
        ));
    }
    Some(out)
}

#[test]
fn prometheus_scrapes_the_exporter_over_mtls_with_basic_auth_and_is_refused_otherwise() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let ca = pki::ca(d, "greenpipe-ca");
    pki::issue(d, &ca, "exporter", true);
    let scraper = pki::issue(d, &ca, "prometheus", false);
    let rogue_ca = pki::ca(d, "rogue-ca");
    let rogue = pki::issue(d, &rogue_ca, "intruder", false);
    let web = d.join("web.yml");
    std::fs::write(
        &web,
        format!(
            "tls_server_config:\n  cert_file: exporter.pem\n  key_file: exporter.key\n  \
             client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: greenpipe-ca.pem\n  \
             client_allowed_sans: [prometheus]\nhttp_server_config:\n  headers:\n    \
             X-Content-Type-Options: nosniff\nbasic_auth_users:\n  prometheus: '{}'\n",
            pki::bcrypt_hash("s3cret")
        ),
    )
    .unwrap();
    let port = free_port();
    let _exporter = start_exporter(port, &web, &d.join("exporter.log"));

    let jobs = [
        tls_job("good", port, &ca.cert, Some(&scraper), "s3cret"),
        tls_job("wrong-password", port, &ca.cert, Some(&scraper), "guess"),
        tls_job("wrong-cert", port, &ca.cert, Some(&rogue), "s3cret"),
        tls_job("no-cert", port, &ca.cert, None, "s3cret"),
    ]
    .concat();
    let prom = Prometheus::start_with_config(&format!(
        "global:\n  scrape_interval: 1s\nscrape_configs:\n{jobs}"
    ))
    .expect("prometheus");

    let cpu = wait_for(Duration::from_secs(60), || {
        prom.query_scalar("sum(greenpipe_node_cpu_seconds_total{node=\"tls-node\",job=\"good\"})")
            .ok()
            .flatten()
    })
    .unwrap_or_else(|| {
        panic!(
            "series scraped over mTLS reach Prometheus; exporter log:\n{}",
            std::fs::read_to_string(d.join("exporter.log")).unwrap_or_default()
        )
    });
    assert!(cpu > 0.0);
    let names = ["good", "wrong-password", "wrong-cert", "no-cert"];
    let health = wait_for(Duration::from_secs(30), || {
        target_health(&prom, &names)
            .filter(|h| h.iter().all(|(j, s, _)| (j == "good") == (s == "up")))
    })
    .unwrap_or_else(|| panic!("targets: {:?}", target_health(&prom, &names)));
    eprintln!("targets: {health:?}");
    for (job, state, error) in &health {
        match job.as_str() {
            "good" => assert!(error.is_empty(), "{error}"),
            "wrong-password" => assert!(error.contains("401"), "{job}: {state} {error}"),
            _ => assert!(
                error.to_lowercase().contains("tls") || error.contains("certificate"),
                "{job}: {state} {error}"
            ),
        }
    }

    // Health endpoints follow the same rules; the refusal says nothing but "Basic".
    let c = client(&ca.cert, Some(&scraper));
    let refused = c
        .get(format!("https://127.0.0.1:{port}/healthz"))
        .send()
        .unwrap();
    assert_eq!(refused.status().as_u16(), 401);
    assert_eq!(refused.headers()["www-authenticate"], "Basic");
    assert_eq!(refused.headers()["x-content-type-options"], "nosniff");
    assert_eq!(refused.text().unwrap(), "Unauthorized\n");
    let ok = c
        .get(format!("https://127.0.0.1:{port}/healthz"))
        .basic_auth("prometheus", Some("s3cret"))
        .send()
        .unwrap();
    assert_eq!(ok.status().as_u16(), 200);
    // Plain HTTP to the TLS port gets no page.
    let plain = reqwest::blocking::Client::new()
        .get(format!("http://127.0.0.1:{port}/metrics"))
        .timeout(Duration::from_secs(10))
        .send();
    assert!(plain.map(|r| !r.status().is_success()).unwrap_or(true));
}

#[test]
fn the_estimator_serves_its_metrics_over_tls_to_the_prometheus_it_reads() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let ca = pki::ca(d, "ca");
    pki::issue(d, &ca, "estimator", true);
    std::fs::write(
        d.join("web.yml"),
        format!(
            "tls_server_config:\n  cert_file: estimator.pem\n  key_file: estimator.key\n  \
             min_version: TLS13\nbasic_auth_users:\n  prometheus: '{}'\n",
            pki::bcrypt_hash("s3cret")
        ),
    )
    .unwrap();
    let port = free_port();
    let prom = Prometheus::start_with_config(&format!(
        "global:\n  scrape_interval: 1s\nscrape_configs:\n{}",
        tls_job("estimator", port, &ca.cert, None, "s3cret")
    ))
    .expect("prometheus");
    let child = Command::new(workspace_binary("greenpipe-estimator"))
        .arg("serve")
        .arg(format!("--prometheus-url={}", prom.url))
        .arg(format!("--remote-write-url={}", prom.remote_write_url()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg(format!("--web.config.file={}", d.join("web.yml").display()))
        .arg("--log.level=warn")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(d.join("estimator.log")).unwrap())
        .spawn()
        .expect("starting the estimator");
    let _estimator = Guard::new("estimator", child);
    let ticks = wait_for(Duration::from_secs(60), || {
        prom.query_scalar("greenpipe_estimator_ticks_total{job=\"estimator\"}")
            .ok()
            .flatten()
    })
    .unwrap_or_else(|| {
        panic!(
            "the estimator's self metrics scraped over TLS: {:?}\n{}",
            target_health(&prom, &["estimator"]),
            std::fs::read_to_string(d.join("estimator.log")).unwrap_or_default()
        )
    });
    // The series exists only because a scrape over TLS + basic auth worked (the wait above is
    // the check); its value may still be 0 this early.
    assert!(ticks.is_finite() && ticks >= 0.0, "ticks_total {ticks}");
    let c = client(&ca.cert, None);
    let refused = c
        .get(format!("https://127.0.0.1:{port}/metrics"))
        .basic_auth("prometheus", Some("wrong"))
        .send()
        .unwrap();
    assert_eq!(refused.status().as_u16(), 401);
}

#[test]
fn a_rotated_certificate_reaches_new_connections_without_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let ca = pki::ca(d, "ca");
    let first = pki::issue(d, &ca, "first", true);
    std::fs::copy(&first.cert, d.join("tls.crt")).unwrap();
    std::fs::copy(&first.key, d.join("tls.key")).unwrap();
    std::fs::write(
        d.join("web.yml"),
        "tls_server_config:\n  cert_file: tls.crt\n  key_file: tls.key\n",
    )
    .unwrap();
    let port = free_port();
    let _exporter = start_exporter(port, &d.join("web.yml"), &d.join("exporter.log"));
    let url = format!("https://127.0.0.1:{port}/healthz");
    let peer = || -> Option<Vec<u8>> {
        let r = client(&ca.cert, None).get(&url).send().ok()?;
        r.extensions()
            .get::<reqwest::tls::TlsInfo>()?
            .peer_certificate()
            .map(|c| c.to_vec())
    };
    let served = wait_for(Duration::from_secs(30), peer).expect("exporter serves TLS");
    assert_eq!(served, pki::der_of(&first.cert));

    // cert-manager style: new files renamed into place while the exporter runs.
    let second = pki::issue(d, &ca, "second", true);
    assert_ne!(pki::der_of(&second.cert), served);
    std::fs::copy(&second.key, d.join("tls.key.new")).unwrap();
    std::fs::copy(&second.cert, d.join("tls.crt.new")).unwrap();
    std::fs::rename(d.join("tls.key.new"), d.join("tls.key")).unwrap();
    std::fs::rename(d.join("tls.crt.new"), d.join("tls.crt")).unwrap();
    let rotated = wait_for(Duration::from_secs(30), || {
        peer().filter(|der| *der == pki::der_of(&second.cert))
    });
    assert!(
        rotated.is_some(),
        "new connections see the new certificate: {}",
        std::fs::read_to_string(d.join("exporter.log")).unwrap_or_default()
    );
}

#[test]
fn a_bad_web_config_stops_start_up_naming_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let ca = pki::ca(d, "ca");
    pki::issue(d, &ca, "server", true);
    for (name, text, expect) in [
        (
            "typo",
            "tls_server_config:\n  cert_fille: x.pem\n",
            "cert_fille",
        ),
        (
            "missing",
            "tls_server_config:\n  cert_file: absent.pem\n  key_file: absent.key\n",
            "absent.pem",
        ),
        ("hash", "basic_auth_users:\n  alice: plaintext\n", "alice"),
        (
            "ca-without-policy",
            "tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\n  \
             client_ca_file: ca.pem\n",
            "Client Auth Policy",
        ),
        (
            "auth",
            "tls_server_config:\n  cert_file: server.pem\n  key_file: server.key\n  \
             client_auth_type: Maybe\n",
            "Maybe",
        ),
    ] {
        let web = d.join(format!("{name}.yml"));
        std::fs::write(&web, text).unwrap();
        let out = Command::new(workspace_binary("greenpipe-exporter"))
            .args([
                "--web.listen-address",
                &format!("127.0.0.1:{}", free_port()),
            ])
            .arg("--web.config.file")
            .arg(&web)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{name}: started anyway");
        assert!(stderr.contains(expect), "{name}: {stderr}");
    }
}
