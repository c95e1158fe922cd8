//! The campaign report: `report.md`, `summary.csv` (the validation rows, the header of
//! `validate`), `energy.csv` (one row per inference configuration and power source),
//! `containers.csv` (every container's energy in every window, the data of the conservation
//! check) and the plots: measured vs predicted power per validation trace (drawn by `validate`
//! into `validate/`), energy per inference against latency grouped by model, and validation error
//! by thread count.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::analysis::{Analysis, StepResult};
use crate::energy::{PowerSource, SourceEnergy};
use crate::plan::{config_text, Plan, Tag, CONFIG_KEYS};
use greenpipe_offline::baselines::{CPU_ONLY, STRESS_ONLY};
use greenpipe_offline::plots;
use greenpipe_offline::report::{self, SummaryRow, ALL};

/// The exact header of `energy.csv`.
pub const ENERGY_HEADER: &str = "node,workload,model,precision,engine,threads,mode,inferences,\
latency_p50_seconds,latency_p95_seconds,node_energy_joules,container_energy_joules,\
joules_per_inference,power_source";

/// The exact header of `containers.csv`.
pub const CONTAINERS_HEADER: &str =
    "node,workload,power_source,container_id,pod_uid,idle_joules,dynamic_joules,energy_joules,node_energy_joules";

/// One inference configuration's figures from one power source.
#[derive(Debug, Clone)]
pub struct EnergyRow {
    /// Step name.
    pub workload: String,
    /// Config values (model, precision, engine, threads, mode).
    pub config: [String; 5],
    /// Inferences in the window.
    pub inferences: f64,
    /// Window length, s.
    pub seconds: f64,
    /// Latency quantiles, s.
    pub p50: Option<f64>,
    /// See `p50`.
    pub p95: Option<f64>,
    /// Node energy, J.
    pub node_joules: f64,
    /// The workload container's energy, J, and its idle part.
    pub container_joules: f64,
    /// Idle part of `container_joules`.
    pub container_idle_joules: f64,
    /// Meter or predicted.
    pub source: PowerSource,
}

impl EnergyRow {
    /// J per inference.
    pub fn joules_per_inference(&self) -> Option<f64> {
        (self.inferences > 0.0).then(|| self.container_joules / self.inferences)
    }
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(String::new, |v| format!("{v:.digits$}"))
}

/// The inference rows of the analysis.
pub fn energy_rows(plan: &Plan, a: &Analysis) -> Vec<EnergyRow> {
    let mut out = Vec::new();
    for (st, (_, r)) in plan.steps.iter().zip(&a.steps) {
        let Some(w) = &r.window else { continue };
        let Some(inferences) = w.inferences else {
            continue;
        };
        for e in &r.energy {
            let c = e
                .containers
                .get(&w.container_id)
                .cloned()
                .unwrap_or_default();
            out.push(EnergyRow {
                workload: st.name.clone(),
                config: CONFIG_KEYS.map(|k| config_text(&st.config, k)),
                inferences,
                seconds: e.seconds,
                p50: w.latency_p50_seconds,
                p95: w.latency_p95_seconds,
                node_joules: e.node_joules,
                container_joules: c.joules(),
                container_idle_joules: c.idle_joules,
                source: e.source,
            });
        }
    }
    out
}

