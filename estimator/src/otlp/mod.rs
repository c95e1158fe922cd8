//! The estimator's results as OTLP metrics over HTTP/protobuf (`serve --otlp.endpoint`), beside
//! remote write (which stays the record the estimator resumes from). Names follow OpenTelemetry's
//! hardware semantic conventions, which keep a host's total apart from its parts so that summing
//! never counts anything twice:
//!
//! | remote write                              | OTLP            | instrument                |
//! |-------------------------------------------|-----------------|---------------------------|
//! | `greenpipe_node_power_watts`              | `hw.host.power` | gauge, `W`                |
//! | `greenpipe_node_energy_joules_total`      | `hw.host.energy`| cumulative monotonic sum, `J` |
//! | `greenpipe_container_power_watts`         | `hw.power`      | gauge, `W`                |
//! | `greenpipe_container_energy_joules_total` | `hw.energy`     | cumulative monotonic sum, `J` |
//! | `greenpipe_node_gpu_power_watts`          | `hw.power`      | gauge, `W`, `hw.type` = `gpu` |
//! | `greenpipe_node_gpu_energy_joules_total`  | `hw.energy`     | cumulative monotonic sum, `J`, `hw.type` = `gpu` |
//!
//! Each node is one resource (`k8s.node.name`, `host.name`, and `service.instance.id` = the node,
//! so receivers that key series by `job`/`instance`, such as Prometheus, keep the nodes apart
//! even where a container id, e.g. `system`, repeats). Host points carry `hw.id` = the node;
//! container points `hw.id` = the container id, `hw.type` = `container` (no well-known
//! `hw.type` fits a share of a host; the conventions allow other values), `container.id`,
//! `k8s.pod.uid` and `greenpipe.power.component` (`idle`|`dynamic`); the node's GPUs (their
//! NVML meters' power, summed) `hw.id` = `<node>/gpu`, `hw.type` = `gpu`. Every point carries
//! `greenpipe.model`. The node's idle power, meter error and the tick marker are remote write
//! only.
//!
//! No start time is sent, for the reason remote write sends no created timestamp
//! ([`crate::remote_write::metadata`]): the counters are restored after a restart, so when they
//! started is not known to the process that writes them.
//!
//! Requests go out in order from one background task behind a bounded queue: a slow or absent
//! OTLP receiver never holds up remote write. Retryable answers (429, 502, 503, 504 and network
//! errors, as the OTLP specification lists them) are retried with backoff; when the queue is
//! full the newest request is dropped and counted.

pub mod proto;

use std::collections::BTreeMap;
use std::sync::Arc;

use prost::Message;
use tokio::sync::mpsc;
use tracing::{debug, warn};

use crate::endpoint::Endpoint;
use crate::remote_write::{RetryPolicy, TimeSeries};
use crate::telemetry::Telemetry;
use greenpipe_common::names::{estimate, label};
use proto::{
    AggregationTemporality, Data, ExportMetricsServiceRequest, ExportMetricsServiceResponse, Gauge,
    InstrumentationScope, KeyValue, Metric, NumberDataPoint, Resource, ResourceMetrics,
    ScopeMetrics, Sum, Value,
};

/// `Content-Type` of an OTLP/HTTP protobuf request.
pub const CONTENT_TYPE: &str = "application/x-protobuf";
/// Requests waiting for the receiver; past it the newest is dropped.
pub const QUEUE_REQUESTS: usize = 64;

/// The OTLP names (see the module documentation).
pub mod names {
    /// Gauge, `W`: the whole host.
    pub const HOST_POWER: &str = "hw.host.power";
    /// Cumulative sum, `J`: the whole host.
    pub const HOST_ENERGY: &str = "hw.host.energy";
    /// Gauge, `W`: a part of the host (a container's share).
    pub const POWER: &str = "hw.power";
    /// Cumulative sum, `J`: a part of the host (a container's share).
    pub const ENERGY: &str = "hw.energy";
    /// `hw.type` of a container's share.
    pub const CONTAINER_TYPE: &str = "container";
    /// `hw.type` of a node's GPUs (a well-known value of the hardware conventions).
    pub const GPU_TYPE: &str = "gpu";
    /// Point attribute: the model that made the estimate.
    pub const MODEL: &str = "greenpipe.model";
    /// Point attribute: `idle` or `dynamic` share of the host's power.
    pub const COMPONENT: &str = "greenpipe.power.component";
}

