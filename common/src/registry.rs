//! Prometheus client metrics built from their declarations in [`crate::contract`]: the name, help
//! and label keys come from the family, and the family's kind decides which metric type may be
//! built from it (a counter family cannot become a gauge), so the programs that serve their own
//! `/metrics` (the estimator, `recalibrate`, the workloads) emit exactly what the contract declares.

use prometheus::core::Collector;
use prometheus::{
    Gauge, GaugeVec, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, Opts, Registry,
};

use crate::contract::{Family, Type};

/// A metric type that a family of one kind is built as.
pub trait FromFamily: Collector + Clone + Sized + 'static {
    /// The kind of family it represents.
    const KIND: Type;
    /// Builds it with these label keys (histograms: these buckets, or the client's default).
    fn build(family: &Family, labels: &[&str], buckets: Option<&[f64]>)
        -> prometheus::Result<Self>;
}

fn opts(f: &Family) -> Opts {
    Opts::new(f.name, f.help)
}

fn histogram_opts(f: &Family, buckets: Option<&[f64]>) -> HistogramOpts {
    let o = HistogramOpts::new(f.name, f.help);
    match buckets {
        Some(b) => o.buckets(b.to_vec()),
        None => o,
    }
}

macro_rules! from_family {
    ($($ty:ty, $kind:ident, |$f:ident, $l:ident, $b:ident| $make:expr;)*) => {$(
        impl FromFamily for $ty {
            const KIND: Type = Type::$kind;
            #[allow(unused_variables)]
            fn build($f: &Family, $l: &[&str], $b: Option<&[f64]>) -> prometheus::Result<Self> {
                $make
            }
        }
    )*};
}

from_family! {
    IntCounter, Counter, |f, l, b| IntCounter::with_opts(opts(f));
    IntCounterVec, Counter, |f, l, b| IntCounterVec::new(opts(f), l);
    Gauge, Gauge, |f, l, b| Gauge::with_opts(opts(f));
    IntGauge, Gauge, |f, l, b| IntGauge::with_opts(opts(f));
    GaugeVec, Gauge, |f, l, b| GaugeVec::new(opts(f), l);
    IntGaugeVec, Gauge, |f, l, b| IntGaugeVec::new(opts(f), l);
    Histogram, Histogram, |f, l, b| Histogram::with_opts(histogram_opts(f, b));
    HistogramVec, Histogram, |f, l, b| HistogramVec::new(histogram_opts(f, b), l);
}

/// `family` built as `M` with its declared label keys, registered in `registry`.
///
/// Panics when `M` is not of the family's kind or the name is registered twice: both are
/// mistakes in the program, found the first time it starts (every program's unit tests build
/// their metrics).
pub fn register<M: FromFamily>(registry: &Registry, family: &Family) -> M {
    register_with(registry, family, family.labels, None)
}

/// [`register`] with other label keys (a series that also carries `node`, which the contract's
/// declarations leave implicit) and, for histograms, buckets.
pub fn register_with<M: FromFamily>(
    registry: &Registry,
    family: &Family,
    labels: &[&str],
    buckets: Option<&[f64]>,
) -> M {
    assert_eq!(
        M::KIND,
        family.kind,
        "{} is declared a {} and cannot be built as another kind",
        family.name,
        family.kind.as_str()
    );
    let metric = M::build(family, labels, buckets)
        .unwrap_or_else(|e| panic!("{}: not a valid metric: {e}", family.name));
    registry
        .register(Box::new(metric.clone()))
        .unwrap_or_else(|e| panic!("{}: {e}", family.name));
    metric
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::{estimator, recalibrate};

    #[test]
    fn a_family_is_built_only_as_its_own_kind() {
        let registry = Registry::new();
        let c: IntCounterVec = register(&registry, &estimator::MODEL_RELOADS_TOTAL);
        c.with_label_values(&["applied"]).inc();
        let h: Histogram = register_with(
            &registry,
            &recalibrate::REFIT_CPU_SECONDS,
            &[],
            Some(&[0.1, 1.0]),
        );
        h.observe(0.5);
        let text = registry.gather();
        assert_eq!(text.len(), 2);
        let wrong = std::panic::catch_unwind(|| {
            register::<Gauge>(&Registry::new(), &estimator::TICKS_TOTAL)
        });
        assert!(wrong.is_err(), "a counter family was built as a gauge");
        let twice = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            register::<IntCounterVec>(&registry, &estimator::MODEL_RELOADS_TOTAL)
        }));
        assert!(twice.is_err());
    }
}
