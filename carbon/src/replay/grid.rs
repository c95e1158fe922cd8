//! The zones' intensity series on one hourly grid: the hours every zone covers.
//!
//! The planner sees the series as they are (a missing hour is no forecast, and the planner then
//! removes that zone's labels and taints, as live). Emissions still have to be counted for energy
//! burnt in a missing hour: there the last known value stands in (the next one at the very start),
//! and the report says how many zone-hours were bridged so.

use crate::series::Hourly;
use crate::Error;

/// One zone's series, as read.
#[derive(Debug, Clone)]
pub struct Zone {
    /// Zone name.
    pub name: String,
    /// The series.
    pub hourly: Hourly,
}

/// All zones on the common grid.
#[derive(Debug, Clone)]
pub struct Grid {
    /// First hour, unix seconds.
    pub start: i64,
    /// Number of hours.
    pub hours: usize,
    /// The zones, in the order given.
    pub zones: Vec<Zone>,
    /// Zone-major: the zone's index in its own series of grid hour 0.
    pub offset: Vec<usize>,
    /// Zone-major intensity used for accounting (missing hours bridged), gCO2/kWh.
    pub accounting: Vec<Vec<f64>>,
    /// Zone-hours without a value (bridged for accounting).
    pub bridged: usize,
}

impl Grid {
    /// Aligns the zones on the hours all of them cover.
    pub fn new(zones: Vec<Zone>) -> Result<Grid, Error> {
        if zones.is_empty() {
            return Err(Error::Invalid("no --intensity zones".into()));
        }
        if let Some(z) = zones.iter().find(|z| z.hourly.values.is_empty()) {
            return Err(Error::Invalid(format!("zone {}: empty series", z.name)));
        }
        for (i, z) in zones.iter().enumerate() {
            if zones[..i].iter().any(|o| o.name == z.name) {
                return Err(Error::Invalid(format!("zone {} given twice", z.name)));
            }
        }
        let start = zones.iter().map(|z| z.hourly.start).max().unwrap_or(0);
        let end = zones
            .iter()
            .map(|z| z.hourly.time(z.hourly.values.len()))
            .min()
            .unwrap_or(0);
        if end <= start {
            return Err(Error::Invalid(format!(
                "the zones' series share no hour ({} .. {})",
                crate::time::format(start),
                crate::time::format(end)
            )));
        }
        let hours = ((end - start) / 3600) as usize;
        let offset: Vec<usize> = zones
            .iter()
            .map(|z| ((start - z.hourly.start) / 3600) as usize)
            .collect();
        let mut bridged = 0;
        let mut accounting = Vec::with_capacity(zones.len());
        for (z, &off) in zones.iter().zip(&offset) {
            let own = &z.hourly.values[off..off + hours];
            let Some(first) = own.iter().flatten().next().copied() else {
                return Err(Error::Invalid(format!(
                    "zone {}: no value in the common hours",
                    z.name
                )));
            };
            let mut last = first;
            let row: Vec<f64> = own
                .iter()
                .map(|v| match v {
                    Some(v) => {
                        last = *v;
                        *v
                    }
                    None => {
                        bridged += 1;
                        last
                    }
                })
                .collect();
            accounting.push(row);
        }
        Ok(Grid {
            start,
            hours,
            zones,
            offset,
            accounting,
            bridged,
        })
    }

    /// Unix time of grid hour `h`.
    pub fn time(&self, h: usize) -> i64 {
        self.start + 3600 * h as i64
    }

    /// Index of a zone by name.
    pub fn zone_index(&self, name: &str) -> Option<usize> {
        self.zones.iter().position(|z| z.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zone(name: &str, start: i64, values: &[Option<f64>]) -> Zone {
        Zone {
            name: name.into(),
            hourly: Hourly {
                start,
                values: values.to_vec(),
            },
        }
    }

    #[test]
    fn common_hours_and_bridged_gaps() {
        let g = Grid::new(vec![
            zone("A", 0, &[Some(1.0), Some(2.0), None, Some(4.0)]),
            zone("B", 3600, &[None, Some(20.0), Some(30.0), Some(40.0)]),
        ])
        .unwrap();
        assert_eq!((g.start, g.hours), (3600, 3));
        assert_eq!(g.offset, vec![1, 0]);
        assert_eq!(g.accounting[0], vec![2.0, 2.0, 4.0]);
        assert_eq!(g.accounting[1], vec![20.0, 20.0, 30.0]);
        assert_eq!(g.bridged, 2);
        let err = Grid::new(vec![
            zone("A", 0, &[Some(1.0)]),
            zone("B", 3600, &[Some(1.0)]),
        ])
        .unwrap_err();
        assert!(err.to_string().contains("share no hour"), "{err}");
        let err =
            Grid::new(vec![zone("A", 0, &[Some(1.0)]), zone("A", 0, &[Some(1.0)])]).unwrap_err();
        assert!(err.to_string().contains("twice"), "{err}");
    }
}
