//! The scheduler model: one step per hour, placing and evicting pods the way kube-scheduler and
//! the taint manager would under the controller's labels and taints.
//!
//! Each step, in order:
//! 1. **labels** (GreenPipe only): one controller round ([`super::labels::Labeller`]);
//! 2. **evictions**: a pod that does not tolerate the red taint leaves a tainted node
//!    `tolerationSeconds` after the taint was added (or after it was bound, if later); with 0 it
//!    leaves at once. It runs on the old node until then and is queued again: a batch job starts
//!    over (its progress is lost), a service keeps its progress;
//! 3. **arrivals**: jobs that arrived during the previous hour join the queue (arrivals are
//!    rounded up to the hour);
//! 4. **placement**, queue in arrival order. Filter: enough free cores; a red-tainted node only
//!    for pods with a toleration (`tolerates_red`, or a non-zero `tolerationSeconds`). Score as
//!    kube-scheduler's defaults weigh them: 2 × NodeAffinity (preferred: green weight 100, yellow
//!    50, normalised to the best feasible node) + 1 × LeastAllocated (free cores after placing,
//!    as % of the node). Ties go to the first node by name. Carbon-blind pods have no affinity, so
//!    only LeastAllocated counts. **Deferral** (GreenPipe only): while some node is green, a
//!    batch job whose best node is not green waits, as long as starting an hour later still
//!    meets its deadline;
//! 5. **run** the hour: every node burns idle power plus power per busy core; a batch job that
//!    has run its duration finishes (and misses its deadline if it ends after it).

use super::fleet;
use super::grid::Grid;
use super::jobs::Job;
use super::labels::Labeller;
use crate::planner::{Class, Policy};
use std::collections::BTreeMap;

/// Joules per kWh.
pub const JOULES_PER_KWH: f64 = 3.6e6;

/// What a replay runs on.
#[derive(Debug, Clone, Copy)]
pub struct Setup<'a> {
    /// Intensity of every zone.
    pub grid: &'a Grid,
    /// The fleet, sorted by name.
    pub nodes: &'a [fleet::Node],
    /// Each node's zone index in `grid`.
    pub node_zone: &'a [usize],
    /// The jobs, in arrival order.
    pub jobs: &'a [Job],
    /// `tolerationSeconds` of the pods that do not tolerate red forever (0: no toleration).
    pub toleration_seconds: i64,
}

/// How work is placed.
#[derive(Debug, Clone, Copy)]
pub enum Mode<'a> {
    /// No labels, no taints, no deferral: least-allocated placement.
    CarbonBlind,
    /// The controller labels and taints on these forecasts (zone-major, one per grid hour).
    GreenPipe {
        /// Forecasts the planner sees.
        forecasts: &'a [Vec<Option<f64>>],
        /// The planner policy.
        policy: &'a Policy,
    },
}

/// What a replay measured.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// Energy of each job's pods (busy-core power only), J, in job order.
    pub job_joules: Vec<f64>,
    /// Idle energy of all nodes, J.
    pub idle_joules: f64,
    /// Energy of all nodes (integrated node power), J.
    pub node_joules: f64,
    /// Emissions, g CO2e.
    pub grams: f64,
    /// Cumulative emissions at the end of each hour, kg.
    pub cumulative_kg: Vec<f64>,
    /// Zone-major: label of the zone's nodes each hour (`None`: unlabelled).
    pub classes: Vec<Vec<Option<Class>>>,
    /// Pods evicted by the taint (each is queued again).
    pub evictions: usize,
    /// Batch jobs finished after their deadline, or unfinished when the deadline passed.
    pub deadlines_missed: usize,
    /// Batch jobs still unfinished at the end whose deadline lies beyond it.
    pub unfinished: usize,
    /// Jobs that arrive outside the replayed hours (ignored).
    pub outside: usize,
    /// Job-hours spent waiting in the queue.
    pub queued_hours: usize,
}

