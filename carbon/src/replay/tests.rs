//! Whole-replay tests on small synthetic inputs (fast in the dev profile).

use super::fleet::Node;
use super::forecasts::Forecast;
use super::grid::{Grid, Zone};
use super::jobs::Job;
use super::scheduler::{simulate, Mode, Outcome, Setup};
use super::summary::{self, Policy};
use super::{Replay, Settings};
use crate::planner::Policy as PlannerPolicy;
use crate::series::Hourly;

const H: i64 = 3600;

fn zone(name: &str, hours: usize, f: impl Fn(usize) -> f64) -> Zone {
    Zone {
        name: name.into(),
        hourly: Hourly {
            start: 0,
            values: (0..hours).map(|h| Some(f(h))).collect(),
        },
    }
}

fn node(name: &str, zone: &str, idle: f64, per_core: f64, cores: u32) -> Node {
    Node {
        name: name.into(),
        zone: zone.into(),
        idle_watts: idle,
        watts_per_busy_core: per_core,
        cores,
    }
}

fn job(
    line: usize,
    arrival: i64,
    cores: u32,
    duration: i64,
    deadline: Option<i64>,
    tolerates_red: bool,
) -> Job {
    Job {
        line,
        arrival,
        cores,
        duration,
        deadline,
        tolerates_red,
    }
}

fn settings(forecasts: &[Forecast], toleration_seconds: i64) -> Settings {
    Settings {
        horizon: 1,
        policy: PlannerPolicy::default(),
        toleration_seconds,
        forecasts: forecasts.to_vec(),
    }
}

/// A mixed workload: services and batch jobs of 1-4 cores, some tolerating red, arriving
/// through `days` days (deterministic).
fn mixed_jobs(days: i64) -> Vec<Job> {
    let mut jobs = Vec::new();
    let mut x: u64 = 7;
    let mut next = || {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (x >> 33) as i64
    };
    for k in 0..days * 6 {
        let arrival = k * 4 * H + next() % H;
        let cores = 1 + (next() % 4) as u32;
        let duration = H / 2 + next() % (6 * H);
        let service = k % 5 == 0;
        let deadline = (!service).then(|| arrival + duration + next() % (30 * H));
        jobs.push(job(
            k as usize + 2,
            arrival,
            cores,
            duration,
            deadline,
            next() % 3 == 0,
        ));
    }
    jobs.sort_by_key(|j| (j.arrival, j.line));
    jobs
}

fn three_zone_replay(days: usize) -> Replay {
    let hours = 24 * days;
    let daily = |h: usize| (std::f64::consts::TAU * (h % 24) as f64 / 24.0).sin();
    let grid = Grid::new(vec![
        zone("A", hours, |h| 300.0 + 150.0 * daily(h)),
        zone("B", hours, |h| {
            320.0 - 120.0 * daily(h) + (h / 24 % 3) as f64 * 20.0
        }),
        zone("C", hours, |h| 280.0 + 40.0 * daily(h + 6)),
    ])
    .unwrap();
    let nodes = vec![
        node("a1", "A", 60.0, 9.0, 8),
        node("a2", "A", 45.0, 12.0, 4),
        node("b1", "B", 80.0, 7.5, 8),
        node("c1", "C", 30.0, 10.0, 6),
    ];
    Replay::new(grid, nodes, mixed_jobs(days as i64 - 2)).unwrap()
}

