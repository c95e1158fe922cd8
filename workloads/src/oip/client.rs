//! `client`: load for a served model, from another node or container.
//!
//! Closed loop (`--concurrency C`: C requests in flight, each sent when the previous answer
//! arrives, the way a pipeline of C cameras would) or open loop (`--rate R` requests per
//! second on a fixed schedule, at most [`MAX_IN_FLIGHT`] outstanding: a request that would
//! exceed it is counted as `RESOURCE_EXHAUSTED` and not sent, so an overloaded server shows up
//! as errors instead of as an ever-growing queue in the client).
//! The input shape comes from the server's `ModelMetadata`, the images from the image set.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tonic::transport::{Channel, Endpoint};

use super::pb::grpc_inference_service_client::GrpcInferenceServiceClient;
use super::pb::model_infer_request::InferInputTensor;
use super::pb::{ModelInferRequest, ModelMetadataRequest};
use super::server::code_name;
use super::INPUT_NAME;
use crate::images::{ImageError, ImageSet};
use crate::metrics::{InferenceLabels, Metrics};

/// Why the client could not reach, use or keep loading a server.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("--target {target:?}")]
    Target {
        target: String,
        #[source]
        source: tonic::transport::Error,
    },
    #[error("cannot reach the inference server at {uri}")]
    Unreachable {
        uri: String,
        #[source]
        source: tonic::transport::Error,
    },
    #[error("ModelMetadata for {model:?} at {uri}")]
    Metadata {
        model: String,
        uri: String,
        #[source]
        source: Box<tonic::Status>,
    },
    #[error("model {model:?} at {uri} has no input {input:?}")]
    NoInput {
        model: String,
        uri: String,
        input: &'static str,
    },
    #[error(
        "model {model:?} at {uri} takes {datatype} {shape:?}; this client sends FP32 NCHW images"
    )]
    InputType {
        model: String,
        uri: String,
        datatype: String,
        shape: Vec<i64>,
    },
    #[error("model {model:?} takes {shape:?}, not [B, 3, S, S]")]
    NotImages { model: String, shape: Vec<i64> },
    #[error(transparent)]
    Images(#[from] ImageError),
    #[error("client task")]
    Task(#[source] tokio::task::JoinError),
}

/// Open-loop requests outstanding at most.
pub const MAX_IN_FLIGHT: usize = 256;

/// How requests are paced.
#[derive(Debug, Clone, Copy)]
pub enum Pace {
    Concurrency(usize),
    Rate(f64),
}

/// What the client does.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    pub target: String,
    pub model: String,
    pub pace: Pace,
    /// Stop after this long.
    pub duration: Duration,
    /// Stop after this many requests (sent), if given.
    pub requests: Option<u64>,
    /// How long to keep trying to reach a server that is not listening yet.
    pub server_wait: Duration,
}

/// Totals of a client run.
#[derive(Debug, Clone, Default)]
pub struct ClientTotals {
    /// Unix time the load began (after the server answered), s.
    pub started: f64,
    pub ok: u64,
    pub images: u64,
    pub errors: u64,
}

