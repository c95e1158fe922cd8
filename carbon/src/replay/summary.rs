//! `summary.csv`: one row per policy (and forecast method), savings against carbon-blind.

use super::forecasts::Forecast;
use super::scheduler::Outcome;

/// Header of `summary.csv`.
pub const HEADER: &str = "policy,forecast,kg_co2e,kwh,saved_percent_vs_blind,share_of_oracle_savings,deadlines_missed,evictions";

/// Which policy a run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// Least-allocated placement, no labels.
    CarbonBlind,
    /// The controller on a forecast method.
    GreenPipe(Forecast),
    /// The controller on perfect knowledge of the intensity.
    Oracle,
}

impl Policy {
    /// The `policy` and `forecast` cells.
    pub fn cells(self) -> (&'static str, &'static str) {
        match self {
            Policy::CarbonBlind => ("carbon-blind", "none"),
            Policy::GreenPipe(f) => ("greenpipe", f.name()),
            Policy::Oracle => ("oracle", Forecast::Oracle.name()),
        }
    }
}

/// One row.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// Policy.
    pub policy: Policy,
    /// Emissions, kg CO2e.
    pub kg_co2e: f64,
    /// Energy, kWh.
    pub kwh: f64,
    /// (blind − this) / blind, %.
    pub saved_percent_vs_blind: f64,
    /// (blind − this) / (blind − oracle); `None` when the oracle saves nothing.
    pub share_of_oracle_savings: Option<f64>,
    /// Deadlines missed.
    pub deadlines_missed: usize,
    /// Evictions.
    pub evictions: usize,
}

/// Rows for the runs; `runs` must hold the carbon-blind and the oracle run.
pub fn rows(runs: &[(Policy, Outcome)]) -> Result<Vec<Row>, crate::Error> {
    let find = |p: Policy| {
        runs.iter()
            .find(|(q, _)| *q == p)
            .map(|(_, o)| o.kg())
            .ok_or_else(|| crate::Error::Invalid(format!("no {} run", p.cells().0)))
    };
    let blind = find(Policy::CarbonBlind)?;
    let oracle = find(Policy::Oracle)?;
    let oracle_saves = blind - oracle;
    Ok(runs
        .iter()
        .map(|(p, o)| {
            let saved = blind - o.kg();
            Row {
                policy: *p,
                kg_co2e: o.kg(),
                kwh: o.kwh(),
                saved_percent_vs_blind: if blind > 0.0 {
                    100.0 * saved / blind
                } else {
                    0.0
                },
                share_of_oracle_savings: (oracle_saves.abs() > 1e-9 * blind.abs().max(1.0))
                    .then(|| saved / oracle_saves),
                deadlines_missed: o.deadlines_missed,
                evictions: o.evictions,
            }
        })
        .collect())
}

impl Row {
    /// The CSV line, no newline (an undefined share is an empty cell).
    pub fn csv(&self) -> String {
        let (policy, forecast) = self.policy.cells();
        format!(
            "{policy},{forecast},{:.3},{:.3},{:.3},{},{},{}",
            self.kg_co2e,
            self.kwh,
            self.saved_percent_vs_blind,
            self.share_of_oracle_savings
                .map_or(String::new(), |s| format!("{s:.4}")),
            self.deadlines_missed,
            self.evictions
        )
    }
}

/// The whole file.
pub fn csv(rows: &[Row]) -> String {
    let mut s = String::from(HEADER);
    s.push('\n');
    for r in rows {
        s.push_str(&r.csv());
        s.push('\n');
    }
    s
}