#[test]
fn energy_is_conserved_under_every_policy() {
    let replay = three_zone_replay(10);
    // tolerationSeconds of 30 min: evicted pods run part of their last hour on the red node.
    let results = replay.run(&settings(&Forecast::ALL, 1800));
    assert_eq!(results.runs.len(), 5);
    let mut evicted = 0;
    for (policy, o) in &results.runs {
        let jobs: f64 = o.job_joules.iter().sum();
        let diff = (o.node_joules - (jobs + o.idle_joules)).abs();
        assert!(
            diff <= 1e-9 * o.node_joules,
            "{policy:?}: {} vs {jobs} + {}",
            o.node_joules,
            o.idle_joules
        );
        let idle: f64 = replay.nodes.iter().map(|n| n.idle_watts).sum::<f64>()
            * (H as f64)
            * replay.grid.hours as f64;
        assert!((o.idle_joules - idle).abs() <= 1e-9 * idle, "{policy:?}");
        assert!(jobs > 0.0 && o.grams > 0.0, "{policy:?}");
        evicted += o.evictions;
        assert_eq!(o.cumulative_kg.last().copied(), Some(o.kg()));
    }
    assert!(
        evicted > 0,
        "the fixture must exercise partial-hour evictions"
    );
}

#[test]
fn with_one_zone_every_policy_emits_the_same() {
    let hours = 24 * 8;
    let grid = Grid::new(vec![zone("A", hours, |h| {
        200.0 + 100.0 * ((h % 24) as f64 / 24.0)
    })])
    .unwrap();
    let nodes = vec![
        node("n1", "A", 50.0, 10.0, 8),
        node("n2", "A", 70.0, 6.0, 4),
        node("n3", "A", 20.0, 14.0, 6),
    ];
    let replay = Replay::new(grid, nodes, mixed_jobs(6)).unwrap();
    let results = replay.run(&settings(&Forecast::ALL, 0));
    let (_, blind) = &results.runs[0];
    assert!(blind.grams > 0.0);
    for (policy, o) in &results.runs {
        assert_eq!(o.grams, blind.grams, "{policy:?}");
        assert_eq!(o.node_joules, blind.node_joules, "{policy:?}");
        assert_eq!((o.evictions, o.deadlines_missed), (0, 0), "{policy:?}");
    }
    let rows = summary::rows(&results.runs).unwrap();
    assert!(rows
        .iter()
        .all(|r| r.saved_percent_vs_blind == 0.0 && r.share_of_oracle_savings.is_none()));
}

/// Zones A and B swap each day: A is 100 g/kWh on even days and 300 on odd ones, B the
/// opposite. One service (1 core, 1 kW busy, no idle power, no red toleration) runs all 4 days.
///
/// By hand (1 kWh per hour; at hour 0 no method has an origin, so the pod lands on `a`, the first
/// node by name, and stays there while the nodes are unlabelled):
/// * carbon-blind stays on `a`: 24 × (100 + 300 + 100 + 300) = 19 200 g;
/// * the oracle knows each hour's value: on `a` (green) on day 0, evicted to the green node each
///   midnight after: 96 × 100 = 9 600 g, 3 evictions, saving 9 600 g (50 %);
/// * seasonal-naive believes yesterday, always the opposite: day 0 unlabelled on `a` (100), then
///   on the node that was green yesterday, now at 300: 2 400 + 72 × 300 = 24 000 g, 2 evictions.
///   It saves −4 800 g: −50 % of the oracle's savings.
#[test]
fn daily_swap_oracle_saves_half_and_seasonal_naive_loses_half_of_that() {
    let swap = |low_on_even: bool| {
        move |h: usize| {
            if (h / 24).is_multiple_of(2) == low_on_even {
                100.0
            } else {
                300.0
            }
        }
    };
    let grid = Grid::new(vec![zone("A", 96, swap(true)), zone("B", 96, swap(false))]).unwrap();
    let nodes = vec![
        node("a", "A", 0.0, 1000.0, 1),
        node("b", "B", 0.0, 1000.0, 1),
    ];
    let replay = Replay::new(grid, nodes, vec![job(2, 0, 1, 96 * H, None, false)]).unwrap();
    let results = replay.run(&settings(&[Forecast::SeasonalNaive], 0));
    let kg = |p: Policy| {
        results
            .runs
            .iter()
            .find(|(q, _)| *q == p)
            .map(|(_, o)| o.clone())
            .unwrap()
    };
    let (blind, naive, oracle) = (
        kg(Policy::CarbonBlind),
        kg(Policy::GreenPipe(Forecast::SeasonalNaive)),
        kg(Policy::Oracle),
    );
    let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
    assert!(close(blind.grams, 19_200.0), "{}", blind.grams);
    assert!(close(oracle.grams, 9_600.0), "{}", oracle.grams);
    assert!(close(naive.grams, 24_000.0), "{}", naive.grams);
    assert_eq!(
        (blind.evictions, oracle.evictions, naive.evictions),
        (0, 3, 2)
    );
    for o in [&blind, &naive, &oracle] {
        assert!(close(o.kwh(), 96.0), "{}", o.kwh());
    }
    let rows = summary::rows(&results.runs).unwrap();
    let share = |p: Policy| {
        rows.iter()
            .find(|r| r.policy == p)
            .unwrap()
            .share_of_oracle_savings
            .unwrap()
    };
    assert!(close(
        share(Policy::GreenPipe(Forecast::SeasonalNaive)),
        -0.5
    ));
    assert!(close(share(Policy::Oracle), 1.0));
    let oracle_row = rows.iter().find(|r| r.policy == Policy::Oracle).unwrap();
    assert!(close(oracle_row.saved_percent_vs_blind, 50.0));
    assert_eq!(
        oracle_row.csv(),
        "oracle,oracle,9.600,96.000,50.000,1.0000,0,3"
    );
}

