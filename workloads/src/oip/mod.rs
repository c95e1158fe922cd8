//! The Open Inference Protocol v2 over gRPC: generated messages ([`pb`]), the server
//! ([`server`]) and the load-generating client ([`client`]).

pub mod client;
pub mod server;

/// Messages and service of `proto/grpc_predict_v2.proto` (package `inference`).
#[allow(clippy::all, missing_docs)]
pub mod pb {
    tonic::include_proto!("inference");
}

/// Name of the served model's only input.
pub const INPUT_NAME: &str = "input";
/// Name of the served model's only output.
pub const OUTPUT_NAME: &str = "logits";
/// The one version a served model has.
pub const MODEL_VERSION: &str = "1";
