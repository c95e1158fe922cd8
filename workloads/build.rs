//! Generates the Open Inference Protocol v2 messages and service (tonic + prost) from
//! `proto/grpc_predict_v2.proto` (the ONNX model messages are greenpipe-litert's, one schema for
//! both crates). Needs `protoc` (Debian's protobuf-compiler, installed by scripts/setup.sh;
//! `PROTOC` may point elsewhere).

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/grpc_predict_v2.proto");
    println!("cargo:rerun-if-env-changed=PROTOC");
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_protos(&["proto/grpc_predict_v2.proto"], &["proto"])?;
    Ok(())
}