/// Connects and reads the model's input shape; a clear error when the server is down or does
/// not serve the model. A server that is not listening yet is retried for up to `wait`: a client
/// is often started beside its server (one Job rollout, one campaign step), and the server
/// listens only once its model is built. Only the transport is retried; a server that answers
/// but does not serve `model` is an error at once.
pub async fn connect(
    target: &str,
    model: &str,
    wait: Duration,
    stop: &AtomicBool,
) -> Result<(GrpcInferenceServiceClient<Channel>, Vec<i64>), ClientError> {
    let uri = if target.contains("://") {
        target.to_string()
    } else {
        format!("http://{target}")
    };
    let endpoint = Endpoint::from_shared(uri.clone())
        .map_err(|source| ClientError::Target {
            target: target.to_string(),
            source,
        })?
        .connect_timeout(Duration::from_secs(5));
    let deadline = tokio::time::Instant::now() + wait;
    let mut logged = false;
    let channel = loop {
        match endpoint.connect().await {
            Ok(channel) => break channel,
            Err(e) if tokio::time::Instant::now() < deadline && !stop.load(Ordering::Relaxed) => {
                if !logged {
                    tracing::info!(%uri, error = %e, wait = ?wait, "inference server not reachable yet; retrying");
                    logged = true;
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            Err(source) => return Err(ClientError::Unreachable { uri, source }),
        }
    };
    let mut client = GrpcInferenceServiceClient::new(channel)
        .max_decoding_message_size(64 << 20)
        .max_encoding_message_size(64 << 20);
    let meta = client
        .model_metadata(ModelMetadataRequest {
            name: model.to_string(),
            version: String::new(),
        })
        .await
        .map_err(|source| ClientError::Metadata {
            model: model.to_string(),
            uri: uri.clone(),
            source: Box::new(source),
        })?
        .into_inner();
    let Some(input) = meta.inputs.iter().find(|i| i.name == INPUT_NAME) else {
        return Err(ClientError::NoInput {
            model: model.to_string(),
            uri,
            input: INPUT_NAME,
        });
    };
    if input.datatype != "FP32" || input.shape.len() != 4 || input.shape.iter().any(|d| *d < 1) {
        return Err(ClientError::InputType {
            model: model.to_string(),
            uri,
            datatype: input.datatype.clone(),
            shape: input.shape.clone(),
        });
    }
    Ok((client, input.shape.clone()))
}

/// Runs the load until the duration, the request count or `stop`.
pub async fn run(
    config: &ClientConfig,
    images: &ImageSet,
    metrics: Arc<Metrics>,
    stop: Arc<AtomicBool>,
) -> Result<ClientTotals, ClientError> {
    let (client, shape) = connect(&config.target, &config.model, config.server_wait, &stop).await?;
    let (batch, size) = (shape[0] as usize, shape[2] as usize);
    if shape[1] != 3 || shape[2] != shape[3] {
        return Err(ClientError::NotImages {
            model: config.model.clone(),
            shape,
        });
    }
    // A few preprocessed batches, cycled: preprocessing is the client's own work, kept out of
    // the measured request latency.
    let payloads: Arc<Vec<Vec<u8>>> = Arc::new(
        (0..images.len().min(4))
            .map(|i| {
                images
                    .batch(i * batch, batch, size)
                    .map(|v| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>())
            })
            .collect::<Result<_, ImageError>>()?,
    );
    let labels = InferenceLabels {
        workload: "client",
        model: config.model.clone(),
        precision: String::new(),
        engine: "",
        threads: String::new(),
        mode: greenpipe_common::names::workload::MODE_SERVED,
    };
    metrics.touch_inference(&labels);
    let started = crate::campaign::unix_now();
    let deadline = Instant::now() + config.duration;
    let sent = Arc::new(AtomicU64::new(0));
    let ok = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let one = {
        let model = config.model.clone();
        let metrics = metrics.clone();
        let labels = labels.clone();
        let ok = ok.clone();
        let errors = errors.clone();
        let payloads = payloads.clone();
        let shape = shape.clone();
        move |mut client: GrpcInferenceServiceClient<Channel>, n: u64| {
            let request = ModelInferRequest {
                model_name: model.clone(),
                id: n.to_string(),
                inputs: vec![InferInputTensor {
                    name: INPUT_NAME.into(),
                    datatype: "FP32".into(),
                    shape: shape.clone(),
                    ..Default::default()
                }],
                raw_input_contents: vec![payloads[n as usize % payloads.len()].clone()],
                ..Default::default()
            };
            let metrics = metrics.clone();
            let labels = labels.clone();
            let ok = ok.clone();
            let errors = errors.clone();
            async move {
                let started = Instant::now();
                match client.model_infer(request).await {
                    Ok(_) => {
                        metrics.observe_inference(
                            &labels,
                            batch as u64,
                            started.elapsed().as_secs_f64(),
                        );
                        ok.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(status) => {
                        metrics.error("client", code_name(status.code()));
                        errors.fetch_add(1, Ordering::Relaxed);
                        tracing::warn!(code = ?status.code(), message = status.message(), "request failed");
                    }
                }
            }
        }
    };
    let take = {
        let sent = sent.clone();
        let limit = config.requests;
        let stop = stop.clone();
        move || -> Option<u64> {
            if stop.load(Ordering::Relaxed) || Instant::now() >= deadline {
                return None;
            }
            let n = sent.fetch_add(1, Ordering::Relaxed);
            match limit {
                Some(l) if n >= l => None,
                _ => Some(n),
            }
        }
    };
    match config.pace {
        Pace::Concurrency(c) => {
            let mut tasks = Vec::new();
            for _ in 0..c.max(1) {
                let client = client.clone();
                let one = one.clone();
                let take = take.clone();
                tasks.push(tokio::spawn(async move {
                    while let Some(n) = take() {
                        one(client.clone(), n).await;
                    }
                }));
            }
            for t in tasks {
                t.await.map_err(ClientError::Task)?;
            }
        }
        Pace::Rate(rate) => {
            let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
            let in_flight = Arc::new(tokio::sync::Semaphore::new(MAX_IN_FLIGHT));
            let mut tasks = tokio::task::JoinSet::new();
            loop {
                tick.tick().await;
                let Some(n) = take() else { break };
                match in_flight.clone().try_acquire_owned() {
                    Ok(permit) => {
                        let fut = one(client.clone(), n);
                        tasks.spawn(async move {
                            fut.await;
                            drop(permit);
                        });
                    }
                    Err(_) => {
                        metrics.error("client", "RESOURCE_EXHAUSTED");
                        errors.fetch_add(1, Ordering::Relaxed);
                    }
                }
                while tasks.try_join_next().is_some() {}
            }
            while tasks.join_next().await.is_some() {}
        }
    }
    let ok = ok.load(Ordering::Relaxed);
    Ok(ClientTotals {
        started,
        ok,
        images: ok * batch as u64,
        errors: errors.load(Ordering::Relaxed),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_unreachable_server_is_named_with_the_transport_s_reason() {
        // A port that was just free: nothing listens there.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let target = format!("127.0.0.1:{port}");
        let err = connect(&target, "m", Duration::ZERO, &AtomicBool::new(false))
            .await
            .unwrap_err();
        assert!(matches!(err, ClientError::Unreachable { .. }), "{err}");
        assert_eq!(
            err.to_string(),
            format!("cannot reach the inference server at http://{target}")
        );
        assert!(std::error::Error::source(&err).is_some());

        let err = connect("bad target", "m", Duration::ZERO, &AtomicBool::new(false))
            .await
            .unwrap_err();
        assert_eq!(err.to_string(), "--target \"bad target\"");
    }
}