/// How one remote-write metric becomes an OTLP metric.
struct Mapping {
    name: &'static str,
    unit: &'static str,
    description: &'static str,
    counter: bool,
    part: Part,
}

/// `hw.power` and `hw.energy` carry both kinds of part, told apart by `hw.type`: one
/// description each.
const PART_POWER: &str = "Power of a part of the node: a container's idle or dynamic share (hw.type container; the shares of a node sum to hw.host.power), or the node's GPUs as their NVML meters read them (hw.type gpu).";
const PART_ENERGY: &str = "Energy of a part of the node: a container's idle or dynamic share (hw.type container; the shares of a node sum to hw.host.energy), or the node's GPUs (hw.type gpu).";

/// What a point describes.
#[derive(Clone, Copy, PartialEq)]
enum Part {
    /// The whole node (`hw.host.*`).
    Host,
    /// A container's share of it.
    Container,
    /// The node's GPUs.
    Gpu,
}

fn mapping(metric: &str) -> Option<Mapping> {
    let m = |name, unit, description, counter, part| Mapping {
        name,
        unit,
        description,
        counter,
        part,
    };
    Some(match metric {
        estimate::NODE_POWER_WATTS => m(
            names::HOST_POWER,
            "W",
            "Predicted power of the whole node.",
            false,
            Part::Host,
        ),
        estimate::NODE_ENERGY_JOULES_TOTAL => m(
            names::HOST_ENERGY,
            "J",
            "Predicted energy of the whole node.",
            true,
            Part::Host,
        ),
        estimate::CONTAINER_POWER_WATTS => m(names::POWER, "W", PART_POWER, false, Part::Container),
        estimate::CONTAINER_ENERGY_JOULES_TOTAL => {
            m(names::ENERGY, "J", PART_ENERGY, true, Part::Container)
        }
        estimate::NODE_GPU_POWER_WATTS => m(names::POWER, "W", PART_POWER, false, Part::Gpu),
        estimate::NODE_GPU_ENERGY_JOULES_TOTAL => {
            m(names::ENERGY, "J", PART_ENERGY, true, Part::Gpu)
        }
        _ => return None,
    })
}