/// Why a campaign plot was not drawn (the report notes it and goes on).
#[derive(Debug, thiserror::Error)]
pub enum CampaignPlotError {
    #[error("{0}")]
    NothingToPlot(&'static str),
    #[error("no model")]
    NoModel,
    #[error(transparent)]
    Plot(#[from] plots::PlotError),
}

fn write_file(path: PathBuf, text: &str) -> Result<(), report::WriteError> {
    std::fs::write(&path, text).map_err(|source| report::WriteError::Write { path, source })
}

/// Writes every file of the report.
pub fn write(
    plan: &Plan,
    a: &Analysis,
    out: &Path,
    node: &str,
) -> Result<String, report::WriteError> {
    report::create_dir(out)?;
    report::write_summary(out, &a.validation)?;
    let rows = energy_rows(plan, a);
    let mut csv = format!("{ENERGY_HEADER}\n");
    for r in &rows {
        let [m, p, e, t, mode] = &r.config;
        let _ = writeln!(
            csv,
            "{node},{},{m},{p},{e},{t},{mode},{:.0},{},{},{:.4},{:.4},{},{}",
            r.workload,
            r.inferences,
            opt(r.p50, 6),
            opt(r.p95, 6),
            r.node_joules,
            r.container_joules,
            opt(r.joules_per_inference(), 6),
            r.source.as_str()
        );
    }
    write_file(out.join("energy.csv"), &csv)?;
    let mut containers = format!("{CONTAINERS_HEADER}\n");
    for (name, r) in &a.steps {
        for e in &r.energy {
            for (id, c) in &e.containers {
                let _ = writeln!(
                    containers,
                    "{node},{name},{},{id},{},{:.6},{:.6},{:.6},{:.6}",
                    e.source.as_str(),
                    c.pod_uid,
                    c.idle_joules,
                    c.dynamic_joules,
                    c.joules(),
                    e.node_joules
                );
            }
        }
    }
    write_file(out.join("containers.csv"), &containers)?;
    let mut plot_notes = Vec::new();
    if let Err(e) = energy_latency_plot(out, &rows) {
        plot_notes.push(format!(
            "energy-vs-latency plot skipped: {}",
            greenpipe_common::error_chain(&e)
        ));
    }
    if let Err(e) = error_by_threads_plot(plan, a, out) {
        plot_notes.push(format!(
            "error-by-threads plot skipped: {}",
            greenpipe_common::error_chain(&e)
        ));
    }
    let md = markdown(plan, a, &rows, node, &plot_notes);
    write_file(out.join("report.md"), &md)?;
    Ok(md)
}

/// MAPE of `model` on `workload` in the validation rows.
fn mape(rows: &[SummaryRow], workload: &str, model: &str) -> Option<f64> {
    rows.iter()
        .find(|r| r.workload == workload && r.model == model)
        .map(|r| r.score.mape_percent)
}

/// A baseline in the headline: name, its validation MAPE, the model's improvement over it (%).
pub type BaselineComparison = (String, f64, f64);

/// The headline: the model's mean validation MAPE and its relative improvement over each
/// baseline.
pub fn headline(a: &Analysis) -> Option<(f64, Vec<BaselineComparison>)> {
    let name = &a.model.as_ref()?.name;
    let m = mape(&a.validation, ALL, name)?;
    let baselines = [STRESS_ONLY, CPU_ONLY]
        .iter()
        .filter_map(|b| {
            let v = mape(&a.validation, ALL, b)?;
            Some((b.to_string(), v, 100.0 * (v - m) / v))
        })
        .collect();
    Some((m, baselines))
}

fn markdown(
    plan: &Plan,
    a: &Analysis,
    rows: &[EnergyRow],
    node: &str,
    plot_notes: &[String],
) -> String {
    let mut md = format!("# Campaign report: {node}\n\n");
    let model_name = a.model.as_ref().map(|m| m.name.clone()).unwrap_or_default();
    match headline(a) {
        Some((m, b)) => {
            let _ = write!(
                md,
                "**{m:.2} % MAPE** on the validation workloads with `{model_name}`"
            );
            if !b.is_empty() {
                let avg = b.iter().map(|x| x.2).sum::<f64>() / b.len() as f64;
                let parts: Vec<String> = b
                    .iter()
                    .map(|(n, v, imp)| format!("{imp:.1} % better than {n} ({v:.2} %)"))
                    .collect();
                let _ = write!(
                    md,
                    ", {}; {avg:.1} % better than the baselines on average",
                    parts.join(", ")
                );
            }
            md.push_str(".\n\n");
        }
        None => md.push_str("No validation result (see the notes).\n\n"),
    }
    // Steps.
    md.push_str("## Steps\n\n| step | group | tag | status | window s | rows with meter | note |\n|---|---|---|---|---|---|---|\n");
    for (st, (_, r)) in plan.steps.iter().zip(&a.steps) {
        let (status, secs) = match &r.window {
            Some(w) => (
                format!("{:?}", w.status).to_lowercase(),
                format!("{:.1}", w.seconds()),
            ),
            None => ("not run".into(), String::new()),
        };
        let _ = writeln!(
            md,
            "| {} | {} | {} | {status} | {secs} | {} | {} |",
            st.name,
            st.group,
            st.tag.as_str(),
            r.metered_rows,
            r.skipped.as_deref().unwrap_or("")
        );
    }
    // Validation per workload and grouped.
    let labels = [model_name.as_str(), STRESS_ONLY, CPU_ONLY];
    md.push_str("\n## Validation MAPE per workload (%)\n\n");
    md.push_str("| workload | architecture | precision | engine | threads | mode |");
    for l in labels {
        let _ = write!(md, " {l} |");
    }
    md.push_str("\n|---|---|---|---|---|---|---|---|---|\n");
    let validated: Vec<_> = plan
        .steps
        .iter()
        .filter(|st| st.tag == Tag::Validate)
        .filter(|st| mape(&a.validation, &st.name, &model_name).is_some())
        .collect();
    for st in &validated {
        let _ = write!(md, "| {} |", st.name);
        for k in CONFIG_KEYS {
            let _ = write!(md, " {} |", config_text(&st.config, k));
        }
        for l in labels {
            let _ = write!(md, " {} |", opt(mape(&a.validation, &st.name, l), 2));
        }
        md.push('\n');
    }
    for (key, title) in CONFIG_KEYS.iter().zip([
        "architecture",
        "precision",
        "engine",
        "thread count",
        "mode",
    ]) {
        let mut groups: BTreeMap<String, Vec<&str>> = BTreeMap::new();
        for st in &validated {
            groups
                .entry(config_text(&st.config, key))
                .or_default()
                .push(&st.name);
        }
        if groups.keys().all(String::is_empty) {
            continue;
        }
        let _ = writeln!(
            md,
            "\nMean MAPE by {title} (%):\n\n| {title} | workloads | {} |\n|---|---|---|---|---|",
            labels.join(" | ")
        );
        for (value, names) in &groups {
            let _ = write!(
                md,
                "| {} | {} |",
                if value.is_empty() { "-" } else { value },
                names.len()
            );
            for l in labels {
                let v: Vec<f64> = names
                    .iter()
                    .filter_map(|n| mape(&a.validation, n, l))
                    .collect();
                let _ = write!(
                    md,
                    " {} |",
                    opt(
                        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64),
                        2
                    )
                );
            }
            md.push('\n');
        }
    }
    // Latency and energy.
    md.push_str("\n## Latency and energy per inference\n\n");
    md.push_str(
        "Container energy is the workload container's share of node energy over the window \
         (GreenPipe's attribution: idle power split by process count, dynamic power by weighted \
         usage); energy per inference is that energy over the window's inferences. `meter` rows \
         attribute the metered node power, `predicted` rows the model's prediction.\n\n",
    );
    md.push_str("| workload | model | precision | engine | threads | mode | source | inferences | throughput /s | p50 ms | p95 ms | node W | container W | idle share % | J/inference | idle J/inf | dynamic J/inf |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for r in rows {
        let [m, p, e, t, mode] = &r.config;
        let jpi = r.joules_per_inference();
        let idle_jpi = (r.inferences > 0.0).then(|| r.container_idle_joules / r.inferences);
        let dyn_jpi = (r.inferences > 0.0)
            .then(|| (r.container_joules - r.container_idle_joules) / r.inferences);
        let idle_share = (r.container_joules > 0.0)
            .then(|| 100.0 * r.container_idle_joules / r.container_joules);
        let _ = writeln!(
            md,
            "| {} | {m} | {p} | {e} | {t} | {mode} | {} | {:.0} | {:.2} | {} | {} | {:.2} | {:.3} | {} | {} | {} | {} |",
            r.workload,
            r.source.as_str(),
            r.inferences,
            r.inferences / r.seconds,
            opt(r.p50.map(|v| v * 1e3), 2),
            opt(r.p95.map(|v| v * 1e3), 2),
            r.node_joules / r.seconds,
            r.container_joules / r.seconds,
            opt(idle_share, 1),
            opt(jpi, 4),
            opt(idle_jpi, 4),
            opt(dyn_jpi, 4),
        );
    }
    if rows.is_empty() {
        md.push_str("\n(no inference window with inference counts)\n");
    }
    md.push_str(&monitoring_overhead(a));
    md.push_str("\n## Plots\n\n- measured vs predicted power per validation trace: `validate/<node>__<workload>__validate.png`\n- energy per inference against latency, by model: `energy_vs_latency.png`\n- validation error by thread count: `error_by_threads.png`\n");
    md.push_str(
        "\nModel training report: `train/report.md`; validation report: `validate/report.md`.\n",
    );
    let notes: Vec<&String> = a.notes.iter().chain(plot_notes).collect();
    if !notes.is_empty() {
        md.push_str("\n## Notes\n\n");
        for n in notes {
            let _ = writeln!(md, "- {n}");
        }
    }
    md
}

/// The monitoring overhead section: the exporter's own power over every window, as a share of
/// node power, per power source.
fn monitoring_overhead(a: &Analysis) -> String {
    let mut md = String::from(
        "\n## Monitoring overhead\n\nThe exporter's own power: the node's dynamic power at each \
         tick times the exporter's share of the node's busy CPU time (the attribution rule \
         applied to its own usage, on CPU alone; `greenpipe:exporter_power_watts` is the same on \
         a live cluster), over every window of the campaign. The estimator runs off the node \
         here, so it adds nothing to the node's power.\n\n",
    );
    let mut any = false;
    md.push_str("| source | windows | exporter W | node W | share of node power % |\n|---|---|---|---|---|\n");
    for source in [PowerSource::Meter, PowerSource::Predicted] {
        let (mut exporter, mut node, mut seconds, mut windows) = (0.0, 0.0, 0.0, 0usize);
        for e in a
            .steps
            .iter()
            .flat_map(|(_, r)| &r.energy)
            .filter(|e| e.source == source)
        {
            if let Some(j) = e.exporter_joules {
                exporter += j;
                node += e.node_joules;
                seconds += e.seconds;
                windows += 1;
            }
        }
        if windows == 0 || seconds <= 0.0 || node <= 0.0 {
            continue;
        }
        any = true;
        let _ = writeln!(
            md,
            "| {} | {windows} | {:.4} | {:.2} | {:.3} |",
            source.as_str(),
            exporter / seconds,
            node / seconds,
            100.0 * exporter / node
        );
    }
    if !any {
        md.push_str(
            "| - | 0 | | | |\n\nNo window had the exporter's CPU counter \
                     (`greenpipe_exporter_cpu_seconds_total`) and the node's together.\n",
        );
    }
    md.push_str(&pi4_overhead_estimate());
    md
}

/// The exporter's instructions per tick at the overhead bar's size (eBPF on, 100 pod-shaped
/// cgroups, 1,000 processes, 1 s ticks): 2.16 M in user space, counted by callgrind
/// (`scripts/profile-exporter-cycle.sh`, 2026-12-06, `090bb44`), times 2.8 for the kernel's
/// part of its CPU time (perf `cpu-clock` sampling of the running exporter, 64 % kernel,
/// `87ed4c2`; an upper bound since `090bb44` cut kernel work). Re-measure both with the
/// exporter when it changes (docs/benchmarks.md#exporter-overhead).
const EXPORTER_INSTRUCTIONS_PER_TICK: f64 = 2.16e6 * 2.8;
/// The Raspberry Pi 4's Cortex-A72 clock, and the instructions per cycle assumed for the
/// exporter's pointer-chasing, syscall-heavy code on it (an in-order-ish estimate, not measured).
const PI4_CLOCK_HZ: f64 = 1.5e9;
const PI4_INSTRUCTIONS_PER_CYCLE: f64 = 1.0;

/// The same figure for a Raspberry Pi 4, estimated: instructions → CPU seconds at the Pi's
/// clock → watts through the bundled `rpi4` profile's weight per busy CPU second. No Pi is
/// measured here, so the row says so.
fn pi4_overhead_estimate() -> String {
    let profile = greenpipe_common::model::ModelFile::from_json(include_str!(
        "../../estimator/models/profiles/rpi4.json"
    ));
    let model = profile.ok().and_then(|f| f.models.into_iter().next());
    let Some(model) = model else {
        return "\nThe bundled rpi4 profile did not load: no Raspberry Pi 4 estimate.\n".into();
    };
    let per_cpu = model
        .attribution_weights
        .iter()
        .find(|w| w.feature == greenpipe_common::features::Feature::CpuSecondsPerSecond)
        .map(|w| w.watts_per_unit);
    let Some(per_cpu) = per_cpu else {
        return "\nThe bundled rpi4 profile has no CPU weight: no Raspberry Pi 4 estimate.\n"
            .into();
    };
    let cpu_seconds_per_second =
        EXPORTER_INSTRUCTIONS_PER_TICK / (PI4_CLOCK_HZ * PI4_INSTRUCTIONS_PER_CYCLE);
    let watts = cpu_seconds_per_second * per_cpu;
    let idle = model.idle_power_watts;
    format!(
        "\nRaspberry Pi 4, an **estimate** (no Pi measured): the exporter's {:.2} M instructions \
         per 1 s tick at the bar's size (100 pod cgroups, 1,000 processes, eBPF on; callgrind, \
         user space × 2.8 for the kernel's part) at the A72's {:.1} GHz and an assumed {} \
         instruction per cycle are {:.1} ms of CPU per second; through the bundled `rpi4` \
         profile's {per_cpu} W per busy CPU that is **{:.1} mW**, {:.2} % of the board's {idle} W \
         idle.\n\n| profile | exporter CPU s/s | exporter W | board idle W | share of idle % |\n\
         |---|---|---|---|---|\n| rpi4 (estimate) | {:.4} | {:.4} | {idle:.2} | {:.3} |\n",
        EXPORTER_INSTRUCTIONS_PER_TICK / 1e6,
        PI4_CLOCK_HZ / 1e9,
        PI4_INSTRUCTIONS_PER_CYCLE,
        cpu_seconds_per_second * 1e3,
        watts * 1e3,
        100.0 * watts / idle,
        cpu_seconds_per_second,
        watts,
        100.0 * watts / idle,
    )
}

fn energy_latency_plot(out: &Path, rows: &[EnergyRow]) -> Result<(), CampaignPlotError> {
    let mut series: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for r in rows.iter().filter(|r| r.source == PowerSource::Predicted) {
        if let (Some(p50), Some(j)) = (r.p50, r.joules_per_inference()) {
            // By model and engine, as the paper compares engines.
            let name = match (r.config[0].as_str(), r.config[2].as_str()) {
                ("", _) => r.workload.clone(),
                (model, "") => model.to_string(),
                (model, engine) => format!("{model} ({engine})"),
            };
            series.entry(name).or_default().push((p50 * 1e3, j));
        }
    }
    if series.is_empty() {
        return Err(CampaignPlotError::NothingToPlot(
            "no inference window with latency and energy",
        ));
    }
    plots::scatter(
        &out.join("energy_vs_latency.png"),
        "Energy per inference vs latency (predicted power), by model",
        "median latency, ms",
        "energy per inference, J",
        &series.into_iter().collect::<Vec<_>>(),
    )?;
    Ok(())
}

fn error_by_threads_plot(plan: &Plan, a: &Analysis, out: &Path) -> Result<(), CampaignPlotError> {
    let name = &a.model.as_ref().ok_or(CampaignPlotError::NoModel)?.name;
    let mut series: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for st in plan.steps.iter().filter(|s| s.tag == Tag::Validate) {
        let (Ok(threads), Some(m)) = (
            config_text(&st.config, "threads").parse::<f64>(),
            mape(&a.validation, &st.name, name),
        ) else {
            continue;
        };
        let model = config_text(&st.config, "model");
        series.entry(model).or_default().push((threads, m));
    }
    if series.is_empty() {
        return Err(CampaignPlotError::NothingToPlot(
            "no validation workload with a thread count",
        ));
    }
    plots::scatter(
        &out.join("error_by_threads.png"),
        "Validation MAPE of the selected model by thread count",
        "threads",
        "MAPE, %",
        &series.into_iter().collect::<Vec<_>>(),
    )?;
    Ok(())
}

/// Σ containers = node, per window and source (what the tests check on the CSV too).
pub fn conservation_error(e: &SourceEnergy) -> f64 {
    (e.containers.values().map(|c| c.joules()).sum::<f64>() - e.node_joules).abs()
}

/// Unused-step helper for the CLI summary.
pub fn skipped(a: &Analysis) -> Vec<(&str, &StepResult)> {
    a.steps
        .iter()
        .filter(|(_, r)| r.skipped.is_some())
        .map(|(n, r)| (n.as_str(), r))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The estimate goes through the bundled rpi4 profile: 6.05 M instructions at 1.5 GHz and
    /// 1 instruction per cycle are 4.03 ms of CPU per second, × 0.925 W per busy CPU = 3.7 mW.
    #[test]
    fn the_pi4_row_converts_instructions_through_the_bundled_profile() {
        let md = pi4_overhead_estimate();
        assert!(md.contains("**estimate**"), "{md}");
        let row = md
            .lines()
            .find(|l| l.starts_with("| rpi4 (estimate) |"))
            .unwrap_or_else(|| panic!("{md}"));
        let cells: Vec<f64> = row
            .split('|')
            .filter_map(|c| c.trim().parse().ok())
            .collect();
        let cpu = 2.16e6 * 2.8 / 1.5e9;
        assert!((cells[0] - cpu).abs() < 1e-4, "{row}");
        assert!((cells[1] - cpu * 0.925).abs() < 1e-4, "{row}");
        assert_eq!(cells[2], 2.7, "{row}");
        assert!(md.contains("3.7 mW"), "{md}");
    }
}