/// A batch job that tolerates red waits for the green node while its deadline allows, and starts
/// wherever it fits once waiting longer would miss it.
#[test]
fn batch_jobs_wait_for_green_until_their_deadline_forces_them() {
    let grid = Grid::new(vec![zone("A", 24, |_| 100.0), zone("B", 24, |_| 300.0)]).unwrap();
    let nodes = vec![
        node("a", "A", 0.0, 1000.0, 1),
        node("b", "B", 0.0, 1000.0, 1),
    ];
    let jobs = vec![
        job(2, 0, 1, 5 * H, None, false), // occupies a (green) for hours 0-4
        job(3, H, 1, 2 * H, Some(20 * H), true), // can wait: runs on a from hour 5
        job(4, H, 1, 2 * H, Some(4 * H), true), // must start by hour 2: on b
    ];
    let replay = Replay::new(grid, nodes, jobs).unwrap();
    let setup = Setup {
        grid: &replay.grid,
        nodes: &replay.nodes,
        node_zone: &replay.node_zone,
        jobs: &replay.jobs,
        toleration_seconds: 0,
    };
    let oracle: Vec<Vec<Option<f64>>> = (0..2)
        .map(|z| super::forecasts::series(&replay.grid, z, Forecast::Oracle, 1))
        .collect();
    let policy = PlannerPolicy::default();
    let o: Outcome = simulate(
        &setup,
        &Mode::GreenPipe {
            forecasts: &oracle,
            policy: &policy,
        },
    );
    // Hour 0 has no forecast (no origin), so nothing is labelled and job 2 is placed on a.
    // Job 4 runs hours 2-3 on b (300 g/kWh); jobs 2 and 3 run 7 h on a (100 g/kWh).
    assert_eq!(o.deadlines_missed, 0);
    assert!(
        (o.grams - (7.0 * 100.0 + 2.0 * 300.0)).abs() < 1e-9,
        "{}",
        o.grams
    );
    // Job 3 waited hours 1-4, job 4 hour 1.
    assert_eq!(o.queued_hours, 5);
    let blind = simulate(&setup, &Mode::CarbonBlind);
    // Blind starts both at hour 1 on b, one after the other: job 3 at 1-2, job 4 at 3-4, too late.
    assert_eq!(blind.deadlines_missed, 1);
    assert!(
        (blind.grams - (5.0 * 100.0 + 4.0 * 300.0)).abs() < 1e-9,
        "{}",
        blind.grams
    );
}