/// The OTLP request for `series` (as [`crate::series::ticks_series`] builds them):
/// one resource per node, the metrics of [`mapping`], every sample a point. Other series are
/// left out.
pub fn request(series: &[TimeSeries]) -> ExportMetricsServiceRequest {
    // node -> OTLP name -> metric, in name order so a request is the same for the same input.
    let mut nodes: BTreeMap<&str, BTreeMap<&'static str, Metric>> = BTreeMap::new();
    for ts in series {
        let (Some(m), Some(node)) = (
            ts.label("__name__").and_then(mapping),
            ts.label(label::NODE),
        ) else {
            continue;
        };
        let model = ts.label(label::MODEL).unwrap_or_default();
        let attributes = if m.part == Part::Host {
            vec![
                KeyValue::string("hw.id", node),
                KeyValue::string(names::MODEL, model),
            ]
        } else if m.part == Part::Gpu {
            vec![
                KeyValue::string("hw.id", &format!("{node}/gpu")),
                KeyValue::string("hw.type", names::GPU_TYPE),
                KeyValue::string(names::MODEL, model),
            ]
        } else {
            let container = ts.label(label::CONTAINER_ID).unwrap_or_default();
            vec![
                KeyValue::string("hw.id", container),
                KeyValue::string("hw.type", names::CONTAINER_TYPE),
                KeyValue::string("container.id", container),
                KeyValue::string("k8s.pod.uid", ts.label(label::POD_UID).unwrap_or_default()),
                KeyValue::string(
                    names::COMPONENT,
                    ts.label(label::COMPONENT).unwrap_or_default(),
                ),
                KeyValue::string(names::MODEL, model),
            ]
        };
        let metric = nodes
            .entry(node)
            .or_default()
            .entry(m.name)
            .or_insert_with(|| Metric {
                name: m.name.to_string(),
                description: m.description.to_string(),
                unit: m.unit.to_string(),
                data: Some(if m.counter {
                    Data::Sum(Sum {
                        data_points: Vec::new(),
                        aggregation_temporality: AggregationTemporality::Cumulative as i32,
                        is_monotonic: true,
                    })
                } else {
                    Data::Gauge(Gauge {
                        data_points: Vec::new(),
                    })
                }),
            });
        let points = match &mut metric.data {
            Some(Data::Sum(s)) => &mut s.data_points,
            Some(Data::Gauge(g)) => &mut g.data_points,
            None => unreachable!("every metric is made with its data"),
        };
        points.extend(ts.samples.iter().map(|s| NumberDataPoint {
            attributes: attributes.clone(),
            start_time_unix_nano: 0,
            // Ticks are after 1970: the cast cannot wrap.
            time_unix_nano: s.timestamp.max(0) as u64 * 1_000_000,
            value: Some(Value::AsDouble(s.value)),
        }));
    }
    let scope = InstrumentationScope {
        name: "greenpipe-estimator".to_string(),
        version: env!("CARGO_PKG_VERSION").to_string(),
    };
    ExportMetricsServiceRequest {
        resource_metrics: nodes
            .into_iter()
            .map(|(node, metrics)| ResourceMetrics {
                resource: Some(Resource {
                    attributes: vec![
                        KeyValue::string("service.name", "greenpipe-estimator"),
                        KeyValue::string("service.instance.id", node),
                        KeyValue::string("k8s.node.name", node),
                        KeyValue::string("host.name", node),
                    ],
                }),
                scope_metrics: vec![ScopeMetrics {
                    scope: Some(scope.clone()),
                    metrics: metrics.into_values().collect(),
                    schema_url: String::new(),
                }],
                schema_url: String::new(),
            })
            .collect(),
    }
}

/// Points in a request.
pub fn points(request: &ExportMetricsServiceRequest) -> usize {
    request
        .resource_metrics
        .iter()
        .flat_map(|r| &r.scope_metrics)
        .flat_map(|s| &s.metrics)
        .map(|m| match &m.data {
            Some(Data::Sum(s)) => s.data_points.len(),
            Some(Data::Gauge(g)) => g.data_points.len(),
            None => 0,
        })
        .sum()
}

/// A request waiting in the queue.
struct Pending {
    body: Vec<u8>,
    points: usize,
}

/// The OTLP writer of `serve`: [`Exporter::export`] queues, a background task sends.
#[derive(Clone)]
pub struct Exporter {
    queue: mpsc::Sender<Pending>,
    telemetry: Arc<Telemetry>,
}

enum Outcome {
    Done,
    Retry(String),
}

impl Exporter {
    /// Starts the sending task (on the current Tokio runtime) for `endpoint`, the full
    /// `/v1/metrics` URL.
    pub fn start(endpoint: Endpoint, retry: RetryPolicy, telemetry: Arc<Telemetry>) -> Exporter {
        let (queue, mut rx) = mpsc::channel::<Pending>(QUEUE_REQUESTS);
        let worker = telemetry.clone();
        tokio::spawn(async move {
            while let Some(pending) = rx.recv().await {
                let mut attempt = 0u32;
                while let Outcome::Retry(why) = send(&endpoint, &pending, &worker).await {
                    let wait = retry.backoff(attempt);
                    warn!(attempt, ?wait, points = pending.points, error = %why.trim(), "OTLP export failed; retrying");
                    tokio::time::sleep(wait).await;
                    attempt = attempt.saturating_add(1);
                }
            }
        });
        Exporter { queue, telemetry }
    }

    /// Queues the OTLP form of `series`; never waits.
    pub fn export(&self, series: &[TimeSeries]) {
        let request = request(series);
        let points = points(&request);
        if points == 0 {
            return;
        }
        let pending = Pending {
            body: request.encode_to_vec(),
            points,
        };
        if self.queue.try_send(pending).is_err() {
            warn!(
                points,
                queued = QUEUE_REQUESTS,
                "OTLP queue full; dropping the newest request"
            );
            self.dropped(points, "queue_full");
        }
    }

