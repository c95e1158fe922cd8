//! Turns what a meter reports into `greenpipe_meter_energy_joules_total`: a counter that starts
//! at zero when the exporter starts and never decreases, whatever the device does.
//!
//! - With a device counter, the total grows by the counter's deltas. A counter that went down
//!   wrapped (RAPL: add the range) or was reset (a plug rebooted, a UM data group cleared: it
//!   restarted from zero, so add its new value). A changed epoch (another UM data group selected)
//!   is a new baseline and adds nothing. The last counter value survives failed reads, so energy
//!   drawn while a Bluetooth link was down is counted when it comes back.
//! - Without one, power is integrated with the trapezoid rule between consecutive good readings.
//!   A failed read breaks the chain: power during an outage is unknown, so it is not guessed.

use std::time::{Duration, Instant};

use super::Reading;

/// Monotonic energy total of one channel.
#[derive(Debug, Clone)]
pub struct EnergyTotal {
    joules: f64,
    last_counter: Option<(f64, u64)>,
    last_power: Option<(f64, Instant)>,
    max_gap: Duration,
    /// How the last good reading was accounted: `Some(true)` = power integrated.
    integrated: Option<bool>,
}

impl EnergyTotal {
    /// A total at zero; power readings further apart than `max_gap` are not integrated.
    pub fn new(max_gap: Duration) -> Self {
        EnergyTotal {
            joules: 0.0,
            last_counter: None,
            last_power: None,
            max_gap,
            integrated: None,
        }
    }

    /// The total so far.
    pub fn joules(&self) -> f64 {
        self.joules
    }

    /// Whether the total follows power integrated by the exporter (`true`: the last good reading
    /// had no device counter) or the device's counter (`false`); `None` before a good reading.
    pub fn integrated(&self) -> Option<bool> {
        self.integrated
    }

    /// Accounts one good reading taken at `at`.
    pub fn observe(&mut self, reading: &Reading, at: Instant) {
        if let Some(e) = reading
            .energy
            .filter(|e| e.joules.is_finite() && e.joules >= 0.0)
        {
            if let Some((prev, epoch)) = self.last_counter {
                if epoch == e.epoch {
                    self.joules += counter_delta(prev, e.joules, e.wraps_at_joules);
                }
            }
            self.last_counter = Some((e.joules, e.epoch));
            self.last_power = None;
            self.integrated = Some(false);
            return;
        }
        let Some(p) = reading.power_watts.filter(|p| p.is_finite() && *p >= 0.0) else {
            self.last_power = None;
            return;
        };
        self.integrated = Some(true);
        if let Some((prev, t)) = self.last_power {
            let dt = at.saturating_duration_since(t);
            if dt <= self.max_gap {
                self.joules += (prev + p) / 2.0 * dt.as_secs_f64();
            }
        }
        self.last_power = Some((p, at));
    }

    /// A read failed: integration restarts at the next good reading.
    pub fn gap(&mut self) {
        self.last_power = None;
    }
}

/// Power from successive values of a device energy counter (RAPL, hwmon `energy*_input`).
#[derive(Debug, Clone, Default)]
pub struct CounterRate {
    last: Option<(f64, Instant)>,
}

impl CounterRate {
    /// Average power since the previous value; `None` for the first one.
    pub fn watts(&mut self, joules: f64, wraps_at: Option<f64>, at: Instant) -> Option<f64> {
        let previous = self.last.replace((joules, at));
        let (prev, t) = previous?;
        let dt = at.saturating_duration_since(t).as_secs_f64();
        (dt > 0.0).then(|| counter_delta(prev, joules, wraps_at) / dt)
    }
}

/// Increase of a counter from `prev` to `now`, never negative.
pub fn counter_delta(prev: f64, now: f64, wraps_at: Option<f64>) -> f64 {
    if now >= prev {
        return now - prev;
    }
    match wraps_at {
        // One wrap between two reads: at 1 Hz a RAPL package would need to draw more than
        // range/1 s (262 kJ/s on common CPUs) to wrap twice.
        Some(range) if prev <= range => range - prev + now,
        _ => now,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meter::DeviceEnergy;

    fn counter(joules: f64, epoch: u64, wraps: Option<f64>) -> Reading {
        Reading {
            energy: Some(DeviceEnergy {
                joules,
                epoch,
                wraps_at_joules: wraps,
            }),
            ..Reading::default()
        }
    }

    fn power(w: f64) -> Reading {
        Reading {
            power_watts: Some(w),
            ..Reading::default()
        }
    }

    #[test]
    fn device_counter_deltas_wrap_reset_and_epoch() {
        let t = Instant::now();
        let mut e = EnergyTotal::new(Duration::from_secs(5));
        assert_eq!(e.integrated(), None, "nothing read yet");
        e.observe(&counter(100.0, 0, Some(1000.0)), t);
        assert_eq!(e.joules(), 0.0, "first value is a baseline");
        assert_eq!(e.integrated(), Some(false), "the device's counter");
        e.observe(&counter(150.0, 0, Some(1000.0)), t);
        assert_eq!(e.joules(), 50.0);
        e.observe(&counter(20.0, 0, Some(1000.0)), t);
        assert_eq!(e.joules(), 50.0 + 850.0 + 20.0, "wrapped at 1000");
        e.observe(&counter(5.0, 0, None), t);
        assert_eq!(
            e.joules(),
            920.0 + 5.0,
            "reset without range: restarted from zero"
        );
        e.observe(&counter(7000.0, 3, None), t);
        assert_eq!(e.joules(), 925.0, "new epoch is a new baseline");
        e.gap();
        e.observe(&counter(7010.0, 3, None), t);
        assert_eq!(e.joules(), 935.0, "the counter bridges a failed read");
    }

    #[test]
    fn integrates_power_and_does_not_bridge_gaps() {
        let t = Instant::now();
        let s = Duration::from_secs(1);
        let mut e = EnergyTotal::new(Duration::from_secs(5));
        e.observe(&power(4.0), t);
        e.observe(&power(6.0), t + s);
        assert_eq!(e.joules(), 5.0);
        assert_eq!(e.integrated(), Some(true), "power integrated");
        e.gap();
        e.observe(&power(100.0), t + 2 * s);
        assert_eq!(e.joules(), 5.0, "after a gap, a new start");
        e.observe(&power(100.0), t + 30 * s);
        assert_eq!(e.joules(), 5.0, "too far apart to integrate");
        e.observe(&power(f64::NAN), t + 31 * s);
        e.observe(&power(-3.0), t + 32 * s);
        assert_eq!(e.joules(), 5.0);
    }
}