impl Outcome {
    /// Total energy, kWh.
    pub fn kwh(&self) -> f64 {
        self.node_joules / JOULES_PER_KWH
    }

    /// Total emissions, kg.
    pub fn kg(&self) -> f64 {
        self.grams / 1000.0
    }
}

#[derive(Debug, Clone, Copy)]
struct Pod {
    job: usize,
    node: usize,
    bound: i64,
}

/// Runs the replay.
pub fn simulate(s: &Setup, mode: &Mode) -> Outcome {
    let grid = s.grid;
    let mut labeller = match mode {
        Mode::CarbonBlind => None,
        Mode::GreenPipe { policy, .. } => Some(Labeller::new(
            s.nodes.iter().map(|n| (n.name.as_str(), n.zone.as_str())),
            (*policy).clone(),
        )),
    };
    let first_node_of_zone: Vec<Option<usize>> = (0..grid.zones.len())
        .map(|z| s.node_zone.iter().position(|&nz| nz == z))
        .collect();
    let mut out = Outcome {
        job_joules: vec![0.0; s.jobs.len()],
        classes: vec![Vec::with_capacity(grid.hours); grid.zones.len()],
        cumulative_kg: Vec::with_capacity(grid.hours),
        ..Outcome::default()
    };
    let mut remaining: Vec<i64> = s.jobs.iter().map(|j| j.duration).collect();
    let mut running: Vec<Pod> = Vec::new();
    let mut pending: Vec<usize> = Vec::new();
    let mut next_job = 0;
    let end = grid.time(grid.hours);
    for h in 0..grid.hours {
        let t = grid.time(h);
        // 1. labels
        if let (Some(l), Mode::GreenPipe { forecasts, .. }) = (labeller.as_mut(), mode) {
            let map: BTreeMap<String, Option<f64>> = grid
                .zones
                .iter()
                .zip(forecasts.iter())
                .map(|(z, f)| (z.name.clone(), f[h]))
                .collect();
            l.step(&map, t);
        }
        for (z, first) in first_node_of_zone.iter().enumerate() {
            let class = first.and_then(|i| labeller.as_ref().and_then(|l| l.class(i)));
            out.classes[z].push(class);
        }
        // 2. evictions
        let mut leaving: Vec<(Pod, i64)> = Vec::new();
        let mut requeue_now: Vec<usize> = Vec::new();
        if let Some(l) = &labeller {
            running.retain(|p| {
                let job = &s.jobs[p.job];
                let Some(tainted) = l.tainted_since[p.node] else {
                    return true;
                };
                if job.tolerates_red {
                    return true;
                }
                let evict_at = if s.toleration_seconds == 0 {
                    t
                } else {
                    tainted.max(p.bound) + s.toleration_seconds
                };
                if evict_at >= t + 3600 {
                    return true;
                }
                out.evictions += 1;
                let secs = (evict_at - t).max(0);
                if secs > 0 {
                    leaving.push((*p, secs));
                } else {
                    requeue_now.push(p.job);
                }
                false
            });
        }
        for &j in &requeue_now {
            if s.jobs[j].deadline.is_some() {
                remaining[j] = s.jobs[j].duration;
            }
        }
        pending.extend(requeue_now);
        // 3. arrivals
        while next_job < s.jobs.len() {
            let a = s.jobs[next_job].arrival;
            let step = (a - grid.start).div_euclid(3600)
                + i64::from((a - grid.start).rem_euclid(3600) != 0);
            if step > h as i64 {
                break;
            }
            if a < grid.start || a >= end {
                out.outside += 1;
            } else {
                pending.push(next_job);
            }
            next_job += 1;
        }
        pending.sort_unstable();
        // 4. placement
        let mut free: Vec<i64> = s.nodes.iter().map(|n| i64::from(n.cores)).collect();
        for p in running.iter().chain(leaving.iter().map(|(p, _)| p)) {
            free[p.node] -= i64::from(s.jobs[p.job].cores);
        }
        // Waiting only makes sense while some node is green (is somewhere better to wait for).
        let any_green = labeller
            .as_ref()
            .is_some_and(|l| l.nodes.iter().any(|n| n.class == Some(Class::Green)));
        pending.retain(|&j| {
            let job = &s.jobs[j];
            let Some((node, class)) = choose(s, job, &free, labeller.as_ref()) else {
                out.queued_hours += 1;
                return true;
            };
            let may_wait = job.deadline.is_some_and(|d| t + 3600 + remaining[j] <= d);
            if any_green && may_wait && class != Some(Class::Green) {
                out.queued_hours += 1;
                return true;
            }
            free[node] -= i64::from(job.cores);
            running.push(Pod {
                job: j,
                node,
                bound: t,
            });
            false
        });
        // 5. run
        let mut node_j: Vec<f64> = s.nodes.iter().map(|n| n.idle_watts * 3600.0).collect();
        out.idle_joules += node_j.iter().sum::<f64>();
        let mut burn = |p: &Pod, secs: i64, out: &mut Outcome| {
            let n = &s.nodes[p.node];
            let j = n.watts_per_busy_core * f64::from(s.jobs[p.job].cores) * secs as f64;
            node_j[p.node] += j;
            out.job_joules[p.job] += j;
        };
        for (p, secs) in &leaving {
            burn(p, *secs, &mut out);
            if s.jobs[p.job].deadline.is_some() {
                remaining[p.job] = s.jobs[p.job].duration;
            } else {
                remaining[p.job] -= secs;
            }
        }
        running.retain(|p| {
            let secs = remaining[p.job].min(3600);
            burn(p, secs, &mut out);
            remaining[p.job] -= secs;
            if remaining[p.job] > 0 {
                return true;
            }
            if s.jobs[p.job].deadline.is_some_and(|d| t + secs > d) {
                out.deadlines_missed += 1;
            }
            false
        });
        for (i, j) in node_j.iter().enumerate() {
            out.node_joules += j;
            out.grams += j / JOULES_PER_KWH * grid.accounting[s.node_zone[i]][h];
        }
        out.cumulative_kg.push(out.grams / 1000.0);
        pending.extend(leaving.iter().map(|(p, _)| p.job));
    }
    // Batch jobs still queued or running at the end.
    for j in pending.iter().chain(running.iter().map(|p| &p.job)) {
        match s.jobs[*j].deadline {
            Some(d) if d <= end => out.deadlines_missed += 1,
            Some(_) => out.unfinished += 1,
            None => {}
        }
    }
    out
}

