//! The `system` pseudo-container: what the node used that no container did.
//!
//! `system = node - Σ containers` computed afresh each tick would jump whenever a container
//! exits (its lifetime total leaves the sum) and a counter must not do that. So the remainder is
//! itself a counter that advances each tick by `max(0, Δnode - Σ Δcontainer)`, where the
//! container deltas cover containers seen in both ticks (a new container contributes its whole
//! value: it was created since the last tick). It starts at `max(0, node - Σ containers)`, so
//! node = Σ containers + system holds exactly at the first tick and for rates thereafter. The
//! clamp matters only when the two sources disagree within one tick (`/proc/stat` counts in
//! 10 ms ticks, cgroups in nanoseconds); the work of a container that exits between two ticks
//! lands in `system` for that tick.

/// A counter that advances by the node's increase not explained by containers.
#[derive(Debug, Default, Clone)]
pub struct Remainder {
    prev_node: Option<f64>,
    value: f64,
}

impl Remainder {
    /// Advances with this tick's node total, Σ container totals and Σ container increases
    /// since the previous tick; returns the remainder's value.
    pub fn update(&mut self, node: f64, containers_total: f64, containers_delta: f64) -> f64 {
        match self.prev_node {
            None => self.value = (node - containers_total).max(0.0),
            Some(prev) => self.value += ((node - prev) - containers_delta).max(0.0),
        }
        self.prev_node = Some(node);
        self.value
    }
}

/// The increase of a container counter since the previous tick (`None` = new container: its
/// whole value). A counter that went down was reset (recreated cgroup): count its new value.
pub fn increase(prev: Option<f64>, now: f64) -> f64 {
    match prev {
        Some(p) if now >= p => now - p,
        _ => now,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_at_difference_then_accumulates_unexplained_increase() {
        let mut r = Remainder::default();
        assert_eq!(r.update(100.0, 60.0, 60.0), 40.0);
        // node +10, containers +7 → system +3
        assert_eq!(r.update(110.0, 67.0, 7.0), 43.0);
        // a container with 50 s exits: Σ drops, system must not jump or drop
        assert_eq!(r.update(112.0, 18.0, 1.0), 44.0);
        // containers' exact accounting exceeds the node's ticks: clamp, never decrease
        assert_eq!(r.update(113.0, 20.0, 2.0), 44.0);
    }

    #[test]
    fn first_tick_never_negative() {
        let mut r = Remainder::default();
        assert_eq!(r.update(10.0, 12.0, 12.0), 0.0);
    }

    #[test]
    fn increase_handles_new_and_reset() {
        assert_eq!(increase(None, 5.0), 5.0);
        assert_eq!(increase(Some(3.0), 5.0), 2.0);
        assert_eq!(increase(Some(9.0), 5.0), 5.0);
    }
}
