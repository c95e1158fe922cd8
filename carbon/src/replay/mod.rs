//! `greenpipe-carbon replay`: how much CO2 the labels and taints avoid, on real intensity data.
//!
//! A discrete-time replay, one step per hour, of a fleet ([`fleet`]) running a workload
//! ([`jobs`]) in grid zones whose hourly intensity is read from canonical CSV files ([`grid`]).
//! The real planner labels and taints the nodes every hour ([`labels`]), on what a forecast
//! method believed at that hour ([`forecasts`]); a model of kube-scheduler and the taint manager
//! places, defers and evicts the work under those labels ([`scheduler`]). Baselines:
//! carbon-blind (least-allocated, no labels) and the oracle (the same controller on the actual
//! intensity). [`summary`] and [`report`] write the results.

pub mod fleet;
pub mod forecasts;
pub mod grid;
pub mod jobs;
pub mod labels;
pub mod report;
pub mod scheduler;
pub mod summary;

use crate::planner::Policy as PlannerPolicy;
use crate::Error;
use forecasts::Forecast;
use scheduler::{Mode, Outcome, Setup};
use summary::Policy;

/// Replay settings.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Hours between the last known hour and the forecast target (1: the hour being placed).
    pub horizon: usize,
    /// The planner's policy.
    pub policy: PlannerPolicy,
    /// `tolerationSeconds` of pods that do not tolerate red forever (0: no toleration).
    pub toleration_seconds: i64,
    /// Forecast methods to run GreenPipe with (the oracle runs in any case).
    pub forecasts: Vec<Forecast>,
}

/// The inputs, checked against each other.
#[derive(Debug, Clone)]
pub struct Replay {
    /// Intensity.
    pub grid: grid::Grid,
    /// Fleet, sorted by name.
    pub nodes: Vec<fleet::Node>,
    /// Each node's zone index.
    pub node_zone: Vec<usize>,
    /// Jobs, in arrival order.
    pub jobs: Vec<jobs::Job>,
}

/// Forecast error of one method in one zone.
#[derive(Debug, Clone, PartialEq)]
pub struct ForecastError {
    /// Zone.
    pub zone: String,
    /// Method.
    pub forecast: Forecast,
    /// Mean absolute error, gCO2/kWh.
    pub mae: f64,
    /// Hours scored (the same for every method of the zone).
    pub hours: usize,
}

/// Everything a replay produced.
#[derive(Debug, Clone)]
pub struct Results {
    /// One outcome per policy: carbon-blind first, the oracle last.
    pub runs: Vec<(Policy, Outcome)>,
    /// Forecast error per zone and method (oracle excluded).
    pub errors: Vec<ForecastError>,
}

impl Replay {
    /// Checks that every node's zone has a series and every job fits on some node.
    pub fn new(
        grid: grid::Grid,
        nodes: Vec<fleet::Node>,
        jobs: Vec<jobs::Job>,
    ) -> Result<Replay, Error> {
        let node_zone = nodes
            .iter()
            .map(|n| {
                grid.zone_index(&n.zone).ok_or_else(|| {
                    Error::Invalid(format!(
                        "node {}: zone {} has no --intensity series",
                        n.name, n.zone
                    ))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let widest = nodes.iter().map(|n| n.cores).max().unwrap_or(0);
        if let Some(j) = jobs.iter().find(|j| j.cores > widest) {
            return Err(Error::Invalid(format!(
                "job on line {} asks for {} cores; the largest node has {widest}",
                j.line, j.cores
            )));
        }
        Ok(Replay {
            grid,
            nodes,
            node_zone,
            jobs,
        })
    }

    fn setup(&self, s: &Settings) -> Setup<'_> {
        Setup {
            grid: &self.grid,
            nodes: &self.nodes,
            node_zone: &self.node_zone,
            jobs: &self.jobs,
            toleration_seconds: s.toleration_seconds,
        }
    }

    /// Runs carbon-blind, GreenPipe on each forecast method, and the oracle.
    pub fn run(&self, s: &Settings) -> Results {
        let zones = self.grid.zones.len();
        let mut methods: Vec<Forecast> = s
            .forecasts
            .iter()
            .copied()
            .filter(|f| *f != Forecast::Oracle)
            .collect();
        methods.sort();
        methods.dedup();
        let series = |f: Forecast| -> Vec<Vec<Option<f64>>> {
            (0..zones)
                .map(|z| forecasts::series(&self.grid, z, f, s.horizon))
                .collect()
        };
        let per_method: Vec<(Forecast, Vec<Vec<Option<f64>>>)> =
            methods.iter().map(|&f| (f, series(f))).collect();
        let oracle = series(Forecast::Oracle);
        let setup = self.setup(s);
        let green = |f: &[Vec<Option<f64>>]| {
            scheduler::simulate(
                &setup,
                &Mode::GreenPipe {
                    forecasts: f,
                    policy: &s.policy,
                },
            )
        };
        let mut runs = vec![(
            Policy::CarbonBlind,
            scheduler::simulate(&setup, &Mode::CarbonBlind),
        )];
        for (f, fc) in &per_method {
            runs.push((Policy::GreenPipe(*f), green(fc)));
        }
        runs.push((Policy::Oracle, green(&oracle)));
        let mut errors = Vec::new();
        for z in 0..zones {
            let fs: Vec<&[Option<f64>]> =
                per_method.iter().map(|(_, fc)| fc[z].as_slice()).collect();
            let (mae, hours) = forecasts::mae(&self.grid, z, &fs, s.horizon);
            for ((f, _), mae) in per_method.iter().zip(mae) {
                errors.push(ForecastError {
                    zone: self.grid.zones[z].name.clone(),
                    forecast: *f,
                    mae,
                    hours,
                });
            }
        }
        Results { runs, errors }
    }
}

#[cfg(test)]
mod tests;