/// The node kube-scheduler would bind `job` to, and that node's label.
fn choose(
    s: &Setup,
    job: &Job,
    free: &[i64],
    labels: Option<&Labeller>,
) -> Option<(usize, Option<Class>)> {
    let cores = i64::from(job.cores);
    let tolerates = job.tolerates_red || s.toleration_seconds > 0;
    let feasible: Vec<usize> = (0..s.nodes.len())
        .filter(|&i| free[i] >= cores)
        .filter(|&i| tolerates || labels.is_none_or(|l| !l.nodes[i].tainted))
        .collect();
    let class = |i: usize| labels.and_then(|l| l.class(i));
    let affinity = |i: usize| match class(i) {
        Some(Class::Green) => 100.0,
        Some(Class::Yellow) => 50.0,
        _ => 0.0,
    };
    let max_affinity = feasible.iter().map(|&i| affinity(i)).fold(0.0, f64::max);
    let score = |i: usize| {
        let a = if max_affinity > 0.0 {
            100.0 * affinity(i) / max_affinity
        } else {
            0.0
        };
        let least_allocated = 100.0 * (free[i] - cores) as f64 / f64::from(s.nodes[i].cores);
        2.0 * a + least_allocated
    };
    let mut best: Option<(usize, f64)> = None;
    for i in feasible {
        let sc = score(i);
        if best.is_none_or(|(_, b)| sc > b) {
            best = Some((i, sc));
        }
    }
    best.map(|(i, _)| (i, class(i)))
}