    fn dropped(&self, n: usize, reason: &str) {
        drop_points(&self.telemetry, n, reason);
    }
}

fn drop_points(telemetry: &Telemetry, n: usize, reason: &str) {
    telemetry
        .otlp_points_dropped
        .with_label_values(&[reason])
        .inc_by(n as u64);
}

async fn send(endpoint: &Endpoint, pending: &Pending, telemetry: &Telemetry) -> Outcome {
    let request = endpoint
        .client
        .post(&endpoint.url)
        .header(reqwest::header::CONTENT_TYPE, CONTENT_TYPE)
        .body(pending.body.clone());
    let request = match endpoint.authorise(request) {
        Ok(r) => r,
        // An unreadable token file may be fixed by the operator (or the kubelet): retry.
        Err(e) => return Outcome::Retry(format!("{e:#}")),
    };
    let count = |outcome: &str| telemetry.otlp_requests.with_label_values(&[outcome]).inc();
    let response = match request.send().await {
        Ok(r) => r,
        Err(e) => {
            count("network_error");
            return Outcome::Retry(format!("{e:#}"));
        }
    };
    let status = response.status();
    count(status.as_str());
    let body = response.bytes().await.unwrap_or_default();
    if status.is_success() {
        // A partial success names the points the receiver refused.
        let rejected = ExportMetricsServiceResponse::decode(body.as_ref())
            .ok()
            .and_then(|r| r.partial_success)
            .filter(|p| p.rejected_data_points > 0);
        match rejected {
            Some(p) => {
                let n = (p.rejected_data_points as usize).min(pending.points);
                warn!(rejected = n, error = %p.error_message, "OTLP receiver refused part of a request");
                drop_points(telemetry, n, "partial_success");
                telemetry
                    .otlp_points_written
                    .inc_by((pending.points - n) as u64);
            }
            None => {
                debug!(points = pending.points, "OTLP export accepted");
                telemetry.otlp_points_written.inc_by(pending.points as u64);
            }
        }
        return Outcome::Done;
    }
    let text = String::from_utf8_lossy(&body);
    match status.as_u16() {
        429 | 502 | 503 | 504 => Outcome::Retry(format!("HTTP {status}: {text}")),
        code => {
            warn!(status = code, points = pending.points, response = %text.trim(), "OTLP export refused; dropping the request");
            drop_points(telemetry, pending.points, &format!("http_{code}"));
            Outcome::Done
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remote_write::Sample;

    fn series(name: &str, labels: &[(&str, &str)], samples: &[(i64, f64)]) -> TimeSeries {
        let mut ts = TimeSeries::new(name, labels);
        ts.samples = samples
            .iter()
            .map(|&(timestamp, value)| Sample { value, timestamp })
            .collect();
        ts
    }

    fn attrs(p: &NumberDataPoint) -> Vec<(String, String)> {
        p.attributes
            .iter()
            .map(|kv| match &kv.value {
                Some(proto::AnyValue {
                    value: Some(proto::AnyKind::StringValue(v)),
                }) => (kv.key.clone(), v.clone()),
                other => panic!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn host_totals_and_container_shares_become_separate_metrics_per_node_resource() {
        let ctr = |n: &'static str, c: &'static str| {
            [
                ("component", c),
                ("container_id", "system"),
                ("model", "m"),
                ("node", n),
                ("pod_uid", ""),
            ]
        };
        let sent = vec![
            series(
                estimate::NODE_POWER_WATTS,
                &[("model", "m"), ("node", "a")],
                &[(1000, 5.0), (2000, 6.0)],
            ),
            series(
                estimate::NODE_IDLE_POWER_WATTS,
                &[("model", "m"), ("node", "a")],
                &[(1000, 3.0)],
            ),
            series(
                estimate::NODE_ENERGY_JOULES_TOTAL,
                &[("model", "m"), ("node", "b")],
                &[(1000, 50.0)],
            ),
            series(
                estimate::CONTAINER_ENERGY_JOULES_TOTAL,
                &ctr("a", "idle"),
                &[(1000, 7.0)],
            ),
            series(
                estimate::CONTAINER_ENERGY_JOULES_TOTAL,
                &ctr("b", "idle"),
                &[(1000, 8.0)],
            ),
        ];
        let r = request(&sent);
        assert_eq!(points(&r), 5, "the idle-power series is not sent");
        // Round trip through prost: what is sent decodes to what was built.
        let decoded = ExportMetricsServiceRequest::decode(r.encode_to_vec().as_slice()).unwrap();
        assert_eq!(decoded, r);
        assert_eq!(r.resource_metrics.len(), 2);
        let a = &r.resource_metrics[0];
        let resource = a.resource.as_ref().unwrap();
        assert!(resource
            .attributes
            .contains(&KeyValue::string("k8s.node.name", "a")));
        assert!(resource
            .attributes
            .contains(&KeyValue::string("service.instance.id", "a")));
        let metrics = &a.scope_metrics[0].metrics;
        let names: Vec<&str> = metrics.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, [names::ENERGY, names::HOST_POWER]);
        match &metrics[0].data {
            Some(Data::Sum(s)) => {
                assert!(s.is_monotonic);
                assert_eq!(
                    s.aggregation_temporality,
                    AggregationTemporality::Cumulative as i32
                );
                assert_eq!(s.data_points[0].value, Some(Value::AsDouble(7.0)));
                assert_eq!(
                    attrs(&s.data_points[0]),
                    [
                        ("hw.id", "system"),
                        ("hw.type", "container"),
                        ("container.id", "system"),
                        ("k8s.pod.uid", ""),
                        ("greenpipe.power.component", "idle"),
                        ("greenpipe.model", "m"),
                    ]
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                );
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(metrics[0].unit, "J");
        match &metrics[1].data {
            Some(Data::Gauge(g)) => {
                let at: Vec<(u64, Option<Value>)> = g
                    .data_points
                    .iter()
                    .map(|p| (p.time_unix_nano, p.value))
                    .collect();
                assert_eq!(
                    at,
                    [
                        (1_000_000_000, Some(Value::AsDouble(5.0))),
                        (2_000_000_000, Some(Value::AsDouble(6.0)))
                    ]
                );
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(metrics[1].unit, "W");
    }

    /// The node's GPUs go out as `hw.power` / `hw.energy` points with `hw.type` = `gpu`, beside
    /// the containers' shares in the same metrics.
    #[test]
    fn gpu_power_and_energy_become_hw_points_of_type_gpu() {
        let node = [("model", "m"), ("node", "orin")];
        let sent = vec![
            series(estimate::NODE_GPU_POWER_WATTS, &node, &[(1000, 52.0)]),
            series(
                estimate::NODE_GPU_ENERGY_JOULES_TOTAL,
                &node,
                &[(1000, 104.0)],
            ),
            series(
                estimate::CONTAINER_POWER_WATTS,
                &[
                    ("component", "dynamic"),
                    ("container_id", "c"),
                    ("model", "m"),
                    ("node", "orin"),
                    ("pod_uid", "p"),
                ],
                &[(1000, 9.0)],
            ),
        ];
        let r = request(&sent);
        assert_eq!(points(&r), 3);
        let metrics = &r.resource_metrics[0].scope_metrics[0].metrics;
        let names: Vec<&str> = metrics.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, [names::ENERGY, names::POWER]);
        let Some(Data::Gauge(power)) = &metrics[1].data else {
            panic!("{:?}", metrics[1])
        };
        let gpu: Vec<_> = power
            .data_points
            .iter()
            .filter(|p| attrs(p).contains(&("hw.type".into(), "gpu".into())))
            .collect();
        assert_eq!(gpu.len(), 1);
        assert_eq!(gpu[0].value, Some(Value::AsDouble(52.0)));
        assert!(attrs(gpu[0]).contains(&("hw.id".into(), "orin/gpu".into())));
        let Some(Data::Sum(energy)) = &metrics[0].data else {
            panic!("{:?}", metrics[0])
        };
        assert!(energy.is_monotonic);
        assert_eq!(energy.data_points[0].value, Some(Value::AsDouble(104.0)));
        assert!(attrs(&energy.data_points[0]).contains(&("hw.type".into(), "gpu".into())));
    }
}
